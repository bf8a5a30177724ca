"""The Hugging Face Trainer and Lightning examples on the local runtime: `verify --runs 2` reproduces them.

They need the examples' frameworks in this environment (scripts/setup.sh installs them from the same
locks the images use); the test is skipped where they are missing.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from reprobox import image

pytestmark = pytest.mark.slow  # two trainings of each example: about a minute

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "hf-trainer": (
        "transformers",
        ["checkpoint-15/model.safetensors", "checkpoint-30/optimizer.pt", "model.safetensors"],
    ),
    "lightning": ("lightning", ["logs/version_0/metrics.csv", "logs/version_0/hparams.yaml"]),
}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_example_verifies_on_the_local_runtime(
    example: str, monkeypatch: pytest.MonkeyPatch, verify_example
) -> None:
    package, outputs = EXAMPLES[example]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed; scripts/setup.sh installs the examples' frameworks")
    assert version(package) == image.locked_pins(ROOT / "examples" / example / "requirements.lock")[package]
    # The job's `python` is found on PATH, as in an activated environment: this interpreter's.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    code, data = verify_example(example, "local")
    assert (code, data["verdict"]) == (0, "identical"), data.get("notes")
    assert set(outputs) <= {checkpoint["path"] for checkpoint in data["checkpoints"]}
    (claim,) = data["claims"]  # read from the framework's own files or log
    assert isinstance(claim["value"], float) and claim["error"] is None, claim
