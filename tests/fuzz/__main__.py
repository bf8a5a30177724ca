"""``python -m tests.fuzz TARGET SECONDS [SEED]``: one target fuzzed for a while; findings kept as
regression inputs under tests/fuzz/regressions/TARGET/."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from tests.fuzz.forkserver import TARGET_FILES, fuzz

REGRESSIONS = Path(__file__).parent / "regressions"


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[0] not in TARGET_FILES:
        print(
            f"usage: python -m tests.fuzz TARGET SECONDS [SEED]; TARGET is one of {', '.join(TARGET_FILES)}",
            file=sys.stderr,
        )
        return 2
    target, seconds, rng_seed = argv[0], float(argv[1]), int(argv[2]) if len(argv) == 3 else 0
    with tempfile.TemporaryDirectory(prefix="reprobox-fuzz-") as folder:
        seeds, work = Path(folder) / "seeds", Path(folder) / "work"
        subprocess.run([sys.executable, "-m", "tests.fuzz.seeds", str(seeds), target], check=True)
        campaign = fuzz(target, seconds, seeds, work, REGRESSIONS, rng_seed)
    rate = campaign.executions / seconds
    print(f"{target}: {campaign.executions} executions in {seconds:.0f} s ({rate:.1f}/s)")
    for kind, count in sorted(campaign.kinds.items()):
        print(f"  {kind:12} {count}")
    for path, outcome in campaign.findings:
        last = outcome.detail.strip().splitlines()[-1] if outcome.detail.strip() else ""
        print(f"FINDING {outcome.kind} {path}: {last}")
    return 1 if campaign.findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
