"""What the engine seam raises: one type per thing that can go wrong, each building its own sentence.

Every class is an EnvironmentProblem (exit 4), so a caller that only reports keeps catching that; a
caller that acts on a cause (retry without GPUs, explain a pip failure, skip without an engine)
catches the narrow type instead of reading the message. Only `_translate` decides which one an SDK
exception becomes.
"""

from __future__ import annotations

from reprobox.errors import EnvironmentProblem
from reprobox.offline import offline_path

START_ENGINE_HINT = "start one with: sudo systemctl start docker"
CHECK_ENGINE_HINT = "check the Docker engine (docker info)"
RUN_LOCAL_HINT = "or run with --runtime local to run without isolation"
OFFLINE_BASE_HINT = f"{offline_path()}, or --base-image and --wheelhouse"
NO_GPU = "the job asks for GPUs but this Docker engine cannot provide them"
GPU_FIX = "install the NVIDIA Container Toolkit, or remove resources.gpus from the job"
NO_ENGINE = "no Docker engine answers"


def said(action: str, reason: str, fix: str) -> str:
    """The common sentence: what was asked, the engine's words in brackets, then the fix."""
    return f"{action} ({reason}); {fix}"


class EngineError(EnvironmentProblem):
    """Root of the engine seam's errors; `reason` is the engine's own words ("" when it said none)."""

    def __init__(
        self, message: str, *, reason: str = "", hint: str | None = None, log_tail: str = ""
    ) -> None:
        super().__init__(message, hint=hint, log_tail=log_tail)
        self.reason = reason


class RequestFailed(EngineError):
    """The engine failed a request, for no cause that has a narrower type here."""

    def __init__(self, action: str, reason: str, *, fix: str = CHECK_ENGINE_HINT) -> None:
        super().__init__(said(action, reason, fix), reason=reason)
        self.action = action


class EngineUnavailable(EngineError):
    """No engine answers: no socket, connection refused or lost, or the socket refuses this user.

    `action` None means no engine was reached at all, so running without isolation is the other way.
    """

    def __init__(self, reason: str, *, action: str | None = None, fix: str = START_ENGINE_HINT) -> None:
        if action is None:
            super().__init__(said(NO_ENGINE, reason, START_ENGINE_HINT), reason=reason, hint=RUN_LOCAL_HINT)
        else:
            super().__init__(said(action, reason, fix), reason=reason)
        self.action = action


class ImageMissing(EngineError):
    """An image the request needs is not on the engine, and this request would not pull it."""

    def __init__(
        self,
        ref: str,
        *,
        fix: str,
        what: str = "image",
        where: str = "on this Docker engine",
        log_tail: str = "",
    ) -> None:
        super().__init__(f"{what} {ref} is not present {where}; {fix}", log_tail=log_tail)
        self.ref = ref


class BaseImageMissing(ImageMissing):
    """A build failed because its base image is neither here nor pullable (the offline case)."""

    def __init__(self, ref: str, *, log_tail: str = "") -> None:
        super().__init__(
            ref,
            fix=OFFLINE_BASE_HINT,
            what="base image",
            where="and cannot be pulled here",
            log_tail=log_tail,
        )


class PullFailed(EngineError):
    """Pulling an image failed: the request itself, or the registry's answer in the pull stream."""

    def __init__(self, ref: str, reason: str, *, in_stream: bool = False) -> None:
        if in_stream:
            message = f"pulling {ref} failed: {reason}; pull or load it by hand"
        else:
            message = said(pull_action(ref), reason, "pull or load it")
        super().__init__(message, reason=reason)
        self.ref = ref


def pull_action(ref: str) -> str:
    """What a failed pull request says it was doing (also the start of its EngineUnavailable)."""
    return f"image {ref} is not present and pulling it failed"


class BuildFailed(EngineError):
    """A build step failed; `step` is the Dockerfile step it was at, `log_tail` the build's last lines."""

    def __init__(self, tag: str, step: str, reason: str, *, log_tail: str = "") -> None:
        super().__init__(
            f"building image {tag} failed at {step.strip()!r}: {reason.strip()}; see the build log above",
            reason=reason,
            log_tail=log_tail,
        )
        self.tag = tag
        self.step = step


class ContainerFailed(RequestFailed):
    """Creating, starting, waiting for, reading, stopping or removing a container failed."""


class GpuUnavailable(ContainerFailed):
    """The container asks for GPUs and the engine has no runtime that can hand them over."""

    def __init__(self, reason: str) -> None:
        super().__init__(NO_GPU, reason, fix=GPU_FIX)


class LoadFailed(EngineError):
    """The engine did not load an image archive: it said why (`reason`), or it loaded nothing."""

    def __init__(self, reason: str | None = None) -> None:
        if reason is None:
            message = "the engine loaded no image from the archive; is it a `docker save` file?"
        else:
            message = f"loading an image archive failed: {reason}; is it a `docker save` file?"
        super().__init__(message, reason=reason or "")
