"""`reproduce --segments M`: a reviewer's spot-check of a published run, replaying M of its segments from
the author's published checkpoints (each checked against the attestation first) instead of the whole
training, and judging each segment's end against the published checkpoint there."""

from __future__ import annotations

from pathlib import Path

from reprobox.errors import EXIT_JOB_FAILED, EXIT_NOT_REPRODUCIBLE, EXIT_OK, UsageError
from reprobox.fileio import write_json_atomic, write_text_atomic
from reprobox.jobfile import JobSpec
from reprobox.render.blocks import Block
from reprobox.render.html import html_page
from reprobox.render.long_runs import segment_table
from reprobox.render.markdown import markdown_page
from reprobox.reproduce._classify import published_record
from reprobox.reproduce._model import FAILED, Context, ReproduceResult
from reprobox.reproduce._report import RESULT_NAME, report_dir_for
from reprobox.resume import spot
from reprobox.runinputs import RunInputs
from reprobox.runner import RunOptions
from reprobox.runtimes.base import Runtime

SEGMENTS_REPRODUCED = "segments-reproduced"
SEGMENTS_DIFFER = "segments-differ"


def check_segment_options(ctx: Context) -> None:
    """Before anything runs: segments start from published checkpoints, so those must be at hand."""
    options = ctx.options
    if options.seeds is not None or options.runs != 1 or options.tolerance is not None:
        raise UsageError(
            "--segments replays parts of one run; it does not take --seeds, --runs or --tolerance"
        )
    if ctx.published is None:
        raise UsageError(
            "--segments replays segments from the author's checkpoints: pass --published DIR (their run or "
            "outputs folder) or reproduce a bundle packed with --published"
        )
    if not ctx.attestation.resumable:
        raise UsageError(
            f"{ctx.attestation.path} records no resumable checkpoints (its job has no 'resume:' section, "
            "or saved none), so there are no segments to replay; reproduce it whole (without --segments)"
        )


def reproduce_segments(
    ctx: Context,
    spec: JobSpec,
    runtime: Runtime,
    result: ReproduceResult,
    *,
    run_options: RunOptions,
    inputs: RunInputs,
) -> None:
    """Draw and replay the segments; the verdict, exit code, sentence and reports go into `result`."""
    ctx.report_dir = report_dir_for(ctx)
    published = ctx.published_record = published_record(ctx, ctx.report_dir)
    assert ctx.options.segments is not None
    check, chosen = spot.plan_spot_check(published, ctx.options.segments, ctx.options.segments_seed)
    check = spot.spot_check(
        published,
        spec,
        runtime,
        run_options,
        chosen=chosen,
        check=check,
        parallel=ctx.options.parallel,
        inputs=inputs,
    )
    result.segments = check.to_json()
    result.runs = [r.run_dir for r in check.results if r.run_dir is not None]
    verdict = check.verdict
    if verdict == "identical":
        result.verdict, result.exit_code = SEGMENTS_REPRODUCED, EXIT_OK
    elif verdict == "different":
        result.verdict, result.exit_code = SEGMENTS_DIFFER, EXIT_NOT_REPRODUCIBLE
    else:
        result.verdict, result.exit_code = FAILED, EXIT_JOB_FAILED
    result.grade = result.verdict
    seed_note = (
        "drawn with --segments-seed"
        if ctx.options.segments_seed is not None
        else "drawn from the published checkpoints' hashes (the author could foresee them: pass "
        "--segments-seed for a draw of your own)"
    )
    result.sentence = f"segment spot-check: {check.sentence()}"
    ctx.notes.append(
        f"segments {seed_note}; a segment proves its own steps only, the rest of the run was not replayed"
    )
    result.reports = _write_reports(ctx.report_dir, result)


def _write_reports(report_dir: Path, result: ReproduceResult) -> list[Path]:
    segments = result.segments or {}
    doc = [
        Block("verdict", result.sentence),
        Block(
            "list",
            items=(
                f"attestation: {result.attestation}",
                f"code: {result.code_dir}",
                f"segments replayed: {len(segments.get('segments') or [])} of "
                f"{segments.get('segments_total')} (seed {segments.get('seed')}, from "
                f"{segments.get('seed_source')})",
                *(f"note: {note}" for note in result.notes),
            ),
        ),
        Block("heading", "Segments"),
        segment_table(segments.get("segments") or []),
    ]
    heading = "reprobox reproduction (segments)"
    paths = [report_dir / "report.md", report_dir / "report.html", report_dir / RESULT_NAME]
    write_text_atomic(paths[0], markdown_page(heading, doc))
    write_text_atomic(paths[1], html_page(heading, doc, verdict=result.verdict))
    write_json_atomic(paths[2], result.to_json() | {"reports": [str(p) for p in paths]})
    return paths
