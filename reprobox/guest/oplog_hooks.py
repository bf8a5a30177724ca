"""How the op recorder (`reprobox.guest.oplog`) is wired into torch while it records.

A TorchDispatchMode hands it every operation; global module hooks keep its module stack; the
DataLoader's iterator is wrapped so that its work is the data phase and each batch it yields is
digested. All of it is installed for the recorded steps only and taken away after them.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol


class Recorder(Protocol):
    """What the hooks hand on: every operation, module entry and exit, DataLoader work and batch."""

    def record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...

    def enter_module(self, module: Any, args: tuple[Any, ...]) -> None: ...

    def leave_module(self, module: Any, args: Any, output: Any) -> None: ...

    def loading(self, workers: int) -> AbstractContextManager[None]: ...

    def batch(self, index: int, batch: Any) -> None: ...


class TorchHooks:
    """The recorder's hooks into torch, installed at once and removed by `remove`."""

    def __init__(self, recorder: Recorder) -> None:
        from torch.nn.modules import module as nn_module
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.data import dataloader

        class _Mode(TorchDispatchMode):  # type: ignore[no-untyped-call]
            def __torch_dispatch__(
                self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
            ) -> Any:
                return recorder.record(func, args, kwargs or {})

        self.mode: Any = None
        self.handles = [
            nn_module.register_module_forward_pre_hook(recorder.enter_module),
            nn_module.register_module_forward_hook(recorder.leave_module, always_call=True),
        ]
        self.original_next = dataloader._BaseDataLoaderIter.__next__
        original = self.original_next

        def next_batch(iterator: Any) -> Any:
            workers = int(getattr(iterator, "_num_workers", 0) or 0)
            with recorder.loading(workers):
                batch = original(iterator)
            recorder.batch(int(getattr(iterator, "_num_yielded", 0)) - 1, batch)
            return batch

        self.original_iter = dataloader.DataLoader.__iter__
        original_iter = self.original_iter

        def start_epoch(loader: Any) -> Any:
            with recorder.loading(int(getattr(loader, "num_workers", 0) or 0)):
                return original_iter(loader)

        dataloader._BaseDataLoaderIter.__next__ = next_batch  # type: ignore[method-assign,assignment]
        dataloader.DataLoader.__iter__ = start_epoch  # type: ignore[method-assign]
        self.mode = _Mode()  # type: ignore[no-untyped-call]
        self.mode.__enter__()

    def remove(self) -> None:
        from torch.utils.data import dataloader

        self.mode.__exit__(None, None, None)
        for handle in self.handles:
            handle.remove()
        self.handles = []
        dataloader._BaseDataLoaderIter.__next__ = self.original_next  # type: ignore[method-assign]
        dataloader.DataLoader.__iter__ = self.original_iter  # type: ignore[method-assign]
