"""A file read once for the several files that need it: a DCP index for each of its shards, an OCDBT
manifest for each of its data files.

Hashing reads such files from several threads: one that asks for a key another is reading waits for that
result rather than reading again, the last few results are kept, and each later reader's CPU budget is
charged the CPU time the read took, so every file's budget is spent alike whichever file read it first.
A read that failed (ValueError, RecursionError) is kept as such and raised anew for each reader, with its
own traceback.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from reprobox.guest.hashing._bounds import charge_cpu

T = TypeVar("T")
_FAILURES = (ValueError, RecursionError)


class SharedReads(Generic[T]):
    """The last `kept` reads of one kind of file, by a key of everything a read depends on."""

    def __init__(self, kept: int) -> None:
        self._kept = kept
        self._reads: OrderedDict[Hashable, tuple[T | ValueError | RecursionError, float]] = OrderedDict()
        self._locks: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, read: Callable[[], T], *, reuse: bool = True) -> T:
        """`read()`'s result for `key`: read now, or the kept one (`reuse=False` reads anew)."""
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # a second reader of the same key waits for the first's result
            kept = self._reads.get(key) if reuse else None
            if kept is None:
                started = time.thread_time()
                result: T | ValueError | RecursionError
                try:
                    result = read()
                except _FAILURES as exc:
                    result = exc
                kept = (result, time.thread_time() - started)
                with self._lock:
                    self._reads[key] = kept
                    while len(self._reads) > self._kept:
                        self._locks.pop(self._reads.popitem(last=False)[0], None)
            else:
                charge_cpu(kept[1])
        value = kept[0]
        if isinstance(value, _FAILURES):
            raise type(value)(*value.args)
        return value
