"""What differs comes first: two runs on different thread counts, as the HTML and Markdown reports and the
terminal show them. The differing stack fields lead, marked; the equal ones fold under one counted line.

The two runs are made the cheap way: this process's real fingerprint with the thread fields a
`determinism: threads: N` run records, and the vary-threads job's training (one micro-batch per thread)
saved and hashed by the guest's own hashing.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from reprobox import cli
from reprobox.guest.fingerprint import collect, stack_digest
from reprobox.guest.hashing import hash_outputs
from reprobox.records.manifest import write_record

THREAD_FIELDS = [  # in the order the stack explanation ranks them
    "software.threads.torch_intra_op",
    "software.threads.torch_inter_op",
    "software.threads.OMP_NUM_THREADS",
    "software.threads.MKL_NUM_THREADS",
    "software.threads.OPENBLAS_NUM_THREADS",
]
THREAD_LABELS = [
    "torch intra-op threads",
    "torch inter-op threads",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
]


def train(micro_batches: int) -> dict[str, torch.Tensor]:
    """tests/jobs/vary-threads: gradients summed over one micro-batch per thread, so the order differs."""
    generator = torch.Generator().manual_seed(0)
    model = nn.Linear(16, 1)
    with torch.no_grad():
        model.weight.copy_(torch.randn(1, 16, generator=generator))
        model.bias.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(256, 16, generator=generator)
    y = x @ torch.randn(16, 1, generator=generator) + 0.1 * torch.randn(256, 1, generator=generator)
    for _epoch in range(5):
        opt.zero_grad()
        for xb, yb in zip(x.chunk(micro_batches), y.chunk(micro_batches), strict=True):
            (nn.functional.mse_loss(model(xb), yb) / micro_batches).backward()
        opt.step()
    return model.state_dict()


def thread_run(root: Path, run_id: str, threads: int, fingerprint: dict[str, Any]) -> Path:
    run_dir = root / "vary-threads" / run_id
    outputs = run_dir / "outputs"
    outputs.mkdir(parents=True)
    torch.save(train(threads), outputs / "model.pt")
    fp = copy.deepcopy(fingerprint)
    fp["software"]["threads"] = {
        "torch_intra_op": threads,
        "torch_inter_op": threads,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "OPENBLAS_NUM_THREADS": str(threads),
    }
    fp["stack_digest"] = stack_digest(fp)
    write_record(
        run_dir,
        {
            "run_id": run_id,
            "job_name": "vary-threads",
            "status": "succeeded",
            "fingerprint": fp,
            "checkpoints": [d.to_json() for d in hash_outputs(outputs, [])],
        },
    )
    return run_dir


@pytest.fixture(scope="module")
def thread_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("runs")
    fingerprint = dict(collect())
    return [
        thread_run(root, "20261124T101500Z-1a2b3c", 1, fingerprint),
        thread_run(root, "20261124T102000Z-4d5e6f", 2, fingerprint),
    ]


def terminal_equal_count(text: str) -> int:
    found = re.search(r"^    (\d+) fields equal$", text, re.MULTILINE)
    assert found, text
    return int(found.group(1))


def test_the_terminal_lists_the_thread_fields_then_counts_the_rest(thread_runs: list[Path], capsys) -> None:
    assert cli.main(["compare", *map(str, thread_runs)]) == 1
    text = capsys.readouterr().out
    lines = text.splitlines()
    start = lines.index("  stack fields that differ (reference run -> the other):")
    listed = lines[start + 1 : start + 1 + len(THREAD_LABELS)]
    assert [line.split(":")[0].strip() for line in listed] == THREAD_LABELS
    assert listed[0] == "    torch intra-op threads: 1 -> 2"
    assert lines[start + 1 + len(THREAD_LABELS)] == f"    {terminal_equal_count(text)} fields equal"
    assert terminal_equal_count(text) > 30  # the rest of a real fingerprint, not listed one by one


def test_html_marks_the_thread_fields_first_and_folds_the_equal_ones(
    thread_runs: list[Path], tmp_path: Path, capsys
) -> None:
    page = tmp_path / "report.html"
    assert cli.main(["compare", *map(str, thread_runs)]) == 1
    equal = terminal_equal_count(capsys.readouterr().out)
    assert cli.main(["report", *map(str, thread_runs), "--html", str(page), "-q"]) == 0
    html = page.read_text()
    differing = html.split("<table id='fingerprint-differences'>")[1].split("</table>")[0]
    rows = re.findall(r"<tr( class='diff')?><td>([^<]*)</td>", differing)
    assert [name for _, name in rows] == [*THREAD_FIELDS, "stack_digest"]
    assert all(marked for marked, _ in rows)  # every differing row is highlighted
    fold = html.split("<details id='equal-fields'>")[1].split("</details>")[0]
    assert fold.startswith(f"<summary>{equal} fields equal</summary><table>")
    folded = re.findall(r"<tr( class='diff')?><td>([^<]*)</td>", fold)
    assert len(folded) == equal and not any(marked for marked, _ in folded)
    assert "software.python.version" in {name for _, name in folded}
    assert not set(THREAD_FIELDS) & {name for _, name in folded}
    assert html.index("id='fingerprint-differences'") < html.index("id='equal-fields'")
    stack = html.split("<h2>Stack differences</h2>")[1].split("</table>")[0]
    assert re.findall(r"<tr><td>([^<]*)</td>", stack)[: len(THREAD_LABELS)] == THREAD_LABELS


def test_markdown_bolds_the_thread_fields_first_and_folds_the_equal_ones(
    thread_runs: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "report.md"
    assert cli.main(["report", *map(str, thread_runs), "--markdown", str(out), "-q"]) == 0
    section = out.read_text().split("## Fingerprints")[1]
    differing, fold = section.split("<details>")
    names = re.findall(r"^\| \*\*([^*]+)\*\* \|", differing, re.MULTILINE)
    assert names == [*THREAD_FIELDS, "stack_digest"]
    summary = re.match(r"<summary>(\d+) fields equal</summary>\n\n\| field \| every run \|", fold)
    assert summary, fold[:200]
    folded = re.findall(r"^\| ([^|]+) \|", fold, re.MULTILINE)[1:]  # less the header row
    assert len(folded) == int(summary.group(1))
    assert not any(name.startswith("**") for name in folded)
    assert fold.rstrip().endswith("</details>")
