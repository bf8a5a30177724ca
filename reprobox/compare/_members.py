"""Archive members whose names differ between two runs only by what each run's own record explains,
paired as output files are, and the values that name them masked by that pairing.

A skops file is a zip of ``schema.json`` and one member per array or bytes object: an array's member is
named by its ``id()`` (``140419582628976.npy``, a memory address inside the run's memory map, written in
decimal), a booster's bytes by a uuid4 the run drew (``<uuid4>.bin``), and ``schema.json`` names each
member where its object lies (``...classes_.file``). Another run writes the same members under other
names. A member's name is the part of a tensor's or value's name up to the first ``/``-separated part that
its run's facts mask (``_mask``); two members, one a run, pair when their names are equal once masked,
each with its own run's facts, found in this order:

1. by the values that name them: a value present in both runs that names a member of one run where the
   other names a member of its own (skops' ``file`` fields), when no member is so named with two others;
2. by their content, where several members mask alike: equal tensors and values under equal inner names;
3. the one member left on each side of a masked name (``renamed_values``, as value names pair).

A name that masks to nothing, or a member nothing pairs, stays present in one run only. Paired members'
contents are still compared, under run a's names; a value that names a paired member is compared with
each member's name replaced by one mark for the pair, so that a value naming the other member of its run
(the arrays swapped between two fields) is still a difference.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from reprobox.compare._lines import judged_string
from reprobox.compare._renamed_values import renamed_values
from reprobox.runspecific import Excuse, RunContext, judge_value, mask

ARCHIVES = frozenset({"zip", "tar"})
"""The checkpoint formats whose names begin with a member's name (``_archives``)."""

PAIRED_MEMBER = "the name of an archive member, paired with the other run's"
BY_RECORD = "the run's own record"

Values = tuple[Mapping[str, object] | None, Mapping[str, object] | None]


@dataclass
class MemberPairs:
    """Run b's member names -> run a's, and why each pair's names differ."""

    contexts: tuple[RunContext, RunContext]  # each run's facts, for the file
    load: Callable[[], Values]  # both runs' values read back (once)
    pairs: dict[str, str] = field(default_factory=dict)  # member of b -> member of a
    why: dict[str, str] = field(default_factory=dict)  # member of a -> the reasons its names differ

    def name_in_a(self, name_b: str) -> str:
        """A name of run b's, under its paired member's name in run a."""
        member = _member_of(name_b, self.pairs)
        return name_b if member is None else self.pairs[member] + name_b[len(member) :]

    def name_in_b(self, name_a: str) -> str:
        """A name of run a's (as ``name_in_a`` made it) as run b's file holds it."""
        member = _member_of(name_a, self._inverse)
        return name_a if member is None else self._inverse[member] + name_a[len(member) :]

    @functools.cached_property
    def _inverse(self) -> dict[str, str]:
        return {a: b for b, a in self.pairs.items()}

    def renamed(self, checkpoint: dict[str, Any]) -> dict[str, Any]:
        """Run b's checkpoint record with its tensors and values under run a's member names."""
        if not self.pairs:
            return checkpoint
        tensors = [{**t, "name": self.name_in_a(t["name"])} for t in checkpoint.get("tensors") or []]
        metadata = {self.name_in_a(k): v for k, v in (checkpoint.get("metadata") or {}).items()}
        return {**checkpoint, "tensors": tensors, "metadata": metadata}

    def values(self) -> Values:
        """Both runs' values read back (once), run b's under run a's member names."""
        values_a, values_b = self.load()
        if values_b is not None and self.pairs:
            values_b = {self.name_in_a(k): v for k, v in values_b.items()}
        return values_a, values_b

    def entries(self, path: str) -> list[dict[str, Any]]:
        """One run-specific entry a pair: the member under both names, and why they differ."""
        return [
            {
                "checkpoint": path,
                "name": a,
                "a": a,
                "b": b,
                "reason": f"member name: {self.why[a]}",
                "evidence": BY_RECORD,
            }
            for b, a in sorted(self.pairs.items(), key=lambda pair: pair[1])
        ]

    def judge(self, key: str, va: object, vb: object, names: Collection[str]) -> Excuse | None:
        """``judge_value`` (a string value that differs in tokens: ``judged_string``), where each paired
        member's name inside the values is one mark for the pair."""
        contexts = self.contexts
        marked_a, marked_b = self._marked(va, 0), self._marked(vb, 1)
        if (marked_a, marked_b) == (va, vb):
            return judge_value(key, va, vb, *contexts, names=names) or judged_string(va, vb, contexts)
        named = {self.why[a] for b, a in self.pairs.items() if _mentions(va, a) or _mentions(vb, b)}
        reason = f"{PAIRED_MEMBER} ({' and '.join(sorted(named))})"
        if marked_a == marked_b:
            return Excuse(reason, BY_RECORD)
        excuse = judge_value(key, marked_a, marked_b, *contexts, names=names)
        excuse = excuse or judged_string(marked_a, marked_b, contexts)
        return None if excuse is None else Excuse(f"{reason}; {excuse.reason}", excuse.evidence)

    @functools.cached_property
    def _marks(self) -> tuple[tuple[re.Pattern[str] | None, dict[str, str]], ...]:
        """Per run: a pattern of its paired members' names, and the mark of each (one a pair)."""
        marks: tuple[dict[str, str], dict[str, str]] = ({}, {})
        for index, (b, a) in enumerate(sorted(self.pairs.items(), key=lambda pair: pair[1])):
            marks[0][a] = marks[1][b] = f"<member {_letters(index)}>"
        return tuple((_pattern(side), side) for side in marks)

    def _marked(self, value: object, side: int) -> object:
        pattern, marks = self._marks[side]
        if pattern is None:
            return value
        if isinstance(value, str):
            return pattern.sub(lambda match: marks[match.group()], value)
        if isinstance(value, list | tuple):
            return [self._marked(v, side) for v in value]
        if isinstance(value, Mapping):
            return {k: self._marked(v, side) for k, v in value.items()}
        return value


