"""`audit`: find what makes a job nondeterministic, statically and by running it."""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox import runner, runtimes
from reprobox.commands.common import (
    add_command,
    add_run_flags,
    check_runs_dir,
    load_job_with_flags,
    runtime_options,
)
from reprobox.errors import EXIT_JOB_FAILED, EXIT_NOT_REPRODUCIBLE, EXIT_OK
from reprobox.guest import settings

if TYPE_CHECKING:
    from reprobox.commands.output import Output

AUDIT_EPILOG = """\
examples:
  reprobox audit examples/tiny-mlp/job.yaml                 scan the code, then run the job in warn-only mode
  reprobox audit job.yaml --max-steps 50 --runtime local    run only the first 50 optimizer steps
  reprobox audit job.yaml --static-only --json              just the code scan, for CI

Each finding names file:line, why it differs between runs and the fix (from PyTorch's reproducibility
notes, the other libraries' own docs and source: tokenizers, scikit-learn, LightGBM, and field practice).
exit: 0 nothing that fails the audit (info findings, and without --strict hazards reprobox neutralises,
are listed but pass), 1 hazards found, 3 the job failed
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        commands,
        "audit",
        "find nondeterminism hazards: a static scan of the code plus a warn-only run",
        AUDIT_EPILOG,
        description="Scan the job's code for known nondeterminism hazards, then run it with deterministic "
        "algorithms in warn-only mode and collect every nondeterministic-op warning with the job's "
        "source line.",
    )
    add_run_flags(parser)
    parser.add_argument("--static-only", action="store_true", help="scan the code without running the job")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also fail on hazards reprobox neutralises (they still bite when the code runs without it)",
    )
    parser.set_defaults(handler=audit_command)


def audit_command(args: argparse.Namespace, out: Output) -> int:
    from reprobox import hazards  # its rules compile many patterns: only for `audit`

    spec = load_job_with_flags(args)
    if not args.static_only:
        check_runs_dir(args.runs_dir)  # before the scan: the run would end on it
    findings = hazards.scan_tree(spec.code)
    static = [
        {**f.to_json(), "covered_by_reprobox": hazards.COVERED_BY_REPROBOX.get(f.rule)} for f in findings
    ]
    result: dict[str, Any] = {"code": str(spec.code), "static": static, "runtime": []}
    failure = None
    if not args.static_only:
        audited = spec.with_overrides(determinism=replace(spec.determinism, algorithms=True, warn_only=True))
        runtime = runtimes.open_runtime(args.runtime, runtime_options(args, audited))
        options = runner.RunOptions(
            runs_dir=args.runs_dir, echo=out.job_output(), max_steps=args.max_steps, audit=True
        )
        record = runner.execute(audited, runtime, options)
        result["run_dir"] = str(record.run_dir)
        failure = record.failure
        result["runtime"] = [asdict(r) for r in _runtime_records(record.run_dir)]
    failing = [
        f
        for f in static
        if f["severity"] == hazards.WARNING and (args.strict or not f["covered_by_reprobox"])
    ]
    result["status"] = "failed" if failure else "hazards" if failing or result["runtime"] else "clean"
    out.result(result, _text(result, failure))
    if failure:
        return EXIT_JOB_FAILED
    return EXIT_NOT_REPRODUCIBLE if failing or result["runtime"] else EXIT_OK


def _runtime_records(run_dir: Path) -> list[Any]:
    from reprobox.guest import audit_hook

    return audit_hook.read_records(run_dir / settings.GUEST_STATE / settings.AUDIT_FILE)


def _text(result: dict[str, Any], failure: str | None) -> str:
    lines = []
    for f in result["static"]:
        lines.append(f"{result['code']}/{f['path']}:{f['line']}:{f['column']}: {f['rule']}: {f['message']}")
        lines.append(f"    fix: {f['fix']}")
        if f["covered_by_reprobox"]:
            lines.append(f"    under reprobox: {f['covered_by_reprobox']}; fix it for runs without reprobox")
    for r in result["runtime"]:
        lines.append(
            f"{r['file']}:{r['line']}: nondeterministic op at run time: {r['op']} (seen {r['count']}x)"
        )
        if r.get("code"):
            lines.append(f"    {r['code'].strip()}")
    if failure:
        lines.append(f"the audited run failed: {failure}")
    counts = f"{len(result['static'])} in the code, {len(result['runtime'])} at run time"
    if result["status"] == "clean":
        lines.append(_clean_summary(result["static"]))
    else:
        lines.append(f"hazards found: {counts}")
    return "\n".join(lines)


def _clean_summary(static: list[dict[str, Any]]) -> str:
    """What a clean audit still listed: hazards reprobox neutralises, and info findings to check by hand
    (e.g. a tokenizer retrained with a model type the scan cannot see), so "none found" is never said
    over findings just printed."""
    covered = sum(1 for f in static if f["covered_by_reprobox"])
    info = sum(1 for f in static if f["severity"] != "warning" and not f["covered_by_reprobox"])
    if not covered and not info:
        return "no nondeterminism hazards found"
    parts = [f"{covered} neutralised by reprobox"] if covered else []
    parts += [f"{info} to check (info)"] if info else []
    return "no hazards that fail the audit; " + ", ".join(parts)
