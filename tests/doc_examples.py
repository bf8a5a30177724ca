"""The shell examples of README.md and docs/*.md, read and run as tests.

The convention (docs/contributing.md says it for writers):

- A shell example is a fenced ```console block. A line that starts with `$ ` is a command (a line ending
  in `\\` goes on at the next); the lines after it, up to the next command, are what it prints, stdout and
  stderr together as a terminal shows them. A command followed by no lines has its output unchecked.
- In what a command prints, `...` alone on a line stands for any number of lines (none too), and `...`
  within a line for any text on that line. Runs of spaces match any run of spaces; trailing spaces and
  blank lines at the end do not count.
- Every command must exit 0; one that fails on purpose says so itself: `$ reprobox verify x; echo "exit $?"`.
- An example runs in a fresh copy of the repository's files (those git does not ignore), at its root,
  with this interpreter's `reprobox` and `python` first on PATH and an empty HOME; the commands of one
  block run in one shell, so a `cd` holds for the rest of the block.
- An HTML comment on the line before the block changes that: `<!-- example: skip REASON -->` (not run;
  the reason is shown), `<!-- example: slow -->` (runs with the integration tests: `--integration`),
  `<!-- example: continues -->` (runs in the folder the page's previous example left, after it),
  `<!-- example: cwd=PATH -->` (starts in PATH of the copy, e.g. `cwd=examples/plain-script`); these
  three may go together, as in `<!-- example: slow continues -->`.

Every other fenced block names its language (`text`, `yaml`, `python`, ...); a block in sh, bash or
shell, or one of another language with `$ ` lines (but `markdown`, which shows a page's source), is
refused, so no shell example goes untested.

A small reader of our own, not a library's: pytest-examples reads Python blocks only, and Sybil collects
documents as pytest test files (docs/ among the test paths, outside the unit and integration groups of
tests/conftest.py) with skip directives that hold from one example to the next in document order.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "zsh", "shell-session"})
DIRECTIVES = frozenset({"slow", "continues"})
FAST_TIMEOUT = 180  # seconds for a whole block
SLOW_TIMEOUT = 900
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*example:\s*(?P<words>.*?)\s*-->\s*$")
_SENTINEL = "@@reprobox-doc-example-exit"


def documents() -> list[Path]:
    """README.md and every page of the docs site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Fence:
    """A fenced block: where it opens (1-based line), its language and its lines, dedented."""

    path: Path
    line: int
    language: str
    lines: tuple[str, ...]
    marker: str | None  # the words of an `<!-- example: ... -->` comment on the line before, if any

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


@dataclass(frozen=True)
class Command:
    text: str
    line: int
    expected: tuple[str, ...] | None  # None: the block shows no output for it


@dataclass(frozen=True)
class Example:
    fence: Fence
    commands: tuple[Command, ...]
    skip: str | None = None
    slow: bool = False
    cwd: str = "."  # where in the copy of the repository it starts
    continues: Example | None = None
    problems: tuple[str, ...] = field(default=())

    @property
    def where(self) -> str:
        return self.fence.where


def fences(path: Path) -> list[Fence]:
    """Every fenced block of a Markdown file, nested in lists or not."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Fence] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not _closes(lines[end], fence):
            line = lines[end]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            end += 1
        previous = lines[index - 1] if index > 0 else ""
        marker = _MARKER.match(previous)
        language = opening["info"].strip().split(" ", 1)[0] if opening["info"].strip() else ""
        found.append(Fence(path, index + 1, language, tuple(body), marker["words"] if marker else None))
        index = end + 1
    return found


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and set(stripped) == {fence[0]} and len(stripped) >= len(fence)


def parse_console(fence: Fence) -> tuple[tuple[Command, ...], tuple[str, ...]]:
    """A console block's commands with what each prints, and what is wrong with the block."""
    commands: list[Command] = []
    problems: list[str] = []
    text: list[str] = []
    output: list[str] = []
    start = 0
    continuing = False

    def close() -> None:
        if text:
            shown = tuple(output) if any(line.strip() for line in output) else None
            commands.append(Command("\n".join(text), start, shown))

    for offset, line in enumerate(fence.lines, start=fence.line + 1):
        if continuing:
            text.append(line)
            continuing = line.endswith("\\")
        elif line.startswith("$ "):
            close()
            text, output, start = [line[2:]], [], offset
            continuing = line.endswith("\\")
        elif not text:
            if line.strip() and not problems:
                problems.append(f"{fence.where}: output before the first `$ ` command (line {offset})")
        else:
            output.append(line)
    close()
    if not commands:
        problems.append(f"{fence.where}: a console block with no `$ ` command")
    return tuple(commands), tuple(problems)


