"""compare explains differing runs: which stack fields differ, and whether equality was expected."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fakes.fake_nvml import A100_SXM4_80GB, H100_SXM5_80GB, FakeNVML

from reprobox import cli
from reprobox.guest.fingerprint import collect, stack_digest
from reprobox.records.manifest import read_record, write_record

EXAMPLES = Path(__file__).parents[2] / "examples"
JOBS = Path(__file__).parents[1] / "jobs"
THREAD_FIELDS = {
    "software.threads.torch_intra_op",
    "software.threads.torch_inter_op",
    "software.threads.OMP_NUM_THREADS",
    "software.threads.MKL_NUM_THREADS",
    "software.threads.OPENBLAS_NUM_THREADS",
}


def compare_json(capsys: pytest.CaptureFixture[str], a: Path, b: Path) -> tuple[int, dict]:
    capsys.readouterr()  # drop what the runs printed
    code = cli.main(["compare", str(a), str(b), "--json"])
    return code, json.loads(capsys.readouterr().out)


def run_once(job: Path, runs: Path) -> Path:
    assert cli.main(["run", str(job), "--runtime", "local", "--runs-dir", str(runs), "-q"]) == 0
    return max(p for p in runs.glob("*/*") if p.is_dir() and not p.is_symlink())


@pytest.fixture(scope="module")
def unseeded_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two runs of a job whose weights come from os.urandom, on one stack: shared, and only read, by the
    tests below (a test that edits their records edits copies)."""
    runs = tmp_path_factory.mktemp("unseeded")
    return run_once(JOBS / "urandom-npz", runs / "a"), run_once(JOBS / "urandom-npz", runs / "b")


def test_one_thread_against_two_names_exactly_the_thread_fields(tmp_path: Path, capsys) -> None:
    one = run_once(EXAMPLES / "tiny-gpt" / "job.yaml", tmp_path)
    two = run_once(EXAMPLES / "tiny-gpt" / "job-2threads.yaml", tmp_path)
    code, data = compare_json(capsys, one, two)
    assert code == 1 and data["verdict"] == "different"
    explanation = data["explanation"]
    assert not explanation["same_stack"]
    numerics = {f["field"] for f in explanation["fields"] if f["affects_numerics"]}
    assert numerics == THREAD_FIELDS
    assert explanation["sentence"].startswith("different stack: bitwise equality is not expected across")
    assert "compare with tolerance (max abs difference" in explanation["sentence"]


def test_h100_against_a100_names_the_gpu_fields(unseeded_pair, tmp_path: Path, capsys) -> None:
    a, b = (shutil.copytree(run, tmp_path / run.parents[1].name, symlinks=True) for run in unseeded_pair)
    for run_dir, gpu in ((a, H100_SXM5_80GB), (b, A100_SXM4_80GB)):
        record = read_record(run_dir)
        fingerprint = collect(
            nvml=FakeNVML(gpus=(gpu,), driver_version="550.54.15", cuda_driver_version=12040)
        )
        fingerprint["hardware"]["cpu"] = record.fingerprint["hardware"]["cpu"]
        fingerprint["software"] = record.fingerprint["software"]
        fingerprint["stack_digest"] = stack_digest(fingerprint)
        write_record(run_dir, {**record.data, "fingerprint": fingerprint})
    code, data = compare_json(capsys, a, b)
    assert code == 1
    numerics = [f["field"] for f in data["explanation"]["fields"] if f["affects_numerics"]]
    assert numerics == [
        "hardware.gpus[0].name",
        "hardware.gpus[0].compute_capability",
        "hardware.gpus[0].sm_count",
    ]
    assert "GPU model" in data["explanation"]["sentence"]
    assert "bitwise equality is not expected" in data["explanation"]["sentence"]


def test_same_stack_nondeterminism_is_called_real(unseeded_pair, capsys) -> None:
    a, b = unseeded_pair
    code, data = compare_json(capsys, a, b)
    assert code == 1
    assert data["explanation"]["same_stack"]
    assert data["explanation"]["sentence"].startswith("same stack, different result: a real nondeterminism")
