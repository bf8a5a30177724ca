"""`verify --vary --html/--markdown` on the local runtime: the matrix as a table, the sensitive row
marked; report paths checked before any run; `--vary list` without a job."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reprobox import cli

JOBS = Path(__file__).parents[1] / "jobs"


def test_the_matrix_report_marks_the_sensitive_factor_and_names_what_changed(
    tmp_path: Path, vary_job
) -> None:
    page, notes = tmp_path / "matrix.html", tmp_path / "matrix.md"
    code, data = vary_job("vary-tz", "tz,threads,world-size", "--html", str(page), "--markdown", str(notes))
    assert code == 1
    assert data["reports"] == [str(page), str(notes)]
    html = page.read_text()
    assert "<div class='verdict different' id='verdict'>sensitive to tz: pin `env: {TZ: UTC}`" in html
    rows = re.findall(r"<tr( class='diff')?><td>([^<]*)</td>(.*?)</tr>", html.split("id='matrix'")[1])
    marked = {factor: (css, rest) for css, factor, rest in rows[:3]}
    assert set(marked) == {"tz", "threads", "world-size"}
    css, rest = marked["tz"]
    assert css and "<td>sensitive</td><td>the runtime&#x27;s TZ</td><td>TZ=RBX-5:30</td>" in rest
    assert "files: metrics.json; values: snapshot" in rest and "pin `env: {TZ: UTC}`" in rest
    assert not marked["threads"][0] and "<td>invariant</td>" in marked["threads"][1]
    assert not marked["world-size"][0] and "<td>not applicable</td>" in marked["world-size"][1]
    assert "pin `determinism.threads" not in html  # a pin is said for the factors that matter only
    for run in data["baseline"]["runs"]:
        assert run in html
    markdown = notes.read_text()
    assert markdown.startswith("# reprobox verify --vary: vary-tz\n")
    assert (
        "| **tz** | sensitive | the runtime's TZ | TZ=RBX-5:30 | files: metrics.json; values: snapshot;"
        in markdown
    )
    assert re.search(r"\| threads \| invariant \| threads=\d+ \| threads=\d+ \|", markdown)
    assert "**reproduced itself:** Run twice on local" in markdown
    assert not (notes.with_suffix(".png")).exists()  # a matrix has no plot


@pytest.mark.parametrize("flag", ["--html", "--markdown"])
@pytest.mark.parametrize("where", ["missing-folder", "a-folder"])
def test_a_report_path_that_cannot_be_written_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, where: str
) -> None:
    target = tmp_path / "missing" / "matrix.out" if where == "missing-folder" else tmp_path
    runs = tmp_path / "runs"
    argv = ["verify", str(JOBS / "vary-tz"), "--vary", "tz", "--runtime", "local", "--runs-dir", str(runs)]
    assert cli.main([*argv, flag, str(target), "--no-attestation"]) == 2
    error = capsys.readouterr().err
    assert flag in error and str(target) in error
    assert not runs.exists()


def test_vary_list_needs_no_job(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli.main(["verify", "--vary", "list"]) == 0
    text = capsys.readouterr().out
    assert "threads:" in text and "RBX-5:30" in text
    assert cli.main(["verify", "--vary", "list", "--json"]) == 0
    names = [factor["name"] for factor in json.loads(capsys.readouterr().out)["factors"]]
    assert names[0] == "threads" and "tz" in names and "file-order" in names


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["verify"], "verify needs a job: reprobox verify JOB"),
        (["verify", "--vary", "tz"], "verify needs a job: reprobox verify JOB"),
        (["verify", "--vary", "list", "--html", "m.html"], "`--vary list` runs nothing"),
        (["verify", str(JOBS / "vary-tz"), "--markdown", "m.md"], "write the matrix of --vary"),
    ],
)
def test_verify_without_what_it_needs_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], words: str
) -> None:
    capsys.readouterr()
    assert cli.main([*argv, "--runs-dir", str(tmp_path / "runs")]) == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_verify_help_says_vary_list_needs_no_job(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["verify", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "reprobox verify --vary list" in text and "(no job needed)" in text
    assert "--html FILE" in text and "--markdown FILE" in text


def test_the_authors_matrix_says_which_factors_differ_here() -> None:
    from reprobox.render.variation_document import NOT_FINGERPRINTED, author_matrix_blocks
    from reprobox.reproduce._replay import without_replay_pins
    from reprobox.reproduce._variation import factors_here
    from reprobox.stackdiff import FieldDifference

    host = FieldDifference("hardware.hostname", "hostname", "a", "b", False, 223)
    pinned = FieldDifference("software.threads.OMP_NUM_THREADS", "OMP_NUM_THREADS", None, "4", True, 60)
    # the replay set OMP_NUM_THREADS to the author's count: that is not a thread difference
    here = factors_here(without_replay_pins([host, pinned], 4))
    assert here == {"threads": False, "cpu-isa": False, "hostname": True, "world-size": False}
    assert factors_here([host, pinned])["threads"]
    rows = [
        {"factor": "threads", "status": "invariant", "baseline": "threads=1", "varied": "threads=4"},
        {"factor": "hostname", "status": "sensitive", "files": ["model.pt"], "pin": "keep it out"},
        {"factor": "tz", "status": "invariant"},
    ]
    table = next(b for b in author_matrix_blocks({"runtime": "docker", "factors": rows}, here) if b.rows)
    assert [(row[0], row[4]) for row in table.rows] == [
        ("threads", "no"),
        ("hostname", "yes"),
        ("tz", NOT_FINGERPRINTED),
    ]
    assert table.highlight == {"hostname"}
    assert table.rows[1][5:] == ("files: model.pt", "keep it out")
