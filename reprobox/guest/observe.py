"""What a job touches, watched from inside each of its Python processes (`reprobox init`'s short run).

Switched on by REPROBOX_OBSERVE=1 in the startup hook. Each process appends JSON lines to
`.reprobox/observed-<pid>.jsonl` in the run dir as it goes (a process stopped by a signal loses
nothing already seen):

- the files it opened for reading, the standard library, site-packages, the interpreter and the system
  left out;
- the variables the job's own code looked up, and those the ML libraries read for it (`HF_*`,
  `WANDB_*`, `TORCH_*`, ...): not every variable some library reads in passing (a CA bundle), nor those
  a bulk copy of the environment touches;
- the top-level modules the job's own code imported, and, as it exits, the distributions it needs
  (`observe_imports`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import sysconfig
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any

from reprobox.guest import settings

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec

SYSTEM_PREFIXES = ("/proc/", "/sys/", "/dev/", "/etc/", "/usr/", "/lib", "/bin/", "/sbin/", "/opt/conda/")
MAX_LINES = 20_000  # a job that opens a million files: the first are named, the rest left out
# Variables the ML stack reads on the job's behalf (a library's lookup of these is the job's setting).
ML_PREFIXES = (
    "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "DATASETS_", "TOKENIZERS_", "DIFFUSERS_", "ACCELERATE_",
    "WANDB_", "MLFLOW_", "COMET_", "NEPTUNE_", "TORCH_", "PYTORCH_", "LIGHTNING_", "PL_", "NCCL_",
    "TORCHINDUCTOR_", "TRITON_", "XLA_", "JAX_", "KERAS_", "TIMM_",
)  # fmt: skip
# Frames of the machinery between a lookup and whoever asked: skipped to find the asker.
PLUMBING = ("/os.py", "/_collections_abc.py", "<frozen os>", "<frozen _collections_abc>", "importlib")
BULK_READERS = frozenset({"copy", "__iter__", "items", "values", "__eq__", "__repr__", "__reduce__"})


class Observer:
    """One process's record of what it read, looked up and imported."""

    def __init__(self, record: Path, code_dir: str) -> None:
        self.record = record
        self.code_dir = code_dir.rstrip(os.sep) + os.sep
        self.seen: set[tuple[str, str]] = set()
        self.job_imports: set[str] = set()
        self.sources: set[str] = set()  # the job's own source files this process read
        self.importers: dict[
            str, tuple[str, int] | None
        ] = {}  # top-level module -> where it was first imported
        # loaded before the job started: an editable install's finder, the guest's own imports
        self.at_start = {name.partition(".")[0] for name in list(sys.modules)}
        self.lines = 0
        own = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
        ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # noqa: PTH100, PTH120
        own |= {sys.prefix, sys.base_prefix, ours}
        self.skip = tuple(sorted({*SYSTEM_PREFIXES, *(p.rstrip(os.sep) + os.sep for p in own)}))

    def write(self, kind: str, value: str, **more: str) -> None:
        if (kind, value) in self.seen or self.lines >= MAX_LINES:
            return
        self.seen.add((kind, value))
        self.lines += 1
        fd = os.open(self.record, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, (json.dumps({kind: value, **more}, sort_keys=True) + "\n").encode())
        finally:
            os.close(fd)

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and args:
            self.opened(args)
        elif event == "import" and args and isinstance(args[0], str):
            root = args[0].partition(".")[0]
            caller = _caller()
            if root not in self.job_imports and self.asked_by_job(caller):
                self.job_imports.add(root)
                self.write("import", root)
            if root not in self.importers:
                self.importers[root] = _importer(caller)

    def opened(self, args: tuple[Any, ...]) -> None:
        path, mode = args[0], args[1] if len(args) > 1 else "r"
        if not isinstance(path, str) or (isinstance(mode, str) and any(m in mode for m in "wax+")):
            return
        if not isinstance(mode, str):  # os.open: flags, not a mode
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            if flags & (os.O_WRONLY | os.O_RDWR):
                return
        absolute = os.path.abspath(path)  # noqa: PTH100 - as opened: links in the working copy kept
        if absolute.endswith(".py") and absolute.startswith(self.code_dir):
            self.sources.add(absolute)  # the job's own code, the script itself included
        if not absolute.startswith(self.skip) and "-packages" + os.sep not in absolute:
            self.write("read", absolute)

    def lookup(self, name: str, frame: FrameType | None) -> None:
        if name.startswith(ML_PREFIXES) or self.asked_by_job(frame):
            self.write("env", name)

    def asked_by_job(self, frame: FrameType | None) -> bool:
        """Whether the first frame past the plumbing runs the job's own code."""
        while frame is not None and frame.f_code.co_filename.endswith(PLUMBING):
            frame = frame.f_back
        while frame is not None and "importlib" in frame.f_code.co_filename:
            frame = frame.f_back
        return frame is not None and frame.f_code.co_filename.startswith(self.code_dir)

    def imported(self) -> None:
        """The distribution and version of each package the job needs (`observe_imports`).

        The watch's Ctrl-C often lands as the job exits, and its terminate ten seconds later: neither
        may cut this record short, so both are ignored from here on, and an interrupt that came before
        they were starts the record again (what is written already is not written twice)."""
        import signal

        for _attempt in range(3):
            try:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    with contextlib.suppress(ValueError, OSError):  # not the main thread
                        signal.signal(sig, signal.SIG_IGN)
                self._record_imports()
                return
            except KeyboardInterrupt:
                continue

    def _record_imports(self) -> None:
        from reprobox.guest.observe_imports import record_imports  # parsing and metadata: the exit only

        record_imports(self)


