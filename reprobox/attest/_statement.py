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
from reprobox.attest._code import attested_tree
from reprobox.attest._model import PREDICATE_SCHEMA, PREDICATE_TYPE, STATEMENT_TYPE
from reprobox.compare import IDENTICAL, compare_runs
from reprobox.errors import UsageError
from reprobox.guest.filehash import file_sha256
from reprobox.jobfile import redact_env
from reprobox.records.manifest import RunRecord


def build_attestation(records: Sequence[RunRecord]) -> dict[str, Any]:
    """The in-toto Statement for runs that finished with bit-identical checkpoints.

    Raises UsageError when the runs cannot be attested: none given, one failed or was only a prefix
    check, they ran different jobs, code or images, their checkpoints differ, or the job file changed.
    """
    if not records:
        raise UsageError("give at least one run directory to attest, e.g. runs/<job>/<run-id>")
    _check_attestable(records)
    first = records[0]
    data = first.data
    job_file = Path(str(data.get("job_file") or data["job"]["job_file"]))
    code = data.get("code") or {}
    code_dir = Path(str(code.get("path") or data["job"]["code"]))
    job_text = _job_text(job_file, str(data.get("job_file_sha256")), first.run_dir)
    tree = attested_tree(codetree.CodeTree(digest=str(code["sha256"]), files=dict(code["files"])))
    fingerprint = first.fingerprint
    checkpoints = [
        _checkpoint_entry(c, records) for c in sorted(first.checkpoints, key=lambda c: str(c["path"]))
    ]
    predicate: dict[str, Any] = {
        "schema": PREDICATE_SCHEMA,
        "reprobox_version": __version__,
        "job": {
            "name": str(data.get("job_name", "")),
            "file": Path(os.path.relpath(job_file, code_dir)).as_posix(),
            "code": Path(os.path.relpath(code_dir, job_file.parent)).as_posix(),
            "sha256": str(data["job_file_sha256"]),
            "text": job_text,
            "spec": data.get("job", {}),
        },
        "code": {
            "schema": codetree.CODE_TREE_SCHEMA,
            "sha256": tree.digest,
            "files": tree.files,
            "run_sha256": str(code["sha256"]),
            "git": _git_entry(code),
        },
        "runtime": str((data.get("runtime") or {}).get("name", "local")),
        "image": _image_entry(data),
        "execution": _execution(data, fingerprint),
        "fingerprint": fingerprint,
        "stack_digest": fingerprint.get("stack_digest"),
        "runs": {
            "verified": len(records),
            "run_ids": [r.run_id for r in records],
            "stack_digests": sorted({str(r.fingerprint.get("stack_digest")) for r in records}),
            "started_at": min(str(r.data.get("started_at", "")) for r in records),
            "ended_at": max(str(r.data.get("ended_at", "")) for r in records),
        },
        "checkpoints": checkpoints,
        "trail": _trail_entry(first),
    }
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
        if record.data.get("prefix_check") or record.data.get("stopped_early"):
            raise UsageError(
                f"run {record.run_dir} stopped early (a prefix check); "
                "attest complete runs, made without --max-steps"
            )
        if not record.checkpoints:
            raise UsageError(
                f"run {record.run_dir} recorded no checkpoints, so there is nothing to attest; "
                "write them to $REPROBOX_OUTPUT_DIR and list them under 'checkpoints' in the job file"
            )
    first = records[0].data
    for record in records[1:]:
        for key, what in (
            ("job_file_sha256", "job file"),
            ("seed", "seed"),
            ("job_name", "job"),
        ):
            if record.data.get(key) != first.get(key):
                raise UsageError(
                    f"runs {records[0].run_dir} and {record.run_dir} have different {what}s; "
                    "attest runs of one job, e.g. the runs of one `reprobox verify`"
                )
        if (record.data.get("code") or {}).get("sha256") != (first.get("code") or {}).get("sha256"):
            raise UsageError(
                f"runs {records[0].run_dir} and {record.run_dir} ran different code trees; "
                "attest runs of one job, e.g. the runs of one `reprobox verify`"
            )
        if _image_id(record.data) != _image_id(first):
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


def _image_id(data: Mapping[str, Any]) -> str | None:
    image = (data.get("runtime") or {}).get("image") or {}
    return str(image["id"]) if image.get("id") else None


def _image_entry(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The image as a reviewer finds it: by digest when it was pushed, else by id; lock and labels."""
    image = (data.get("runtime") or {}).get("image") or {}
    if not image.get("id"):
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


def _execution(data: Mapping[str, Any], fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a reviewer replays: seed, determinism, the effective thread counts, world size, env."""
    job = data.get("job") or {}
    software = fingerprint.get("software") or {}
    launcher = job.get("launcher") or {}
    world_size = (software.get("distributed") or {}).get("world_size")
    if not isinstance(world_size, int):
        world_size = int(launcher.get("nproc_per_node", 1)) * int(launcher.get("nnodes", 1))
    return {
        "seed": data.get("seed", job.get("seed", 0)),
        "determinism": job.get("determinism") or {},
        "threads": software.get("threads") or {},
        "world_size": world_size,
        "launcher": launcher,
        "env": redact_env(job.get("env") or {}),  # again: manifests older than value redaction
        "trail_every": (job.get("trail") or {}).get("every"),
    }


def _checkpoint_entry(entry: Mapping[str, Any], records: Sequence[RunRecord]) -> dict[str, Any]:
    """The first run's hashes, and every run's file sha256: equal weights may be saved in other bytes."""
    keep = ("path", "format", "file_sha256", "content_sha256", "tensors", "metadata")
    result = {key: entry[key] for key in keep if key in entry}
    runs = [(r.checkpoint(str(entry["path"])) or {}).get("file_sha256") for r in records]
    result["file_sha256_runs"] = sorted({str(h) for h in runs if h})
    return result


def _trail_entry(record: RunRecord) -> dict[str, Any] | None:
    name = record.data.get("trail")
    if not name:
        return None
    path = record.run_dir / str(name)
    digest = file_sha256(path) if path.is_file() else None
    every = ((record.data.get("job") or {}).get("trail") or {}).get("every")
    return {"file": str(name), "sha256": digest, "every": every}
