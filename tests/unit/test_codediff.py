"""`reprobox diff`'s parts that need no run: git's hunks and line mapping, revisions, the first operation
two versions computed differently, renamed tensors, and bad input refused before anything runs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli
from reprobox.codediff import parse_diff
from reprobox.codediff._renames import _pair
from reprobox.forensics.drilldown import first_changed_operation
from reprobox.records.oplog import OPLOG_DIR, OPLOG_SCHEMA, encode_line, read_oplogs

JOB = Path(__file__).parents[1] / "jobs" / "diff-repo"

DIFF = """\
diff --git a/model.py b/model.py
index 1111111..2222222 100644
--- a/model.py
+++ b/model.py
@@ -3,0 +4,2 @@ import torch
+# a comment
+# another
@@ -20 +22 @@ class Mixer(nn.Module):
-        return (left + middle) + right
+        return left + (middle + right)
diff --git a/old.py b/new.py
similarity index 90%
rename from old.py
rename to new.py
--- a/old.py
+++ b/new.py
@@ -5,2 +5,0 @@ def f():
-    x = 1
-    y = 2
"""


def test_hunks_map_lines_and_hold_the_changed_ones() -> None:
    changes = parse_diff(DIFF)
    assert changes.files == ["model.py", "new.py"]
    assert changes.map_line("model.py:10") == "model.py:12"  # below the two added comment lines
    assert changes.map_line("model.py:2") == "model.py:2"
    assert changes.map_line("model.py:20") is None  # the rewritten line
    assert changes.map_line("model.py:25") == "model.py:27"
    assert changes.map_line("old.py:9") == "new.py:7"  # renamed, below two deleted lines
    assert changes.map_line("other.py:4") == "other.py:4"  # an unchanged file
    hunk = changes.hunk_of("model.py:20", "model.py:22")
    assert hunk is not None and hunk.text() == "model.py line 22 (was line 20)"
    assert changes.hunk_of("model.py:21", "model.py:23") is None  # moved by the comments, not changed
    deleted = changes.hunk_of("old.py:6", None)  # a line only A has
    assert deleted is not None and deleted.path_b == "new.py"


def log(tmp_path: Path, name: str, ops: list[tuple[str, list[str], list[str], int]]) -> Any:
    folder = tmp_path / name / OPLOG_DIR
    folder.mkdir(parents=True)
    lines = [{"schema": OPLOG_SCHEMA, "rank": 0, "steps": [1], "threads": 1}]
    for i, (op, ins, outs, line) in enumerate(ops):
        lines.append(
            {
                "step": 1, "i": i, "op": op, "phase": "forward", "module": "mixer", "class": "Mixer",
                "source": f"model.py:{line}", "t": i,
                "in": [{"d": d, "shape": [4], "dtype": "float32"} for d in ins],
                "out": [{"d": d, "shape": [4], "dtype": "float32"} for d in outs],
            }
        )  # fmt: skip
    (folder / "rank0.jsonl").write_text("".join(encode_line(x) for x in lines))
    return read_oplogs(tmp_path / name)[0]


def test_a_reassociated_sum_is_named_at_the_new_line(tmp_path: Path) -> None:
    a = log(tmp_path, "a", [("aten::mm", ["x"], ["l"], 17), ("aten::add", ["l", "m"], ["lm"], 20),
                            ("aten::add", ["lm", "r"], ["out"], 20)])  # fmt: skip
    b = log(tmp_path, "b", [("aten::mm", ["x"], ["l"], 17), ("aten::add", ["m", "r"], ["mr"], 22),
                            ("aten::add", ["l", "mr"], ["out2"], 22)])  # fmt: skip
    found = first_changed_operation(a, b)
    assert found is not None
    assert (found["name"], found["cause"], found["source_a"], found["source_b"]) == (
        "aten::add", "code", "model.py:20", "model.py:22",
    )  # fmt: skip
    assert found["sentence"].startswith("`aten::add` in `mixer` at model.py:22 during forward at step 1")


def test_reordered_independent_operations_and_an_extra_copy_are_no_divergence(tmp_path: Path) -> None:
    """Two versions may run other operations in another order; only a value one never computed counts."""
    a = log(tmp_path, "a", [("aten::mm", ["x"], ["p"], 3), ("aten::mm", ["x"], ["q"], 4),
                            ("aten::add", ["p", "q"], ["s"], 5)])  # fmt: skip
    b = log(tmp_path, "b", [("aten::mm", ["x"], ["q"], 9), ("aten::clone", ["q"], ["q"], 9),
                            ("aten::mm", ["x"], ["p"], 8), ("aten::add", ["p", "q"], ["s"], 10)])  # fmt: skip
    assert first_changed_operation(a, b) is None
    c = log(tmp_path, "c", [("aten::mm", ["x"], ["q"], 9), ("aten::mm", ["x"], ["p"], 8),
                            ("aten::mul", ["p", "q"], ["t"], 10)])  # fmt: skip
    found = first_changed_operation(a, c)
    assert found is not None and found["name"] in ("aten::add", "aten::mul") and found["cause"] == "code"


def test_renamed_tensors_pair_by_content_and_a_changed_one_is_no_rename() -> None:
    a = {"head.weight": "f[2]:1", "head.bias": "f[2]:2", "body.weight": "f[2]:3"}
    assert _pair(
        a, {"classifier.weight": "f[2]:1", "classifier.bias": "f[2]:2", "body.weight": "f[2]:3"}
    ) == {
        "head.bias": "classifier.bias",
        "head.weight": "classifier.weight",
    }
    assert (
        _pair(a, {"classifier.weight": "f[2]:9", "classifier.bias": "f[2]:2", "body.weight": "f[2]:3"})
        is None
    )


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def make_repo(tmp_path: Path) -> Path:
    """The mixer job committed in a fresh repository (runs/ ignored, as users keep it)."""
    repo = tmp_path / "repo"
    shutil.copytree(JOB, repo)
    (repo / ".gitignore").write_text("runs/\n__pycache__/\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the mixer")
    return repo


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["no-such-branch"], "'no-such-branch' is not a commit in"),
        (["HEAD", "--max-steps", "0"], "--max-steps must be a positive number"),
        (["HEAD", "--job", "missing.yaml"], "missing.yaml"),
        (["--", "-x"], "is not a revision"),
    ],
)
def test_bad_input_is_one_sentence_exit_2_and_nothing_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    words: str,
) -> None:
    repo = make_repo(tmp_path)
    monkeypatch.chdir(repo)
    before = sorted(p.name for p in repo.iterdir())
    assert cli.main(["diff", "--runtime", "local", "--json", *args]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert sorted(p.name for p in repo.iterdir()) == before  # no runs/ folder made
    assert git(repo, "status", "--porcelain") == ""


def test_code_outside_git_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "plain"
    shutil.copytree(JOB, folder)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert cli.main(["diff", "HEAD", "--runtime", "local"]) == 2
    err = capsys.readouterr().err
    assert "is not in a git work tree" in err and "git init" in err


def test_the_same_code_at_both_versions_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A commit that touched only files outside the code folder: identical, without a run."""
    repo = make_repo(tmp_path)
    (repo / "README.md").write_text("notes\n")
    (repo / ".reproboxignore").write_text("README.md\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "notes")
    monkeypatch.chdir(repo)
    assert cli.main(["diff", "HEAD", "--runtime", "local", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["numerically_identical"] and data["a"]["run"] is None
    assert not (repo / "runs").exists() or not list((repo / "runs").rglob("manifest.json"))
