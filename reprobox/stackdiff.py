"""Explain how two fingerprints differ, most numerics-relevant difference first, and what that means.

Which fields change numerics, their names and their order come from one table,
``reprobox.guest.fingerprint.FIELDS``; this module only walks two fingerprints side by side. It runs
on the controller and never imports torch.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from reprobox.guest.fingerprint import field_spec, is_absent, iter_fields
from reprobox.valuetext import show_value

SAME_STACK: Final = "same stack, different result: a real nondeterminism"
UNRANKED: Final = 10_000
NAMED_IN_VERDICT: Final = 3
MISSING: Final = {"absent": "not recorded in this fingerprint"}


@dataclass(frozen=True)
class FieldDifference:
    """One field whose value differs between fingerprint ``a`` and fingerprint ``b``.

    For list fields (CPU flags, SIMD extensions) ``added`` holds the items only ``b`` has and
    ``removed`` the items only ``a`` has.
    """

    field: str
    label: str
    a: object
    b: object
    affects_numerics: bool
    rank: int
    added: tuple[object, ...] = ()
    removed: tuple[object, ...] = ()

    def describe(self) -> str:
        """One line for a person: ``GPU model: NVIDIA H100 80GB HBM3 -> NVIDIA A100-SXM4-80GB``."""
        if self.added or self.removed:
            changes = [f"+{item}" for item in self.added] + [f"-{item}" for item in self.removed]
            return f"{self.label}: {' '.join(changes)}"
        return f"{self.label}: {show_value(self.a)} -> {show_value(self.b)}"


def diff_fingerprints(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[FieldDifference]:
    """Every field that differs, numerics fields first by rank, then the rest (hostname, paths, ...)."""
    found: list[FieldDifference] = []
    _walk("", a, b, found)
    return sorted(found, key=lambda d: (not d.affects_numerics, d.rank, _natural(d.field)))


def equal_fields(
    a: Mapping[str, Any], b: Mapping[str, Any], diffs: Sequence[FieldDifference] | None = None
) -> list[str]:
    """The fields both fingerprints record with equal values, in recorded order: what a report folds
    under one line once the differing ones are shown (``diffs``: ``diff_fingerprints(a, b)``, if known)."""
    differing = {d.field for d in (diff_fingerprints(a, b) if diffs is None else diffs)}
    in_a = dict(iter_fields(a))
    return [
        path
        for path, value in iter_fields(b)
        if path in in_a
        and path not in differing
        and not is_per_rank(path)
        and (path != "stack_digest" or in_a[path] == value)  # the one field the walk skips
    ]


def is_per_rank(path: str) -> bool:
    """A field of a multi-rank run's per-rank copies (``ranks.1.software...``): rank 0's are the fields
    a person reads; the copies stay in the JSON."""
    return path.startswith("ranks.")


def same_stack(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """True when no field that changes numerics differs."""
    return not any(d.affects_numerics for d in diff_fingerprints(a, b))


def stack_verdict(diffs: Sequence[FieldDifference], *, closeness: str | None = None) -> str:
    """The sentence to show when two runs' results differ, given their fingerprint differences."""
    suffix = f" ({closeness})" if closeness else ""
    labels = list(dict.fromkeys(d.label for d in diffs if d.affects_numerics))
    if not labels:
        return SAME_STACK + suffix
    named = labels[:NAMED_IN_VERDICT]
    if len(labels) > NAMED_IN_VERDICT:
        listing = ", ".join(named) + f" and {len(labels) - NAMED_IN_VERDICT} more"
    else:
        listing = named[0] if len(named) == 1 else ", ".join(named[:-1]) + f" and {named[-1]}"
    return (
        f"different stack: bitwise equality is not expected across {listing}; compare with tolerance{suffix}"
    )


def _walk(path: str, a: object, b: object, found: list[FieldDifference]) -> None:
    if _is_record(a) and _is_record(b):
        for key in [*a, *(k for k in b if k not in a)]:
            if not path and key == "stack_digest":
                continue  # a summary of the fields compared here, not a field of its own
            _walk(f"{path}.{key}" if path else str(key), a.get(key, MISSING), b.get(key, MISSING), found)
        return
    if isinstance(a, list) and isinstance(b, list):
        if _holds_records(a) or _holds_records(b):
            for index in range(max(len(a), len(b))):
                item_a = a[index] if index < len(a) else MISSING
                item_b = b[index] if index < len(b) else MISSING
                _walk(f"{path}[{index}]", item_a, item_b, found)
        else:
            _compare_lists(path, a, b, found)
        return
    if a is MISSING and _is_container(b):
        for sub_path, value in iter_fields(b, path):
            found.append(_difference(sub_path, MISSING, value))
        return
    if b is MISSING and _is_container(a):
        for sub_path, value in iter_fields(a, path):
            found.append(_difference(sub_path, value, MISSING))
        return
    if not _equal(a, b):
        found.append(_difference(path, a, b))


def _compare_lists(path: str, a: list[Any], b: list[Any], found: list[FieldDifference]) -> None:
    """Lists of plain values compare as multisets: order does not matter, counts do."""
    count_a, count_b = Counter(map(_key, a)), Counter(map(_key, b))
    if count_a == count_b:
        return
    by_key = {_key(item): item for item in [*a, *b]}
    added = tuple(by_key[k] for k in sorted((count_b - count_a).elements()))
    removed = tuple(by_key[k] for k in sorted((count_a - count_b).elements()))
    found.append(_difference(path, a, b, added=added, removed=removed))


def _difference(
    path: str, a: object, b: object, *, added: tuple[object, ...] = (), removed: tuple[object, ...] = ()
) -> FieldDifference:
    spec = field_spec(path)
    numerics = spec is not None and spec.affects_numerics and not (is_absent(a) and is_absent(b))
    return FieldDifference(
        field=path,
        label=spec.label if spec else path,
        a=a,
        b=b,
        affects_numerics=numerics,
        rank=spec.rank if spec else UNRANKED,
        added=added,
        removed=removed,
    )


def _is_record(value: object) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(value, Mapping) and not is_absent(value)


def _is_container(value: object) -> bool:
    return (_is_record(value) and bool(value)) or (isinstance(value, list) and _holds_records(value))


def _holds_records(items: list[Any]) -> bool:
    return any(isinstance(item, Mapping) for item in items)


def _equal(a: object, b: object) -> bool:
    """Equal as JSON values: ``True`` differs from ``1``, ``1`` equals ``1.0`` only if both are floats."""
    return type(a) is type(b) and a == b


def _key(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _natural(path: str) -> list[Any]:
    """Sort key putting gpus[2] before gpus[10]."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]
