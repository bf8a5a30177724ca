"""`reprobox init -- COMMAND`: a job file from one short observed run of a repository as its authors left
it (a script in a subfolder importing the repository's own package, data its git ignores read by a
relative path, outputs written next to the code, TensorBoard files and a log beside them, variables
read from the shell), and the verdict `verify` then gives; every refusal writes nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from foreign_repos import make_repo

from reprobox import cli
from reprobox.jobfile import load_job
from reprobox.scaffold._classify import _tool_settings


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    scripts = make_repo(tmp_path / "repo")
    monkeypatch.chdir(scripts)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "repo"))  # how its README makes mypkg importable
    monkeypatch.setenv("TRAIN_MODE", "fast")
    monkeypatch.setenv("WANDB_API_KEY", "s3cr3t-value")
    return scripts


def init(capsys: pytest.CaptureFixture[str], *command: str, extra: tuple[str, ...] = ()) -> tuple[int, dict]:
    capsys.readouterr()
    code = cli.main(["init", "--json", "-q", *extra, "--", *command])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_a_repository_as_its_authors_left_it(repo: Path, capsys) -> None:
    (repo / "out").mkdir()  # what an earlier run of the author's left (git ignores it): no input
    (repo / "out" / "model-fast.pt").write_bytes(b"an earlier run's weights")
    code, data = init(capsys, sys.executable, "train.py", "--steps", "3", extra=("--seconds", "30"))
    assert code == 0, data
    text = (repo / "job.yaml").read_text()
    job = load_job(repo / "job.yaml")
    assert job.code == repo.parent and job.cwd == "scripts" and job.workdir == "copy"
    assert job.env["PYTHONPATH"] == ".."
    assert job.env["TRAIN_MODE"] == "fast"
    assert "s3cr3t-value" not in text and 'WANDB_API_KEY: "${WANDB_API_KEY}"' in text
    assert [(d.source, d.target) for d in job.data] == [(repo / "data", "/data/data")]
    ignored = {rule.file for rule in job.compare.ignore}
    assert ignored == set()  # the event files and the log are compared, their stamps excused
    assert data["outputs"]["checkpoint"] == ["out/model-fast.pt"]
    assert data["written"] == [str(repo / "job.yaml")]  # torch is in the image: no requirements

    capsys.readouterr()
    code = cli.main(["verify", "job.yaml", "--runtime", "local", "--no-attestation", "--json", "-q"])
    verdict = json.loads(capsys.readouterr().out)
    assert code == 0, verdict["sentence"]
    assert verdict["grade"] == "reproduced"  # the model equal; the event file's and the log's stamps excused
    assert {c["path"] for c in verdict["checkpoints"]} >= {"scripts/out/model-fast.pt"}
    assert (repo / "out" / "model-fast.pt").read_bytes() == b"an earlier run's weights"  # never written


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (("no-such-program", "x"), "no-such-program: no such command on PATH"),
        ((), "init needs the command to observe after --"),
    ],
)
def test_bad_commands_are_refused(repo: Path, capsys, command: tuple[str, ...], message: str) -> None:
    code = cli.main(["init", "--", *command])
    assert code == 2 and message in capsys.readouterr().err
    assert listing(repo) == ["data", "train.py"]


def test_an_existing_job_file_is_kept_without_force(repo: Path, capsys) -> None:
    (repo / "job.yaml").write_text("mine\n")
    code = cli.main(["init", "--", sys.executable, "train.py", "--steps", "1"])
    assert code == 2 and "job.yaml exists; pass --force" in capsys.readouterr().err
    assert (repo / "job.yaml").read_text() == "mine\n"


def test_a_command_that_fails_at_once_writes_nothing(repo: Path, capsys) -> None:
    code = cli.main(["init", "--", sys.executable, "train.py"])  # --steps is required: argparse exits 2
    err = capsys.readouterr().err
    assert code == 3 and "failed in its short run (exited with status 2)" in err
    assert "the following arguments are required: --steps" in err
    assert listing(repo) == ["data", "train.py"]


def test_a_run_that_writes_nothing_is_refused(repo: Path, capsys) -> None:
    code = cli.main(["init", "--", sys.executable, "-c", "print('hello')"])
    assert code == 3 and "wrote no file in its short run" in capsys.readouterr().err
    assert listing(repo) == ["data", "train.py"]


def test_a_data_folder_named_on_the_command_line_becomes_a_variable(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """`--data /datasets/numbers` reads a folder elsewhere: it is mounted read-only at /data/numbers and
    the command names it as ${NUMBERS_DIR}, so the data may lie anywhere on the next machine."""
    data = tmp_path / "datasets" / "numbers"
    data.mkdir(parents=True)
    (data / "values.txt").write_text("1 2 3\n")
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "total.py").write_text(
        "import pathlib, sys\n"
        "values = (pathlib.Path(sys.argv[2]) / 'values.txt').read_text().split()\n"
        "pathlib.Path('total.txt').write_text(str(sum(map(int, values))))\n"
    )
    monkeypatch.chdir(folder)
    code, data_json = init(capsys, sys.executable, "total.py", "--data", str(data))
    assert code == 0, data_json
    job = load_job(folder / "job.yaml")
    assert job.command[-2:] == ("--data", "${NUMBERS_DIR}")
    assert [(d.source, d.target, d.env) for d in job.data] == [(data, "/data/numbers", "NUMBERS_DIR")]
    capsys.readouterr()
    assert cli.main(["run", "job.yaml", "--runtime", "local", "--json", "-q"]) == 0
    run_dir = Path(json.loads(capsys.readouterr().out)["run_dir"])
    assert (run_dir / "outputs" / "total.txt").read_text() == "6"


def test_packages_loaded_for_the_job_and_its_tools_settings_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """torch.utils.tensorboard needs tensorboard though the script imports torch alone; W&B reads its
    variables in bulk, never one by one: both still belong in the job file."""
    pytest.importorskip("tensorboard")
    pytest.importorskip("wandb")
    (tmp_path / "train.py").write_text(
        "import torch\nimport wandb.sdk.lib.runid\nfrom torch.utils.tensorboard import SummaryWriter\n"
        "writer = SummaryWriter()\nwriter.add_scalar('loss', 1.0, 0)\nwriter.close()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # no package index: the lock fails fast, the job file says so
    code, data = init(capsys, sys.executable, "train.py", extra=("--seconds", "30"))
    assert code == 0, data
    wanted = (tmp_path / "requirements.in").read_text()
    assert "\ntensorboard==" in wanted and "\nwandb==" in wanted
    text = (tmp_path / "job.yaml").read_text()
    assert 'WANDB_MODE: "offline"' in text
    assert "the packages could not be locked here" in text


def test_a_tools_variables_count_only_when_the_run_loaded_the_tool() -> None:
    environ = {
        "WANDB_MODE": "offline",
        "MLFLOW_TRACKING_URI": "./mlruns",
        "HF_HOME": "/cache",
        "PATH": "/bin",
    }
    loaded = {"wandb": "0.31.0", "mlflow_skinny": "3.17.2"}
    assert _tool_settings(loaded, environ) == {"WANDB_MODE", "MLFLOW_TRACKING_URI"}
    assert _tool_settings({}, environ) == set()
