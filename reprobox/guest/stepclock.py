"""Wall time of each optimizer step, for `reprobox cost`: what a determinism setting costs the job.

Switched on by REPROBOX_STEP_TIMES=1 (with the trail, whose step hook calls it). A step's time runs
from the end of the previous step's hook to the start of this one's, so the trail's own digests are
not counted; on a GPU the device is synchronised at both ends, so queued kernels are counted in the
step that launched them. One line per step goes to `.reprobox/step-times.jsonl` in the run dir.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

from reprobox.guest import settings
from reprobox.records.steptimes import STEP_TIMES_FILE, encode_step_time


class StepClock:
    def __init__(self, torch_module: ModuleType, run_dir: Path) -> None:
        self.torch = torch_module
        folder = run_dir / settings.GUEST_STATE
        folder.mkdir(exist_ok=True)
        self.handle = (folder / STEP_TIMES_FILE).open("a", encoding="utf-8")
        self.left = time.perf_counter()  # the first step's time includes the job's set-up

    def _now(self) -> float:
        cuda = self.torch.cuda
        if cuda.is_initialized():
            cuda.synchronize()
        return time.perf_counter()

    def arrived(self, step: int) -> None:
        """At the start of step `step`'s hook: the step's work is done."""
        self.handle.write(encode_step_time(step, self._now() - self.left))
        self.handle.flush()

    def leaving(self) -> None:
        """At the end of the hook: the next step starts now."""
        self.left = self._now()


def from_environment(torch_module: ModuleType, run_dir: Path, environ: dict[str, str]) -> StepClock | None:
    return StepClock(torch_module, run_dir) if environ.get(settings.STEP_TIMES) == "1" else None
