"""The determinism settings `reprobox cost` measures: the job's own, and each one knob changed from it.

A setting either keeps PyTorch's determinism guarantee (a pinned thread count, TF32, the smaller
cuBLAS workspace, a fixed attention kernel, oneDNN off: each picks fixed kernels) or gives it up (the
deterministic-algorithms switch, cuDNN's benchmark mode, which picks kernels by timing them). One that
gives it up can still be bit-exact in the runs measured, because this job happens to call no kernel
that varies; it is reported, never recommended, since the next change to the code may call one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from reprobox.guest.determinism import Determinism

DEFAULT = "default"
NO_DETERMINISM = "no determinism"
CPU, CUDA = "cpu", "cuda"
SDPA_CHOICES: tuple[tuple[str, ...], ...] = (("math",), ("flash", "math"), ("efficient", "math"))


@dataclass(frozen=True)
class Setting:
    """One row of the cost table: what it changes from the job's own settings and what it trades."""

    name: str
    changes: Mapping[str, Any] = field(default_factory=dict)
    doc: str = ""
    guaranteed: bool = True  # deterministic by construction, not only in the runs measured
    device: str = CPU  # CUDA: measured only when the job computes on a GPU

    def applied(self, det: Determinism) -> Determinism:
        return replace(det, **self.changes)


def candidate_settings(det: Determinism, *, threads_used: int | None, cpus: int, gpu: bool) -> list[Setting]:
    """Every setting worth measuring for a job whose own settings are `det`, the job's own first."""
    rows = [Setting(DEFAULT, {}, "the job's own settings")]
    own_threads = det.threads or threads_used
    # One thread and every core (at least two): the pair `verify --vary threads` tries, so that the
    # two commands say the same of a job's thread counts.
    for count in sorted({1, max(cpus, 2)}):
        if count != own_threads:
            rows.append(Setting(f"threads={count}", {"threads": count}, f"{count} CPU threads, pinned"))
    if det.algorithms and det.fill_uninitialized_memory:
        rows.append(
            Setting(
                "fill_uninitialized_memory=false",
                {"fill_uninitialized_memory": False},
                "new tensors left unfilled (bit-exact while the job never reads memory it did not write)",
            )
        )
    rows.append(_toggle(det, "onednn", "oneDNN CPU kernels"))
    if gpu:
        rows += _cuda_settings(det)
    if det.algorithms:
        rows.append(
            Setting(
                "algorithms=false",
                {"algorithms": False},
                "nondeterministic kernels allowed (atomics, cuDNN's fastest)",
                guaranteed=False,
            )
        )
    rows.append(
        Setting(
            NO_DETERMINISM,
            {
                "algorithms": False,
                "fill_uninitialized_memory": False,
                "cudnn_benchmark": gpu,
                "tf32": gpu,
                "threads": None,
                "sdpa_backends": None,
            },
            "PyTorch as it comes, with benchmark mode and TF32 on a GPU: the fastest it gets",
            guaranteed=False,
        )
    )
    return [row for row in rows if row.name == DEFAULT or row.applied(det) != det]


def _toggle(det: Determinism, name: str, what: str) -> Setting:
    value = not getattr(det, name)
    return Setting(f"{name}={str(value).lower()}", {name: value}, f"{what} {'on' if value else 'off'}")


def _cuda_settings(det: Determinism) -> list[Setting]:
    other_workspace = ":16:8" if det.cublas_workspace_config == ":4096:8" else ":4096:8"
    rows = [
        Setting(
            "cudnn_benchmark=true",
            {"cudnn_benchmark": True},
            "cuDNN times its kernels and keeps the fastest: the choice can change between runs",
            guaranteed=False,
            device=CUDA,
        ),
        Setting(
            f"cublas_workspace_config={other_workspace}",
            {"cublas_workspace_config": other_workspace},
            "cuBLAS workspace size (:16:8 saves memory, may be slower)",
            device=CUDA,
        ),
        replace(_toggle(det, "tf32", "TF32 float32 matmuls and convolutions"), device=CUDA),
    ]
    for choice in SDPA_CHOICES:
        if det.sdpa_backends != choice:
            rows.append(
                Setting(
                    f"sdpa_backends=[{', '.join(choice)}]",
                    {"sdpa_backends": choice},
                    f"attention through {' or '.join(choice)} kernels only",
                    device=CUDA,
                )
            )
    return rows


def determinism_block(det: Determinism) -> str:
    """The `determinism:` section of job.yaml for `det`: what differs from reprobox's defaults, and
    the thread count always (pinned, so that another machine's core count cannot change the numbers)."""
    defaults = asdict(Determinism())
    values = asdict(det)
    lines = ["determinism:"]
    for key, value in values.items():
        if value != defaults[key] or key == "threads":
            lines.append(f"  {key}: {_yaml(value)}")
    return "\n".join(lines)


def _yaml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)
