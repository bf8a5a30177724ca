"""Resumable checkpoint patterns: which outputs of a run are the checkpoint saved after which step.

`ckpt/step-{step}.pt` names a file, `checkpoint-{step}` (Hugging Face) a folder whose files together are
the checkpoint. `*` matches within one path component and `**` any number of folders, as in the job
file's `checkpoints:` globs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

STEP = "{step}"
CHECKPOINT = "{checkpoint}"
STOP = "{stop}"
# Where each framework's own checkpoints go under the outputs folder, wherever the job put its output_dir.
FRAMEWORK_PATTERNS = {
    "transformers": "**/checkpoint-{step}",
    "lightning": "**/epoch=*-step={step}.ckpt",
}
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


@dataclass(frozen=True)
class Resumable:
    """One resumable checkpoint of a run: the step it was saved after, and its files."""

    step: int
    path: str  # relative to the outputs folder: the file, or the folder holding the files
    files: tuple[str, ...]  # the files it consists of, relative to the outputs folder

    @property
    def is_folder(self) -> bool:
        return self.files != (self.path,)


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is no resumable checkpoint pattern (a sentence ending in a fix), or None."""
    parts = pattern.split("/")
    if pattern.startswith("/") or ".." in parts or "\\" in pattern:
        return (
            f"'{pattern}' points outside the outputs folder; use a path relative to it such as "
            "'ckpt/step-{step}.pt'"
        )
    if pattern.count(STEP) != 1:
        return (
            f"'{pattern}' must hold {STEP} exactly once (the step the checkpoint was saved after, as the job "
            "counts), e.g. 'ckpt/step-{step}.pt'"
        )
    others = [p for p in _PLACEHOLDER.findall(pattern) if p != STEP]
    if others:
        return f"'{pattern}' holds {others[0]}; the only placeholder here is {STEP}"
    if parts[-1] == "**" or any(not p for p in parts):
        return f"'{pattern}' must end in the checkpoint's own name, e.g. 'ckpt/step-{{step}}.pt'"
    return None


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The pattern as a regular expression over a relative path, with the step as group `step`."""
    regex = ""
    for part in pattern.split("/"):
        if part == "**":
            regex += "(?:[^/]+/)*"
            continue
        for piece in re.split(r"(\{step\}|\*|\?)", part):
            regex += {"{step}": r"(?P<step>\d+)", "*": "[^/]*", "?": "[^/]"}.get(piece, re.escape(piece))
        regex += "/"
    return re.compile(regex[:-1])


def find_resumable(paths: Iterable[str], pattern: str) -> list[Resumable]:
    """The resumable checkpoints among a run's output files, by step (one per step: the first path)."""
    compiled = compile_pattern(pattern)
    found: dict[str, tuple[int, list[str]]] = {}
    for path in sorted(paths):
        parts = path.split("/")
        for end in range(1, len(parts) + 1):
            prefix = "/".join(parts[:end])
            match = compiled.fullmatch(prefix)
            if match:
                found.setdefault(prefix, (int(match.group("step")), []))[1].append(path)
                break
    by_step: dict[int, Resumable] = {}
    for prefix, (step, files) in sorted(found.items()):
        by_step.setdefault(step, Resumable(step, prefix, tuple(files)))
    return [by_step[step] for step in sorted(by_step)]


def hash_globs(pattern: str) -> tuple[str, ...]:
    """Globs that select every file of every resumable checkpoint (so that each one is hashed)."""
    glob = pattern.replace(STEP, "*")
    return (glob, f"{glob}/**")


def fill(arguments: Iterable[str], placeholder: str, value: str) -> tuple[str, ...]:
    """The job file's `from` or `stop` arguments with their placeholder filled in."""
    return tuple(argument.replace(placeholder, value) for argument in arguments)
