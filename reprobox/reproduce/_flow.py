"""One reproduction from start to end, and the checks that must pass before anything runs."""

from __future__ import annotations

import math
from pathlib import Path

from reprobox import attest, bundle, progress
from reprobox.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_OK, UsageError
from reprobox.guest.filehash import file_sha256
from reprobox.jobfile import JobSpec
from reprobox.records.manifest import RunRecord
from reprobox.reproduce._classify import classify
from reprobox.reproduce._image import runtime_for
from reprobox.reproduce._model import (
    CODE_MISMATCH,
    FAILED,
    IMAGE_MISMATCH,
    Context,
    ReproduceOptions,
    ReproduceResult,
)
from reprobox.reproduce._replay import replay_job
from reprobox.reproduce._report import write_reports
from reprobox.reproduce._seeds import check_seed_count, reproduce_seeds
from reprobox.reproduce._segments import check_segment_options, reproduce_segments
from reprobox.reproduce._signature import signature_facts
from reprobox.runinputs import RunInputs
from reprobox.runner import RunOptions, execute, prepare_inputs
from reprobox.runtimes.base import Runtime


def reproduce(source: Path, options: ReproduceOptions) -> ReproduceResult:
    """Reproduce the job an attestation (or a bundle made by `reprobox pack`) describes."""
    _check_options(options)
    if source.is_dir() and (found := attest.attestation_in(source)) is not None:
        source = found  # `reprobox reproduce .` in the paper's code folder
    opened = None
    attestation_path = source
    if source.is_file() and bundle.looks_like_bundle(source):
        opened = bundle.open_bundle(
            source, options.runs_dir / "bundles", expected_sha256=options.bundle_sha256
        )
        attestation_path = opened.attestation
        progress.say(f"bundle {source} checked (sha256 {opened.sha256[:16]}), unpacked to {opened.root}")
    attestation = attest.read_attestation(attestation_path, verify_signature=options.verify_signature)
    check_seed_count(attestation, options.seeds)
    ctx = Context(attestation, options, notes=[], bundle=opened)
    result = ReproduceResult(
        verdict="", sentence="", exit_code=EXIT_OK, attestation=attestation_path, notes=ctx.notes
    )
    published = options.published or (opened.published if opened else None)
    result.signature = signature_facts(attestation, options, published, ctx.notes)
    result.bundle = opened.to_json() if opened else None
    if opened is not None and opened.digest_source == "none":
        ctx.notes.append(
            f"no recorded digest next to the bundle ({bundle.digest_file_for(source).name}); every member "
            "was checked against the bundle's index, but pass --bundle-sha256 with the digest the author "
            "published to check the bundle itself"
        )

    code_dir = (options.code or (opened.code_dir if opened else attest.locate_code(attestation))).absolute()
    result.code_dir = code_dir
    progress.say(f"checking the code in {code_dir} against the attestation ...")
    changes = _code_changes(attestation, code_dir, options.runs_dir)
    if changes:
        result.verdict, result.exit_code, result.code_changes = CODE_MISMATCH, EXIT_BAD_INPUT, changes
        result.sentence = f"the code differs from the attested code ({bundle.describe_changes(changes)})"
        return result
    _find_published(ctx)
    if options.segments is not None:
        check_segment_options(ctx)
    if options.tolerance is not None and ctx.published is None:
        raise UsageError(
            "--tolerance needs the author's checkpoint files to measure the difference: pass --published DIR "
            "(their run or outputs folder) or reproduce a bundle packed with --published"
        )

    spec, extra_env, result.settings = replay_job(attestation, code_dir, options, ctx.notes)
    ctx.replay_pin = result.settings["threads"].get("pinned_by_replay")
    ctx.claims, ctx.accept = spec.claims, spec.accept
    runtime, image_facts, mismatch = runtime_for(ctx, spec)
    result.image = image_facts
    if mismatch:
        result.verdict, result.exit_code = IMAGE_MISMATCH, EXIT_ENVIRONMENT
        shown = "; ".join(f"{m['label']}: attested {m['attested']}, found {m['found']}" for m in mismatch[:4])
        result.sentence = f"the image differs from the attested image ({shown})"
        return result

    run_options = RunOptions(runs_dir=options.runs_dir, echo=options.echo, extra_env=extra_env)
    inputs = prepare_inputs(spec, run_options)  # one code snapshot and one data hash for all runs
    if options.segments is not None:
        reproduce_segments(ctx, spec, runtime, result, run_options=run_options, inputs=inputs)
        return result
    records = _run(spec, runtime, options.runs, run_options, inputs)
    result.runs = [r.run_dir for r in records]
    classify(ctx, records, result)
    if options.seeds is not None and result.verdict != FAILED:
        reproduce_seeds(ctx, spec, runtime, records, result, run_options=run_options, inputs=inputs)
    result.reports = write_reports(ctx, records, result)
    return result


def _check_options(options: ReproduceOptions) -> None:
    if options.runs < 1:
        raise UsageError(f"--runs must be at least 1, not {options.runs}")
    if options.threads is not None and options.threads < 1:
        raise UsageError(f"--threads must be a positive number, not {options.threads}")
    if options.tolerance is not None and not (math.isfinite(options.tolerance) and options.tolerance >= 0):
        raise UsageError(f"--tolerance must be a non-negative number such as 1e-5, not {options.tolerance}")
    if options.accept not in (None, "bits", "claims"):
        raise UsageError(f"--accept must be bits or claims, not {options.accept!r}")
    if options.parallel < 1:
        raise UsageError(f"--parallel must be at least 1, not {options.parallel}")
    if options.runtime not in (None, "docker", "local"):
        raise UsageError(f"--runtime must be docker or local, not {options.runtime!r}")


def _code_changes(
    attestation: attest.Attestation, code_dir: Path, runs_dir: Path
) -> dict[str, list[str]] | None:
    changes = attest.code_changes(attestation, code_dir, exclude=(runs_dir,))
    job_file = attest.job_file_in(attestation, code_dir)
    if changes is None and not job_file.is_relative_to(code_dir):
        # A job file outside the code folder is not part of the tree: check it on its own.
        if not job_file.is_file():
            return {"added": [], "removed": [attestation.job["file"]], "changed": []}
        if file_sha256(job_file) != attestation.job["sha256"]:
            return {"added": [], "removed": [], "changed": [attestation.job["file"]]}
    return changes


def _find_published(ctx: Context) -> None:
    directory = ctx.options.published or (ctx.bundle.published if ctx.bundle else None)
    if directory is None:
        return
    ctx.published, ctx.published_trail = bundle.check_published(ctx.attestation, directory)
    progress.say(f"the author's checkpoints in {ctx.published} match the attestation")


def _run(
    spec: JobSpec, runtime: Runtime, runs: int, run_options: RunOptions, inputs: RunInputs
) -> list[RunRecord]:
    records: list[RunRecord] = []
    series = progress.Series(runs)
    for index in range(runs):
        progress.say(f"run {index + 1}/{runs} of {spec.name} ({runtime.name})")
        record = execute(spec, runtime, run_options, inputs=inputs, label=series.label(index + 1))
        records.append(record)
        if not record.succeeded:
            break
    return records
