"""The ids a job's Python cut from its clock: each ``uuid.uuid1`` (and ``uuid6``, ``uuid7`` where the
standard library has them) as it returned, the record that excuses such an id, or a piece of it, as
run-specific (``runspecific._clockids``).

A ``uuid1`` is a 60-bit count of 100 ns since 1582, a 14-bit clock sequence and the host's node: on Linux
the C library makes it (``uuid._generate_time_safe``), reading a clock no wrapper of ``time`` sees, so
what ``uuid1`` returns is recorded rather than the readings it was made from. Libraries name things by a
piece of one (Ray Tune's trial ids are ``uuid1().hex[:5]`` and a counter). The module's functions are
wrapped the moment ``uuid`` is imported (``post_import``), so ``from uuid import uuid1`` gets the wrapper
too; a process that never imports ``uuid`` pays nothing. Bounds as for draws: the first ``MAX_IDS`` and
the latest ``MAX_IDS``, the ones between counted as dropped.
"""

from __future__ import annotations

from collections import deque

TYPE_CHECKING = False  # imported in every process of the job at start-up: typing costs more than this
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

MAX_IDS = 512
MAKERS = ("uuid1", "uuid6", "uuid7")  # the uuid versions whose bits are the clock's


class ClockIds:
    """The clock-derived uuids this process made, as 32 hex digits, within the bound."""

    def __init__(self) -> None:
        self.first: list[str] = []
        self.latest: deque[str] = deque(maxlen=MAX_IDS)
        self.dropped = 0

    def add(self, hex_digits: str) -> None:
        if len(self.first) < MAX_IDS:
            self.first.append(hex_digits)
            return
        if len(self.latest) == MAX_IDS:  # past the bound: the latest kept, the rest counted
            self.dropped += 1
        self.latest.append(hex_digits)

    def kept(self) -> list[str]:
        return [*self.first, *self.latest]

    def wrap_module(self, module: ModuleType) -> None:
        """Replace the clock-derived makers of the ``uuid`` module by recording ones."""
        for name in MAKERS:
            maker = getattr(module, name, None)
            if callable(maker) and not getattr(maker, "__reprobox_recorded__", False):
                setattr(module, name, self._wrap(name, maker))

    def _wrap(self, name: str, maker: Callable[..., Any]) -> Callable[..., Any]:
        add = self.add

        def made(*args: Any, **kwargs: Any) -> Any:
            value = maker(*args, **kwargs)
            hex_digits = getattr(value, "hex", None)
            if isinstance(hex_digits, str):
                add(hex_digits)
            return value

        made.__name__ = made.__qualname__ = name
        made.__module__ = "uuid"  # pickled by reference, it is found where the job looks for it
        made.__doc__ = maker.__doc__
        made.__reprobox_recorded__ = True  # type: ignore[attr-defined]
        made.__wrapped__ = maker  # type: ignore[attr-defined]
        return made
