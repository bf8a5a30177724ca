"""What an attestation may say about the machine and the person that made it: the stack facts that
decide the numerics, and nothing that names them.

An attestation is published with a paper, so it must not carry the writer's host name, user name,
home directory, work folder, runs folder or interpreter path. Three rules, applied when the statement
is built:

- the job spec's paths are written relative to the code folder (a path outside it keeps only its
  name, under ``<outside the code folder>/``);
- the fingerprint withholds the host name (``WITHHELD_FIELDS``) and keeps only the file name of any
  absolute path (the interpreter, loaded libraries): their versions stay, where they were installed
  goes;
- the settings' strings (job spec, execution, image, runs, variation) have the known machine folders
  replaced by placeholders (the code folder by ``.``, the runs folder by ``<runs>``, the interpreter's
  prefix by ``<python>``, the home folder by ``~``) and an `env` value that is exactly the host or user
  name withheld; what the job produced (checkpoint and tensor names, claims) is left as it is.

The job file's own text and the code's relative file names are published as written. The stack
digest covers only numerics fields, which these rules leave alone, so it stays as recorded.
"""

from __future__ import annotations

import getpass
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

WITHHELD = "<withheld>"
OUTSIDE_CODE = "<outside the code folder>"
WITHHELD_FIELDS = ("hardware.hostname",)  # names the machine; no numerics depend on it
SPEC_PATHS = ("job_file", "code")
UNTOUCHED = ("text", "files")  # the job file as written, the code's relative file names
PRODUCED = ("job", "code", "checkpoints", "claims", "seeds")  # job: handled on its own


@dataclass(frozen=True)
class Machine:
    """The strings that identify the writer's machine and account."""

    host: str
    user: str
    folders: tuple[tuple[str, str], ...]  # (absolute folder, placeholder), longest first

    @classmethod
    def here(cls, *, code_dir: Path, runs_dir: Path | None) -> Machine:
        folders = {str(code_dir.absolute()): ".", sys.prefix: "<python>", sys.base_prefix: "<python>"}
        if runs_dir is not None:
            folders[str(runs_dir.absolute())] = "<runs>"
        home = str(Path("~").expanduser())
        if home not in ("/", "~"):
            folders[home] = "~"
        ordered = sorted(((f, p) for f, p in folders.items() if f not in ("", "/")), key=lambda i: -len(i[0]))
        return cls(host=socket.gethostname(), user=_user(), folders=tuple(ordered))


def public_predicate(predicate: dict[str, Any], machine: Machine, code_dir: Path) -> dict[str, Any]:
    """The predicate as it may be published (a new object; the given one is not changed).

    What the job produced (checkpoint and tensor names, claims, the seed spread) and the code's file
    names are left as they are: a tensor may well be called what a user is called. The settings (job
    spec, execution, image, runs, variation) have machine folders replaced, and an `env` value that is
    exactly the host or user name withheld.
    """
    result = dict(predicate)
    job = dict(result["job"])
    job["spec"] = public_spec(job.get("spec") or {}, code_dir)
    result["fingerprint"] = public_fingerprint(result.get("fingerprint") or {})
    for key, value in result.items():
        if key not in PRODUCED:
            result[key] = _scrub(value, machine)
    result["job"] = {k: (v if k in UNTOUCHED else _scrub(v, machine)) for k, v in job.items()}
    for section in (result["job"].get("spec"), result.get("execution")):
        if isinstance(section, dict) and isinstance(section.get("env"), dict):
            section["env"] = {k: _withhold_names(v, machine) for k, v in section["env"].items()}
    return result


def public_spec(spec: Mapping[str, Any], code_dir: Path) -> dict[str, Any]:
    """The resolved job spec with its paths relative to the code folder."""
    result = dict(spec)
    for key in SPEC_PATHS:
        if isinstance(result.get(key), str):
            result[key] = relative_to_code(result[key], code_dir)
    if isinstance(result.get("data"), list):
        result["data"] = [
            {**d, "source": relative_to_code(d["source"], code_dir)}
            if isinstance(d, dict) and isinstance(d.get("source"), str)
            else d
            for d in result["data"]
        ]
    image = result.get("image")
    if isinstance(image, dict):
        result["image"] = {
            k: relative_to_code(v, code_dir)
            if k in ("requirements", "wheelhouse") and isinstance(v, str)
            else v
            for k, v in image.items()
        }
    return result


def relative_to_code(path: str, code_dir: Path) -> str:
    if not PurePosixPath(path).is_absolute():
        return path
    try:
        return Path(os.path.normpath(path)).relative_to(code_dir.absolute()).as_posix() or "."
    except ValueError:
        return f"{OUTSIDE_CODE}/{PurePosixPath(path).name}"


def public_fingerprint(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint without the host name, and with every absolute path cut to its file name."""
    result = _without_paths(fingerprint)
    for dotted in WITHHELD_FIELDS:
        section, _, name = dotted.partition(".")
        if isinstance(result.get(section), dict) and name in result[section]:
            result[section] = {k: v for k, v in result[section].items() if k != name}
    return dict(result)


def _without_paths(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_paths(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_paths(v) for v in value]
    if isinstance(value, str) and value.startswith("/") and "\n" not in value:
        return PurePosixPath(value).name or value
    return value


def _scrub(value: Any, machine: Machine) -> Any:
    if isinstance(value, Mapping):
        return {_scrub(k, machine): _scrub(v, machine) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, machine) for v in value]
    if not isinstance(value, str):
        return value
    for folder, placeholder in machine.folders:
        value = _replace_folder(value, folder, placeholder)
    return value


def _withhold_names(value: Any, machine: Machine) -> Any:
    return WITHHELD if isinstance(value, str) and value and value in (machine.host, machine.user) else value


def _replace_folder(text: str, folder: str, placeholder: str) -> str:
    """`folder` replaced where it is a whole path or a path's start (`/home/al` is not in `/home/alice`)."""
    if folder not in text:
        return text
    out, start = [], 0
    while (index := text.find(folder, start)) != -1:
        end = index + len(folder)
        whole = end == len(text) or text[end] in "/:;, '\"\n)]}"
        out.append(text[start:index] + (placeholder if whole else folder))
        start = end
    out.append(text[start:])
    return "".join(out)


def names_the_machine(text: str) -> bool:
    """Whether a published value had a machine folder or name withheld (a replay uses its own value)."""
    placeholders = (WITHHELD, OUTSIDE_CODE, "<runs>", "<python>")
    return text.startswith("~") or "=~" in text or ":~" in text or any(p in text for p in placeholders)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for this uid (a container's arbitrary user)
        return ""
