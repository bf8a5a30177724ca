"""Hashing one input in a forked child, held to a time and a memory limit, and classing the outcome.

The process that forks has imported the readers once (and neither torch nor any writer library), so a
child starts in well under a millisecond of Python. The child hashes the file (or each file of a folder)
as ``reprobox hash`` does (``hash_checkpoint(strict=True)``) and reports its outcome class on a pipe; the
parent kills it past the time limit and reads its peak memory from ``wait4``. The memory limit is checked
against the child's growth over the parent (``ru_maxrss``), and an address-space rlimit keeps a runaway
child from the machine. Outcome classes, never messages, decide: ``read`` (digested), ``noted`` (compared
as bytes, with a note saying why), ``refused`` (a UsageError: exit 2); every other ending is a finding.
"""

from __future__ import annotations

import gc
import json
import os
import random
import resource
import select
import shutil
import signal
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TIME_LIMIT_S = 10.0
"""Of the child's CPU time (RLIMIT_CPU): a loaded machine slows an input, it does not fail it."""
WALL_BACKSTOP = 6
"""A child blocked rather than computing is killed after this many times the limit by the clock."""
MEMORY_LIMIT_BYTES = 512 << 20
ADDRESS_SPACE_MARGIN = 2 << 30
PASSING = frozenset({"read", "noted", "refused"})

TARGET_FILES: dict[str, str] = {
    # target: the file name each input is hashed under (its suffix or place picks the reader)
    "npy": "model.npy",
    "npz": "arrays.npz",
    "safetensors": "model.safetensors",
    "torch": "model.pt",
    "pickle": "state.pkl",
    "text": "values",  # the seed's own suffix (.json, .jsonl, .yaml, .csv, .tsv) is kept
    "tensorboard": "events.out.tfevents.1700000000.host",
    "wandb": "run-abcdefgh.wandb",
    "mlflow": "mlruns/0/0123abcd/metrics/loss",
    "hdf5": "model.weights.h5",
    "sqlite": "study.db",
    "compressed": "values",  # the seed's own suffixes (.json.gz, .npy.xz) are kept
    "ubjson": "model.ubj",
    "zstd": "frames.zst",
    "pt2": "model.pt2",
    "torchscript": "traced_model.pt",
}
DIRECT_MAX_OUTPUT = 64 << 20


def _read_zstd(data: bytes) -> None:
    from reprobox.guest.hashing._zstd import decompress

    decompress(data, max_output=DIRECT_MAX_OUTPUT)


DIRECT_READERS: dict[str, Callable[[bytes], None]] = {"frames.zst": _read_zstd}
"""Inputs handed to a decoder itself, not through a reader (by the file name they are written under), within a
file's CPU budget: read, or refused with the decoders' own error (``ZstdError``, ``OverLimit``)."""
SUFFIXED = frozenset({"text", "compressed"})
"""Targets whose inputs keep their seed's suffix: it picks the reader (of the file a stream holds)."""

# --- targets whose input is one file of a folder (FOLDERS) ---
TARGET_FILES["dcp-metadata"] = ".metadata"  # beside the valid .distcp shards of the seed's own save
TARGET_FILES["dcp-shard"] = "__0_0.distcp"  # beside the valid .metadata (and other shard) of that save
TARGET_FILES["ocdbt-manifest"] = "manifest.ocdbt"  # beside the data files its database wrote
TARGET_FILES["ocdbt-data"] = "d/" + "0" * 32  # a data file (nodes and values) beside its manifest
FOLDERS = frozenset({"dcp-metadata", "dcp-shard", "ocdbt-manifest", "ocdbt-data"})
"""Targets whose seeds are folders: the file named in TARGET_FILES is mutated, the seed's other files
(its companions) lie beside it, written once a campaign, and every file of the folder is hashed, each as
``reprobox hash`` hashes it (a DCP checkpoint's index is read with its shards, and each shard by it)."""


@dataclass
class Outcome:
    kind: str  # read, noted, refused; or timeout, memory, environment, exception, died
    detail: str = ""
    seconds: float = 0.0
    grown_bytes: int = 0
    signature: str = ""

    @property
    def passed(self) -> bool:
        return self.kind in PASSING