def examples(path: Path) -> list[Example]:
    """The console blocks of one file, each with its directives; `continues` points at the one before."""
    found: list[Example] = []
    for fence in fences(path):
        if fence.language != "console":
            continue
        commands, problems = parse_console(fence)
        skip, slow, continues, cwd = None, False, None, "."
        words = (fence.marker or "").split()
        if words[:1] == ["skip"]:
            skip = " ".join(words[1:])
            if not skip:
                problems += (f"{fence.where}: `example: skip` needs a reason",)
        else:
            cwd = next((word[4:] for word in words if word.startswith("cwd=")), ".")
            unknown = {word for word in words if not word.startswith("cwd=")} - DIRECTIVES
            if unknown:
                problems += (f"{fence.where}: unknown example directive {sorted(unknown)}",)
            slow = "slow" in words
            if "continues" in words:
                previous = [example for example in found if example.skip is None]
                if previous:
                    continues = previous[-1]
                    cwd = cwd if any(word.startswith("cwd=") for word in words) else continues.cwd
                else:
                    problems += (f"{fence.where}: `continues`, but no example runs before it",)
        found.append(Example(fence, commands, skip, slow, cwd, continues, problems))
    return found


def all_examples() -> list[Example]:
    return [example for path in documents() for example in examples(path)]


def convention_problems(path: Path) -> list[str]:
    """What in one file breaks the convention: shell in other blocks, unnamed languages, stray markers."""
    problems: list[str] = []
    for fence in fences(path):
        if fence.language in SHELL_LANGUAGES:
            problems.append(f"{fence.where}: a ```{fence.language} block: write shell examples as ```console")
        elif not fence.language:
            problems.append(f"{fence.where}: a fenced block with no language (```text for plain text)")
        elif fence.language not in {"console", "markdown"} and any(
            line.startswith("$ ") for line in fence.lines
        ):
            problems.append(f"{fence.where}: `$ ` commands in a ```{fence.language} block: use ```console")
        elif fence.marker is not None and fence.language != "console":
            problems.append(f"{fence.where}: an example directive before a ```{fence.language} block")
    for example in examples(path):
        problems.extend(example.problems)
        if not (ROOT / example.cwd).is_dir():
            problems.append(f"{example.where}: cwd={example.cwd} is no folder of the repository")
    return problems


# ---- matching -------------------------------------------------------------------------------------


def _normal(line: str) -> str:
    return re.sub(r"[ \t]+", " ", line.rstrip())


