"""Hostile job files and arguments: refused with exit 2 and a sentence, never a crash, hang or leak."""

from __future__ import annotations

import json
import os
import string
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobox import cli, verify
from reprobox.errors import SpecError, UsageError
from reprobox.jobfile import REDACTED, load_job, redact_env, redact_text, redact_values
from reprobox.runner import RunOptions
from reprobox.runtimes.base import RunOutcome, RunPlan

SECRET = "hunter2-s3cret-value"
HEADER = "version: 1\nname: bounds\ncommand: [python, t.py]\n"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def write(folder: Path, text: str, name: str = "job.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def refuse(tmp_path: Path, text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_job(write(tmp_path, text), host_env={})
    return info.value


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


# -- secrets -----------------------------------------------------------------------------------------


SECRET_JOB = (
    "version: 1\nname: secret\n"
    'command: [python, t.py, "${DB_URL}", "--url=pg://u:${DB_URL}@h"]\n'
    "env:\n  DB_URL: ${AWS_SECRET_ACCESS_KEY}\n  CONN: pg://u:${DB_PASSWORD}@host\n  TOKEN: literal-token\n"
    "  PLAIN: ${HOME_DIR}\n"
)
SECRET_HOST = {"AWS_SECRET_ACCESS_KEY": SECRET, "DB_PASSWORD": "pw-98765", "HOME_DIR": "/home/me"}


def test_secret_values_are_redacted_under_any_name(tmp_path: Path) -> None:
    spec = load_job(write(tmp_path, SECRET_JOB), host_env=SECRET_HOST)
    assert spec.env["DB_URL"] == SECRET  # the job itself still gets the value
    resolved = json.dumps(spec.to_json())
    for value in (SECRET, "pw-98765", "literal-token"):
        assert value not in resolved
        assert value not in repr(spec)
    assert "secrets" not in spec.to_json()
    env = spec.to_json()["env"]
    assert env["DB_URL"] == REDACTED and env["CONN"] == f"pg://u:{REDACTED}@host"
    assert env["PLAIN"] == "/home/me"  # not secret: kept


def test_redaction_reaches_guest_environment_and_command() -> None:
    secrets = (SECRET,)
    assert redact_env({"DB_URL": SECRET, "A": "x"}, secrets) == {"DB_URL": REDACTED, "A": "x"}
    record = {"command": ["python", f"--url={SECRET}"], "nested": [{"k": SECRET}], "n": 3}
    assert redact_values(record, secrets) == {
        "command": ["python", f"--url={REDACTED}"],
        "nested": [{"k": REDACTED}],
        "n": 3,
    }
    assert redact_text("ab", ("ab",)) == REDACTED  # a short secret is redacted when it is the whole value
    assert redact_text("cabd", ("ab",)) == "cabd"  # but not inside other text, where it would mangle


def test_secret_never_lands_in_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("DB_PASSWORD", "pw-98765")
    monkeypatch.setenv("HOME_DIR", "/home/me")
    job = write(tmp_path, SECRET_JOB.replace("python, t.py", "python, -c, 'print(1)'"))
    runs = tmp_path / "runs"
    code, err = run_cli(["run", str(job), "--runtime", "local", "--runs-dir", str(runs), "-q"], capsys)
    assert code == 0, err
    manifest = next(runs.glob("secret/*/manifest.json")).read_text()
    assert SECRET not in manifest and "pw-98765" not in manifest
    data = json.loads(manifest)
    assert f"--url=pg://u:{REDACTED}@h" in data["command"]
    assert data["environment"]["DB_URL"] == REDACTED
    assert SECRET not in err
    guest = next(runs.glob("secret/*/.reprobox/guest.json")).read_text()  # the guest's own record too
    assert SECRET not in guest and "pw-98765" not in guest


# -- bounds and types ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "field", "text"),
    [
        ("timeout: .nan\n", "timeout", "not .nan"),
        ("timeout: .inf\n", "timeout", "not .inf"),
        ("timeout: 1.0e+12\n", "timeout", "at most"),
        ("resources: {cpus: .inf}\n", "resources.cpus", "not .inf"),
        ("resources: {cpus: .nan}\n", "resources.cpus", "not .nan"),
        ("resources: {cpus: 0.001}\n", "resources.cpus", "from 0.01"),
        ("resources: {memory: 1b}\n", "resources.memory", "outside 6m"),
        ("resources: {memory: 5m}\n", "resources.memory", "outside 6m"),
        ("resources: {memory: 99999999999g}\n", "resources.memory", "outside"),
        ("resources: {shm_size: 0}\n", "resources.shm_size", "outside"),
        ("resources: {pids: 100000000000000000000}\n", "resources.pids", "21 digits"),
        ("launcher: {type: torchrun, nproc_per_node: 100000}\n", "launcher.nproc_per_node", "1 to 1024"),
        ("determinism: {threads: 1000000}\n", "determinism.threads", "at most 4096"),
        (f"env: {{BIG: {'x' * 140_000}}}\n", "env.BIG", "a process can be given"),
        ('checkpoints: ["a\\0b"]\n', "checkpoints.0", "NUL byte"),
        ('env: {"A\\0B": x}\n', "env.A", "NUL byte"),
        ('command: [python, "a\\0"]\n', "command.1", "NUL byte"),
        ("data: [{source: ., target: //reprobox/code}]\n", "data.0.target", "reprobox or the kernel"),
        ("data: [{source: ., target: /data/../reprobox}]\n", "data.0.target", "reprobox or the kernel"),
        ("data: [{source: ., target: /proc/self}]\n", "data.0.target", "reprobox or the kernel"),
        ("data: [{source: ., target: /data, env: PYTHONHASHSEED}]\n", "data.0.env", "set by reprobox"),
        ("data: [{source: ., target: /data, env: REPROBOX_SEED}]\n", "data.0.env", "set by reprobox"),
        (f"data: [{{source: ., target: /{'d' * 256}}}]\n", "data.0.target", "more than the 255"),
        (f"data: [{{source: {'s' * 300}, target: /data}}]\n", "data.0.source", "more than the 255"),
        (f"image: {{requirements: {'r/' * 2100}x}}\n", "image.requirements", "shorten the path"),
    ],
)
def test_out_of_bounds_values_name_field_and_fix(tmp_path: Path, extra: str, field: str, text: str) -> None:
    header = HEADER if not extra.startswith("command") else "version: 1\nname: bounds\n"
    error = refuse(tmp_path, header + extra)
    messages = [f"{p.field}: {p.message}" for p in error.problems]
    assert any(m.startswith(field) and text in m for m in messages), messages


