"""Verified runs -> the in-toto Statement: subject (the checkpoints) and the reprobox predicate.

The predicate holds what a reviewer needs to run the same job again and judge the result: the job
file's text and digest, the code tree's per-file digests with its git commit and dirty flag, the image
with its lock digest and labels, the execution settings, the author's fingerprint and stack digest,
the number of verified runs and every checkpoint's file, content and tensor hashes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reprobox import codetree
from reprobox._version import __version__
from reprobox.attest._claims import attested_claims
from reprobox.attest._code import attested_tree
from reprobox.attest._public import Machine, public_predicate
from reprobox.compare import IDENTICAL, compare_runs
from reprobox.errors import UsageError
from reprobox.guest.filehash import file_sha256
from reprobox.jobfile import redact_env
from reprobox.records.attestation import PREDICATE_SCHEMA, PREDICATE_TYPE, STATEMENT_TYPE
from reprobox.records.manifest import RunRecord
from reprobox.records.spotcheck import read_spot_check
from reprobox.resume.checkpoints import recorded_checkpoints


def build_attestation(
    records: Sequence[RunRecord], *, extra: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The in-toto Statement for runs that finished with bit-identical checkpoints.

    `extra` adds predicate fields (the variation matrix, the seed spread), made safe to publish with the
    rest. Raises UsageError when the runs cannot be attested: none given, one failed or was only a prefix
    check, they ran different jobs, code or images, their checkpoints differ, or the job file changed.
    """
    if not records:
        raise UsageError("give at least one run directory to attest, e.g. runs/<job>/<run-id>")
    _check_attestable(records)
    first = records[0]
    job_file, job_sha256, code_sha256 = first.job_file, first.job_file_sha256, first.code_sha256
    if job_file is None or job_sha256 is None or code_sha256 is None:
        raise UsageError(
            f"run {first.run_dir} does not record its job file and code tree; "
            "attest runs made by `reprobox run` or `reprobox verify`"
        )
    code = first.code
    code_dir = Path(str(code.get("path") or first.job_spec["code"]))
    job_text = _job_text(job_file, job_sha256, first.run_dir)
    tree = attested_tree(codetree.CodeTree(digest=code_sha256, files=first.code_files))
    fingerprint = first.fingerprint
    checkpoints = [
        _checkpoint_entry(c, records) for c in sorted(first.checkpoints, key=lambda c: str(c["path"]))
    ]
    predicate: dict[str, Any] = {
        "schema": PREDICATE_SCHEMA,
        "reprobox_version": __version__,
        "job": {
            "name": first.job_name,
            "file": Path(os.path.relpath(job_file, code_dir)).as_posix(),
            "code": Path(os.path.relpath(code_dir, job_file.parent)).as_posix(),
            "sha256": job_sha256,
            "text": job_text,
            "spec": first.job_spec,
        },
        "code": {
            "schema": codetree.CODE_TREE_SCHEMA,
            "sha256": tree.digest,
            "files": tree.files,
            "run_sha256": code_sha256,
            "git": _git_entry(code),
        },
        "runtime": first.runtime_name,
        "image": _image_entry(first),
        "execution": _execution(first, fingerprint),
        "fingerprint": fingerprint,
        "stack_digest": fingerprint.get("stack_digest"),
        "runs": {
            "verified": len(records),
            "run_ids": [r.run_id for r in records],
            "stack_digests": sorted({str(r.fingerprint.get("stack_digest")) for r in records}),
            "started_at": min(r.started_at for r in records),
            "ended_at": max(r.ended_at for r in records),
        },
        "checkpoints": checkpoints,
        "trail": _trail_entry(first),
    }
    claims = attested_claims(records)
    if claims is not None:
        predicate["claims"] = claims
    predicate.update(long_run_entries(first))
    for field, value in (extra or {}).items():  # `variation` (verify --vary), `seeds` (verify --seeds)
        predicate[field] = dict(value)  # before the machine is withheld: these are published too
    machine = Machine.here(code_dir=code_dir, runs_dir=first.run_dir.parent.parent)
    predicate = public_predicate(predicate, machine, code_dir)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": c["path"], "digest": {"sha256": c["file_sha256"]}} for c in checkpoints],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def _check_attestable(records: Sequence[RunRecord]) -> None:
    for record in records:
        if not record.succeeded:
            raise UsageError(
                f"run {record.run_dir} {record.status} ({record.failure or 'no reason recorded'}); "
                "attest only runs that succeeded"
            )
        if record.stopped_short:
            raise UsageError(
                f"run {record.run_dir} stopped early (a prefix check); "
                "attest complete runs, made without --max-steps"
            )
        if not record.checkpoints:
            raise UsageError(
                f"run {record.run_dir} recorded no checkpoints, so there is nothing to attest; "
                "write them to $REPROBOX_OUTPUT_DIR and list them under 'checkpoints' in the job file"
            )
    first = records[0]
    for record in records[1:]:
        for same, what in (
            (record.job_file_sha256 == first.job_file_sha256, "job file"),
            (record.seed == first.seed, "seed"),
            (record.job_name == first.job_name, "job"),
        ):
            if not same:
                raise UsageError(
                    f"runs {records[0].run_dir} and {record.run_dir} have different {what}s; "
                    "attest runs of one job, e.g. the runs of one `reprobox verify`"
                )
        if record.code_sha256 != first.code_sha256:
            raise UsageError(
                f"runs {records[0].run_dir} and {record.run_dir} ran different code trees; "
                "attest runs of one job, e.g. the runs of one `reprobox verify`"
            )
        if record.image_id != first.image_id:
            raise UsageError(
                f"runs {records[0].run_dir} and {record.run_dir} ran in different images; "
                "attest runs of one image, e.g. the runs of one `reprobox verify`"
            )
    if len(records) > 1:
        comparison = compare_runs(records, tensor_details=False)
        if comparison.verdict != IDENTICAL:
            differing = [c["path"] for c in comparison.checkpoints if not c["identical"]]
            raise UsageError(
                f"the runs' checkpoints are not bit-identical ({', '.join(differing) or comparison.verdict});"
                " "
                "only reproducible results can be attested: see `reprobox compare` for why they differ"
            )


