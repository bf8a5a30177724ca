"""SDK and connection errors -> the engine's typed errors, with the sentences users read.

The docker SDK's own exception classes are raised (with real `requests` responses for a status), once
straight into the translation point and once through each verb over a client that only raises or
streams what the test gives it; the one real engine failure (no socket) goes through `connect`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests
import requests.exceptions

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

START = "start one with: sudo scripts/start-docker.sh"
CHECK = "check the Docker engine (docker info)"
GPU_WORDS = 'could not select device driver "" with capabilities: [[gpu]]'
CONTAINER = "0123456789abcdef0123"


def response(status: int) -> requests.Response:
    answer = requests.Response()
    answer.status_code = status
    answer.url = "http+docker://localhost/v1.47/anything"
    answer.reason = "Some Reason"
    return answer


def api_error(
    status: int, explanation: str, cls: type[docker.errors.APIError] = docker.errors.APIError
) -> Any:
    return cls(f"{status} error", response=response(status), explanation=explanation)


def refused_connection() -> requests.exceptions.ConnectionError:
    return requests.exceptions.ConnectionError(
        "('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))"
    )


def raised(action: str | None, exc: Exception, **rules: Any) -> EngineError:
    with pytest.raises(EngineError) as caught, translated(action, **rules):
        raise exc
    assert caught.value.__cause__ is exc
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    return caught.value


# -- the translation point -------------------------------------------------------------------------


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


# -- each verb, over a client that raises or streams what it is given ------------------------------


class Calls:
    """Stands in for `client.api` / `client.containers`: each named call raises, streams or returns."""

    def __init__(self, **outcomes: Any) -> None:
        self.outcomes = outcomes

    def __getattr__(self, name: str) -> Any:
        outcome = self.outcomes[name]

        def call(*_args: Any, **_kwargs: Any) -> Any:
            if isinstance(outcome, BaseException):
                raise outcome
            if callable(outcome):
                return outcome()
            return outcome

        return call


def over(**outcomes: Any) -> engine.Engine:
    client = type("Client", (), {"api": Calls(**outcomes), "containers": Calls(**outcomes)})()
    return engine.Engine(client)


def events_then(events: list[dict[str, Any]], exc: Exception | None = None) -> Any:
    def stream() -> Iterator[dict[str, Any]]:
        yield from events
        if exc is not None:
            raise exc

    return stream


def test_image_exists_answers_false_for_missing_or_invalid_references() -> None:
    assert not over(inspect_image=api_error(404, "nope", docker.errors.ImageNotFound)).image_exists("x")
    assert not over(inspect_image=api_error(400, "invalid reference format")).image_exists("X Y")
    with pytest.raises(RequestFailed, match=r"^inspecting image x failed \(boom\); check the Docker"):
        over(inspect_image=api_error(500, "boom")).image_exists("x")
    assert over(inspect_image={"Id": "sha256:1"}).image_exists("x")


def test_missing_images_say_how_to_get_them(tmp_path: Path) -> None:
    not_found = api_error(404, "No such image: x:1", docker.errors.ImageNotFound)
    with pytest.raises(ImageMissing) as caught:
        over(inspect_image=not_found).inspect_image("x:1")
    assert (
        caught.value.message
        == "image x:1 is not present on this Docker engine; build it, or pull or load it first"
    )
    with pytest.raises(ImageMissing) as caught:
        over(create=not_found).create_container({"image": "x:1"})
    assert caught.value.message == "image x:1 is not present on this Docker engine; build or load it first"
    with (tmp_path / "x.tar").open("wb") as out, pytest.raises(ImageMissing) as caught:
        engine.save_image(over(get_image=not_found), "x:1", out)
    assert caught.value.message == (
        "image x:1 is not present on this Docker engine, so it cannot be saved; build or load it first"
    )


def test_a_start_without_a_gpu_runtime_is_its_own_type() -> None:
    with pytest.raises(GpuUnavailable) as caught:
        over(start=api_error(500, GPU_WORDS)).start(CONTAINER)
    assert caught.value.message == (
        f"the job asks for GPUs but this Docker engine cannot provide them ({GPU_WORDS}); "
        "install the NVIDIA Container Toolkit, or remove resources.gpus from the job"
    )
    assert isinstance(caught.value, ContainerFailed)
    with pytest.raises(ContainerFailed) as other:
        over(start=api_error(500, "port is already allocated")).start(CONTAINER)
    assert type(other.value) is ContainerFailed
    assert (
        other.value.message == f"starting container 0123456789ab failed (port is already allocated); {CHECK}"
    )


@pytest.mark.parametrize(
    ("verb", "call", "exc"),
    [
        (
            "stop",
            "stop",
            docker.errors.NotFound("x", response=response(404), explanation="No such container"),
        ),
        ("kill", "kill", api_error(404, "No such container")),
        ("kill", "kill", api_error(409, "is not running")),
        ("remove_container", "remove_container", docker.errors.NotFound("x", response=response(404))),
        (
            "remove_container",
            "remove_container",
            api_error(409, "removal of container x is already in progress"),
        ),
    ],
)
def test_a_container_already_gone_is_fine(verb: str, call: str, exc: Exception) -> None:
    target = over(**{call: exc})
    args = (CONTAINER, 1.0) if verb == "stop" else (CONTAINER,)
    assert getattr(target, verb)(*args) is None


def test_container_failures_name_the_container_and_the_verb() -> None:
    with pytest.raises(ContainerFailed, match=r"^removing container 0123456789ab failed \(conflict\); check"):
        over(remove_container=api_error(409, "conflict")).remove_container(CONTAINER)
    with pytest.raises(ContainerFailed, match=r"^waiting for container 0123456789ab failed"):
        over(wait=api_error(500, "gone wrong")).wait(CONTAINER)
    with pytest.raises(
        EngineUnavailable, match=rf"^reading the output of container 0123456789ab failed .*{START}"
    ):
        list(over(logs=events_then([b"line\n"], refused_connection())).stream_logs(CONTAINER))


def test_pull_failures_in_the_stream_and_of_the_request() -> None:
    with pytest.raises(PullFailed) as caught:
        over(pull=events_then([{"status": "Pulling"}, {"error": "manifest unknown"}])).pull("x:1", print)
    assert caught.value.message == "pulling x:1 failed: manifest unknown; pull or load it by hand"
    with pytest.raises(PullFailed) as caught:
        over(pull=api_error(404, "pull access denied for x", docker.errors.ImageNotFound)).pull("x:1", print)
    assert caught.value.message == (
        "image x:1 is not present and pulling it failed (pull access denied for x); pull or load it"
    )
    with pytest.raises(
        EngineUnavailable, match=rf"^image x:1 is not present and pulling it failed \(.*{START}$"
    ):
        over(pull=refused_connection()).pull("x:1", print)


STEPS = [{"stream": "Step 1/2 : FROM base:1\n"}, {"stream": "Step 2/2 : RUN pip install numpy\n"}]


def test_a_failed_build_step_carries_the_step_and_the_log_tail() -> None:
    failing = events_then([*STEPS, {"stream": "no wheel\n"}, {"errorDetail": {"message": "exit code 1"}}])
    with pytest.raises(BuildFailed) as caught:
        over(build=failing, inspect_image={"Id": "sha256:base"}).build(
            b"", "t:1", {}, {}, print, base_image="base:1"
        )
    assert caught.value.message == (
        "building image t:1 failed at 'Step 2/2 : RUN pip install numpy': exit code 1; "
        "see the build log above"
    )
    assert caught.value.log_tail.splitlines()[-2:] == ["no wheel", "error: exit code 1"]
    refused = events_then(STEPS[:1], api_error(500, "dockerfile parse error"))
    with pytest.raises(BuildFailed, match="failed at 'Step 1/2 : FROM base:1': dockerfile parse error"):
        over(build=refused, inspect_image={"Id": "sha256:base"}).build(b"", "t:1", {}, {}, print)


def test_a_build_whose_base_is_missing_names_the_offline_base() -> None:
    failing = events_then([STEPS[0], {"error": "pull access denied for base"}])
    missing = api_error(404, "No such image: base:1", docker.errors.ImageNotFound)
    with pytest.raises(BaseImageMissing) as caught:
        over(build=failing, inspect_image=missing).build(b"", "t:1", {}, {}, print, base_image="base:1")
    assert caught.value.message == (
        "base image base:1 is not present and cannot be pulled here; build the offline base with "
        "scripts/build-offline-base.sh and pass --base-image / REPROBOX_BASE_IMAGE"
    )
    assert isinstance(caught.value, ImageMissing)
    assert caught.value.log_tail.endswith("error: pull access denied for base")


def test_load_failures_ask_whether_it_is_an_image_archive(tmp_path: Path) -> None:
    archive = tmp_path / "x.tar"
    archive.write_bytes(b"not an archive")
    broken = over(load_image=[{"errorDetail": {"message": "unexpected EOF"}}])
    with archive.open("rb") as stream, pytest.raises(LoadFailed) as caught:
        engine.load_image(broken, stream)
    assert (
        caught.value.message == "loading an image archive failed: unexpected EOF; is it a `docker save` file?"
    )
    with archive.open("rb") as stream, pytest.raises(LoadFailed) as caught:
        engine.load_image(over(load_image=[{"stream": "nothing\n"}]), stream)
    assert caught.value.message == "the engine loaded no image from the archive; is it a `docker save` file?"


# -- the one real failure: no engine at the address --------------------------------------------------


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
