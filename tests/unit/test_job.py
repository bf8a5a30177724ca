"""job.yaml validation: every bad file is refused with file:line, field and fix; nothing is created."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.errors import SpecError
from reprobox.jobfile import load_job

BAD_JOBS = sorted((Path(__file__).parents[1] / "jobs" / "bad").glob("*.yaml"))
EXPECT = re.compile(r"^# expect: (?:(\d+): )?(.+)$", re.MULTILINE)


def expectations(path: Path) -> list[tuple[int | None, str]]:
    return [(int(line) if line else None, text) for line, text in EXPECT.findall(path.read_text())]


def test_there_are_enough_bad_job_cases() -> None:
    assert len(BAD_JOBS) >= 15


@pytest.mark.parametrize("job_file", BAD_JOBS, ids=[p.stem for p in BAD_JOBS])
def test_bad_job_is_refused_with_location_and_nothing_written(
    job_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs_dir = tmp_path / "runs"
    code = cli.main(["run", str(job_file), "--runtime", "local", "--runs-dir", str(runs_dir)])
    captured = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in captured.err
    assert not runs_dir.exists()
    lines = [line for line in captured.err.splitlines() if line.startswith("error: ")]
    expected = expectations(job_file)
    assert len(lines) == len(expected), captured.err
    for (line, text), message in zip(expected, lines, strict=True):
        where = f"{job_file}:{line}:" if line else f"{job_file}:"
        assert message.startswith(f"error: {where}"), message
        assert text in message


def test_all_problems_are_collected_at_once() -> None:
    path = Path(__file__).parents[1] / "jobs" / "bad" / "many-problems.yaml"
    with pytest.raises(SpecError) as info:
        load_job(path)
    assert [p.line for p in info.value.problems] == [5, 6, 8, 9]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def test_defaults_and_resolution(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    spec = load_job(write(tmp_path, "version: 1\nname: ok\ncommand: python train.py --lr 0.1\ncode: src\n"))
    assert spec.command == ("python", "train.py", "--lr", "0.1")
    assert spec.code == (tmp_path / "src").resolve()
    assert spec.seed == 0 and spec.timeout is None and spec.checkpoints == ()
    assert spec.determinism.algorithms and not spec.determinism.cudnn_benchmark
    assert spec.determinism.cublas_workspace_config == ":4096:8"
    assert not spec.network and spec.resources.pids == 4096


def test_folder_means_its_job_yaml(tmp_path: Path) -> None:
    write(tmp_path, "version: 1\nname: ok\ncommand: [python, t.py]\n")
    assert load_job(tmp_path).name == "ok"


def test_missing_file_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", str(tmp_path / "nope.yaml"), "--runtime", "local"]) == 2
    assert "nope.yaml: file not found" in capsys.readouterr().err


def test_command_variables_and_env_expansion(tmp_path: Path) -> None:
    text = (
        "version: 1\nname: ok\n"
        'command: [python, t.py, "${REPROBOX_OUTPUT_DIR}/x", "${DATA}", "$$HOME"]\n'
        "env:\n  DATA: /data\n  TOKEN: ${MY_TOKEN}\n"
    )
    spec = load_job(write(tmp_path, text), host_env={"MY_TOKEN": "s3cret"})
    assert spec.env == {"DATA": "/data", "TOKEN": "s3cret"}
    assert spec.to_json()["env"]["TOKEN"] == "<redacted>"
    assert "s3cret" not in str(spec.to_json())


def test_env_reference_to_unset_host_variable_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(
        SpecError, match=r"env.TOKEN: uses \$\{MY_TOKEN\}, which is not set in your environment"
    ):
        load_job(
            write(tmp_path, "version: 1\nname: ok\ncommand: [x]\nenv:\n  TOKEN: ${MY_TOKEN}\n"), host_env={}
        )


def test_container_fields(tmp_path: Path) -> None:
    text = (
        "version: 1\nname: ok\ncommand: [x]\nnetwork: true\n"
        "image: {base: 'debian:bookworm'}\n"
        "resources: {gpus: [0, 1], memory: 8g, cpus: 2, shm_size: 1g, pids: 256}\n"
        "data: [{source: ., target: /data, env: DATA_DIR}]\n"
        "trail: {every: 10}\n"
    )
    spec = load_job(write(tmp_path, text))
    assert spec.network and spec.image.base == "debian:bookworm"
    assert spec.resources.gpus == (0, 1) and spec.resources.memory == "8g" and spec.resources.cpus == 2.0
    assert spec.data[0].target == "/data" and spec.data[0].env == "DATA_DIR"
    assert spec.trail is not None and spec.trail.every == 10


def test_data_env_variables_are_usable_in_the_command(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    text = (
        "version: 1\nname: ok\n"
        'command: [python, t.py, --data, "${DATA_DIR}/train"]\n'
        "data: [{source: ./data, target: /data, env: DATA_DIR}]\n"
    )
    spec = load_job(write(tmp_path, text))
    assert spec.command == ("python", "t.py", "--data", "${DATA_DIR}/train")


def test_compare_ignore_accepts_globs_and_value_names(tmp_path: Path) -> None:
    text = (
        "version: 1\nname: ok\ncommand: [x]\n"
        'compare:\n  ignore: ["*.log", {file: trainer_state.json, key: "log_history.*.train_runtime"}]\n'
    )
    spec = load_job(write(tmp_path, text))
    assert [(r.file, r.key) for r in spec.compare.ignore] == [
        ("*.log", None),
        ("trainer_state.json", "log_history.*.train_runtime"),
    ]
    assert spec.to_json()["compare"]["ignore"][1]["key"] == "log_history.*.train_runtime"
