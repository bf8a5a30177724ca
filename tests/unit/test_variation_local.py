"""verify --vary end to end on the local runtime: the matrix names exactly the factor that matters.

The jobs save their weights with NumPy (an .npz is hashed tensor by tensor like a torch checkpoint), all but
vary-threads, whose factor is torch's own thread count."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from reprobox import attest, cli
from reprobox.forensics.variation import FACTORS

JOBS = Path(__file__).parents[1] / "jobs"
ATTESTATION = "reprobox.attestation.json"


@pytest.fixture(scope="module")
def threads_published(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    """An author's `verify --vary threads,tz` of a copy of vary-threads, attested next to its job file:
    (exit code, JSON, the copy's folder). The blame and the reviewer's reproduction below read the same
    verify, so it runs once."""
    root = tmp_path_factory.mktemp("threads")
    shutil.copytree(JOBS / "vary-threads", root / "code")
    argv = ["verify", str(root / "code"), "--vary", "threads,tz", "--runtime", "local"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli.main([*argv, "--runs-dir", str(root / "author"), "--json", "-q"])
    return code, json.loads(printed.getvalue()), root / "code"


def test_a_thread_sensitive_job_is_blamed_on_threads_alone(threads_published) -> None:
    code, data, _code_dir = threads_published
    assert code == 1
    assert data["baseline"]["reproducible"]
    assert (data["sensitive"], data["invariant"]) == (["threads"], ["tz"])
    threads = data["factors"][0]
    assert threads["files"] == ["model.pt"] and threads["tensors"]
    assert threads["max_abs"] > 0
    used = threads["baseline"].removeprefix("threads=")  # unpinned: what torch picked in the baseline
    assert threads["varied"] == ("threads=1" if used != "1" else "threads=2")
    assert data["sentence"].startswith(f"sensitive to threads: pin `determinism.threads: {used}`")


def test_a_time_zone_sensitive_job_is_blamed_on_tz_alone(vary_job) -> None:
    code, data = vary_job("vary-tz", "threads,tz")
    assert code == 1
    assert (data["sensitive"], data["invariant"]) == (["tz"], ["threads"])
    tz = data["factors"][1]
    assert tz["files"] == ["metrics.json"] and tz["values_changed"] == ["snapshot"] and not tz["tensors"]
    assert data["sentence"].startswith("sensitive to tz: pin `env: {TZ: UTC}`")
    # the baseline is bit-identical: its runs are attested, the sensitive factor recorded as such
    attestation = attest.read_attestation(Path(data["attestation"]))
    assert attestation.verified_runs == 2
    assert attestation.factors_with_status("sensitive") == ["tz"]
    assert attestation.factors_with_status("invariant") == ["threads"]
    row = (attestation.variation or {})["factors"][1]
    assert (row["baseline"], row["varied"]) == ("the runtime's TZ", "TZ=RBX-5:30")
    assert row["files"] == ["metrics.json"]


def test_an_invariant_job_passes_and_says_what_was_not_varied(tmp_path: Path, vary_job) -> None:
    code, data = vary_job("vary-invariant", "threads,tz,env-order,world-size")
    assert code == 0
    assert data["invariant"] == ["threads", "tz", "env-order"]
    assert data["unsupported"] == ["world-size"]
    assert "not varied: world-size" in data["sentence"]
    assert "combination" not in data  # tried, and all at once changed nothing either
    attestation = attest.read_attestation(tmp_path / ATTESTATION)
    assert data["attestation"] == str(tmp_path / ATTESTATION)
    variation = attestation.variation or {}
    assert variation["runtime"] == "local"
    assert variation["invariant"] == ["threads", "tz", "env-order"] and variation["sensitive"] == []
    assert attestation.factors_with_status("not applicable") == ["world-size"]
    assert [row["factor"] for row in variation["factors"]] == ["threads", "tz", "env-order", "world-size"]
    assert attestation.runtime == "local" and attestation.verified_runs == 2


def test_no_attestation_leaves_the_job_folder_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    capsys.readouterr()
    job = tmp_path / "job"
    shutil.copytree(JOBS / "vary-invariant", job)
    argv = ["verify", str(job), "--vary", "tz", "--runtime", "local", "--runs-dir", str(tmp_path / "r")]
    assert cli.main([*argv, "--no-attestation", "--json", "-q"]) == 0
    assert "attestation" not in json.loads(capsys.readouterr().out)
    assert not (job / ATTESTATION).exists()
    assert cli.main([*argv, "--json", "-q"]) == 0  # by default next to the job file, as plain verify
    assert json.loads(capsys.readouterr().out)["attestation"] == str(job / ATTESTATION)
    assert attest.read_attestation(job / ATTESTATION).factors_with_status("invariant") == ["tz"]


def test_vary_list_documents_every_factor(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli.main(["verify", str(JOBS / "vary-tz"), "--vary", "list"]) == 0
    text = capsys.readouterr().out
    assert "threads:" in text and "RBX-5:30" in text and "file-order:" in text


def test_unknown_factor_is_refused_before_any_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = cli.main(["verify", str(JOBS / "vary-tz"), "--vary", "colour", "--runs-dir", str(tmp_path / "r")])
    assert code == 2
    assert not (tmp_path / "r").exists()


def test_a_job_that_lists_its_data_unsorted_is_blamed_on_file_order(vary_job) -> None:
    code, data = vary_job("vary-file-order", "file-order,tz")
    assert code == 1
    assert (data["sensitive"], data["invariant"]) == (["file-order"], ["tz"])
    assert data["factors"][1]["files"] == ["model.npz"] and data["factors"][1]["tensors"]
    assert data["sentence"].startswith("sensitive to file-order: sort directory listings")


def test_a_job_that_sorts_its_listing_is_invariant_to_file_order(vary_job) -> None:
    code, data = vary_job("vary-file-order/sorted.yaml", "file-order")
    assert code == 0
    assert data["invariant"] == ["file-order"]


def test_reproduce_names_the_differing_factor_the_author_found_sensitive(
    threads_published, tmp_path: Path
) -> None:
    from reprobox.reproduce import BIT_IDENTICAL, DIFFERENT_STACK, ReproduceOptions, reproduce

    code, data, code_dir = threads_published
    assert code == 1
    published = Path(data["attestation"])
    assert published == code_dir / ATTESTATION  # sensitive, yet the baseline is attested
    # the baseline is the plain run: a reviewer's plain rerun on the author's stack matches it
    same = reproduce(published, ReproduceOptions(runtime="local", runs_dir=tmp_path / "same"))
    assert same.verdict == BIT_IDENTICAL, same.sentence
    result = reproduce(published, ReproduceOptions(runtime="local", runs_dir=tmp_path / "rev", threads=1))
    assert result.verdict == DIFFERENT_STACK
    assert result.sentence.endswith("(the author found it sensitive to threads)")
    assert "the author verified the result invariant to tz (reprobox verify --vary)" in result.notes
    assert any(
        n.startswith("threads differs here, and the author found the result sensitive") for n in result.notes
    )
    # the report shows the author's matrix as a table, beside whether each factor differs here
    markdown = next(p for p in result.reports if p.suffix == ".md").read_text()
    assert "## The author's variation matrix" in markdown
    assert re.search(
        r"\| \*\*threads\*\* \| sensitive \| threads=\d+ \| threads=\d+ \| yes \| files: model\.pt", markdown
    )
    assert (
        "| tz | invariant | the runtime's TZ | TZ=RBX-5:30 | not known (not in the fingerprint) | - | - |"
        in markdown
    )
    html = next(p for p in result.reports if p.suffix == ".html").read_text()
    assert "<tr class='diff'><td>threads</td><td>sensitive</td>" in html
    assert "<tr><td>tz</td><td>invariant</td>" in html


def test_a_job_seeded_from_its_host_name_is_blamed_on_hostname_alone(vary_job) -> None:
    code, data = vary_job("vary-hostname", "hostname,tz,time", "--no-attestation")
    assert code == 1, data["sentence"]
    assert (data["sensitive"], data["invariant"]) == (["hostname"], ["tz", "time"])
    hostname = next(row for row in data["factors"] if row["factor"] == "hostname")
    assert hostname["files"] == ["model.npz"] and sorted(hostname["tensors"]) == ["bias", "weight"]
    assert data["sentence"].startswith("sensitive to hostname: keep the host name out of outputs and seeds")


def test_a_job_no_factor_reaches_passes_vary_all_and_its_attestation_lists_every_factor(vary_job) -> None:
    code, data = vary_job("vary-nothing-matters", "all")
    assert code == 0, data["sentence"]
    not_applicable = ["workers", "world-size"]  # the job reads no worker count and does not use torchrun
    varied = [f.name for f in FACTORS if f.name not in ("user", *not_applicable)]
    assert data["invariant"] == varied and data["sensitive"] == [] and "combination" not in data
    attestation = attest.read_attestation(Path(data["attestation"]))
    assert attestation.verified_runs == 2
    assert attestation.factors_with_status("invariant") == varied
    assert attestation.factors_with_status("unsupported") == ["user"]
    assert attestation.factors_with_status("not applicable") == not_applicable
