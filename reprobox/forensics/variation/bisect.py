"""The smallest combination of factors that changes the result, when no single factor does.

Generic over what is combined: `differs(subset)` runs (or looks up) one run with exactly those factors
varied and says whether it differs from the baseline. Halves are tried first (a bisection, one run
each), then every remaining member is dropped in turn while the rest still differs, so the answer is
1-minimal: removing any one of its members makes the difference go away.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def smallest_combination(items: Sequence[T], differs: Callable[[tuple[T, ...]], bool]) -> tuple[T, ...]:
    """A 1-minimal subset of `items` (which together differ) that still differs; order kept.

    Each distinct subset is asked about at most once.
    """
    cache: dict[tuple[T, ...], bool] = {}

    def ask(subset: tuple[T, ...]) -> bool:
        if subset not in cache:
            cache[subset] = differs(subset)
        return cache[subset]

    current = tuple(items)
    while len(current) > 1:  # bisect while one half alone still differs
        half = len(current) // 2
        first, second = current[:half], current[half:]
        if ask(first):
            current = first
        elif ask(second):
            current = second
        else:
            break
    index = 0
    while index < len(current) and len(current) > 1:  # then drop members the difference does not need
        without = current[:index] + current[index + 1 :]
        if ask(without):
            current = without
        else:
            index += 1
    return current
