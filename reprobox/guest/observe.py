"""What a job touches, watched from inside each of its Python processes (`reprobox init`'s short run).

Switched on by REPROBOX_OBSERVE=1 in the startup hook. Each process appends JSON lines to
`.reprobox/observed-<pid>.jsonl` in the run dir as it goes (a process stopped by a signal loses
nothing already seen):

- the files it opened for reading, the standard library, site-packages, the interpreter and the system
  left out;
- the variables the job's own code looked up, and those the ML libraries read for it (`HF_*`,
  `WANDB_*`, `TORCH_*`, ...): not every variable some library reads in passing (a CA bundle), nor those
  a bulk copy of the environment touches;
- the top-level modules the job's own code imported, and, as it exits, the distribution and version
  of every installed package loaded since it started (what the job imports, and what those load),
  and of every one its own code imports anywhere, read from its source (`code_imports`: the run is cut
  short at its first checkpoint), each with why ("imported by eval.py:12") and, for one installed from
  a local folder (`pip install .`, `pip install -e .`), that folder: the repository's own code.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from reprobox.guest import settings

if TYPE_CHECKING:
    from reprobox.guest.code_imports import CodeImport

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
        """The distribution and version of each module the job's own code imported (as it ran, and as
        its files say: a module some library had imported first raised no event when the job did).

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
        from importlib import metadata

        loaded = {name.partition(".")[0] for name in list(sys.modules)}
        in_code = self.imports_in_code()
        job_imports = self.job_imports | set(in_code)
        installed: list[str] = []
        for root in sorted(job_imports & loaded):  # the job's own code first: it needs no metadata
            location = getattr(sys.modules.get(root), "__file__", None) or ""
            if "-packages" + os.sep in location:
                installed.append(root)
            elif location and not location.startswith((self.code_dir, *self.skip)):
                self.write("external", root, file=location)  # code of the job's beyond its folder
        try:
            owners = metadata.packages_distributions()
        except Exception:  # noqa: BLE001 - a broken distribution's metadata must not break the job's exit
            owners = {}
        # Every installed package loaded counts, not only those the job names: torch.utils.tensorboard
        # needs tensorboard, and a job that imports torch alone still cannot run without it.
        # ... but not what a library tries to import and does without (torch.hub's tqdm progress bars)
        # (asked only of installed packages: reading a library's source to see whether it does without
        # a module of the standard library would be wasted, and it is most of the cost)
        needed = {
            root
            for root in loaded - self.at_start
            if _installed(root) and not _optional(self.importers.get(root))
        }
        for root in sorted(set(installed) | needed):
            if _installed(root):  # not the standard library, built-ins, the job's own code
                self._distributions(root, owners.get(root, []), self._why(root, in_code))
        # What its code imports where the short run never went (after the first checkpoint): found where
        # the interpreter would find it, without running it.
        for root in sorted(set(in_code) - loaded - set(sys.stdlib_module_names)):
            location = _origin(root)
            if location is None or location.startswith(self.code_dir):
                continue
            if "-packages" + os.sep in location:
                owned = owners.get(root, [])
                if location.endswith(os.sep):  # a namespace package: only who provides what is imported
                    owned = _providers(owned, in_code[root].modules) or owned
                self._distributions(root, owned, self._why(root, in_code))
            elif not location.startswith(self.skip):
                self.write("external", root, file=location)

    def _distributions(self, root: str, distributions: list[str], why: str) -> None:
        from importlib import metadata

        for distribution in sorted(set(distributions)):
            try:
                version = metadata.version(distribution)
            except metadata.PackageNotFoundError:
                continue
            source = _installed_from(distribution)
            more = {"source": source} if source else {}
            self.write("distribution", distribution, module=root, version=version, why=why, **more)

    def _why(self, root: str, in_code: Mapping[str, CodeImport]) -> str:
        """Where the job's code imports `root`, or that the run loaded it for what the job imports."""
        found = in_code.get(root)
        where = (found.file, found.line) if found else self.importers.get(root)
        if where and where[0].startswith(self.code_dir):
            return f"imported by {where[0][len(self.code_dir) :]}:{where[1]}"
        return "loaded by the packages it imports"

    def imports_in_code(self) -> dict[str, CodeImport]:
        """The top-level modules the job's own code imports anywhere, read from its source (the files
        the interpreter opened, and its own modules those import: `__main__` has lost its `__file__` by
        the time the process exits)."""
        from reprobox.guest.code_imports import imports_in_code  # parsing is for the exit only

        search = [os.path.abspath(p) for p in sys.path if p]  # noqa: PTH100 - strings are wanted
        return imports_in_code(self.sources, self.code_dir, search)


