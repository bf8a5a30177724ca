"""The reviewer's side: an attestation (or a bundle) -> the author's job run again here -> one sentence.

Order matters, and nothing runs until every check before it passed: read the attestation (and check
its signature), check the code tree file by file, check or load or rebuild the image, then replay the
author's settings (seed, determinism, effective thread count, environment), run the job N times and
classify the result against the published hashes:

- ``bit-identical to the published checkpoints`` (exit 0);
- ``same stack, different result: a real nondeterminism`` (exit 1);
- ``different stack: bitwise equality not expected; ...`` naming the fingerprint fields that differ
  (exit 1, or 0 when ``tolerance`` is given and met);
- code mismatch (exit 2) or image mismatch (exit 4), before anything runs.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from reprobox import attest, bundle, explain, reportdoc
from reprobox.compare import DIFFERENT, IDENTICAL, Comparison, compare_runs, differing_tensor_names
from reprobox.errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_JOB_FAILED,
    EXIT_NOT_REPRODUCIBLE,
    EXIT_OK,
    EnvironmentProblem,
    UsageError,
)
from reprobox.guest.determinism import Determinism
from reprobox.job import REDACTED, JobSpec, Trail, file_sha256, load_job
from reprobox.manifest import RunRecord, write_json_atomic, write_record, write_text_atomic
from reprobox.runner import RunOptions, execute
from reprobox.runtime import Runtime

BIT_IDENTICAL = "bit-identical"
NONDETERMINISTIC = "nondeterministic"
DIFFERENT_STACK = "different-stack"
CODE_MISMATCH = "code-mismatch"
IMAGE_MISMATCH = "image-mismatch"
FAILED = "failed"

SENTENCE_IDENTICAL = "bit-identical to the published checkpoints"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
LABEL_PREFIX = "io.reprobox."
NAMED_FIELDS = 6
RESULT_NAME = "result.json"

Progress = Callable[[str], None]


def _quiet(_line: str) -> None:
    """A progress callback that shows nothing."""


@dataclass(frozen=True)
class ReproduceOptions:
    """What the reviewer chose; everything else comes from the attestation."""

    code: Path | None = None  # default: the folder around the attestation, else the current directory
    runs: int = 1
    runtime: str | None = None  # docker or local; default: the one the author used
    runs_dir: Path = Path("runs")
    published: Path | None = None  # the author's checkpoints (a run dir or outputs/) for tensor numbers
    tolerance: float | None = None  # max abs difference accepted when the stack differs
    threads: int | None = None  # run with this many threads instead of the author's
    verify_signature: Path | None = None  # the author's public key
    bundle_sha256: str | None = None  # the bundle digest the author published
    report_dir: Path | None = None
    base_image: str | None = None  # for a rebuild only; must give the attested build digest
    wheelhouse: Path | None = None
    echo: Callable[[bytes], None] | None = None
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
    runs: list[Path] = field(default_factory=list)
    reports: list[Path] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    image: dict[str, Any] | None = None
    bundle: dict[str, Any] | None = None
    signature: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "sentence": self.sentence,
            "exit_code": self.exit_code,
            "attestation": str(self.attestation),
            "code_dir": str(self.code_dir) if self.code_dir else None,
            "code_changes": self.code_changes,
            "comparison": self.comparison.to_json() if self.comparison else None,
            "stack_differences": self.stack_differences,
            "max_abs_difference": _json_number(self.max_abs_difference),
            "differing_tensors": self.differing_tensors,
            "runs": [str(r) for r in self.runs],
            "reports": [str(r) for r in self.reports],
            "settings": self.settings,
            "image": self.image,
            "bundle": self.bundle,
            "signature": self.signature,
            "notes": self.notes,
        }


@dataclass
class _Context:
    """What the steps share while one reproduction goes on."""

    attestation: attest.Attestation
    options: ReproduceOptions
    say: Progress
    notes: list[str]
    bundle: bundle.Bundle | None = None
    published: Path | None = None  # outputs folder holding the author's checkpoints
    published_trail: Path | None = None
    report_dir: Path | None = None
    published_record: RunRecord | None = None
    replay_pin: int | None = None  # threads pinned only to replay the author's unpinned count
    stack_differences: list[explain.FieldDifference] = field(default_factory=list)


def reproduce(source: Path, options: ReproduceOptions, progress: Progress | None = None) -> ReproduceResult:
    """Reproduce the job an attestation (or a bundle made by `reprobox pack`) describes."""
    say = progress or _quiet
    _check_options(options)
    if source.is_dir() and (source / attest.ATTESTATION_NAME).is_file():
        source = source / attest.ATTESTATION_NAME  # `reprobox reproduce .` in the paper's code folder
    opened = None
    attestation_path = source
    if source.is_file() and bundle.looks_like_bundle(source):
        opened = bundle.open_bundle(
            source, options.runs_dir / "bundles", expected_sha256=options.bundle_sha256, progress=say
        )
        attestation_path = opened.attestation
        say(f"bundle {source} checked (sha256 {opened.sha256[:16]}), unpacked to {opened.root}")
    attestation = attest.read_attestation(attestation_path, verify_signature=options.verify_signature)
    ctx = _Context(attestation, options, say, notes=[], bundle=opened)
    result = ReproduceResult(
        verdict="", sentence="", exit_code=EXIT_OK, attestation=attestation_path, notes=ctx.notes
    )
    result.signature = _signature_facts(attestation, ctx.notes)
    result.bundle = opened.to_json() if opened else None
    if opened is not None and opened.digest_source == "none":
        ctx.notes.append(
            f"no recorded digest next to the bundle ({bundle.digest_file_for(source).name}); every member "
            "was checked against the bundle's index, but pass --bundle-sha256 with the digest the author "
            "published to check the bundle itself"
        )

    code_dir = (options.code or (opened.code_dir if opened else attest.locate_code(attestation))).absolute()
    result.code_dir = code_dir
    say(f"checking the code in {code_dir} against the attestation ...")
    changes = _code_changes(attestation, code_dir, options.runs_dir)
    if changes:
        result.verdict, result.exit_code, result.code_changes = CODE_MISMATCH, EXIT_BAD_INPUT, changes
        result.sentence = f"the code differs from the attested code ({bundle.describe_changes(changes)})"
        return result
    _find_published(ctx)
    if options.tolerance is not None and ctx.published is None:
        raise UsageError(
            "--tolerance needs the author's checkpoint files to measure the difference: pass --published DIR "
            "(their run or outputs folder) or reproduce a bundle packed with --published"
        )

    spec, extra_env, result.settings = replay_job(attestation, code_dir, options, ctx.notes)
    ctx.replay_pin = result.settings["threads"].get("pinned_by_replay")
    runtime, image_facts, mismatch = _open_runtime(ctx, spec)
    result.image = image_facts
    if mismatch:
        result.verdict, result.exit_code = IMAGE_MISMATCH, EXIT_ENVIRONMENT
        shown = "; ".join(f"{m['label']}: attested {m['attested']}, found {m['found']}" for m in mismatch[:4])
        result.sentence = f"the image differs from the attested image ({shown})"
        return result

    records = _run(spec, runtime, options, extra_env, say)
    result.runs = [r.run_dir for r in records]
    _classify(ctx, records, result)
    result.reports = _write_reports(ctx, records, result)
    return result


def _check_options(options: ReproduceOptions) -> None:
    if options.runs < 1:
        raise UsageError(f"--runs must be at least 1, not {options.runs}")
    if options.threads is not None and options.threads < 1:
        raise UsageError(f"--threads must be a positive number, not {options.threads}")
    if options.tolerance is not None and not (math.isfinite(options.tolerance) and options.tolerance >= 0):
        raise UsageError(f"--tolerance must be a non-negative number such as 1e-5, not {options.tolerance}")
    if options.runtime not in (None, "docker", "local"):
        raise UsageError(f"--runtime must be docker or local, not {options.runtime!r}")


def _signature_facts(attestation: attest.Attestation, notes: list[str]) -> dict[str, Any]:
    if attestation.signed and not attestation.signature_verified:
        notes.append(
            f"the attestation is signed (key id {str(attestation.keyid)[:16]}) but the signature was not "
            "checked: pass --verify-signature AUTHOR.pub"
        )
    elif not attestation.signed:
        notes.append("the attestation is not signed: anyone could have written it; ask the author to sign it")
    return {
        "signed": attestation.signed,
        "keyid": attestation.keyid,
        "verified": attestation.signature_verified,
    }


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


def _find_published(ctx: _Context) -> None:
    directory = ctx.options.published or (ctx.bundle.published if ctx.bundle else None)
    if directory is None:
        return
    ctx.published, ctx.published_trail = bundle.check_published(ctx.attestation, directory)
    ctx.say(f"the author's checkpoints in {ctx.published} match the attestation")


# -- the author's settings ------------------------------------------------------------------------


def replay_job(
    attestation: attest.Attestation, code_dir: Path, options: ReproduceOptions, notes: list[str]
) -> tuple[JobSpec, dict[str, str], dict[str, Any]]:
    """The author's job as it ran for them: their job file, seed, determinism, threads and environment."""
    job_file = attest.job_file_in(attestation, code_dir)
    spec = load_job(job_file)
    if spec.code.resolve() != code_dir.resolve():
        raise UsageError(
            f"job file {job_file} runs the code in {spec.code}, not in {code_dir}; pass --code {spec.code}"
        )
    execution = attestation.execution
    known = {f.name for f in fields(Determinism)}
    determinism = Determinism(**{k: v for k, v in execution["determinism"].items() if k in known})
    author_threads = _int_or_none(execution["threads"].get("torch_intra_op"))
    threads = options.threads or determinism.threads or author_threads
    if options.threads is not None and options.threads != author_threads:
        notes.append(
            f"running with {options.threads} threads (--threads); the author's runs used {author_threads}"
        )
    elif determinism.threads is None and author_threads is not None:
        notes.append(
            f"the job does not pin its thread count; replaying the author's {author_threads} torch threads "
            "(set determinism.threads in the job file to make this explicit)"
        )
    pinned_by_replay = options.threads is None and determinism.threads is None and threads is not None
    extra_env: dict[str, str] = {}
    if threads is None:  # nothing to pin torch with: at least give OpenMP/MKL what the author had
        recorded = execution["threads"]
        extra_env = {k: str(recorded[k]) for k in THREAD_VARIABLES if isinstance(recorded.get(k), str)}
    env = _replayed_env(spec.env, execution["env"], notes)
    trail_every = execution.get("trail_every")
    spec = spec.with_overrides(
        seed=int(execution["seed"]),
        determinism=replace(determinism, threads=threads),
        env=env,
        trail=Trail(every=int(trail_every)) if trail_every else spec.trail,
    )
    world_size = execution.get("world_size")
    if isinstance(world_size, int) and world_size != spec.launcher.world_size:
        notes.append(
            f"the author's runs had world size {world_size}; this job file starts {spec.launcher.world_size}"
        )
    settings = {
        "seed": spec.seed,
        "determinism": asdict(spec.determinism),
        "threads": {
            "used": threads,
            "author": author_threads,
            "overridden": options.threads is not None,
            "pinned_by_replay": threads if pinned_by_replay else None,
        },
        "world_size": spec.launcher.world_size,
        "env": sorted(env),
        "extra_env": extra_env,
        "trail_every": spec.trail.every if spec.trail else None,
    }
    return spec, extra_env, settings


