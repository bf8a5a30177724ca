"""The job file `reprobox init` writes: every choice on its own line, with a comment that says why."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprobox.scaffold._classify import Findings, Output

MAX_NAMED = 6  # outputs named in a comment; the rest counted


def job_name(folder: Path) -> str:
    """The folder's name as a job name ([a-z0-9][a-z0-9._-]*)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", folder.name.lower()).strip("-._")
    return name or "job"


def job_text(
    name: str,
    command: Sequence[str],
    findings: Findings,
    *,
    folder: Path,
    how: str,
    requirements: str | None = None,
    lock: str | None = None,
) -> str:
    """The job.yaml text; `how` says how the short run went, `requirements`/`lock` name the files of
    the packages the image lacks (the lock only when one could be written)."""
    by_argument = _data_variables(command, [source for source, _why in findings.data])
    lines = [
        f"# Written by `reprobox init` from a short run of: {shlex.join(command)}",
        f"# ({how}). Each choice says why; check them, then run: reprobox verify job.yaml",
        "version: 1",
        f"name: {name}",
        f"command: {json.dumps(_command(command, by_argument))}",
        *_code_lines(findings, folder),
        "# it runs in a writable copy of its folder: what it writes or changes there is its output"
        + _named(" (it wrote ", [o.path for o in findings.outputs], ")"),
        "workdir: copy",
    ]
    checkpoints = findings.checkpoints
    if checkpoints:
        lines.append(
            _named("# its checkpoints: ", [o.path for o in checkpoints], "")
            + "; every file it writes is compared but for what compare: ignore lists"
        )
    else:
        lines.append("# no checkpoint was written in the short run: every file it writes is compared")
    lines += _section(
        "compare", ["  ignore:"] + [f"    - {json.dumps(g)}  # {why}" for g, why in findings.ignore]
    )
    lines += _section("data", [_data_line(source, why, by_argument) for source, why in findings.data])
    env = [
        _env_line(n, v, secret)
        for n, v, secret in findings.env
        if not (findings.pythonpath and n == "PYTHONPATH")
    ]
    if findings.pythonpath:
        where = os.pathsep.join(findings.pythonpath)
        env.insert(
            0, f"  PYTHONPATH: {json.dumps(where)}  # where its repository's own code is imported from"
        )
    lines += _section("env", env)
    lines += [
        f"# {name} is installed from this repository ({os.path.relpath(where, folder)}): it is code, found "
        "on PYTHONPATH in the working copy, never a package to lock"
        for name, where in findings.own_packages.items()
    ]
    lines += [
        f"# it imports {name} from {where}, outside its repository: install it in the image instead"
        for name, where in findings.unplaced.items()
    ]
    lines += _image_lines(findings, requirements, lock)
    if findings.framework:
        lines += [
            "resume:",
            f"  framework: {findings.framework}  # its Trainer saves resumable checkpoints: "
            "verify --resume-at and spot-check can use them",
        ]
    return "\n".join(lines) + "\n"


def _code_lines(findings: Findings, folder: Path) -> list[str]:
    """Where the code is, when the job imports code of its repository from above its own folder."""
    if findings.code_root is None:
        return []
    lines = [
        f"code: {json.dumps(os.path.relpath(findings.code_root, folder))}  # its repository: it imports "
        "code of its own from there"
    ]
    if findings.cwd:
        lines.append(f"cwd: {json.dumps(findings.cwd)}  # where the command starts, as you typed it")
    return lines


def _section(key: str, entries: list[str]) -> list[str]:
    real = [e for e in entries if not e.startswith("  ignore:")]
    return [f"{key}:", *entries] if real else []


def shown_path(path: str) -> str:
    """A file name the job chose, fit for a comment line: as it is, or quoted with escapes where it
    holds a line break, a control character or bytes that are no UTF-8."""
    return path if path.isprintable() else json.dumps(path)


def _named(prefix: str, paths: list[str], suffix: str) -> str:
    if not paths:
        return ""
    shown = ", ".join(map(shown_path, paths[:MAX_NAMED])) + (
        f" and {len(paths) - MAX_NAMED} more" if len(paths) > MAX_NAMED else ""
    )
    return f"{prefix}{shown}{suffix}"


def _data_variables(command: Sequence[str], sources: Sequence[str]) -> dict[str, str]:
    """Folders elsewhere that the command names in its arguments: each gets a variable (CIFAR_DIR for
    /datasets/cifar), which the command uses instead, so the data can lie anywhere on each machine."""
    named: dict[str, str] = {}
    for source in sources:
        if Path(source).is_absolute() and any(_names(part, source) for part in command):
            stem = re.sub(r"[^A-Za-z0-9]+", "_", Path(source).name).strip("_").upper() or "DATA"
            name = f"{stem}_DIR"
            while name in named.values():
                name = f"{stem}_{len(named)}_DIR"
            named[source] = name
    return named


def _names(part: str, source: str) -> bool:
    return part == source or part.startswith(source + "/") or part.endswith("=" + source)


def _command(command: Sequence[str], by_argument: Mapping[str, str]) -> list[str]:
    """The command as the job file holds it: `$` escaped, named data folders as their variables."""
    out = []
    for part in command:
        text = part.replace("$", "$$")
        for source, name in by_argument.items():
            if _names(part, source):
                text = text.replace(source, f"${{{name}}}", 1)
        out.append(text)
    return out


def _data_line(source: str, why: str, by_argument: Mapping[str, str]) -> str:
    """A folder the command names: mounted at /data/<name>, given by its variable; one the script names
    itself: seen at the same path; one beside the code: linked into the working copy where it lay."""
    name = by_argument.get(source)
    if name:
        target = f"/data/{Path(source).name}"
        return (
            f"  - {{source: {json.dumps(source)}, target: {json.dumps(target)}, env: {name}}}  "
            f"# read by the job; its command names it as ${{{name}}}"
        )
    target = source if Path(source).is_absolute() else f"/data/{source}"
    return f"  - {{source: {json.dumps(source)}, target: {json.dumps(target)}}}  # {why}"


def _env_line(name: str, value: str, secret: bool) -> str:
    why = (
        "read by the job; a secret: taken from your shell at each run, never written down"
        if secret
        else "read by the job and set in your shell: confirm it belongs to the job"
    )
    return f"  {name}: {json.dumps(value)}  # {why}"


def _image_lines(findings: Findings, requirements: str | None, lock: str | None) -> list[str]:
    if not findings.missing:
        return []
    names = ", ".join(f"{n}=={v}" for n, v in findings.missing.items())
    reasons = [f"#   {n}=={v}: {findings.why[n]}" for n, v in findings.missing.items() if n in findings.why]
    if lock:
        return [
            "# what it imports that the image lacks, and why:",
            *reasons,
            "image:",
            f"  requirements: {json.dumps(lock)}  # what it imports that the image lacks: {names}",
        ]
    return [
        *(["# what it imports that the image lacks, and why:", *reasons] if reasons else []),
        f"# it imports what the image lacks: {names} (listed in {requirements}); lock them with",
        f"#   reprobox lock {requirements} -o requirements.lock",
        "# then add: image: {requirements: requirements.lock}",
    ]


def outputs_summary(outputs: Sequence[Output]) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = {}
    for output in outputs:
        kinds.setdefault(output.kind, []).append(output.path)
    return kinds