def input_path(folder: Path, target: str, suffix: str = "") -> Path:
    """Where an input of ``target`` is written: the name its reader is chosen by."""
    relative = TARGET_FILES[target] + (suffix if target in SUFFIXED else "")
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def folder_input(work: Path, target: str, seed: Path) -> Path:
    """Where an input of a FOLDERS target mutated from ``seed`` (a folder) is written: in a folder of its
    own under ``work``, beside ``seed``'s other files, copied there the first time."""
    folder = work / seed.name
    if not folder.is_dir():
        folder.mkdir(parents=True)
        for companion in seed.rglob("*"):
            name = companion.relative_to(seed).as_posix()
            if companion.is_file() and name != TARGET_FILES[target]:
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_bytes(companion.read_bytes())
    (folder / TARGET_FILES[target]).parent.mkdir(parents=True, exist_ok=True)
    return folder / TARGET_FILES[target]


def input_root(path: Path, target: str) -> Path:
    """The folder a FOLDERS target's input lies in, as its seed's files do (``d/<id>`` lies one down)."""
    return path.parents[TARGET_FILES[target].count("/")]


def _rss_bytes() -> int:
    with Path("/proc/self/statm").open() as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _vm_bytes() -> int:
    with Path("/proc/self/statm").open() as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _signature(exc: BaseException) -> str:
    """The exception's type and the line that raised it: one finding per signature is kept."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return f"{type(exc).__name__}@{where}"


def _child(path: Path, write_end: int, time_limit: float) -> None:
    from reprobox.errors import EnvironmentProblem, UsageError
    from reprobox.guest.hashing import hash_checkpoint

    limit = _vm_bytes() + ADDRESS_SPACE_MARGIN
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cpu_seconds = int(time_limit) + 1  # whole seconds: past it the kernel sends SIGXCPU, which ends the child
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    warnings.simplefilter("ignore")  # a reader's library warning about an input is not an outcome
    files, root = (
        (sorted(p for p in path.rglob("*") if p.is_file()), path) if path.is_dir() else ([path], path.parent)
    )
    try:
        if path.name in DIRECT_READERS:
            report = _direct(path)
        else:
            digests = [hash_checkpoint(file, relative_to=root, workers=1, strict=True) for file in files]
            notes = [d.note for d in digests if d.format == "file" and d.note is not None]  # as bytes
            report = {"kind": "noted" if notes else "read", "detail": "\n".join(notes)}
    except UsageError as exc:
        report = {"kind": "refused", "detail": str(exc)}
    except EnvironmentProblem as exc:
        report = {"kind": "environment", "detail": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - every other ending is the finding
        report = {
            "kind": "memory" if isinstance(exc, MemoryError) else "exception",
            "detail": "".join(traceback.format_exception(exc))[-4000:],
            "signature": _signature(exc),
        }
    os.write(write_end, json.dumps(report).encode())
    os._exit(0)


def _direct(path: Path) -> dict[str, str]:
    """The outcome of a DIRECT_READERS input: read, or refused with the decoders' own error."""
    from reprobox.guest.hashing._bounds import OverLimit, cpu_budget
    from reprobox.guest.hashing._zstd import ZstdError

    try:
        with cpu_budget():
            DIRECT_READERS[path.name](path.read_bytes())
    except (ZstdError, OverLimit) as exc:
        return {"kind": "refused", "detail": str(exc)}
    return {"kind": "read", "detail": ""}


PRELOADED = (
    "reprobox.guest.hashing",
    "reprobox.guest.hashing._zstd",
    "reprobox.errors",
    "numpy",
    "numpy.lib.format",
    "zlib",
    "yaml",
    "csv",
    "zipfile",
    "bz2",
    "gzip",
    "lzma",
    "sqlite3",
    "tokenize",
    "ast",
    "pickletools",
)


def preload() -> None:
    """What every child would import, imported once before forking (readers import lazily)."""
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)


def preload_torch() -> None:
    import contextlib

    with contextlib.suppress(ImportError):
        import torch  # noqa: F401


