"""The runtime audit: real nondeterministic-op warnings from torch on CPU, recorded at the job's line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reprobox.guest import audit_hook
from reprobox.guest.audit_hook import AuditRecord, read_records

torch = pytest.importorskip("torch")
F = torch.nn.functional

THIS_FILE = str(Path(__file__).resolve())


@pytest.fixture
def warn_only() -> Iterator[None]:
    """Deterministic algorithms on with warn_only=True, as reprobox's audit runs set them."""
    enabled = torch.are_deterministic_algorithms_enabled()
    only_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(enabled, warn_only=only_warn)


@pytest.fixture
def shown() -> Iterator[list[tuple[Any, ...]]]:
    """What reaches the `showwarning` that was in place before `install()` (what the user sees)."""
    with warnings.catch_warnings():
        seen: list[tuple[Any, ...]] = []
        warnings.showwarning = lambda *args: seen.append(args)
        yield seen
        audit_hook.uninstall()


def put_twice_into_one_place() -> None:
    """Tensor.put_ with accumulate=False: no deterministic implementation on any device, CPU included."""
    torch.zeros(4).put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_records_a_real_cpu_warning_at_the_calling_line(
    tmp_path: Path, warn_only: None, shown: list[tuple[Any, ...]]
) -> None:
    record = tmp_path / "audit.jsonl"
    audit_hook.install(record)
    x = torch.zeros(4)
    expected_line = sys._getframe().f_lineno + 1
    x.put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))

    (entry,) = lines(record)
    assert entry["op"] == "put_"
    assert entry["message"].startswith("put_ does not have a deterministic implementation, but you set ")
    assert (entry["file"], entry["line"]) == (THIS_FILE, expected_line)
    assert entry["code"] == "x.put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))"
    assert entry["pid"] > 0
    (display,) = shown  # the user still sees the warning, pointed at their own line
    assert display[1] is UserWarning
    assert (display[2], display[3]) == (THIS_FILE, expected_line)


def test_a_warning_raised_inside_torch_python_code_points_at_the_caller(
    tmp_path: Path, warn_only: None, shown: list[tuple[Any, ...]]
) -> None:
    """F.max_unpool1d warns from torch/nn/functional.py; the record names the line that called it."""
    record = tmp_path / "audit.jsonl"
    audit_hook.install(record)
    pooled, indices = F.max_pool1d(torch.arange(8.0).reshape(1, 1, 8), 2, return_indices=True)
    expected_line = sys._getframe().f_lineno + 1
    F.max_unpool1d(pooled, indices, 2)

    (entry,) = read_records(record)
    assert entry.op.startswith("max_unpooling")
    assert (entry.file, entry.line, entry.code) == (
        THIS_FILE,
        expected_line,
        "F.max_unpool1d(pooled, indices, 2)",
    )
    assert shown[0][2] == THIS_FILE  # Python alone would have pointed at torch/nn/functional.py


def test_every_call_is_recorded_up_to_the_cap_and_shown_once(
    tmp_path: Path, warn_only: None, shown: list[tuple[Any, ...]]
) -> None:
    record = tmp_path / "audit.jsonl"
    audit_hook.install(record, max_per_site=3)
    for _ in range(5):
        put_twice_into_one_place()
    put_twice_into_one_place()

    records = read_records(record)
    assert [(r.op, r.file, r.count) for r in records] == [("put_", THIS_FILE, 3)]
    assert records[0].code == "torch.zeros(4).put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))"
    assert len(shown) == 1


def test_other_warnings_pass_through_untouched(
    tmp_path: Path, warn_only: None, shown: list[tuple[Any, ...]]
) -> None:
    record = tmp_path / "audit.jsonl"
    audit_hook.install(record)
    warnings.filterwarnings("always", message="unrelated")
    expected_line = sys._getframe().f_lineno + 1
    warnings.warn("unrelated warning", RuntimeWarning, stacklevel=1)

    assert record.read_text() == ""  # created at install, nothing recorded
    (display,) = shown
    assert (str(display[0]), display[1], display[2], display[3]) == (
        "unrelated warning",
        RuntimeWarning,
        __file__,
        expected_line,
    )


def test_installing_twice_wraps_once_and_moves_the_record(
    tmp_path: Path, warn_only: None, shown: list[tuple[Any, ...]]
) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    audit_hook.install(first)
    audit_hook.install(second)
    put_twice_into_one_place()
    assert first.read_text() == ""
    assert [r.count for r in read_records(second)] == [1]
    assert len(shown) == 1  # not shown twice by two stacked wrappers


