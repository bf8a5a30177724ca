"""A run as its manifest records it (`RunRecord`): one typed property per field the code reads, so each
field's name, type and default for older records is written down once, here.

The file itself (schema, field checks, reading and writing) is `reprobox.records.manifest`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobox.records._shape import is_int
from reprobox.records.trail import StoppedEarly

STATUS_SUCCEEDED = "succeeded"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"
STATUS_CANCELLED = "cancelled"  # stopped by reprobox once the verdict was known (verify --stop-on-divergence)
STATUSES = frozenset({STATUS_SUCCEEDED, STATUS_FAILED, STATUS_INTERRUPTED, STATUS_CANCELLED})


@dataclass(frozen=True)
class RunRecord:
    """A manifest as loaded from disk; `data` is the JSON object, `run_dir` where it lives.

    Read its fields through the properties: they give each field's type and its default for records
    that lack it (older versions, the record `reproduce` makes of the author's published result).
    """

    run_dir: Path
    data: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.data.get("run_id", self.run_dir.name))

    @property
    def job_name(self) -> str:
        return str(self.data.get("job_name") or "")

    @property
    def status(self) -> str:
        return str(self.data.get("status"))

    @property
    def succeeded(self) -> bool:
        return self.status == STATUS_SUCCEEDED

    @property
    def failure(self) -> str | None:
        return self._text("failure")

    @property
    def started_at(self) -> str:
        return str(self.data.get("started_at") or "")

    @property
    def ended_at(self) -> str:
        return str(self.data.get("ended_at") or "")

    @property
    def run_facts(self) -> dict[str, Any]:
        """What makes the run itself, as the guest recorded it: its clock window and UTC offsets, host
        names, the job's pids, run id and folders; empty for older records."""
        facts = self.data.get("run_facts")
        return dict(facts) if isinstance(facts, dict) else {}

    @property
    def seed(self) -> int | None:
        seed = self.data.get("seed")
        return seed if is_int(seed) else None

    @property
    def job_spec(self) -> dict[str, Any]:
        """The job as it ran (the job file's fields, with defaults filled in)."""
        return dict(self.data.get("job") or {})

    @property
    def job_file(self) -> Path | None:
        name = self.data.get("job_file") or self.job_spec.get("job_file")
        return Path(str(name)) if name else None

    @property
    def job_file_sha256(self) -> str | None:
        return self._text("job_file_sha256")

    @property
    def compare_ignore(self) -> list[Any]:
        """The job's `compare: ignore:` rules, as written."""
        return list((self.job_spec.get("compare") or {}).get("ignore") or [])

    @property
    def trail_every(self) -> int | None:
        every = (self.job_spec.get("trail") or {}).get("every")
        return every if is_int(every) else None

    @property
    def code(self) -> dict[str, Any]:
        """The code tree the run ran: sha256, files (path -> digest), snapshot, path, git."""
        return dict(self.data.get("code") or {})

    @property
    def code_sha256(self) -> str | None:
        return str(self.code["sha256"]) if self.code.get("sha256") else None

    @property
    def code_files(self) -> dict[str, str]:
        return dict(self.code.get("files") or {})

    @property
    def command(self) -> list[str]:
        return [str(part) for part in self.data.get("command") or []]

    @property
    def environment(self) -> dict[str, Any]:
        return dict(self.data.get("environment") or {})

    @property
    def runtime(self) -> dict[str, Any]:
        """What the runtime recorded: its name, the image, the container or Slurm job, the paths."""
        return dict(self.data.get("runtime") or {})

    @property
    def runtime_name(self) -> str:
        return str(self.runtime.get("name") or "local")

    @property
    def runtime_paths(self) -> dict[str, Any]:
        """Where the job saw its code, data and outputs (`mode` says how they were put there)."""
        return dict(self.runtime.get("paths") or {})

    @property
    def image(self) -> dict[str, Any] | None:
        """The container image the run ran in (id, tags, labels, repo digest); None outside one."""
        image = self.runtime.get("image")
        return dict(image) if isinstance(image, dict) and image.get("id") else None

    @property
    def image_id(self) -> str | None:
        return str(self.image["id"]) if self.image else None

    @property
    def checkpoints(self) -> list[dict[str, Any]]:
        return list(self.data.get("checkpoints") or [])

    @property
    def fingerprint(self) -> dict[str, Any]:
        return dict(self.data.get("fingerprint") or {})

    @property
    def claims(self) -> list[dict[str, Any]]:
        """The job file's claims as this run produced them: {name, value, file, key, sha256, evidence,
        error}; empty for jobs without claims and for older records."""
        found = self.data.get("claims")
        return [dict(c) for c in found if isinstance(c, dict)] if isinstance(found, list) else []

    def claim(self, name: str) -> dict[str, Any] | None:
        return next((c for c in self.claims if c.get("name") == name), None)

    @property
    def output_dir(self) -> Path:
        return self.run_dir / "outputs"

    @property
    def trail_name(self) -> str | None:
        """The run's trail file, relative to the run directory; None when it recorded none."""
        return self._text("trail")

    @property
    def trail_path(self) -> Path | None:
        return self.run_dir / self.trail_name if self.trail_name else None

    @property
    def prefix_check(self) -> dict[str, Any] | None:
        """Set when only the first --max-steps optimizer steps ran: {max_steps, reached}."""
        return dict(self.data["prefix_check"]) if self.data.get("prefix_check") else None

    @property
    def stopped_early(self) -> StoppedEarly | None:
        """Why the step hook ended the job before its end (a prefix check, a divergence), if it did."""
        return StoppedEarly.from_json(self.data.get("stopped_early"))

    @property
    def stopped_short(self) -> bool:
        """A prefix check, or a stop at a divergence: no final checkpoints, the trail is the evidence."""
        return bool(self.data.get("prefix_check") or self.data.get("stopped_early"))

    @property
    def resume(self) -> dict[str, Any]:
        """Set for a resumed or stopped run: {from: {step, checkpoint, from_run, files}, stop_at}."""
        return dict(self.data.get("resume") or {})

    @property
    def resumed_at(self) -> int | None:
        """The step of the checkpoint the run started from; None for a run from the start."""
        step = (self.resume.get("from") or {}).get("step")
        return step if is_int(step) else None

    @property
    def resume_pattern(self) -> str | None:
        """The job's resumable checkpoint pattern (`resume.checkpoint`), as it ran."""
        pattern = (self.job_spec.get("resume") or {}).get("checkpoint")
        return str(pattern) if pattern else None

    def restricted(self, paths: Collection[str], *, claims: bool = True) -> RunRecord:
        """The same run with only these checkpoint files (and its claims or none) recorded: what a
        comparison of part of a run reads (a segment that stops early makes no claim of the run's)."""
        kept = [c for c in self.checkpoints if c.get("path") in paths]
        return RunRecord(
            self.run_dir, {**self.data, "checkpoints": kept, "claims": self.claims if claims else []}
        )

    def checkpoint(self, path: str) -> dict[str, Any] | None:
        return next((c for c in self.checkpoints if c.get("path") == path), None)

    def _text(self, name: str) -> str | None:
        value = self.data.get(name)
        return str(value) if value else None