def pair_members(
    ca: Mapping[str, Any],
    cb: Mapping[str, Any],
    contexts: tuple[RunContext, RunContext],
    load: Callable[[], Values],
) -> MemberPairs:
    """The members of two runs' archives (checkpoint records ``ca``, ``cb``) that pair by their names'
    run-specific parts; ``load`` reads both runs' values back, once, if pairing needs them."""
    found = MemberPairs(contexts, functools.cache(load))
    if ca.get("format") not in ARCHIVES or cb.get("format") not in ARCHIVES:
        return found
    contents_a, contents_b = _contents(ca), _contents(cb)
    only_a, only_b = set(contents_a) - set(contents_b), set(contents_b) - set(contents_a)
    members_a, members_b = _members(only_a, contexts[0]), _members(only_b, contexts[1])
    if not members_a or not members_b:
        return found
    masked = {
        0: {m: mask(m, contexts[0]) for m in members_a},
        1: {m: mask(m, contexts[1]) for m in members_b},
    }

    def pair(a: str, b: str, why: set[str]) -> None:
        found.pairs[b] = a
        found.why[a] = " and ".join(sorted(why))
        members_a.pop(a)
        members_b.pop(b)

    if _crowded(masked):  # the values are read only where names alone cannot pair
        for a, b in _named_by_values(found.load(), members_a, members_b, masked):
            pair(a, b, masked[0][a][1] | masked[1][b][1])
    for a, b in _equal_contents(members_a, members_b, contents_a, contents_b, masked):
        pair(a, b, masked[0][a][1] | masked[1][b][1])
    for a, renamed in renamed_values(list(members_a), list(members_b), contexts).items():
        pair(a, renamed.key_b, masked[0][a][1] | masked[1][renamed.key_b][1])
    return found


def _contents(checkpoint: Mapping[str, Any]) -> dict[str, object]:
    """Every tensor and value name of a checkpoint record -> what its record holds of it."""
    found: dict[str, object] = {}
    for tensor in checkpoint.get("tensors") or []:
        found[tensor["name"]] = (
            "tensor",
            tensor.get("dtype"),
            str(tensor.get("shape")),
            tensor.get("sha256"),
        )
    for key, digest in (checkpoint.get("metadata") or {}).items():
        found.setdefault(key, ("value", digest))
    return found