def _replayed_env(current: dict[str, str], author: dict[str, Any], notes: list[str]) -> dict[str, str]:
    """The author's job environment; secrets (recorded redacted) come from this machine's environment."""
    env = dict(current)
    for key, value in author.items():
        if value == REDACTED:
            if key in current:
                notes.append(
                    f"env {key} is a secret: its value comes from your environment, not the author's"
                )
            continue
        if env.get(key) != str(value):
            notes.append(f"env {key} is the author's {value!r}, not {env.get(key)!r} as expanded here")
        env[key] = str(value)
    return env


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


# -- the image ------------------------------------------------------------------------------------


def _open_runtime(
    ctx: _Context, spec: JobSpec
) -> tuple[Runtime, dict[str, Any] | None, list[dict[str, Any]]]:
    """The runtime to use; for docker, the attested image found, loaded from the bundle, or rebuilt."""
    attested = ctx.attestation.image
    name = ctx.options.runtime or ("docker" if ctx.attestation.runtime == "docker" else "local")
    if name == "local":
        from reprobox.local_runtime import LocalRuntime

        if attested is not None:
            ctx.notes.append(
                f"the author ran in image {attested['id'][:19]}; --runtime local runs on this machine's "
                "Python stack instead, so bitwise equality needs the same stack"
            )
        return LocalRuntime(), None, []
    from reprobox import engine as engine_module
    from reprobox.docker_runtime import DockerRuntime, image_facts

    engine = ctx.options.engine or engine_module.connect()
    if attested is None:
        ctx.notes.append(
            "the author ran without a container; this run uses the reprobox image of this checkout"
        )
        runtime = DockerRuntime.for_job(
            spec,
            base_image=ctx.options.base_image,
            wheelhouse=ctx.options.wheelhouse,
            progress=ctx.say,
            engine=engine,
        )
        return runtime, {**image_facts(runtime.image), "how": "built for this run"}, []
    info, how = _attested_image(ctx, spec, engine)
    mismatch = image_mismatch(attested, dict(info.labels))
    if info.id != attested["id"] and not mismatch:
        ctx.notes.append(
            f"image {info.id[:19]} is not the author's {attested['id'][:19]} byte for byte, but was built "
            "from the same inputs (its build, context and lock digests match)"
        )
    return DockerRuntime(info, engine=engine), {**image_facts(info), "how": how}, mismatch