def test_an_unwritable_record_never_breaks_the_job(
    tmp_path: Path, warn_only: None, shown: list[tuple[Any, ...]]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    record = blocker / "audit.jsonl"  # its folder cannot exist: a file is in the way
    audit_hook.install(record)
    put_twice_into_one_place()
    assert not record.exists()
    assert len(shown) == 1


def test_install_creates_the_record_and_its_folder(shown: list[tuple[Any, ...]], tmp_path: Path) -> None:
    record = tmp_path / "run" / ".reprobox" / "audit.jsonl"
    audit_hook.install(record)
    assert record.read_text() == ""
    assert read_records(record) == []


def test_uninstall_restores_the_previous_showwarning(shown: list[tuple[Any, ...]], tmp_path: Path) -> None:
    before = warnings.showwarning
    audit_hook.install(tmp_path / "audit.jsonl")
    assert warnings.showwarning is not before
    audit_hook.uninstall()
    assert warnings.showwarning is before


def test_dataloader_workers_append_to_one_record(tmp_path: Path) -> None:
    """Forked DataLoader workers inherit the hook; every process's lines land whole in one file."""
    script = tmp_path / "job.py"
    source = textwrap.dedent(
        """
            import sys
            from pathlib import Path

            import torch
            from torch.utils.data import DataLoader, Dataset

            from reprobox.guest import audit_hook


            class Puts(Dataset):
                def __len__(self):
                    return 8

                def __getitem__(self, index):
                    target = torch.zeros(4)
                    target.put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))
                    return target


            if __name__ == "__main__":
                torch.use_deterministic_algorithms(True, warn_only=True)
                audit_hook.install(Path(sys.argv[1]))
                loader = DataLoader(Puts(), batch_size=2, num_workers=2, multiprocessing_context="fork")
                batches = list(loader)
                Puts()[0]
            """
    )
    script.write_text(source)
    put_line = 1 + [line.strip() for line in source.splitlines()].index(
        "target.put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))"
    )
    record = tmp_path / "audit.jsonl"
    result = subprocess.run(
        [sys.executable, str(script), str(record)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr

    records = read_records(record)
    assert [(r.op, r.file, r.line, r.code) for r in records] == [
        ("put_", str(script), put_line, "target.put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))")
    ]
    assert records[0].count == 9  # 8 items in the workers, 1 in the main process
    assert len(records[0].pids) == 3
    assert len(lines(record)) == 9  # every line is a whole JSON object
    assert result.stderr.count("does not have a deterministic implementation") == 3  # once per process


def test_read_records_merges_sites_and_skips_broken_lines(tmp_path: Path) -> None:
    def entry(op: str, line: int, pid: int) -> str:
        return json.dumps(
            {"op": op, "message": f"{op} ...", "file": "/job/train.py", "line": line, "code": "x", "pid": pid}
        )

    record = tmp_path / "audit.jsonl"
    record.write_text(
        "\n".join(
            [
                entry("put_", 10, 1),
                "not json",
                entry("put_", 10, 2),
                json.dumps(
                    {"op": "put_", "file": "/job/train.py", "line": "10", "code": "", "message": "", "pid": 1}
                ),
                json.dumps(
                    {"op": "put_", "file": "/job/train.py", "line": True, "code": "", "message": "", "pid": 1}
                ),
                "[1, 2]",
                entry("max_unpooling2d_forward_out", 12, 1),
                entry("put_", 10, 1),
                entry("put_", 11, 1)[:30],  # a process killed in the middle of a write
            ]
        )
    )
    records = read_records(record)
    assert records == [
        AuditRecord("put_", "/job/train.py", 10, "x", "put_ ...", count=3, pids=(1, 2)),
        AuditRecord(
            "max_unpooling2d_forward_out",
            "/job/train.py",
            12,
            "x",
            "max_unpooling2d_forward_out ...",
            count=1,
            pids=(1,),
        ),
    ]
    assert records[0].to_json()["pids"] == [1, 2]
    assert str(records[0]) == "/job/train.py:10: put_ (recorded 3x)"


def test_read_records_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_records(tmp_path / "absent.jsonl") == []


@pytest.mark.parametrize(
    ("path", "library"),
    [
        (torch.nn.functional.__file__, True),
        (warnings.__file__, True),
        (audit_hook.__file__, True),
        ("<frozen importlib._bootstrap>", True),
        (__file__, False),
        (pytest.__file__, False),  # another installed package is job code as far as torch is concerned
        ("<stdin>", False),
    ],
)
def test_library_files(path: str, library: bool) -> None:
    assert audit_hook._is_library_file(path) is library