def _members(names: set[str], context: RunContext) -> dict[str, list[str]]:
    """Member name -> the names under it, for the names that have a part the run's facts mask (the member
    is the name up to that part)."""
    explained: dict[str, bool] = {}
    found: dict[str, list[str]] = {}
    for name in sorted(names):
        parts = name.split("/")
        for end in range(1, len(parts) + 1):
            prefix = "/".join(parts[:end])
            if prefix not in explained:
                explained[prefix] = bool(mask(parts[end - 1], context)[1])
            if explained[prefix]:
                found.setdefault(prefix, []).append(name)
                break
    return found


def _crowded(masked: Mapping[int, Mapping[str, tuple[str, set[str]]]]) -> bool:
    """Whether any masked name stands for more than one member of a run (a pairing by name alone fails)."""
    for side in masked.values():
        names = [m for m, _ in side.values()]
        if len(set(names)) < len(names):
            return True
    return False


def _named_by_values(
    values: Values,
    members_a: Mapping[str, list[str]],
    members_b: Mapping[str, list[str]],
    masked: Mapping[int, Mapping[str, tuple[str, set[str]]]],
) -> list[tuple[str, str]]:
    """Members named at the same place in both runs' values (one of each, masking alike), where no
    member is named with two others."""
    values_a, values_b = values
    if values_a is None or values_b is None:
        return []
    partners: dict[tuple[int, str], set[str]] = {}
    for key in values_a.keys() & values_b.keys():
        for a, b in _string_pairs(values_a[key], values_b[key]):
            if a in members_a and b in members_b and masked[0][a][0] == masked[1][b][0]:
                partners.setdefault((0, a), set()).add(b)
                partners.setdefault((1, b), set()).add(a)
    return sorted(
        (a, next(iter(bs)))
        for (side, a), bs in partners.items()
        if side == 0 and len(bs) == 1 and partners[(1, next(iter(bs)))] == {a}
    )


def _string_pairs(a: object, b: object) -> Iterator[tuple[str, str]]:
    """The strings at the same places of two values (lists of the same length walked side by side)."""
    if isinstance(a, str) and isinstance(b, str):
        if a != b:
            yield a, b
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        for x, y in zip(a, b, strict=True):
            yield from _string_pairs(x, y)


def _equal_contents(
    members_a: Mapping[str, list[str]],
    members_b: Mapping[str, list[str]],
    contents_a: Mapping[str, object],
    contents_b: Mapping[str, object],
    masked: Mapping[int, Mapping[str, tuple[str, set[str]]]],
) -> list[tuple[str, str]]:
    """Members that mask alike and hold the same tensors and values under the same inner names, where
    several of a run mask alike (one of each is left to the name alone)."""
    waiting: dict[tuple[str, object], list[str]] = {}
    for b, names in sorted(members_b.items()):
        waiting.setdefault((masked[1][b][0], _content(b, names, contents_b)), []).append(b)
    found: list[tuple[str, str]] = []
    for a, names in sorted(members_a.items()):
        matches = waiting.get((masked[0][a][0], _content(a, names, contents_a)))
        if matches:
            found.append((a, matches.pop(0)))
    return found


def _content(member: str, names: list[str], contents: Mapping[str, object]) -> object:
    return tuple(sorted((name[len(member) :], repr(contents[name])) for name in names))


def _member_of(name: str, members: Mapping[str, str]) -> str | None:
    """The member of ``members`` the name lies under (the name itself, or a folder of it)."""
    if name in members:
        return name
    parts = name.split("/")
    return next(
        (prefix for end in range(1, len(parts)) if (prefix := "/".join(parts[:end])) in members), None
    )


def _mentions(value: object, member: str) -> bool:
    return member in (value if isinstance(value, str) else repr(value))


def _pattern(names: Any) -> re.Pattern[str] | None:
    listed = sorted(names, key=len, reverse=True)
    if not listed:
        return None
    return re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, listed)) + r")(?![\w])")


def _letters(index: int) -> str:
    """``a``, ``b``, ... ``z``, ``ba``: a mark no run's facts can mask (it holds no digit)."""
    text = ""
    while True:
        index, digit = divmod(index, 26)
        text = chr(ord("a") + digit) + text
        if not index:
            return text
