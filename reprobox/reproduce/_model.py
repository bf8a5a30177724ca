"""The reviewer's choices, the answer, the verdict names, and what the steps share on the way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox import attest, bundle, stackdiff
from reprobox.compare import Comparison
from reprobox.fileio import json_number
from reprobox.jobfile import Claim
from reprobox.records.manifest import RunRecord

BIT_IDENTICAL = "bit-identical"
REPRODUCED = "reproduced"  # every tensor and value equal; only run-specific values or file bytes differ
NONDETERMINISTIC = "nondeterministic"
DIFFERENT_STACK = "different-stack"
CODE_MISMATCH = "code-mismatch"
IMAGE_MISMATCH = "image-mismatch"
FAILED = "failed"

SENTENCE_IDENTICAL = "bit-identical to the published checkpoints"
SENTENCE_REPRODUCED = (
    "reproduced: every tensor and value equals the published ones, except run-specific values (listed)"
)


@dataclass(frozen=True)
class ReproduceOptions:
    """What the reviewer chose; everything else comes from the attestation."""

    code: Path | None = None  # default: the folder around the attestation, else the current directory
    runs: int = 1
    runtime: str | None = None  # docker, podman or local; default: the one the author used
    runs_dir: Path = Path("runs")
    published: Path | None = None  # the author's checkpoints (a run dir or outputs/) for tensor numbers
    tolerance: float | None = None  # max abs difference accepted when the stack differs
    seeds: int | None = None  # rerun the first N published seeds and compare each claim's spread
    accept: str | None = None  # "claims": every claim holding exits 0 on a different stack; None: job file's
    threads: int | None = None  # run with this many threads instead of the author's
    verify_signature: Path | None = None  # the author's public key
    bundle_sha256: str | None = None  # the bundle digest the author published
    report_dir: Path | None = None
    base_image: str | None = None  # for a rebuild only; must give the attested build digest
    wheelhouse: Path | None = None
    echo: Callable[[bytes], None] | None = None
    segments: str | int | None = None  # replay this many segments (or "all") instead of whole runs
    segments_seed: int | None = None  # draw them with this seed instead of the published checkpoints' hashes
    parallel: int = 1  # segments side by side
    engine: Any = None  # a connected reprobox.engine.Engine; connected on demand when None


@dataclass
class ReproduceResult:
    """The answer, shaped like `reprobox reproduce --json`."""

    verdict: str
    sentence: str
    exit_code: int
    attestation: Path
    code_dir: Path | None = None
    code_changes: dict[str, list[str]] | None = None
    comparison: Comparison | None = None
    stack_differences: list[dict[str, Any]] = field(default_factory=list)
    max_abs_difference: float | None = None
    differing_tensors: int = 0
    within_tolerance: bool | None = None  # with --tolerance: every tensor within it
    grade: str = ""  # the highest rung that holds (reprobox.reproduce._grade.GRADES)
    grades: dict[str, bool | None] = field(default_factory=dict)  # each rung: holds, fails, or not judged
    claims: list[dict[str, Any]] = field(default_factory=list)  # each claim: published, reproduced, holds
    seed_spread: dict[str, Any] = field(default_factory=dict)  # --seeds: each claim's two spreads
    seed_runs: list[dict[str, Any]] = field(default_factory=list)  # --seeds: each seed's run here
    runs: list[Path] = field(default_factory=list)
    reports: list[Path] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    image: dict[str, Any] | None = None
    bundle: dict[str, Any] | None = None
    signature: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    segments: dict[str, Any] | None = None  # --segments: the spot-check of the published run

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "grade": self.grade,
            "sentence": self.sentence,
            "grades": self.grades,
            "claims": self.claims,
            "seed_spread": self.seed_spread,
            "seed_runs": self.seed_runs,
            "exit_code": self.exit_code,
            "attestation": str(self.attestation),
            "code_dir": str(self.code_dir) if self.code_dir else None,
            "code_changes": self.code_changes,
            "comparison": self.comparison.to_json() if self.comparison else None,
            "stack_differences": self.stack_differences,
            "max_abs_difference": json_number(self.max_abs_difference),
            "differing_tensors": self.differing_tensors,
            "within_tolerance": self.within_tolerance,
            "runs": [str(r) for r in self.runs],
            "reports": [str(r) for r in self.reports],
            "settings": self.settings,
            "image": self.image,
            "bundle": self.bundle,
            "signature": self.signature,
            "notes": self.notes,
            "segments": self.segments,
        }


@dataclass
class Context:
    """What the steps share while one reproduction goes on."""

    attestation: attest.Attestation
    options: ReproduceOptions
    notes: list[str]
    bundle: bundle.Bundle | None = None
    published: Path | None = None  # outputs folder holding the author's checkpoints
    published_trail: Path | None = None
    report_dir: Path | None = None
    published_record: RunRecord | None = None
    accept: str = "bits"  # the job file's `accept:`
    claims: tuple[Claim, ...] = ()  # the job file's claims
    replay_pin: int | None = None  # threads pinned only to replay the author's unpinned count
    stack_differences: list[stackdiff.FieldDifference] = field(default_factory=list)