def image_mismatch(attested: dict[str, Any], labels: dict[str, str]) -> list[dict[str, Any]]:
    """Every io.reprobox.* label (lock digest, build digest, ...) whose value differs from the attested."""
    expected = {k: v for k, v in attested.get("labels", {}).items() if k.startswith(LABEL_PREFIX)}
    return [
        {"label": key, "attested": value, "found": labels.get(key)}
        for key, value in sorted(expected.items())
        if labels.get(key) != value
    ]


def _attested_image(ctx: _Context, spec: JobSpec, engine: Any) -> tuple[Any, str]:
    from reprobox import engine as engine_module

    attested = ctx.attestation.image
    assert attested is not None
    how = ""
    archive = ctx.bundle.image_archive if ctx.bundle else None
    if archive is not None and not engine.image_exists(attested["id"]):
        ctx.say(f"loading image {attested['id'][:19]} from the bundle (docker load) ...")
        with archive.open("rb") as stream:
            engine_module.load_image(engine, stream)
        how = "loaded from the bundle"
    for ref in (attested["id"], attested.get("repo_digest"), *attested.get("tags", [])):
        if ref and engine.image_exists(ref):
            return engine.inspect_image(ref), how or f"found on this engine as {ref}"
    return _rebuild(ctx, spec, engine), "rebuilt from the attested build inputs"


