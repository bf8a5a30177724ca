"""`reprobox diff` end to end on a real git history, local runtime: a refactor is numerically identical,
a reassociated sum is named at its changed line (uncommitted, then committed), the base side is reused,
and --max-steps bounds the runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli
from tests.unit.test_codediff import git, make_repo

pytestmark = pytest.mark.slow

REFACTOR = (
    """    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left = self.left(x)
        middle = self.middle(x)
        right = self.right(x)
        return (left + middle) + right""",
    """    def _branches(self, features: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # every branch reads the same features
        return self.left(features), self.middle(features), self.right(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second, third = self._branches(x)
        partial = first + second
        return partial + third""",
)
RENAME = ("self.head", "self.classifier")
REASSOCIATE = ("        return partial + third", "        return first + (second + third)")


def edit(repo: Path, *changes: tuple[str, str]) -> int:
    """Apply text replacements to model.py; the line number of the last replacement's first line."""
    path = repo / "model.py"
    text = path.read_text()
    for old, new in changes:
        assert old in text
        text = text.replace(old, new)
    path.write_text(text)
    return text[: text.index(changes[-1][1])].count("\n") + 1


def diff(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = cli.main(["diff", *args, "--runtime", "local", "--json", "-q"])
    return code, json.loads(capsys.readouterr().out)


def main_runs(repo: Path) -> int:
    runs = (repo / "runs" / "mixer" / ".diff" / "mixer").glob("*/manifest.json")
    return sum(1 for manifest in runs if not manifest.parent.is_symlink())  # not the `latest` link


def test_refactor_identical_reassociation_named_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path)
    monkeypatch.chdir(repo)
    edit(repo, REFACTOR, RENAME)
    git(repo, "commit", "-qam", "refactor the mixer")

    code, data = diff(capsys, "HEAD~1", "HEAD")
    assert code == 0, data["sentence"]
    assert data["numerically_identical"] and data["verdict"] == "identical"
    assert data["renamed_tensors"] == {
        "model.pt: model.head.bias": "model.classifier.bias",
        "model.pt: model.head.weight": "model.classifier.weight",
    }
    assert not data["a"]["reused"] and not data["b"]["reused"]
    assert main_runs(repo) == 2

    train = repo / "train.py"  # a saved value that changed, with the same numbers: not identical
    train.write_text(train.read_text().replace('"steps": STEPS}', '"steps": STEPS, "note": "v2"}'))
    code, data = diff(capsys, "HEAD")
    assert code == 1 and data["b"]["run"] and data["a"]["reused"], data["sentence"]
    assert data["sentence"].startswith(
        "the numbers are the same at every step, yet what the job saved differs"
    )
    assert "first_divergence" not in data
    git(repo, "checkout", "train.py")

    line = edit(repo, REASSOCIATE)  # left uncommitted: the working tree is B
    code, data = diff(capsys, "HEAD")
    assert code == 1, data["sentence"]
    assert data["a"]["reused"], "HEAD's run from the first diff is kept and reused"
    assert main_runs(repo) == 4, "only the working tree's side ran"
    operation = data["first_divergence"]["operation"]
    assert (operation["module"], operation["phase"], operation["cause"]) == ("mixer", "forward", "code")
    assert operation["source_b"] == f"model.py:{line}"
    change = operation["change"]
    assert change["inside"] and change["commit"]["commit"] == "uncommitted"
    assert change["hunk"]["lines"] == [line, line]

    git(repo, "commit", "-qam", "reassociate the mixer's sum")
    code, data = diff(capsys, "HEAD~2", "HEAD", "--max-steps", "3")
    assert code == 1, data["sentence"]
    assert data["first_divergence"]["step"] == 1
    change = data["first_divergence"]["operation"]["change"]
    assert change["inside"] and change["commit"]["summary"] == "reassociate the mixer's sum"
    for side in ("a", "b"):
        trail = Path(data[side]["run"]) / "trail.jsonl"
        steps = [json.loads(x).get("step") for x in trail.read_text().splitlines()]
        assert max(s for s in steps if s is not None) == 3, "--max-steps stops both runs at step 3"
    assert git(repo, "status", "--porcelain") == "", "the user's checkout is untouched"
