"""Seed spread: the job verified with N seeds, and each claim's mean and standard deviation over them.

Papers report mean ± std over seeds. `verify --seeds N` runs the job with seeds S, S+1, ..., S+N-1
(S: the job file's seed), each seed `--runs` times and compared bit for bit as a plain verify does, so
every point of the spread is itself reproducible; `reproduce --seeds N` reruns the first N published
seeds and compares the two spreads (`compare_spreads`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from reprobox import progress
from reprobox.claims import recorded_value
from reprobox.compare import DIFFERENT, FAILED, IDENTICAL, Comparison
from reprobox.errors import UsageError
from reprobox.jobfile import Claim, JobSpec
from reprobox.records.manifest import RunRecord
from reprobox.runner import RunOptions, prepare_inputs
from reprobox.runtimes.base import Runtime
from reprobox.verify import VerifyOptions, verify

MAX_SEEDS = 100
SPREAD_WIDTH = 2.0  # an interval is mean ± 2 standard deviations (about 95% of a normal spread) ...


@dataclass(frozen=True)
class Spread:
    """One claim over seeds: its values (in seed order), their mean and sample standard deviation."""

    values: tuple[float, ...]
    seeds: tuple[int, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def std(self) -> float:
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "values": list(self.values), "seeds": list(self.seeds)}

    def interval(self, claim: Claim | None) -> tuple[float, float]:
        """mean ± 2·std, widened by the claim's own tolerance (absolute, or relative to the mean)."""
        slack = SPREAD_WIDTH * self.std
        if claim is not None and claim.tolerance is not None:
            slack += claim.tolerance * abs(self.mean) if claim.relative else claim.tolerance
        return self.mean - slack, self.mean + slack

    def text(self) -> str:
        shown = ", ".join(f"{v:.6g}" for v in self.values)
        return f"{self.mean:.6g} ± {self.std:.3g} over {len(self.values)} seeds ({shown})"


@dataclass
class SeedsResult:
    """Every seed's verify, and the claims' spread over the seeds whose runs succeeded."""

    seeds: list[int]
    comparisons: list[Comparison] = field(default_factory=list)
    records: list[list[RunRecord]] = field(default_factory=list)
    spread: dict[str, Spread] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        verdicts = [c.verdict for c in self.comparisons]
        if FAILED in verdicts or len(verdicts) < len(self.seeds):
            return FAILED
        return DIFFERENT if DIFFERENT in verdicts else IDENTICAL

    def attestation_entry(self) -> dict[str, Any]:
        """`predicate.seeds`: the seeds, the runs per seed, each claim's spread, each seed's checkpoints."""
        return {
            "seeds": list(self.seeds),
            "runs_per_seed": len(self.records[0]) if self.records else 0,
            "claims": {name: s.to_json() for name, s in self.spread.items()},
            "checkpoints": {
                str(seed): [
                    {"path": c["path"], "content_sha256": c.get("content_sha256")}
                    for c in records[0].checkpoints
                ]
                for seed, records in zip(self.seeds, self.records, strict=False)
                if records
            },
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "seeds": [
                {"seed": seed, "verdict": c.verdict, "sentence": c.sentence, "runs": c.runs}
                for seed, c in zip(self.seeds, self.comparisons, strict=False)
            ],
            "spread": {name: s.to_json() for name, s in self.spread.items()},
        }


def seed_list(base: int, count: int) -> list[int]:
    if not 2 <= count <= MAX_SEEDS:
        raise UsageError(f"--seeds must be from 2 to {MAX_SEEDS}, not {count}; e.g. --seeds 3")
    return [base + offset for offset in range(count)]


def verify_seeds(
    job: JobSpec, runtime: Runtime, run_options: RunOptions, options: VerifyOptions, count: int
) -> SeedsResult:
    """Verify the job with each seed in turn; stop at the first seed whose runs fail."""
    result = SeedsResult(seeds=seed_list(job.seed, count))
    inputs = prepare_inputs(job, run_options)  # one code snapshot and one data hash for every seed
    for index, seed in enumerate(result.seeds):
        progress.say(f"seed {seed} ({index + 1}/{count})")
        comparison, records = verify(
            job.with_overrides(seed=seed),
            runtime,
            run_options,
            replace(options, what=f"seed {seed}: {options.what}"),
            inputs=inputs,
        )
        result.comparisons.append(comparison)
        result.records.append(records)
        progress.say(f"seed {seed}: {comparison.sentence or comparison.verdict}")
        if comparison.verdict == FAILED:
            break
    result.spread = spread_of(
        job.claims, [(s, r[0]) for s, r in zip(result.seeds, result.records, strict=False)]
    )
    return result


def spread_of(claims: tuple[Claim, ...], runs: list[tuple[int, RunRecord]]) -> dict[str, Spread]:
    """Each claim's values over the given (seed, run) pairs, leaving out runs that did not produce it."""
    found: dict[str, Spread] = {}
    for claim in claims:
        pairs = [(seed, recorded_value(record, claim.name)) for seed, record in runs]
        kept = [(seed, value) for seed, value in pairs if value is not None]
        if kept:
            found[claim.name] = Spread(tuple(v for _, v in kept), tuple(s for s, _ in kept))
    return found


@dataclass(frozen=True)
class SpreadCheck:
    """A claim's published spread against the reviewer's: each mean inside the other's interval."""

    name: str
    published: Spread
    reproduced: Spread
    published_in_reproduced: bool
    reproduced_in_published: bool

    @property
    def holds(self) -> bool:
        return self.published_in_reproduced and self.reproduced_in_published

    def to_json(self) -> dict[str, Any]:
        return {
            "published": self.published.to_json(),
            "reproduced": self.reproduced.to_json(),
            "published_in_reproduced": self.published_in_reproduced,
            "reproduced_in_published": self.reproduced_in_published,
            "holds": self.holds,
        }

    def text(self) -> str:
        verdict = "holds" if self.holds else "does not hold"
        return f"{self.name}: published {self.published.text()}, here {self.reproduced.text()}: {verdict}"


def compare_spreads(
    claims: tuple[Claim, ...], published: dict[str, Spread], reproduced: dict[str, Spread]
) -> list[SpreadCheck]:
    checks = []
    for claim in claims:
        mine, theirs = reproduced.get(claim.name), published.get(claim.name)
        if mine is None or theirs is None:
            continue
        low, high = mine.interval(claim)
        their_low, their_high = theirs.interval(claim)
        checks.append(
            SpreadCheck(
                claim.name,
                theirs,
                mine,
                published_in_reproduced=low <= theirs.mean <= high,
                reproduced_in_published=their_low <= mine.mean <= their_high,
            )
        )
    return checks
