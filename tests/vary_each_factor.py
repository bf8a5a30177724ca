"""What `verify --vary all` must find on tests/jobs/vary-each-factor, on any runtime: each varied
factor changes exactly its own file, and a factor the runtime cannot apply says so."""

from __future__ import annotations

from typing import Any

JOB = "vary-each-factor"  # under tests/jobs; plain Python, so its many runs need no torch
TORCH_JOB = "vary-torch-factors"  # what torch itself makes of the factors that reach it
TORCH_FACTORS = {"threads", "cpu-isa"}

NOT_TORCHRUN = "not applicable (the job does not use torchrun)"


ALL_BUT_WORLD_SIZE = {
    "threads", "cpu-isa", "workers", "tz", "locale", "env-order", "hostname", "user", "cwd", "home",
    "umask", "file-order", "time",
}  # fmt: skip
APPLIED_BY_THE_RUNTIME = {"env-order", "hostname", "user", "cwd", "home", "umask", "file-order", "time"}
"""The factors a runtime applies in its own way; the others reach every runtime as environment variables."""


def assert_each_factor_changes_only_its_own_file(
    data: dict[str, Any], runtime: str, unsupported: set[str], asked: set[str] | None = None
) -> None:
    """``asked``: the factors given to --vary (None: ``all``, world-size included)."""
    assert data["baseline"]["reproducible"], data["baseline"]
    rows = {row["factor"]: row for row in data["factors"]}
    if asked is None:
        assert rows["world-size"]["reason"] == NOT_TORCHRUN
    for name in unsupported:
        assert rows[name]["status"] == "unsupported", rows[name]
        assert rows[name]["reason"] == f"unsupported on {runtime} (vary it with --runtime docker or podman)"
    varied = set(rows) - unsupported - {"world-size"}
    assert varied == (ALL_BUT_WORLD_SIZE if asked is None else asked) - unsupported
    for name in sorted(varied):
        row = rows[name]
        assert (row["status"], row["files"]) == ("sensitive", [f"observed/{name}.json"]), row
    assert sorted(data["sensitive"]) == sorted(varied)