def _rebuild(ctx: _Context, spec: JobSpec, engine: Any) -> Any:
    """Build the image again; only when this machine would build it from the attested inputs."""
    from reprobox import image as image_module
    from reprobox.docker_runtime import ensure_image

    attested = ctx.attestation.image
    assert attested is not None
    short = attested["id"][:19]
    missing = f"image {short} is not on this Docker engine"
    fix = (
        "reproduce from a bundle (`reprobox pack` on the author's side) or load the image with `docker load`"
    )
    if spec.image.reference:
        try:
            return ensure_image(spec.image, engine=engine, progress=ctx.say)
        except EnvironmentProblem as exc:
            raise EnvironmentProblem(f"{missing} and pulling {spec.image.reference} failed; {fix}") from exc
    labels = attested.get("labels", {})
    lock, base = (
        labels.get(f"{LABEL_PREFIX}lock"),
        ctx.options.base_image or labels.get(f"{LABEL_PREFIX}base"),
    )
    try:
        plan = image_module.plan_build(
            spec.image, base_image=base, lock=lock, wheelhouse=ctx.options.wheelhouse
        )
    except (EnvironmentProblem, UsageError) as exc:
        raise EnvironmentProblem(f"{missing} and cannot be rebuilt here ({exc.message}); {fix}") from exc
    wanted = labels.get(f"{LABEL_PREFIX}build-digest")
    found = plan.labels.get(f"{LABEL_PREFIX}build-digest")
    if found != wanted:
        version = labels.get(f"{LABEL_PREFIX}version", "?")
        raise EnvironmentProblem(
            f"{missing} and cannot be rebuilt identically here: this reprobox would build {plan.tag} "
            f"(build digest {str(found)[7:23]}, attested {str(wanted)[7:23]}); {fix}, or install reprobox "
            f"{version} with the author's base image and wheelhouse"
        )
    ctx.say(f"rebuilding image {plan.tag} from the attested inputs ...")
    return ensure_image(spec.image, engine=engine, progress=ctx.say, base_image=base, lock=lock)


