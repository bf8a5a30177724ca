"""The report of a diverging pair: verdict, tensor table and plot, checked in a real headless browser."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.runner import list_runs

JOBS = Path(__file__).parents[1] / "jobs"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


@pytest.fixture(scope="module")
def diverged_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    runs = tmp_path_factory.mktemp("runs")
    for _ in range(2):
        assert (
            cli.main(
                [
                    "run",
                    str(JOBS / "diverge-at-step"),
                    "--runtime",
                    "local",
                    "--trail",
                    "2",
                    "--runs-dir",
                    str(runs),
                    "-q",
                ]
            )
            == 0
        )
    return list_runs(runs, "diverge-at-step")


def test_markdown_report(diverged_runs: list[Path], tmp_path: Path, capsys) -> None:
    out = tmp_path / "REPRODUCIBILITY.md"
    assert cli.main(["report", *map(str, diverged_runs), "--markdown", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "different"
    text = out.read_text()
    assert "**Verdict: not reproducible: 4 tensors differ (first: body.bias in model.pt).**" in text
    assert "same stack, different result: a real nondeterminism" in text
    assert "First divergence after optimizer step 18 (equal), by step 20 (differs) in: head.weight." in text
    assert "| model.pt | head.weight | float32 | 128 of 128 |" in text
    png = out.with_suffix(".png")
    assert png.read_bytes().startswith(b"\x89PNG")
    assert "![divergence per optimizer step](REPRODUCIBILITY.png)" in text


def test_report_needs_a_destination(diverged_runs: list[Path], capsys) -> None:
    assert cli.main(["report", str(diverged_runs[0])]) == 2
    assert "say where to write the report" in capsys.readouterr().err


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_html_report_renders_in_a_real_browser(diverged_runs: list[Path], tmp_path: Path) -> None:
    from PIL import Image

    page = tmp_path / "review.html"
    assert cli.main(["report", *map(str, diverged_runs), "--html", str(page), "-q"]) == 0
    profile = tmp_path / "profile"
    common = [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    dom = subprocess.run(
        [*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert "not reproducible: 4 tensors differ" in dom
    assert 'id="tensors"' in dom and "head.weight" in dom
    assert "<svg" in dom and "first divergence: step 20" in dom
    assert re.search(r'<details id="equal-fields"><summary>\d+ fields equal</summary>', dom)  # folded
    shot = tmp_path / "review.png"
    subprocess.run(
        [*common, f"--screenshot={shot}", "--window-size=1280,1600", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 1600)
    colours = {colour for _, colour in image.getcolors(maxcolors=1 << 24) or []}
    assert (0xFD, 0xE8, 0xE6) in colours  # the red verdict banner was drawn
    assert len(colours) > 50  # text, table and plot, not a blank page