class _RecordingEnviron(os._Environ):  # type: ignore[type-arg]
    """os.environ, noting each name looked up (os.getenv, environ.get, [], in), but not what a bulk
    read (a copy, a walk over items) touches."""

    observer: Observer | None = None

    def __getitem__(self, key: str) -> str:  # get, getenv and `in` come through here too
        value: str = super().__getitem__(key)  # a name that is not set is nothing to carry over
        observer = self.observer
        if observer is not None and isinstance(key, str):
            caller = sys._getframe(1)
            if caller.f_code.co_name not in BULK_READERS:
                observer.lookup(key, caller)
        return value


def _importer(frame: FrameType | None) -> tuple[str, int] | None:
    """The file and line of the import statement that loads a module: the first frame past importlib."""
    while frame is not None and (
        "importlib" in frame.f_code.co_filename or frame.f_code.co_filename.startswith("<frozen")
    ):
        frame = frame.f_back
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


class _ImportStarts:
    """A finder first on sys.meta_path that finds nothing: it notes where each import began, also those
    that raise no "import" audit event (`importlib.import_module`, as lazy loaders call it), so that one
    cut short by the watch's Ctrl-C is still known to the record at the exit."""

    def __init__(self, observer: Observer) -> None:
        self.observer = observer

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        root = fullname.partition(".")[0]
        if root not in self.observer.importers and _is_import(sys._getframe(1)):
            self.observer.importers[root] = _importer(sys._getframe(1))
        return None


def _is_import(lookup: FrameType) -> bool:
    """Whether importlib's lookup (``_find_spec``) is an import, not a library asking whether a module is
    there (``importlib.util.find_spec``, as torch's dynamo asks of pandas and scikit-learn): that one
    imports nothing, and what it asks about is no package the job needs."""
    caller = lookup.f_back
    return caller is not None and caller.f_code.co_name in ("_find_and_load_unlocked", "_find_and_load")


def install() -> None:
    """Watch this process (a no-op unless the job runs under `reprobox init`'s observation)."""
    run_dir = os.environ.get(settings.RUN_DIR)
    if os.environ.get(settings.OBSERVE) != "1" or not run_dir:
        return
    folder = Path(run_dir) / settings.GUEST_STATE
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return
    code_dir = os.environ.get(settings.CODE_DIR) or os.getcwd()  # noqa: PTH109 - a string is wanted
    observer = Observer(folder / f"observed-{os.getpid()}.jsonl", code_dir)
    sys.addaudithook(observer.audit)
    sys.meta_path.insert(0, _ImportStarts(observer))
    _RecordingEnviron.observer = observer
    os.environ.__class__ = _RecordingEnviron
    atexit.register(observer.imported)


def _caller() -> FrameType | None:
    """The frame that imports, or None for an import with no Python frame above the hook (the `runpy`
    that `python -m module` imports before any code runs)."""
    try:
        return sys._getframe(2)
    except ValueError:
        return None
