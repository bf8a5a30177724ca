"""The CUDA image built where no registry answers, as an air-gapped GPU cluster builds it: the CUDA lock's
wheels (torch's CUDA build, with the CUDA runtime, cuBLAS, cuDNN and NCCL as nvidia-* wheels) on the
offline base, with no network in any build step. Inside it, on a machine without a GPU, the fingerprint
names the CUDA, cuDNN and NCCL the image carries, at the versions the lock pins.

It runs only where the CUDA lock's wheels are cached (about 2.7 GB), in $REPROBOX_WHEELHOUSE or in
$REPROBOX_CACHE/wheelhouse-cuda; the image (about 5 GB) is reused when it is already there, else built
(minutes, about 24 GB of disk at the build's peak, so it skips where the engine's disk has less) and
removed afterwards.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli, image
from reprobox.engine import Engine, ImageInfo
from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.jobfile import ImageSpec
from reprobox.runtimes.docker import ensure_image

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CUDA_LOCK_FILE = ROOT / image.LOCKS[image.CUDA_LOCK]
CACHE = Path(os.environ.get("REPROBOX_CACHE", Path.home() / ".cache" / "reprobox"))
FILL = "reprobox lock --wheelhouse ~/.cache/reprobox/wheelhouse-cuda --locked env/requirements-cuda.lock"


@pytest.fixture(scope="module")
def cuda_wheelhouse() -> Path:
    """A wheelhouse holding every wheel of the CUDA lock, or the test skips."""
    for candidate in (os.environ.get(image.WHEELHOUSE_VARIABLE), str(CACHE / "wheelhouse-cuda")):
        if not candidate:
            continue
        try:
            image.plan_build(lock=image.CUDA_LOCK, wheelhouse=Path(candidate), environ={})
        except (EnvironmentProblem, UsageError):
            continue
        return Path(candidate)
    pytest.skip(f"the CUDA lock's wheels are not cached here; `{FILL}` fetches them (2.7 GB)")


@pytest.fixture(scope="module")
def cuda_image(engine: Engine, offline_base: str, cuda_wheelhouse: Path, created: Any) -> ImageInfo:
    """The image `reprobox build --cuda` makes, built with no network at all (or reused)."""
    offline = {"REPROBOX_OFFLINE_BASE": offline_base}
    base, lock = image.cuda_build(None, base_image=None, lock=None, environ=offline)
    plan = image.plan_build(base_image=base, lock=lock, wheelhouse=cuda_wheelhouse, environ={})
    there = engine.image_exists(plan.tag)
    storage = engine.image_storage()
    peak = int(image.build_space_floor(plan.wheels) * image.MEASURED_PEAK_OVER_FLOOR)
    if not there and storage is not None and storage[1] < peak:
        pytest.skip(
            f"building the CUDA image takes about {peak / 1e9:.0f} GB of disk at its peak; "
            f"{storage[0]} has {storage[1] / 1e9:.1f} GB free"
        )
    info = ensure_image(
        ImageSpec(), engine=engine, base_image=base, lock=lock, wheelhouse=cuda_wheelhouse, network=False
    )
    if not there:
        created.images.append(plan.tag)
    return info


def test_the_cuda_image_is_the_cuda_lock_on_the_offline_base(
    cuda_image: ImageInfo, offline_base: str
) -> None:
    assert cuda_image.labels["io.reprobox.base"] == offline_base
    assert cuda_image.labels["io.reprobox.lock"] == "env/requirements-cuda.lock"
    assert cuda_image.labels["io.reprobox.offline"] == "true"


def test_its_fingerprint_names_the_cuda_cudnn_and_nccl_it_carries_without_a_gpu(
    cuda_image: ImageInfo,
    cuda_wheelhouse: Path,
    offline_base: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv(image.BASE_IMAGE_VARIABLE, raising=False)
    monkeypatch.setenv("REPROBOX_OFFLINE_BASE", offline_base)
    command = ["fingerprint", "--runtime", "docker", "--cuda", "--wheelhouse", str(cuda_wheelhouse)]

    assert cli.main([*command, "--json", "-q"]) == 0

    software = json.loads(capsys.readouterr().out)["software"]
    assert software["image"]["id"] == cuda_image.id  # `--cuda` found the image built above
    pins = image.locked_pins(CUDA_LOCK_FILE)
    runtime, cudnn, cublas = pins["nvidia-cuda-runtime"], pins["nvidia-cudnn-cu13"], pins["nvidia-cublas"]
    assert software["torch"]["version"].startswith(pins["torch"] + "+cu")
    assert software["torch"]["cuda"] == ".".join(runtime.split(".")[:2])
    assert software["torch"]["cudnn"] == ".".join(cudnn.split(".")[:3])
    assert software["nccl"] == pins["nvidia-nccl-cu13"]
    libraries = software["libraries"]
    assert {name: libraries[name]["version"] for name in ("cudart", "cudnn", "cublas", "cublasLt")} == {
        "cudart": runtime,
        "cudnn": cudnn,
        "cublas": cublas,
        "cublasLt": cublas,
    }
    # CUDA comes from the wheels: the base has none.
    assert all("/site-packages/nvidia/" in entry["path"] for entry in libraries.values())
