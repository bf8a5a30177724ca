"""Each engine verb's failures, over a client that raises or streams what the test gives it.

Which type each verb raises, and the sentence: an image missing, a container already gone (fine),
no GPU runtime, a failed build step with its log tail, a pull or a load the engine refused.
"""

from __future__ import annotations

from pathlib import Path

import docker.errors
import pytest
from fakes.docker_sdk import (
    CHECK,
    GPU_WORDS,
    START,
    api_error,
    events_then,
    over,
    refused_connection,
    response,
)

from reprobox import engine
from reprobox.engine._errors import (
    BaseImageMissing,
    BuildFailed,
    ContainerFailed,
    EngineUnavailable,
    GpuUnavailable,
    ImageMissing,
    LoadFailed,
    PullFailed,
    RequestFailed,
)
from reprobox.errors import EXIT_ENVIRONMENT

CONTAINER = "0123456789abcdef0123"


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
        "base image base:1 is not present and cannot be pulled here; a build with no registry takes "
        "REPROBOX_BASE_IMAGE=reprobox/offline-base:bookworm (made by `reprobox offline-base`) and "
        "REPROBOX_WHEELHOUSE=DIR (filled by `reprobox lock --base cpu --wheelhouse DIR` where the package "
        "index answers), or --base-image and --wheelhouse"
    )
    assert caught.value.exit_code == EXIT_ENVIRONMENT
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