def run_input(
    path: Path, time_limit: float = TIME_LIMIT_S, memory_limit: int = MEMORY_LIMIT_BYTES
) -> Outcome:
    """Hash ``path`` (a folder: each of its files, as ``reprobox hash folder/*`` does) in a forked child
    within the limits; the outcome class it ended in."""
    preload()

    baseline = _rss_bytes()
    read_end, write_end = os.pipe()
    # the parent's objects out of the collector's reach: a child's collections would walk (and copy) the
    # parent's whole heap, costing it seconds and hundreds of MiB that the input never asked for
    gc.freeze()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports on the pipe
        os.close(read_end)
        try:
            _child(path, write_end, time_limit)
        finally:
            os._exit(1)
    os.close(write_end)
    chunks: list[bytes] = []
    timed_out = False
    while True:
        left = time_limit * WALL_BACKSTOP - (time.monotonic() - started)
        if left <= 0:
            timed_out = True
            os.kill(pid, signal.SIGKILL)
            break
        ready, _, _ = select.select([read_end], [], [], left)
        if ready:
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(read_end)
    _, status, usage = os.wait4(pid, 0)
    seconds = usage.ru_utime + usage.ru_stime  # the child's CPU time: what the input cost, whatever the load
    grown = max(0, usage.ru_maxrss * 1024 - baseline)
    out_of_cpu = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU
    if timed_out or out_of_cpu or seconds > time_limit:
        how = "blocked" if timed_out else "of CPU time"
        return Outcome("timeout", f"over {time_limit:.0f} s {how}", seconds, grown, "timeout")
    if not chunks:
        return Outcome("died", f"wait status {status}", seconds, grown, f"died:{status}")
    report = json.loads(b"".join(chunks))
    outcome = Outcome(
        report["kind"], report["detail"], seconds, grown, report.get("signature", report["kind"])
    )
    if outcome.passed and grown > memory_limit:
        return Outcome(
            "memory", f"peak memory grew {grown >> 20} MiB, over {memory_limit >> 20} MiB", seconds, grown
        )
    return outcome


@dataclass
class Campaign:
    """One target's run: inputs tried, how they ended, the failing ones kept."""

    target: str
    executions: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    findings: list[tuple[Path, Outcome]] = field(default_factory=list)


def seed_files(seeds: Path, target: str) -> list[tuple[str, bytes]]:
    """Each seed's suffixes and bytes (for a FOLDERS target: the seed folder's name and its target file's)."""
    if target in FOLDERS:
        return [(p.name, (p / TARGET_FILES[target]).read_bytes()) for p in sorted((seeds / target).iterdir())]
    return [("".join(p.suffixes), p.read_bytes()) for p in sorted((seeds / target).iterdir())]


def fuzz(target: str, seconds: float, seeds: Path, work: Path, findings: Path, rng_seed: int = 0) -> Campaign:
    """Mutate ``target``'s seeds for ``seconds``, each input hashed in a child; failing inputs are
    written to ``findings/<target>/`` under their digest (and the seed's suffixes, where the target keeps
    them)."""
    import hashlib

    from tests.fuzz.mutate import MUTATORS

    if target == "torch":  # quantized tensors are built by torch: imported once here, not per child
        preload_torch()
    rng = random.Random(rng_seed)
    corpus = seed_files(seeds, target)
    campaign = Campaign(target)
    mutator = MUTATORS[target]
    seen: set[str] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        suffix, data = rng.choice(corpus)
        data = mutator(rng, data) if campaign.executions >= len(corpus) or rng.random() < 0.9 else data
        folder = target in FOLDERS  # then ``suffix`` names the seed folder
        path = (
            folder_input(work, target, seeds / target / suffix)
            if folder
            else input_path(work, target, suffix)
        )
        path.write_bytes(data)
        outcome = run_input(input_root(path, target) if folder else path)
        campaign.executions += 1
        campaign.kinds[outcome.kind] = campaign.kinds.get(outcome.kind, 0) + 1
        if not outcome.passed and outcome.signature not in seen:
            seen.add(outcome.signature)
            kept = findings / target / (hashlib.sha256(data).hexdigest()[:16] + ("" if folder else suffix))
            kept.parent.mkdir(parents=True, exist_ok=True)
            if folder:  # the whole folder: its companions as this save wrote them
                shutil.copytree(input_root(path, target), kept, dirs_exist_ok=True)
            else:
                kept.write_bytes(data)
            campaign.findings.append((kept, outcome))
        elif outcome.kind == "read" and len(corpus) < 64 and rng.random() < 0.05:
            corpus.append((suffix, data))  # a readable mutation reaches deeper as a seed of its own
        path.unlink()
    return campaign
