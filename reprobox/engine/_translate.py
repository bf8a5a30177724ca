"""The one place where docker SDK and connection errors become the engine seam's typed errors.

Each engine verb wraps its SDK calls in `translated(...)`, saying what it was doing and which answers
mean something narrower (an image not there, a build refused, a container already gone); everything
else is decided here, once, in the same order for every verb.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

import docker.errors
import requests.exceptions

from reprobox.engine._errors import CHECK_ENGINE_HINT, EngineError, EngineUnavailable, RequestFailed

ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)

Failure = Callable[[str, str], EngineError]  # (what was being done, the engine's words) -> the error


def translated(
    action: str | None,
    *,
    error: Failure = RequestFailed,
    missing: Callable[[], EngineError] | None = None,
    refused: Callable[[str], EngineError] | None = None,
    tolerate: Callable[[Exception], bool] | None = None,
) -> Translation:
    """A context manager that turns SDK and connection errors raised inside it into EngineErrors.

    `action` says what was being done ("inspecting image x failed"); None means connecting, where
    every failure means no engine answers. `missing` makes the error for an image the engine does not
    have, `refused` the one for a request the engine answered with an error (an API error), `error`
    the one for everything without a narrower type. `tolerate` names failures that are fine (the
    container is already gone): they are swallowed and the code after the block runs.
    """
    return Translation(action, error=error, missing=missing, refused=refused, tolerate=tolerate)


class Translation:
    """See `translated`; `error_for` is the pure mapping, `__exit__` applies it."""

    def __init__(
        self,
        action: str | None,
        *,
        error: Failure,
        missing: Callable[[], EngineError] | None,
        refused: Callable[[str], EngineError] | None,
        tolerate: Callable[[Exception], bool] | None,
    ) -> None:
        self.action = action
        self.error = error
        self.missing = missing
        self.refused = refused
        self.tolerate = tolerate

    def __enter__(self) -> Translation:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        if exc is None or not isinstance(exc, ENGINE_ERRORS):
            return False  # success, or not the engine's error (a ReproboxError raised inside passes as is)
        if self.tolerate is not None and self.tolerate(exc):
            return True
        raise self.error_for(exc) from exc

    def error_for(self, exc: Exception) -> EngineError:
        """The typed error for one SDK or connection exception raised while doing `action`."""
        words = reason(exc)
        if self.missing is not None and isinstance(exc, docker.errors.ImageNotFound):
            return self.missing()
        if self.refused is not None and isinstance(exc, docker.errors.APIError | docker.errors.BuildError):
            return self.refused(words)
        if self.action is None or connection_lost(exc):
            return EngineUnavailable(words, action=self.action)
        if isinstance(exc, PermissionError):  # the socket refuses this user
            return EngineUnavailable(words, action=self.action, fix=CHECK_ENGINE_HINT)
        return self.error(self.action, words)


def reason(exc: BaseException) -> str:
    """The engine's own words for a failure, one line: its explanation when it gave one."""
    if isinstance(exc, docker.errors.APIError):
        return str(exc.explanation or exc)
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0] if text else type(exc).__name__


def connection_lost(exc: BaseException) -> bool:
    return isinstance(exc, requests.exceptions.ConnectionError | ConnectionError)


def status_in(exc: Exception, *codes: int) -> bool:
    """True for an API error whose HTTP status is one of `codes`."""
    return isinstance(exc, docker.errors.APIError) and exc.status_code in codes


def image_absent(exc: Exception) -> bool:
    return isinstance(exc, docker.errors.ImageNotFound)


def object_absent(exc: Exception) -> bool:
    """The engine has no such object (image or container)."""
    return isinstance(exc, docker.errors.NotFound)
