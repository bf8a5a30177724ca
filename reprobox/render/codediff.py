"""A diff of two versions of the code as terminal text: the verdict, both versions, and where they parted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reprobox.render.terminal import comparison_text, short

if TYPE_CHECKING:
    from reprobox.codediff import CodeDiff, Side

LISTED_FILES = 8


def code_diff_text(found: CodeDiff) -> str:
    lines = comparison_text(found.comparison).splitlines()
    head, rest = lines[:1], [line for line in lines[1:] if not line.startswith("  run ")]
    head += [_side_line("A", found.a), _side_line("B", found.b)]
    if found.changed_files:
        shown = ", ".join(found.changed_files[:LISTED_FILES])
        more = (
            f" and {len(found.changed_files) - LISTED_FILES} more"
            if len(found.changed_files) > LISTED_FILES
            else ""
        )
        head.append(f"  the code differs in {shown}{more}")
    change = (found.operation or {}).get("change")
    if change:
        rest.append("  " + change_text(change))
    elif found.drill_down and not found.operation:
        rest.append(f"  drill-down: {found.drill_down}")
    return "\n".join(head + rest)


def _side_line(name: str, side: Side) -> str:
    run = f"run {side.record.run_dir}" if side.record is not None else "not run"
    kept = " (kept from an earlier diff)" if side.reused else ""
    return f"  {name}: {side.revision.label}, code {short(side.inputs.code.tree.digest, 12)}, {run}{kept}"


def change_text(place: dict[str, object]) -> str:
    """Whether the first diverging operation's line lies inside the change, naming the hunk and commit."""
    if place.get("inside"):
        commit = place.get("commit")
        by = ""
        if isinstance(commit, dict):
            by = (
                ", not committed yet"
                if commit.get("commit") == "uncommitted"
                else f", commit {str(commit.get('commit'))[:12]} {commit.get('summary')!r}"
            )
        return f"inside the change: {place.get('hunk_text')}{by}"
    mapped, source_a = place.get("source_a_in_b"), place.get("source_a")
    line = f" ({source_a} in A is {mapped} in B)" if mapped and source_a else ""
    return f"outside the change{line}: that line is the same in both versions; a value it reads differs"
