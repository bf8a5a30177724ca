"""The runtime a reproduction runs in; for docker, the attested image found on this engine, loaded from
the bundle, or rebuilt from the attested inputs, and every io.reprobox.* label that does not match."""

from __future__ import annotations

from typing import Any

from reprobox import progress
from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.image import LABEL_PREFIX, plan_build
from reprobox.jobfile import JobSpec
from reprobox.reproduce._model import Context
from reprobox.runtimes import open_runtime
from reprobox.runtimes.base import Runtime, RuntimeOptions

_CONTAINER_RUNTIMES = ("docker", "podman")  # the same image, so an attestation names the one to reuse


def runtime_for(ctx: Context, spec: JobSpec) -> tuple[Runtime, dict[str, Any] | None, list[dict[str, Any]]]:
    """The runtime to use, its image's facts and the label mismatch list; for docker, the attested image
    found, loaded from the bundle, or rebuilt, then opened through the registry like any other."""
    attested = ctx.attestation.image
    container = ctx.attestation.runtime in _CONTAINER_RUNTIMES
    name = ctx.options.runtime or (ctx.attestation.runtime if container else "local")
    if name == "local":
        if attested is not None:
            ctx.notes.append(
                f"the author ran in image {attested['id'][:19]}; --runtime local runs on this machine's "
                "Python stack instead, so bitwise equality needs the same stack"
            )
        return open_runtime("local", RuntimeOptions()), None, []
    from reprobox.runtimes.docker import image_facts

    engine = ctx.options.engine or _connect(name)
    if attested is None:
        ctx.notes.append(
            "the author ran without a container; this run uses the reprobox image of this checkout"
        )
        options = RuntimeOptions(
            job=spec, base_image=ctx.options.base_image, wheelhouse=ctx.options.wheelhouse, engine=engine
        )
        runtime = open_runtime(name, options)
        return runtime, {**runtime.describe()["image"], "how": "built for this run"}, []
    info, how = _attested_image(ctx, spec, engine)
    mismatch = image_mismatch(attested, dict(info.labels))
    if info.id != attested["id"] and not mismatch:
        ctx.notes.append(
            f"image {info.id[:19]} is not the author's {attested['id'][:19]} byte for byte, but was built "
            "from the same inputs (its build, context and lock digests match)"
        )
    runtime = open_runtime(name, RuntimeOptions(image=info.id, engine=engine))
    return runtime, {**image_facts(info), "how": how}, mismatch


def _connect(runtime: str) -> Any:
    """The engine whose image store the reproduction uses: Docker's, or Podman's (its service started for
    this command when none answers)."""
    if runtime == "podman":
        from reprobox.runtimes.podman import open_engine

        return open_engine()[0]
    from reprobox import engine as engine_module

    return engine_module.connect()


def image_mismatch(attested: dict[str, Any], labels: dict[str, str]) -> list[dict[str, Any]]:
    """Every io.reprobox.* label (lock digest, build digest, ...) whose value differs from the attested."""
    expected = {k: v for k, v in attested.get("labels", {}).items() if k.startswith(LABEL_PREFIX)}
    return [
        {"label": key, "attested": value, "found": labels.get(key)}
        for key, value in sorted(expected.items())
        if labels.get(key) != value
    ]


def _attested_image(ctx: Context, spec: JobSpec, engine: Any) -> tuple[Any, str]:
    from reprobox import engine as engine_module

    attested = ctx.attestation.image
    assert attested is not None
    how = ""
    archive = ctx.bundle.image_archive if ctx.bundle else None
    if archive is not None and not engine.image_exists(attested["id"]):
        progress.say(f"loading image {attested['id'][:19]} from the bundle (docker load) ...")
        with archive.open("rb") as stream:
            engine_module.load_image(engine, stream)
        how = "loaded from the bundle"
    for ref in (attested["id"], attested.get("repo_digest"), *attested.get("tags", [])):
        if ref and engine.image_exists(ref):
            return engine.inspect_image(ref), how or f"found on this engine as {ref}"
    return _rebuild(ctx, spec, engine), "rebuilt from the attested build inputs"


def _rebuild(ctx: Context, spec: JobSpec, engine: Any) -> Any:
    """Build the image again; only when this machine would build it from the attested inputs."""
    from reprobox.runtimes.docker import ensure_image

    attested = ctx.attestation.image
    assert attested is not None
    short = attested["id"][:19]
    missing = f"image {short} is not on this Docker engine"
    fix = (
        "reproduce from a bundle (`reprobox pack` on the author's side) or load the image with `docker load`"
    )
    if spec.image.reference:
        try:
            return ensure_image(spec.image, engine=engine)
        except EnvironmentProblem as exc:
            raise EnvironmentProblem(f"{missing} and pulling {spec.image.reference} failed; {fix}") from exc
    labels = attested.get("labels", {})
    lock, base = (
        labels.get(f"{LABEL_PREFIX}lock"),
        ctx.options.base_image or labels.get(f"{LABEL_PREFIX}base"),
    )
    try:
        plan = plan_build(spec.image, base_image=base, lock=lock, wheelhouse=ctx.options.wheelhouse)
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
    progress.say(f"rebuilding image {plan.tag} from the attested inputs ...")
    # The same inputs the digest was checked with: a wheelhouse changes what the build installs from.
    return ensure_image(
        spec.image, engine=engine, base_image=base, lock=lock, wheelhouse=ctx.options.wheelhouse
    )