# -- running and judging --------------------------------------------------------------------------


def _run(
    spec: JobSpec, runtime: Runtime, options: ReproduceOptions, extra_env: dict[str, str], say: Progress
) -> list[RunRecord]:
    run_options = RunOptions(runs_dir=options.runs_dir, echo=options.echo, extra_env=extra_env)
    records: list[RunRecord] = []
    for index in range(options.runs):
        say(f"run {index + 1}/{options.runs} of {spec.name} ({runtime.name})")
        record = execute(spec, runtime, run_options)
        records.append(record)
        if not record.succeeded:
            break
    return records


def _classify(ctx: _Context, records: list[RunRecord], result: ReproduceResult) -> None:
    failed = next((r for r in records if not r.succeeded), None)
    if failed is not None:
        result.verdict, result.exit_code = FAILED, EXIT_JOB_FAILED
        result.sentence = (
            f"the job failed here ({failed.failure or failed.status}), so there is nothing to compare; "
            f"see {failed.run_dir / 'stdout.log'}"
        )
        return
    ctx.report_dir = _report_dir(ctx)
    published = ctx.published_record = _published_record(ctx, ctx.report_dir)
    comparison = compare_runs([published, *records])
    result.comparison = comparison
    if comparison.verdict == IDENTICAL:
        result.verdict, result.exit_code, result.sentence = BIT_IDENTICAL, EXIT_OK, SENTENCE_IDENTICAL
        return
    differing = next(r for r in records if not _same_content(published, r))
    diffs = _without_replay_pins(ctx, explain.diff_fingerprints(published.fingerprint, differing.fingerprint))
    ctx.stack_differences = diffs
    result.stack_differences = [
        {
            "field": d.field,
            "label": d.label,
            "author": d.a,
            "here": d.b,
            "affects_numerics": d.affects_numerics,
        }
        for d in diffs
    ]
    result.differing_tensors, result.max_abs_difference, comparable = _tensor_numbers(
        ctx, published, differing
    )
    amount = _amount(ctx, result.differing_tensors, result.max_abs_difference)
    own = compare_runs(records, tensor_details=False) if len(records) > 1 else None
    labels = list(dict.fromkeys(d.label for d in diffs if d.affects_numerics))
    if own is not None and own.verdict == DIFFERENT:
        result.verdict, result.exit_code = NONDETERMINISTIC, EXIT_NOT_REPRODUCIBLE
        result.sentence = f"{explain.SAME_STACK}: the {len(records)} runs here differ from each other"
    elif not labels:
        result.verdict, result.exit_code = NONDETERMINISTIC, EXIT_NOT_REPRODUCIBLE
        result.sentence = f"{explain.SAME_STACK}; {amount}"
    else:
        result.verdict, result.exit_code = DIFFERENT_STACK, EXIT_NOT_REPRODUCIBLE
        listing = ", ".join(labels[:NAMED_FIELDS]) + (
            f" and {len(labels) - NAMED_FIELDS} more" if len(labels) > NAMED_FIELDS else ""
        )
        result.sentence = (
            f"different stack: bitwise equality not expected; {amount}; the stacks differ in {listing}"
        )
        tolerance = ctx.options.tolerance
        if tolerance is not None:
            met = (
                comparable
                and result.max_abs_difference is not None
                and result.max_abs_difference <= tolerance
            )
            result.sentence += f"; {'within' if met else 'outside'} --tolerance {tolerance:g}"
            result.exit_code = EXIT_OK if met else EXIT_NOT_REPRODUCIBLE


