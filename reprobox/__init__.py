"""reprobox: run a PyTorch training job bit for bit reproducibly, and prove it.

The Python API, for job code and for tools that drive reprobox (the CLI is a thin layer over it):

- In a job: `seed_everything`, `seed_worker`, `generator` (explicit seeding; a job run by reprobox is
  already seeded by the guest's startup hook) and `trail` (`trail.log(step, loss=...)`).
- Driving runs: `load_job(path)` → `JobSpec`; `open_runtime(name, RuntimeOptions(job=spec))`;
  `run_job(spec, runtime, RunOptions(...))` → `RunRecord` (one run); `verify_job(spec, runtime,
  RunOptions(...), VerifyOptions(...))` → (`Comparison`, records); `read_record(run_dir)`;
  `compare_runs([record, ...])` → `Comparison` (the graded verdict: `.grade`, `.sentence`);
  `verify_resume(spec, runtime, RunOptions(...), K)` → `ResumeCheck` (is resuming at step K exact);
  `measure_cost(spec, runtime, RunOptions(...), CostOptions(...))` → `CostResult` (what each
  determinism setting costs the job, and the cheapest bit-exact one).

Imports are lazy so that `import reprobox` (which every job process does at start-up) costs nothing.
"""

from __future__ import annotations

from reprobox._version import __version__

TYPE_CHECKING = False  # not typing's: every job process imports this package, and typing costs ~4 ms
if TYPE_CHECKING:
    from typing import Any

    from reprobox.compare import compare_runs as compare_runs
    from reprobox.cost import CostOptions as CostOptions
    from reprobox.cost import measure_cost as measure_cost
    from reprobox.guest import trail as trail
    from reprobox.guest.seeding import generator as generator
    from reprobox.guest.seeding import seed_everything as seed_everything
    from reprobox.guest.seeding import seed_worker as seed_worker
    from reprobox.jobfile import load_job as load_job
    from reprobox.records.manifest import read_record as read_record
    from reprobox.resume.exact import verify_resume as verify_resume
    from reprobox.runner import RunOptions as RunOptions
    from reprobox.runner import execute as run_job
    from reprobox.runtimes import open_runtime as open_runtime
    from reprobox.runtimes.base import RuntimeOptions as RuntimeOptions
    from reprobox.verify import VerifyOptions as VerifyOptions
    from reprobox.verify import verify as verify_job

# Public name -> (module, name there). No public name is also a submodule's (`verify` is one).
_WHERE = {
    "seed_everything": ("reprobox.guest.seeding", "seed_everything"),
    "seed_worker": ("reprobox.guest.seeding", "seed_worker"),
    "generator": ("reprobox.guest.seeding", "generator"),
    "load_job": ("reprobox.jobfile", "load_job"),
    "open_runtime": ("reprobox.runtimes", "open_runtime"),
    "RuntimeOptions": ("reprobox.runtimes.base", "RuntimeOptions"),
    "run_job": ("reprobox.runner", "execute"),
    "RunOptions": ("reprobox.runner", "RunOptions"),
    "verify_job": ("reprobox.verify", "verify"),
    "VerifyOptions": ("reprobox.verify", "VerifyOptions"),
    "read_record": ("reprobox.records.manifest", "read_record"),
    "compare_runs": ("reprobox.compare", "compare_runs"),
    "verify_resume": ("reprobox.resume.exact", "verify_resume"),
    "measure_cost": ("reprobox.cost", "measure_cost"),
    "CostOptions": ("reprobox.cost", "CostOptions"),
}

__all__ = [
    "CostOptions",
    "RunOptions",
    "RuntimeOptions",
    "VerifyOptions",
    "__version__",
    "compare_runs",
    "generator",
    "load_job",
    "measure_cost",
    "open_runtime",
    "read_record",
    "run_job",
    "seed_everything",
    "seed_worker",
    "trail",
    "verify_job",
    "verify_resume",
]


def __getattr__(name: str) -> Any:
    if name == "trail":
        from reprobox.guest import trail

        return trail
    if name in _WHERE:
        import importlib

        module, attribute = _WHERE[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'reprobox' has no attribute {name!r}")
