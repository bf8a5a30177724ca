"""A tiny module saved as torch's exported and compiled forms: TorchScript (``torch.jit.save`` of a scripted
and of a traced module) and PT2 archives (``torch.export.save``, and ``package_pt2`` with a second model,
an extra file and an ExecuTorch payload), each written by torch itself.

Weights come from ``torch.arange``, never a generator, so every process saves the same bytes. Run as
``python -m tests.exported_models FOLDER`` to save them in a process of their own.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

EXAMPLE = torch.arange(3.0).reshape(1, 3)


class Tiny(torch.nn.Module):
    """A parameter pair, a buffer and a plain tensor attribute (a constant once traced or exported)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        with torch.no_grad():
            self.fc.weight.copy_(torch.arange(6.0).reshape(2, 3) / 10)
            self.fc.bias.fill_(0.5)
        self.register_buffer("scale", torch.tensor([2.0, 3.0]))
        self.c = torch.ones(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.scale + self.c


Saver = Callable[[Path], None]
"""Saves the module's current state at the path (the archive's folder is named after the file)."""


def savers(model: Tiny) -> dict[str, Saver]:
    """Each form, from one module: what a save writes follows the module's weights as they are then."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated in favour of export
        scripted = torch.jit.script(model)
        traced = torch.jit.trace(model, EXAMPLE)
    exported = torch.export.export(model, (EXAMPLE,))

    def jit_save(module: torch.jit.ScriptModule) -> Saver:
        def save(path: Path) -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                torch.jit.save(module, str(path), _extra_files={"notes.txt": "tiny"})

        return save

    def packaged(path: Path) -> None:
        from torch.export.pt2_archive._package import package_pt2

        package_pt2(
            str(path),
            exported_programs={"model": exported, "second": exported},
            extra_files={"notes.txt": "tiny"},
            executorch_files={"model.pte": b"\x00ExecuTorch program\x01"},
        )

    return {
        "scripted.pt": jit_save(scripted),
        "traced.pt": jit_save(traced),
        "exported.pt2": lambda path: torch.export.save(exported, str(path)),
        "packaged.pt2": packaged,
    }


def bump(model: Tiny) -> None:
    """One element of ``fc.weight`` changed in place: every form saves it from there (they share it)."""
    with torch.no_grad():
        model.fc.weight[1, 2] += 1.0


def save_all(folder: Path) -> dict[str, bytes]:
    """Every form of a fresh module saved in ``folder``, by file name."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, save in savers(Tiny()).items():
        save(folder / name)
    return {name: (folder / name).read_bytes() for name in sorted(p.name for p in folder.iterdir())}


if __name__ == "__main__":
    save_all(Path(sys.argv[1]))