def _without_replay_pins(
    ctx: _Context, diffs: list[explain.FieldDifference]
) -> list[explain.FieldDifference]:
    """Drop OMP/MKL/OpenBLAS variables that only differ because the replay set them to the author's
    effective thread count (which torch's own counts, still compared, show to be the same)."""
    if ctx.replay_pin is None:
        return diffs
    pinned = {f"software.threads.{name}" for name in THREAD_VARIABLES}
    kept = [d for d in diffs if not (d.field in pinned and d.a is None and d.b == str(ctx.replay_pin))]
    if len(kept) < len(diffs):
        ctx.notes.append(
            f"{', '.join(THREAD_VARIABLES)} were set to {ctx.replay_pin} here to replay the author's "
            "unpinned thread count; they are not counted as a stack difference"
        )
    return kept


def _same_content(a: RunRecord, b: RunRecord) -> bool:
    contents = {c["path"]: c.get("content_sha256") for c in a.checkpoints}
    return contents == {c["path"]: c.get("content_sha256") for c in b.checkpoints}


def _tensor_numbers(ctx: _Context, published: RunRecord, other: RunRecord) -> tuple[int, float | None, bool]:
    """(differing tensors, max abs difference over all of them, every one comparable) against the author."""
    count, comparable = 0, ctx.published is not None
    values: list[float] = []
    for entry in published.checkpoints:
        mine = other.checkpoint(entry["path"])
        if mine is None:
            comparable = False
            continue
        names = differing_tensor_names(entry, mine)
        if entry.get("content_sha256") == mine.get("content_sha256"):
            continue
        count += len(names)
        if ctx.published is None or names == ["<file>"]:
            comparable = comparable and names != ["<file>"]
            continue
        from reprobox import tensordiff

        diffs = tensordiff.diff_checkpoint_files(
            ctx.published / entry["path"],
            other.output_dir / entry["path"],
            checkpoint=entry["path"],
            names=names,
        )
        for diff in diffs:
            if diff.max_abs is None:
                comparable = False
            else:
                values.append(diff.max_abs)
    if not values:
        return count, None, comparable
    worst = math.nan if any(math.isnan(v) for v in values) else max(values)
    return count, worst, comparable


def _amount(ctx: _Context, count: int, worst: float | None) -> str:
    if worst is not None:
        return f"max difference {worst:.3g} over {count} tensors"
    if ctx.published is None:
        return (
            f"{count} tensors differ (how much needs the author's checkpoint files: pass --published DIR, "
            "or reproduce a bundle packed with --published)"
        )
    return f"{count} tensors differ"


def _report_dir(ctx: _Context) -> Path:
    if ctx.options.report_dir is not None:
        return ctx.options.report_dir
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = ctx.options.runs_dir / "reproductions" / f"{ctx.attestation.job['name']}-{stamp}"
    candidate, number = base, 1
    while candidate.exists():
        number += 1
        candidate = base.with_name(f"{base.name}-{number}")
    return candidate