def test_name_longer_than_a_file_name_is_refused(tmp_path: Path) -> None:
    error = refuse(tmp_path, f"version: 1\nname: {'n' * 300}\ncommand: [x]\n")
    assert "at most 128" in str(error)


def test_sane_values_still_load(tmp_path: Path) -> None:
    spec = load_job(
        write(
            tmp_path,
            HEADER + "timeout: 3600\nresources: {cpus: 0.5, memory: 6m, pids: 32768, shm_size: 1g}\n"
            "data: [{source: ., target: /data/../inputs, env: DATA_DIR}]\n",
        ),
        host_env={},
    )
    assert spec.timeout == 3600.0 and spec.resources.memory == "6m"
    assert spec.data[0].target == "/inputs"


@pytest.mark.parametrize(
    "text",
    [
        "command: " + "[" * 20_000 + "]" * 20_000 + "\n",
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
        ),
        "command: &c [python, *c]\n",
        "version: 1\nname: ts\ncommand: [x]\nseed: !!timestamp 2001-13-40\n",
        "version: 1\nname: int\ncommand: [x]\nseed: !!int nine\n",
    ],
    ids=["nested-20000", "billion-laughs", "self-alias", "bad-timestamp", "bad-int-tag"],
)
def test_bomb_files_are_refused_quickly(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write(tmp_path, text)
    with pytest.raises(SpecError):
        load_job(job, host_env={})
    runs = tmp_path / "runs"
    code, err = run_cli(["run", str(job), "--runtime", "local", "--runs-dir", str(runs)], capsys)
    assert code == 2 and str(job) in err
    assert not runs.exists()


def test_unreadable_job_files_are_refused_with_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "dir-named"
    (folder / "job.yaml").mkdir(parents=True)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    cases = [folder, folder / "job.yaml", fifo, Path("/dev/zero")]
    if not IS_ROOT:
        locked = write(tmp_path, HEADER, "locked.yaml")
        locked.chmod(0)
        cases.append(locked)
    for job in cases:
        result: list[int] = []
        worker = threading.Thread(
            target=lambda job=job, result=result: result.append(
                cli.main(["run", str(job), "--runtime", "local"])
            ),
            daemon=True,
        )
        worker.start()
        worker.join(timeout=20)
        assert result == [2], f"{job} was not refused at once"
        err = capsys.readouterr().err
        assert "Traceback" not in err and "error: " in err and str(job.name) in err


# -- arguments ---------------------------------------------------------------------------------------


@pytest.fixture
def job(tmp_path: Path) -> Path:
    return write(tmp_path, "version: 1\nname: ok\ncommand: [python, -c, 'print(1)']\n")


@pytest.mark.parametrize(
    ("flags", "text"), [(["--runs", "101"], "from 2 to 100"), (["--runs", "1"], "from 2")]
)
def test_run_count_is_bounded(
    job: Path, tmp_path: Path, flags: list[str], text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    code, err = run_cli(["verify", str(job), "--runtime", "local", "--runs-dir", str(runs), *flags], capsys)
    assert code == 2 and text in err
    assert not runs.exists()


def test_bad_signing_key_is_refused_before_any_run(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    garbage = write(tmp_path, "not a key", "garbage.key")
    for key in (tmp_path / "missing.key", garbage, tmp_path):
        argv = ["verify", str(job), "--runtime", "local", "--runs-dir", str(runs), "--sign", str(key)]
        code, err = run_cli(argv, capsys)
        assert code == 2 and str(key) in err
    assert not runs.exists()


def test_unwritable_attestation_path_is_refused_before_any_run(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    target = tmp_path / "no" / "such" / "dir" / "att.json"
    argv = ["verify", str(job), "--runtime", "local", "--runs-dir", str(runs), "--attestation", str(target)]
    code, err = run_cli(argv, capsys)
    assert code == 2 and "--attestation" in err and str(target) in err
    assert not runs.exists()


def test_runs_dir_that_is_a_file_is_refused(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = write(tmp_path, "", "a-file")
    for runs in (blocker, blocker / "below"):
        code, err = run_cli(["run", str(job), "--runtime", "local", "--runs-dir", str(runs)], capsys)
        assert code == 2 and "--runs-dir" in err and "not a folder" in err
    assert blocker.read_text() == ""


@pytest.mark.skipif(IS_ROOT, reason="root writes into read-only folders")
def test_read_only_runs_dir_is_refused(job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    runs.chmod(0o555)
    try:
        code, err = run_cli(["run", str(job), "--runtime", "local", "--runs-dir", str(runs)], capsys)
    finally:
        runs.chmod(0o755)
    assert code == 2 and "not writable" in err


def test_report_to_an_unwritable_path_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for flag, target in (("--html", tmp_path / "missing" / "r.html"), ("--markdown", tmp_path)):
        code, err = run_cli(["report", str(tmp_path / "run-a"), flag, str(target)], capsys)
        assert code == 2 and flag in err and str(target) in err


# -- verify makes run directories lazily -----------------------------------------------------------------


class _CountingRuntime:
    """Counts the run directories that exist when each run starts; every run fails (no guest result)."""

    name = "fake"

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self.seen: list[int] = []

    def run(self, plan: RunPlan, sink: Any, stop: threading.Event | None) -> RunOutcome:
        self.seen.append(len([p for p in (self.runs_dir / plan.job.name).iterdir() if p.name[0].isdigit()]))
        return RunOutcome(exit_code=1)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


def test_parallel_verify_creates_run_dirs_only_when_runs_start(tmp_path: Path) -> None:
    job_file = write(tmp_path, "version: 1\nname: lazy\ncommand: [x]\n")
    spec = load_job(job_file, host_env={})
    runs = tmp_path / "runs"
    runtime = _CountingRuntime(runs)
    options = verify.VerifyOptions(runs=verify.MAX_RUNS, parallel=2)
    _, records = verify.verify(spec, runtime, RunOptions(runs_dir=runs), options)  # type: ignore[arg-type]
    made = [p for p in (runs / "lazy").iterdir() if p.name[0].isdigit()]
    assert len(made) <= 2 and len(records) == len(made)  # a failure stops the rest before they start
    assert max(runtime.seen) <= options.parallel  # never more folders than runs side by side


def test_library_refuses_too_many_runs(tmp_path: Path) -> None:
    spec = load_job(write(tmp_path, HEADER), host_env={})
    with pytest.raises(UsageError, match="--runs must be from 2 to 100"):
        verify.verify(spec, None, RunOptions(runs_dir=tmp_path / "r"), verify.VerifyOptions(runs=10**6))  # type: ignore[arg-type]
    assert not (tmp_path / "r").exists()


# -- property: anything at all is refused with a SpecError -----------------------------------------------

KEYS = st.sampled_from(
    ["version", "name", "command", "env", "data", "resources", "timeout", "seed", "launcher", "x", "\0"]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=string.printable + "\0\u00e9", max_size=20)
)
STRUCTURES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(max_size=5), inner, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=STRUCTURES)
def test_any_yaml_structure_loads_or_raises_spec_error(
    tmp_path: Path, document: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, yaml.safe_dump(document, allow_unicode=True))
    try:
        load_job(path, host_env={})
    except SpecError as exc:
        assert exc.exit_code == 2 and exc.lines()
    else:
        return  # a valid job (rare): nothing to refuse
    runs = tmp_path / "runs"
    code, err = run_cli(["run", str(path), "--runtime", "local", "--runs-dir", str(runs)], capsys)
    assert code == 2 and "error: " in err
    assert not runs.exists()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_any_bytes_are_refused_by_the_cli_without_a_traceback(
    tmp_path: Path, raw: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(raw)
    with pytest.raises(SpecError):
        load_job(path, host_env={})
    runs = tmp_path / "runs"
    code, err = run_cli(["run", str(path), "--runtime", "local", "--runs-dir", str(runs)], capsys)
    assert code == 2 and "error: " in err
    assert not runs.exists()
