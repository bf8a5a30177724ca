"""Benchmark segment spot-checks against a full verify, measured side by side in one run.

examples/long-run made long: 1000 optimizer steps of a 4-layer, 512-wide MLP on batches of 1024, a
resumable checkpoint every 50 steps (20 segments of several seconds of training each). Timed on the local
runtime: `verify --runs 2` (the whole job twice), then `spot-check RUN --segments 3` of one of its runs
(three segments replayed one after another, each from its checkpoint). Target: the spot-check takes at
most 20% of the verify. Also printed: the seconds of training per segment (a run's wall time over its
segments, less one run's start-up, measured as `run --max-steps 1`), which must be at least 5 s for the
target to mean what it says.

Exit status 1 when the target is missed. Medians of alternating repeats; the machine should be quiet.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_trail import reprobox  # noqa: E402 - one way to time a reprobox command

TARGET = 0.20
MIN_SEGMENT_S = 5.0
SEGMENTS = 20
STEPS = 1000
COMMAND = (
    f'[python, train.py, --steps, "{STEPS}", --save-every, "{STEPS // SEGMENTS}", --width, "512", '
    '--depth, "4", --batch-size, "1024"]'
)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--segments", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"verify": [], "spot": [], "run": [], "start": []}
    with tempfile.TemporaryDirectory() as folder:
        job = Path(folder) / "job"
        shutil.copytree(ROOT / "examples" / "long-run", job)
        text = (job / "job.yaml").read_text()
        start = text.index("command:")
        end = text.index("\n", start)
        (job / "job.yaml").write_text(text[:start] + f"command: {COMMAND}" + text[end:])
        runs = Path(folder) / "runs"
        for _ in range(args.repeats):
            times["verify"].append(reprobox("verify", str(job), "--runs-dir", str(runs), "--no-attestation"))
            run = sorted(p for p in (runs / "long-run").iterdir() if p.name[0].isdigit())[-1]
            times["run"].append(times["verify"][-1] / 2)
            times["start"].append(reprobox("run", str(job), "--runs-dir", str(runs), "--max-steps", "1"))
            times["spot"].append(
                reprobox("spot-check", str(run), "--segments", str(args.segments), "--runs-dir", str(runs))
            )
            shutil.rmtree(runs)
    verify_s, spot_s, run_s, start_s = (
        statistics.median(times[k]) for k in ("verify", "spot", "run", "start")
    )
    ratio = spot_s / verify_s
    segment_s = (run_s - start_s) / SEGMENTS
    print(
        f"verify --runs 2: {verify_s:.1f} s ({segment_s:.1f} s of training per segment of "
        f"{STEPS // SEGMENTS} steps, start-up {start_s:.1f} s); spot-check of {args.segments} of its "
        f"segments: {spot_s:.1f} s: "
        f"{ratio:.0%} of the verify (target <= {TARGET:.0%})"
    )
    return 1 if ratio > TARGET or segment_s < MIN_SEGMENT_S else 0


if __name__ == "__main__":
    raise SystemExit(main())
