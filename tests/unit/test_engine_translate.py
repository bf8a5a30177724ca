"""SDK and connection errors -> the engine's typed errors, at the one place that translates them.

The docker SDK's own exception classes are raised (with real `requests` responses for a status)
straight into `translated`; the one real engine failure (no socket) goes through `connect`.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests.exceptions
from fakes.docker_sdk import CHECK, START, api_error, refused_connection, response

from reprobox import engine
from reprobox.engine._errors import (
    BaseImageMissing,
    BuildFailed,
    ContainerFailed,
    EngineError,
    EngineUnavailable,
    GpuUnavailable,
    ImageMissing,
    LoadFailed,
    PullFailed,
    RequestFailed,
)
from reprobox.engine._translate import translated
from reprobox.errors import EXIT_ENVIRONMENT, EnvironmentProblem, UsageError


def raised(action: str | None, exc: Exception, **rules: Any) -> EngineError:
    with pytest.raises(EngineError) as caught, translated(action, **rules):
        raise exc
    assert caught.value.__cause__ is exc
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    return caught.value


@pytest.mark.parametrize(
    "exc",
    [
        refused_connection(),
        docker.errors.DockerException("Error while fetching server API version: Connection refused"),
        PermissionError(13, "Permission denied"),
        ConnectionRefusedError(111, "Connection refused"),
    ],
)
def test_no_engine_reached_is_unavailable_with_the_local_hint(exc: Exception) -> None:
    error = raised(None, exc)
    assert type(error) is EngineUnavailable
    assert error.message.startswith("no Docker engine answers (")
    assert error.message.endswith(f"); {START}")
    assert error.hint == "or run with --runtime local to run without isolation"


def test_permission_denied_on_the_socket_is_unavailable() -> None:
    error = raised(None, PermissionError(13, "Permission denied"))
    assert error.message == f"no Docker engine answers ([Errno 13] Permission denied); {START}"
    later = raised("listing images failed", PermissionError(13, "Permission denied"))
    assert type(later) is EngineUnavailable
    assert later.message == f"listing images failed ([Errno 13] Permission denied); {CHECK}"
    assert later.hint is None


def test_connection_lost_mid_request_says_to_start_an_engine() -> None:
    error = raised("inspecting image x failed", refused_connection())
    assert type(error) is EngineUnavailable
    assert error.message == (
        "inspecting image x failed (('Connection aborted.', "
        f"FileNotFoundError(2, 'No such file or directory'))); {START}"
    )
    assert error.hint is None


def test_api_error_without_a_narrower_type_quotes_the_engines_explanation() -> None:
    error = raised("listing containers failed", api_error(500, "the daemon is shutting down"))
    assert type(error) is RequestFailed
    assert error.message == f"listing containers failed (the daemon is shutting down); {CHECK}"
    assert error.reason == "the daemon is shutting down"


def test_an_error_without_explanation_is_told_by_its_first_line() -> None:
    error = raised("waiting failed", requests.exceptions.ReadTimeout("read timed out\nmore detail"))
    assert error.message == f"waiting failed (read timed out); {CHECK}"
    assert type(raised("waiting failed", OSError())) is RequestFailed  # no words at all: the type's name


def test_image_not_found_becomes_the_verbs_missing_error_or_a_plain_failure() -> None:
    not_found = api_error(404, "No such image: x:1", docker.errors.ImageNotFound)
    missing = raised("inspecting x:1 failed", not_found, missing=lambda: ImageMissing("x:1", fix="build it"))
    assert type(missing) is ImageMissing
    assert missing.message == "image x:1 is not present on this Docker engine; build it"
    plain = raised("pulling failed", not_found)
    assert type(plain) is RequestFailed
    assert plain.message == f"pulling failed (No such image: x:1); {CHECK}"


def test_refusals_go_to_the_verbs_refused_error() -> None:
    def refused(reason: str) -> EngineError:
        return BuildFailed("t:1", "Step 2/3 : RUN false", reason, log_tail="tail")

    error = raised(
        "building t:1 failed", docker.errors.BuildError("returned a non-zero code", []), refused=refused
    )
    assert type(error) is BuildFailed
    assert error.message == (
        "building image t:1 failed at 'Step 2/3 : RUN false': returned a non-zero code; "
        "see the build log above"
    )
    assert error.log_tail == "tail"
    assert type(raised("building t:1 failed", api_error(500, "no"), refused=refused)) is BuildFailed
    assert type(raised("building t:1 failed", refused_connection(), refused=refused)) is EngineUnavailable


def test_tolerated_failures_are_swallowed_and_the_code_after_runs() -> None:
    after = []
    with translated("stopping failed", tolerate=lambda exc: isinstance(exc, docker.errors.NotFound)):
        raise docker.errors.NotFound("gone", response=response(404), explanation="No such container")
    after.append(True)
    assert after == [True]
    with pytest.raises(RequestFailed), translated("stopping failed", tolerate=lambda exc: False):
        raise api_error(404, "No such container")


def test_errors_that_are_not_the_engines_pass_untouched() -> None:
    own = PullFailed("x:1", "manifest unknown", in_stream=True)
    with pytest.raises(PullFailed) as caught, translated("pulling failed"):
        raise own
    assert caught.value is own
    with pytest.raises(ValueError, match="a bug"), translated("anything"):
        raise ValueError("a bug")


def test_every_engine_error_keeps_the_environment_exit_code() -> None:
    for cls in (
        EngineError,
        RequestFailed,
        EngineUnavailable,
        ImageMissing,
        BaseImageMissing,
        PullFailed,
        BuildFailed,
        ContainerFailed,
        GpuUnavailable,
        LoadFailed,
    ):
        assert issubclass(cls, EnvironmentProblem)
        assert cls.exit_code == EXIT_ENVIRONMENT
    assert not issubclass(EngineError, UsageError)


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_connect_without_an_engine_is_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(engine.EngineUnavailable) as caught:
        engine.connect(timeout=2)
    assert caught.value.message.startswith("no Docker engine answers (")
    assert caught.value.message.endswith(START)
    assert caught.value.hint == "or run with --runtime local to run without isolation"
    assert not engine.engine_available()
    del caught
    gc.collect()  # the SDK leaves a socket that failed to connect to the collector: collect it here