def _job_text(job_file: Path, expected: str, run_dir: Path) -> str:
    try:
        raw = job_file.read_bytes()
    except OSError as exc:
        raise UsageError(
            f"cannot read the job file {job_file} recorded by run {run_dir} ({exc.strerror}); "
            "attest on the machine and checkout that made the runs"
        ) from None
    if hashlib.sha256(raw).hexdigest() != expected:
        raise UsageError(
            f"job file {job_file} changed since run {run_dir}; "
            "run `reprobox verify` again and attest those runs"
        )
    return raw.decode("utf-8")


def _git_entry(code: Mapping[str, Any]) -> dict[str, Any] | None:
    """The commit the code was at and whether it had uncommitted changes; the local path stays home."""
    git = code.get("git")
    if not isinstance(git, Mapping):
        return None
    return {"commit": git.get("commit"), "dirty": bool(git.get("dirty"))}


def _image_entry(record: RunRecord) -> dict[str, Any] | None:
    """The image as a reviewer finds it: by digest when it was pushed, else by id; lock and labels."""
    image = record.image
    if image is None:
        return None
    labels = {str(k): str(v) for k, v in (image.get("labels") or {}).items()}
    repo_digest = image.get("repo_digest")
    return {
        "reference": repo_digest or image["id"],
        "id": image["id"],
        "repo_digest": repo_digest,
        "tags": list(image.get("tags") or []),
        "labels": labels,
        "lock": labels.get("io.reprobox.lock"),
        "lock_digest": labels.get("io.reprobox.lock-digest"),
        "build_digest": labels.get("io.reprobox.build-digest"),
    }


def _execution(record: RunRecord, fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a reviewer replays: seed, determinism, the effective thread counts, world size, env."""
    job = record.job_spec
    software = fingerprint.get("software") or {}
    launcher = job.get("launcher") or {}
    world_size = (software.get("distributed") or {}).get("world_size")
    if not isinstance(world_size, int):
        world_size = int(launcher.get("nproc_per_node", 1)) * int(launcher.get("nnodes", 1))
    return {
        "seed": record.seed if record.seed is not None else job.get("seed", 0),
        "determinism": job.get("determinism") or {},
        "threads": software.get("threads") or {},
        "world_size": world_size,
        "launcher": launcher,
        "env": redact_env(job.get("env") or {}),  # again: manifests older than value redaction
        "trail_every": record.trail_every,
    }


def _checkpoint_entry(entry: Mapping[str, Any], records: Sequence[RunRecord]) -> dict[str, Any]:
    """The first run's hashes, and every run's file sha256: equal weights may be saved in other bytes."""
    # "unaccounted": the bytes no reader read, so that a reproduction excuses only the formats' framing
    keep = ("path", "format", "file_sha256", "content_sha256", "tensors", "metadata", "unaccounted")
    result = {key: entry[key] for key in keep if key in entry}
    runs = [(r.checkpoint(str(entry["path"])) or {}).get("file_sha256") for r in records]
    result["file_sha256_runs"] = sorted({str(h) for h in runs if h})
    return result


def long_run_entries(record: RunRecord) -> dict[str, Any]:
    """The resumable checkpoints (step, path, content digest: what segment replays start from and end
    at) and the run's last spot-check (which segments were replayed and how each came out)."""
    saved = recorded_checkpoints(record)
    if not saved:
        return {}
    entries: dict[str, Any] = {"resumable": [c.to_json() for c in saved]}
    checked = read_spot_check(record.run_dir)
    if checked is not None:
        entries["spot_check"] = {
            "verdict": checked.get("verdict"),
            "checked_at": checked.get("checked_at"),
            "runtime": checked.get("runtime"),
            "seed": checked.get("seed"),
            "seed_source": checked.get("seed_source"),
            "segments_total": checked.get("segments_total"),
            "replayed_share": checked.get("replayed_share"),
            "segments": [
                {key: s.get(key) for key in ("start", "end", "match", "outcome")}
                for s in checked.get("segments") or []
            ],
        }
    return entries


def _trail_entry(record: RunRecord) -> dict[str, Any] | None:
    if record.trail_name is None:
        return None
    path = record.run_dir / record.trail_name
    digest = file_sha256(path) if path.is_file() else None
    return {"file": record.trail_name, "sha256": digest, "every": record.trail_every}