def _origin(root: str) -> str | None:
    """The file the interpreter would load for a top-level module, found without running it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(root)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return spec.origin
    locations = list(spec.submodule_search_locations or [])
    return os.path.join(locations[0], "") if locations else None  # noqa: PTH118 - a namespace package


def _providers(distributions: list[str], modules: tuple[str, ...]) -> list[str]:
    """Those of the distributions sharing a namespace package (`google`) whose files hold one of the
    modules imported under it (`google.protobuf`: protobuf, not google-auth)."""
    from importlib import metadata

    wanted = {"/".join(name.split(".")[:2]) for name in modules}
    found = []
    for distribution in distributions:
        try:
            files = metadata.distribution(distribution).files or []
        except Exception:  # noqa: BLE001, S112 - broken metadata: not known to provide it
            continue
        names = {file.as_posix() for file in files}
        if any(f"{w}.py" in names or any(n.startswith(f"{w}/") for n in names) for w in wanted):
            found.append(distribution)
    return found


def _installed_from(distribution: str) -> str | None:
    """The local folder a distribution was installed from (`pip install .`, `pip install -e .`, an
    egg-link or a .pth naming a source tree), if any: code of a repository rather than a package."""
    from importlib import metadata
    from urllib.parse import unquote, urlsplit

    try:
        found = metadata.distribution(distribution)
        direct = found.read_text("direct_url.json")
    except Exception:  # noqa: BLE001 - broken metadata: as if installed from an index
        return None
    if direct:
        try:
            url = json.loads(direct).get("url", "")
        except (ValueError, AttributeError):
            url = ""
        if isinstance(url, str) and url.startswith("file://"):
            return unquote(urlsplit(url).path)
    where = str(getattr(found, "_path", "") or "")
    if where and "-packages" + os.sep not in where + os.sep:  # metadata in a source tree (setup.py develop)
        return os.path.dirname(where)  # noqa: PTH120
    for file in found.files or []:
        if file.suffix != ".pth":
            continue
        try:
            lines = Path(str(file.locate())).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if line.strip() and not line.startswith(("#", "import")) and Path(line.strip()).is_absolute():
                return line.strip()
    return None


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


def _installed(root: str) -> bool:
    """Whether a loaded top-level module is an installed package's (not the standard library's, a
    built-in or the job's own code)."""
    location = getattr(sys.modules.get(root), "__file__", None) or ""
    return "-packages" + os.sep in location


_PARSED: dict[str, Any] = {}  # importer file -> its syntax tree (ast.Module), or None when unreadable
_OPTIONAL_CATCHES = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _optional(where: tuple[str, int] | None) -> bool:
    """Whether the import at ``where`` lies in a ``try`` whose handler catches its failure: the
    library runs without the module, so the job does not need it."""
    if where is None:
        return False
    import ast

    path, line = where
    if path not in _PARSED:  # one library file often loads several optional modules
        try:
            _PARSED[path] = ast.parse(Path(path).read_bytes())
        except (OSError, SyntaxError, ValueError):
            _PARSED[path] = None
    tree = _PARSED[path]
    if tree is None:
        return False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try) or not node.body:
            continue
        if not node.body[0].lineno <= line <= (node.body[-1].end_lineno or node.body[-1].lineno):
            continue
        for handler in node.handlers:
            caught = handler.type
            names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
            if caught is None or any(isinstance(n, ast.Name) and n.id in _OPTIONAL_CATCHES for n in names):
                return True
    return False


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
