"""Where each operation of the op log (`reprobox.guest.oplog`) ran: its phase, its module and the line of
the user's code.

Modules are named as the outermost module's `named_modules()` names them, and its parameters, buffers
and the optimizer's state tensors after them, so a differing tensor is named. A backward op is
attributed to the forward op that created its autograd node (through the node's sequence number),
unless user code runs it (a custom Function's backward). The source line is the innermost frame
outside torch, reprobox and the standard library.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from reprobox.guest import settings

ENGINE_FRAMES = ("_engine_run_backward", "run_backward")


class Attribution:
    """The phase, module stack and names of one recording process; the recorder keeps them current."""

    def __init__(self, torch: ModuleType) -> None:
        self.torch = torch
        self.outside = "setup"  # the phase of an op outside modules, backward and optimizer
        self.in_optimizer = False
        self.in_data = 0
        self.module_stack: list[tuple[str, str]] = []
        self.names: dict[int, str] = {}  # id(module) -> its name in the outermost module
        self.tags: dict[int, str] = {}  # id(tensor) -> param:NAME, buffer:NAME, optim:NAME
        self.nodes: dict[int, tuple[str, str, str]] = {}  # autograd node sequence nr -> module, class, source
        self.last_sequence = -1
        roots = {Path(str(torch.__file__)).parent, Path(__file__).parents[1]}
        self.library_roots = tuple(f"{root}{os.sep}" for root in roots)
        # The standard library (not its site-packages: a framework there is code the user runs).
        self.stdlib = f"{Path(os.__file__).parent}{os.sep}"
        self.code_dir = (os.environ.get(settings.CODE_DIR) or "").rstrip(os.sep) + os.sep
        self.library_files: dict[str, bool] = {}  # per frame file: skipped when looking for the user's line

    def begin(self, step: int) -> None:
        self.outside = "setup" if step == 1 else "data"
        self.in_optimizer = False

    def where(self) -> tuple[str, str, str, str]:
        """The op's phase, module (name, class) and source line; a backward op's from its autograd node."""
        torch = self.torch
        node = torch._C._current_autograd_node()
        if node is not None:
            self.outside = "backward"
            sequence = node._sequence_nr()
            module, module_class, forward_source = self.nodes.get(sequence, ("", "", ""))
            if not module_class and hasattr(node, "variable"):  # AccumulateGrad: the parameter's own
                module = self.tags.get(id(node.variable), "").partition(":")[2].rpartition(".")[0]
            source = self._source(inside_engine=True) or forward_source
            return "backward", module, module_class, source
        source = self._source(inside_engine=False)
        if self.module_stack:
            module, module_class = self.module_stack[-1]
            phase = "forward"
        else:  # e.g. the loss, computed outside any module
            module, module_class = "", ""
            phase = "optimizer" if self.in_optimizer else "data" if self.in_data else self.outside
        sequence = torch._C._autograd._get_sequence_nr()
        if sequence != self.last_sequence:  # this op made autograd nodes: its backward ops are named so
            for created in range(max(self.last_sequence, sequence - 64), sequence):
                self.nodes[created] = (module, module_class, source)
            self.last_sequence = sequence
        return phase, module, module_class, source

    def enter(self, module: Any) -> None:
        self.module_stack.append((self.names.get(id(module), ""), type(module).__name__))

    def leave(self) -> None:
        if self.module_stack:
            self.module_stack.pop()

    def outermost(self, module: Any) -> None:
        """An outermost module's forward starts: name its modules and tensors."""
        if self.outside in ("setup", "data"):
            self.outside = "forward"
        if not self.names or id(module) not in self.names:
            self.names.update({id(m): name for name, m in module.named_modules()})
            self.names[id(module)] = ""
            self.tags.update({id(p): f"param:{name}" for name, p in module.named_parameters()})
            self.tags.update({id(b): f"buffer:{name}" for name, b in module.named_buffers()})

    def batch_arrives(self) -> None:
        """A DataLoader yielded a batch: what runs before any module now is the step's data phase."""
        if self.outside == "setup":
            self.outside = "data"

    def name_optimizer_state(self, optimizer: Any) -> None:
        """Name an optimizer's state tensors after their parameters, so a differing one is named."""
        for param, state in optimizer.state.items():
            name = self.tags.get(id(param), "param:?").partition(":")[2]
            for key, value in state.items():
                if isinstance(value, self.torch.Tensor):
                    self.tags.setdefault(id(value), f"optim:{name}.{key}")

    def _source(self, *, inside_engine: bool) -> str:
        """The innermost frame of the user's code (outside torch and reprobox), as path:line.

        In the backward, only a frame called by the autograd engine counts (a custom Function's
        backward): the frame that called backward() says nothing about which op ran.
        """
        frame: Any = sys._getframe(1)
        while frame is not None:
            filename = frame.f_code.co_filename
            if inside_engine and frame.f_code.co_name in ENGINE_FRAMES:
                return ""
            if not self._library(filename):
                return f"{self._path(filename)}:{frame.f_lineno}"
            frame = frame.f_back
        return ""

    def _library(self, filename: str) -> bool:
        """torch, reprobox, the standard library and frozen modules: never the user's line."""
        known = self.library_files.get(filename)
        if known is None:
            known = filename.startswith((*self.library_roots, "<")) or (
                filename.startswith(self.stdlib) and "-packages" + os.sep not in filename
            )
            self.library_files[filename] = known
        return known

    def _path(self, filename: str) -> str:
        if self.code_dir != os.sep and filename.startswith(self.code_dir):
            return filename[len(self.code_dir) :]
        _, found, rest = filename.rpartition("-packages" + os.sep)
        return rest if found else filename
