"""An attestation is safe to publish: it never holds the writer's host name, user name, home folder, work
folder, runs folder or interpreter path, and the stack facts that decide the numerics all stay."""

from __future__ import annotations

import getpass
import json
import shutil
import socket
import sys
from pathlib import Path

import pytest
from publishing import EXAMPLES, JOBS, edit_attestation, fresh_copy, machine_strings_in

from reprobox import attest, cli
from reprobox.attest._public import Machine, public_predicate
from reprobox.guest.fingerprint import stack_digest
from reprobox.jobfile import load_job
from reprobox.reproduce import ReproduceOptions, reproduce
from reprobox.runner import RunOptions, execute
from reprobox.runtimes.local import LocalRuntime


@pytest.fixture(scope="module")
def at_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An author whose code, data and runs live in their home folder, with a job env naming it."""
    home = tmp_path_factory.mktemp("home") / "alice"
    code, data, runs = home / "papers" / "claims", home / "datasets" / "toy", home / "scratch" / "runs"
    shutil.copytree(EXAMPLES / "paper-claims", code)
    data.mkdir(parents=True)
    (data / "README").write_text("a data source outside the code folder\n")
    job = code / "job.yaml"
    job.write_text(  # written as people write them: relative, or through ${HOME}; the text is published
        job.read_text()
        + "data: [{source: ../../datasets/toy, target: /data, env: TOY_DATA}]\n"
        + "env: {CACHE_DIR: '${HOME}/.cache/claims'}\n"
    )
    mp = pytest.MonkeyPatch()
    mp.setenv("HOME", str(home))
    try:
        spec = load_job(job)
        records = [execute(spec, LocalRuntime(), RunOptions(runs_dir=runs)) for _ in range(2)]
        target = attest.attestation_path_for(spec.job_file)
        attest.write_attestation(target, attest.build_attestation(records))
    finally:
        mp.undo()
    return {"home": home, "code": code, "data": data, "runs": runs, "attestation": target}


def test_nothing_names_the_writer_or_their_machine(at_home: dict[str, Path]) -> None:
    statement = json.loads(at_home["attestation"].read_text())
    folders = [at_home["home"], at_home["code"], at_home["runs"], Path(sys.prefix), Path(sys.executable)]
    names = [socket.gethostname(), getpass.getuser()]
    assert machine_strings_in(statement, folders=folders, names=names) == []
    spec = statement["predicate"]["job"]["spec"]
    assert (spec["code"], spec["job_file"]) == (".", "job.yaml")
    assert spec["data"][0]["source"] == "<outside the code folder>/toy"
    assert spec["env"]["CACHE_DIR"] == "~/.cache/claims"
    assert "hostname" not in statement["predicate"]["fingerprint"]["hardware"]


def test_the_stack_facts_stay_and_the_stack_digest_still_holds(at_home: dict[str, Path]) -> None:
    fingerprint = attest.read_attestation(at_home["attestation"]).fingerprint
    assert fingerprint["software"]["torch"]["version"]
    assert fingerprint["software"]["threads"]["torch_intra_op"] >= 1
    assert fingerprint["hardware"]["cpu"]["model"]
    assert fingerprint["software"]["python"]["executable"] == Path(sys.executable).name
    assert stack_digest(fingerprint) == fingerprint["stack_digest"]


def test_a_published_attestation_reproduces_with_the_reviewers_own_folders(
    at_home: dict[str, Path], tmp_path: Path
) -> None:
    clone = fresh_copy(at_home["attestation"], tmp_path / "papers" / "claims")
    shutil.copytree(at_home["data"], tmp_path / "datasets" / "toy")  # where the job file says it is
    result = reproduce(clone, ReproduceOptions(runtime="local", runs_dir=tmp_path / "runs"))
    assert (result.verdict, result.exit_code) == ("bit-identical", 0), result.sentence
    assert any("env CACHE_DIR named a folder of the author's machine" in n for n in result.notes)
    assert not result.stack_differences


def test_an_attestation_from_before_still_reproduces(at_home: dict[str, Path], tmp_path: Path) -> None:
    """Written before paths were made relative: absolute folders and the host name in it."""
    clone = fresh_copy(at_home["attestation"], tmp_path / "papers" / "claims")
    shutil.copytree(at_home["data"], tmp_path / "datasets" / "toy")

    def as_before(statement: dict) -> None:
        predicate = statement["predicate"]
        predicate["job"]["spec"].update(code=str(at_home["code"]), job_file=str(at_home["code"] / "job.yaml"))
        predicate["fingerprint"]["hardware"]["hostname"] = "authors-workstation"
        predicate["fingerprint"]["software"]["python"]["executable"] = "/home/alice/venv/bin/python"

    edit_attestation(clone, as_before)
    result = reproduce(clone, ReproduceOptions(runtime="local", runs_dir=tmp_path / "runs"))
    assert (result.verdict, result.exit_code) == ("bit-identical", 0), result.sentence


def test_show_prints_what_would_be_published_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = tmp_path / "code"
    shutil.copytree(JOBS / "publish-small-npz", code)
    spec = load_job(code / "job.yaml")
    record = execute(spec, LocalRuntime(), RunOptions(runs_dir=tmp_path / "runs"))
    before = sorted(p.name for p in code.iterdir())
    assert cli.main(["attest", str(record.run_dir), "--show"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in code.iterdir()) == before  # nothing written
    assert cli.main(["attest", str(record.run_dir), "-q"]) == 0
    capsys.readouterr()
    assert json.loads((code / attest.ATTESTATION_NAME).read_text()) == shown


def test_what_the_job_produced_is_never_rewritten() -> None:
    """A tensor, checkpoint or claim may be called what the user or host is called; settings may not."""
    machine = Machine(host="w", user="alice", folders=(("/home/alice", "~"),))
    predicate = {
        "job": {"text": "env: {WHO: alice}", "spec": {"env": {"WHO": "alice", "CACHE": "/home/alice/c"}}},
        "execution": {"env": {"WHO": "alice"}, "seed": 0},
        "fingerprint": {"hardware": {"hostname": "w"}},
        "checkpoints": [{"path": "w", "tensors": [{"name": "w"}, {"name": "alice"}]}],
        "claims": [{"name": "alice", "file": "/home/alice/x"}],
    }
    public = public_predicate(predicate, machine, Path("/home/alice/paper"))
    assert public["checkpoints"] == predicate["checkpoints"]
    assert public["claims"] == predicate["claims"]
    assert public["job"]["text"] == "env: {WHO: alice}"  # published as written
    assert public["job"]["spec"]["env"] == {"WHO": "<withheld>", "CACHE": "~/c"}
    assert public["execution"]["env"] == {"WHO": "<withheld>"}
    assert public["fingerprint"] == {"hardware": {}}