def _lines(text: str) -> list[str]:
    lines = [_normal(line) for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def output_matches(expected: tuple[str, ...] | list[str], actual: str) -> bool:
    """Whether `actual` is what `expected` shows, with `...` as the wildcard (see the module docstring)."""
    shown = [_normal(line) for line in expected]
    while shown and not shown[-1]:
        shown.pop()
    pattern = ""
    for line in shown:
        if line.strip() == "...":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += "[^\n]*?".join(re.escape(part) for part in line.split("...")) + r"\n"
    text = "".join(line + "\n" for line in _lines(actual))
    return re.fullmatch(pattern, text) is not None


# ---- running --------------------------------------------------------------------------------------


@cache
def _repository_files() -> tuple[str, ...]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return tuple(name for name in listed.split("\0") if name and (ROOT / name).exists())


def copy_repository(dest: Path) -> Path:
    """The repository's files (those git does not ignore) under `dest`: the folder an example starts in."""
    for name in _repository_files():
        source, target = ROOT / name, dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(source.readlink())
        else:
            shutil.copy2(source, target)
    return dest


def environment(home: Path) -> dict[str, str]:
    """The caller's environment, with this interpreter's scripts first on PATH, an empty HOME, output
    unbuffered (so stdout and stderr interleave as on a terminal) and no runs dir of the caller's."""
    env = {key: value for key, value in os.environ.items() if key not in {"REPROBOX_RUNS_DIR", "PYTHONPATH"}}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    env["REPROBOX_CACHE"] = os.environ.get("REPROBOX_CACHE", str(Path.home() / ".cache" / "reprobox"))
    return env


def script(commands: tuple[Command, ...]) -> str:
    """One bash script for a block: each command, then a line with its exit status; it stops at a failure."""
    parts = ["exec 2>&1"]
    for command in commands:
        parts.append(command.text)
        parts.append(f'__rc=$?; printf "\\n{_SENTINEL} %d\\n" "$__rc"; [ "$__rc" -eq 0 ] || exit 0')
    return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class Outcome:
    command: Command
    output: str
    status: int | None  # None: it never ran (a command before it failed) or the block timed out


def run_commands(commands: tuple[Command, ...], cwd: Path, home: Path, timeout: float) -> list[Outcome]:
    try:
        done = subprocess.run(
            ["bash", "-c", script(commands)],
            cwd=cwd,
            env=environment(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            timeout=timeout,
            check=False,
        )
        printed = done.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as exc:
        printed = (exc.stdout or b"").decode(errors="replace") + f"\n[timed out after {timeout:.0f} s]\n"
    outcomes: list[Outcome] = []
    rest = printed
    for command in commands:
        match = re.search(rf"\n{_SENTINEL} (\d+)\n", rest)
        if match is None:
            outcomes.append(Outcome(command, rest, None))
            rest = ""
            continue
        outcomes.append(Outcome(command, rest[: match.start()], int(match[1])))
        rest = rest[match.end() :]
    return outcomes


def failure(example: Example, outcomes: list[Outcome]) -> str | None:
    """Why the run of an example does not show what the Markdown says; None when it does."""
    for outcome in outcomes:
        command = outcome.command
        where = f"{example.fence.path.relative_to(ROOT).as_posix()}:{command.line}"
        if outcome.status is None:
            return f"{where}: `{command.text}` did not finish:\n{outcome.output}"
        if outcome.status != 0:
            return f"{where}: `{command.text}` exited {outcome.status}:\n{outcome.output}"
        if command.expected is not None and not output_matches(command.expected, outcome.output):
            return (
                f"{where}: `{command.text}` printed what the example does not show\n"
                f"---- the example shows\n{chr(10).join(command.expected)}\n"
                f"---- it printed\n{outcome.output.rstrip()}"
            )
    return None


class Workspaces:
    """The folder each example ran in, kept so an example that `continues` the one before goes on there
    (an example run alone first runs the ones it continues)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.done: dict[str, Path] = {}
        base.mkdir(parents=True, exist_ok=True)

    def run(self, example: Example) -> str | None:
        """Run an example (after the ones it continues); why it failed, or None."""
        if example.continues is not None:
            if example.continues.where not in self.done:
                earlier = self.run(example.continues)
                if earlier is not None:
                    return f"the example it continues, {example.continues.where}, failed: {earlier}"
            folder = self.done[example.continues.where]
        else:
            folder = copy_repository(Path(tempfile.mkdtemp(prefix="example-", dir=self.base)))
        home = Path(tempfile.mkdtemp(prefix="home-", dir=self.base))
        timeout = SLOW_TIMEOUT if example.slow else FAST_TIMEOUT
        reason = failure(example, run_commands(example.commands, folder / example.cwd, home, timeout))
        if reason is None:
            self.done[example.where] = folder
        return reason


def params(*, slow: bool) -> Iterator[tuple[str, Example]]:
    """(pytest id, example) for the fast examples (the skipped ones among them) or the slow ones."""
    for example in all_examples():
        if (example.slow if example.skip is None else False) == slow:
            yield example.where, example