def _published_record(ctx: _Context, report_dir: Path) -> RunRecord:
    """The author's result as a run record (so compare and the report treat it as run A)."""
    attestation = ctx.attestation
    where = (report_dir / "published").absolute()
    where.mkdir(parents=True, exist_ok=True)
    if ctx.published is not None:
        (where / "outputs").symlink_to(ctx.published.absolute(), target_is_directory=True)
    trail = None
    if ctx.published_trail is not None:
        trail = bundle.TRAIL_NAME
        (where / trail).symlink_to(ctx.published_trail.absolute())
    runs = attestation.predicate.get("runs") or {}
    return write_record(
        where,
        {
            "run_id": "published",
            "job_name": attestation.job["name"],
            "status": "succeeded",
            "started_at": runs.get("started_at", ""),
            "ended_at": runs.get("ended_at", ""),
            "attestation": str(attestation.path),
            "job": attestation.job.get("spec", {}),
            "fingerprint": attestation.fingerprint,
            "checkpoints": attestation.checkpoints,
            "trail": trail,
        },
    )


# -- the report -----------------------------------------------------------------------------------


def _write_reports(ctx: _Context, records: Sequence[RunRecord], result: ReproduceResult) -> list[Path]:
    """report.md, report.html and result.json next to the author's record, all written atomically."""
    if result.comparison is None or ctx.report_dir is None or ctx.published_record is None:
        return []  # a failed run: its own record says why
    report_dir = ctx.report_dir
    data = reportdoc.gather([ctx.published_record, *records], result.comparison)
    data.stack_differences = ctx.stack_differences or data.stack_differences
    data.stack_sentence = None  # the reproduction's own sentence heads the report
    summary = _summary_lines(ctx, result)
    markdown_text = reportdoc.markdown(data, None)
    title, _, rest = markdown_text.partition("\n")
    markdown_path, html_path, json_path = (
        report_dir / "report.md",
        report_dir / "report.html",
        report_dir / RESULT_NAME,
    )
    result.reports = [markdown_path, html_path, json_path]
    write_text_atomic(markdown_path, "\n".join([title, "", "## Reproduction", "", *summary]) + "\n" + rest)
    html_text = reportdoc.html_document(data, None)
    head, marker, tail = html_text.partition("</h1>")
    write_text_atomic(html_path, head + marker + _summary_html(summary) + tail)
    write_json_atomic(json_path, result.to_json())
    return result.reports


def _summary_lines(ctx: _Context, result: ReproduceResult) -> list[str]:
    threads = result.settings.get("threads", {})
    image = result.image or {}
    signature = "absent"
    if result.signature.get("signed"):
        signature = "verified" if result.signature.get("verified") else "not checked"
    how = f" ({image['how']})" if image.get("how") else ""
    lines = [
        f"**{result.sentence}** (exit code {result.exit_code})",
        "",
        f"- attestation: {result.attestation} ({ctx.attestation.verified_runs} verified run(s) by the "
        f"author; signature {signature})",
        f"- code: {result.code_dir} matches the attested tree ({ctx.attestation.code['sha256'][:16]})",
        f"- image: {image.get('id', 'none (local runtime)')}{how}",
        f"- replayed: seed {result.settings.get('seed')}, {threads.get('used')} threads "
        f"(author: {threads.get('author')}), world size {result.settings.get('world_size')}",
        f"- runs here: {', '.join(str(r) for r in result.runs)}",
    ]
    if result.bundle:
        lines.append(f"- bundle: {result.bundle['path']} (sha256 {result.bundle['sha256']})")
    lines += [f"- note: {note}" for note in result.notes]
    return lines


def _summary_html(lines: Sequence[str]) -> str:
    body = "".join(f"<li>{html.escape(line[2:])}</li>" for line in lines if line.startswith("- "))
    sentence = html.escape(lines[0].replace("**", ""))
    return f"<h2>Reproduction</h2><p id='reproduction'><strong>{sentence}</strong></p><ul>{body}</ul>"


def _json_number(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else "inf"
