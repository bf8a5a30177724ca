"""`--cuda`: the CUDA lock on a base without CUDA, and the CUDA lock carrying the libraries the
fingerprint names (tests/integration/test_cuda_image_build.py builds the image and probes it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reprobox import cli, image
from reprobox.errors import UsageError
from reprobox.guest.fingerprint._probes_stack import _LIBRARY_WHEELS
from reprobox.jobfile import ImageSpec

ROOT = Path(__file__).resolve().parents[2]
CUDA_LOCK_FILE = ROOT / "env" / "requirements-cuda.lock"
VARIABLES = ("REPROBOX_BASE_IMAGE", "REPROBOX_OFFLINE_BASE", "REPROBOX_WHEELHOUSE", "REPROBOX_LOCK")


def test_the_cuda_image_goes_on_the_offline_base_unless_another_base_is_asked_for() -> None:
    none: dict[str, str] = {}
    assert image.cuda_build(None, base_image=None, lock=None, environ=none) == (
        "reprobox/offline-base:bookworm",
        "cuda",
    )
    renamed = {"REPROBOX_OFFLINE_BASE": "site/offline:1"}
    assert image.cuda_build(None, base_image=None, lock=None, environ=renamed)[0] == "site/offline:1"
    chosen = {**renamed, "REPROBOX_BASE_IMAGE": "site/base:2"}
    assert image.cuda_build(None, base_image=None, lock=None, environ=chosen)[0] == "site/base:2"
    job = ImageSpec(base="job/base:3")
    assert image.cuda_build(job, base_image=None, lock=None, environ=chosen)[0] == "job/base:3"
    assert image.cuda_build(job, base_image="flag/base:4", lock=None, environ=chosen)[0] == "flag/base:4"


@pytest.mark.parametrize("lock", ["cuda", "env/requirements-cuda.lock"])
def test_cuda_accepts_the_cuda_lock_named_either_way(lock: str) -> None:
    assert image.cuda_build(None, base_image="b:1", lock=lock, environ={}) == ("b:1", "cuda")


def test_cuda_with_another_lock_is_refused_naming_both_flags() -> None:
    refused = r"--cuda installs env/requirements-cuda.lock, and --lock asks for cpu"
    with pytest.raises(UsageError, match=refused):
        image.cuda_build(None, base_image=None, lock="cpu", environ={})


def test_build_cuda_plans_the_cuda_lock_on_the_offline_base(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)

    assert cli.main(["build", "--cuda", "--dry-run", "--json"]) == 0

    planned = json.loads(capsys.readouterr().out)
    assert planned["base_image"] == "reprobox/offline-base:bookworm"
    assert planned["lock"] == "env/requirements-cuda.lock"
    assert planned["labels"]["io.reprobox.lock"] == "env/requirements-cuda.lock"


def test_build_cuda_with_the_cpu_lock_is_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)

    assert cli.main(["build", "--cuda", "--lock", "cpu", "--dry-run"]) == 2

    assert "drop one of the two flags" in capsys.readouterr().err


def test_the_cuda_lock_pins_a_wheel_for_each_library_the_fingerprint_names() -> None:
    """The fingerprint reads a wheel's library version from the distribution that ships it; each one it
    looks for is in the CUDA lock, so the CUDA image's fingerprint names full versions."""
    pins = image.locked_pins(CUDA_LOCK_FILE)
    for library, stem in _LIBRARY_WHEELS.items():
        owners = [name for name in pins if re.fullmatch(re.escape(stem) + r"(-cu\d+)?", name)]
        assert owners, f"no wheel in {CUDA_LOCK_FILE.name} ships {library} (looked for {stem})"
    assert any(name.startswith("nvidia-nccl") for name in pins)
