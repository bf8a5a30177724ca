"""What the short run's record means for the job file: which outputs are checkpoints and which are logs
to leave out of the comparison, what it read that is data, which variables it needs, which packages
the image lacks, and which framework's checkpoints can be resumed from."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from reprobox import image
from reprobox.guest.watch import looks_like_checkpoint
from reprobox.jobfile import SECRET_PATTERN
from reprobox.scaffold._observe import Observation

CHECKPOINT, LOG, VALUES, OTHER = "checkpoint", "log", "values", "other"
# Outputs that are records of the run rather than of what it computed: listed, left out of comparisons.
# (Logs, TensorBoard event files, W&B and MLflow runs and Hydra's records are compared: their numbers are
# read and their clocks, durations, hosts and run ids judged by the run's record, so they need no rule: a
# log's losses are values the job saved.)
LOG_RULES: tuple[tuple[str, str, str], ...] = (
    ("*.trace.json", "**/*.trace.json", "profiler traces: timings"),
    ("nohup.out", "**/nohup.out", "a shell's record of the run's output"),
)
SOURCE_SUFFIXES = (".py", ".pyc", ".so", ".pyd", ".pth")
VALUE_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".csv", ".txt")
# Variables no job file should carry: the shell's own, where things are, what reprobox sets itself.
NOT_JOB_SETTINGS = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "PWD", "OLDPWD", "SHLVL", "HOSTNAME", "TMPDIR",
        "TMP", "TEMP", "DISPLAY", "LANG", "TZ", "VIRTUAL_ENV", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED", "PYTHONSTARTUP", "PYTHONHOME", "CUBLAS_WORKSPACE_CONFIG", "NCCL_ALGO",
        "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "COLUMNS", "LINES", "MAIL",
        "SSH_AUTH_SOCK", "SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY", "XDG_RUNTIME_DIR", "XDG_SESSION_ID",
    }
)  # fmt: skip
NOT_JOB_PREFIXES = ("REPROBOX_", "LC_", "OMP_", "MKL_", "OPENBLAS_", "NVTE_", "CONDA", "PYENV", "XDG_", "_")
NOT_PACKAGES = frozenset({"pip", "setuptools", "wheel", "reprobox", "distutils-precedence"})
STEP_FOLDER = re.compile(r"(^|/)checkpoint-\d+/")


@dataclass(frozen=True)
class Output:
    path: str
    size: int
    kind: str
    why: str = ""


@dataclass
class Findings:
    outputs: list[Output] = field(default_factory=list)
    ignore: list[tuple[str, str]] = field(default_factory=list)  # (glob, why)
    data: list[tuple[str, str]] = field(default_factory=list)  # (source, why): inside or outside the folder
    env: list[tuple[str, str, bool]] = field(default_factory=list)  # (name, value to write, secret)
    missing: dict[str, str] = field(default_factory=dict)  # distribution -> version the image lacks
    why: dict[str, str] = field(default_factory=dict)  # distribution -> why ("imported by eval.py:12")
    own_packages: dict[str, str] = field(default_factory=dict)  # installed from this tree: name -> folder
    framework: str | None = None  # transformers or lightning: checkpoints its Trainer can resume from
    code_root: Path | None = None  # a folder above, when the job imports code of its own from there
    cwd: str | None = None  # the folder it starts in, inside code_root
    pythonpath: list[str] = field(default_factory=list)  # where that code is found, from cwd
    unplaced: dict[str, str] = field(default_factory=dict)  # code imported from too far away to include

    @property
    def checkpoints(self) -> list[Output]:
        return [o for o in self.outputs if o.kind == CHECKPOINT]


def classify(seen: Observation, folder: Path, environ: Mapping[str, str]) -> Findings:
    found = Findings()
    for path, size in seen.outputs:
        found.outputs.append(_output(seen.record.run_dir / "outputs" / path, path, size))
    found.ignore = _ignore_rules(found.outputs)
    own = _installed_from_tree(seen.seen.installed_from, folder)
    found.own_packages = {name: str(module.parent) for name, (_root, module) in own.items()}
    _code_beyond(found, {**seen.seen.external, **{root: str(m) for root, m in own.values()}}, folder)
    found.data = _data(seen, folder, found.code_root or folder)
    found.env = _env(seen.seen.env | _tool_settings(seen.seen.distributions, environ), environ, folder)
    found.missing = _missing({d: v for d, v in seen.seen.distributions.items() if d not in own})
    found.why = {d: seen.seen.why[d] for d in found.missing if d in seen.seen.why}
    found.framework = _framework(seen.seen.modules, found.outputs)
    return found


def _output(path: Path, relative: str, size: int) -> Output:
    for pattern, _rule, why in LOG_RULES:
        if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(PurePosixPath(relative).name, pattern):
            return Output(relative, size, LOG, why)
    if looks_like_checkpoint(path):
        return Output(relative, size, CHECKPOINT)
    if relative.endswith(VALUE_SUFFIXES):
        return Output(relative, size, VALUES)
    return Output(relative, size, OTHER)


def _ignore_rules(outputs: list[Output]) -> list[tuple[str, str]]:
    rules: dict[str, str] = {}
    for output in outputs:
        if output.kind != LOG:
            continue
        for pattern, rule, why in LOG_RULES:
            name = PurePosixPath(output.path).name
            if fnmatch.fnmatch(output.path, pattern) or fnmatch.fnmatch(name, pattern):
                rules.setdefault(rule, why)
                break
    return sorted(rules.items())


def _code_beyond(found: Findings, external: Mapping[str, str], folder: Path) -> None:
    """Code the job imports from above its folder (its repo's own package, installed editable or on
    PYTHONPATH): the code folder becomes the repository, the command starts where it was typed, and
    PYTHONPATH finds that package in the working copy. Code from anywhere else is only named."""
    if not external:
        return
    search = {name: _search_dir(Path(path)) for name, path in external.items()}
    top = _repository(folder)
    placed = {name: d for name, d in search.items() if top is not None and (d == top or top in d.parents)}
    found.unplaced = {name: str(search[name]) for name in search if name not in placed}
    if top is None or not placed:
        return
    found.code_root = top
    found.cwd = folder.relative_to(top).as_posix() if folder != top else None
    found.pythonpath = sorted({os.path.relpath(d, folder) for d in placed.values()})


def _installed_from_tree(
    installed_from: Mapping[str, tuple[str, str]], folder: Path
) -> dict[str, tuple[str, Path]]:
    """Distributions installed from this very tree (`pip install .` or `pip install -e .` in the
    repository): its own code, never a package to lock. Each with its module and the module's file in
    the tree (the package folder's `__init__.py`, or the module's `.py`), where PYTHONPATH finds it."""
    top = (_repository(folder) or folder).resolve()
    own: dict[str, tuple[str, Path]] = {}
    for distribution, (root, source) in sorted(installed_from.items()):
        where = _resolved(source)  # what the job's process wrote: any string at all
        if where is None or (where != top and top not in where.parents):
            continue
        own[distribution] = (root, _module_in_tree(root, where))
    return own


def _resolved(path: str) -> Path | None:
    """An absolute path as the file system resolves it; None for one that names nothing it could hold
    (a NUL byte, a relative path, a loop of links)."""
    if "\0" in path or not Path(path).is_absolute():
        return None
    try:
        return Path(path).resolve()
    except (OSError, ValueError, RuntimeError):
        return None


def _module_in_tree(root: str, source: Path) -> Path:
    """Where `root` lies under the folder a package was installed from: at its top, in src/, or one
    folder down; the folder itself when it is not found (its module may be made by the build)."""
    try:
        below = sorted(p for p in source.iterdir() if p.is_dir()) if source.is_dir() else []
    except OSError:  # unreadable: its module is looked for at its top alone
        below = []
    for base in (source, source / "src", *below):
        for candidate in (base / root / "__init__.py", base / f"{root}.py"):
            if candidate.is_file():
                return candidate
    return source / f"{root}.py"


def _search_dir(module_file: Path) -> Path:
    """The folder Python must search to import the module (a package's parent, a module's own)."""
    return module_file.parent.parent if module_file.name == "__init__.py" else module_file.parent


def _repository(folder: Path) -> Path | None:
    """The top of the git work tree holding the folder, if any."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _data(seen: Observation, folder: Path, code_root: Path) -> list[tuple[str, str]]:
    """What it read that is neither code nor the system: what the code leaves out of the folder (read
    where it lay), and folders elsewhere (mounted read-only at the same path in a container)."""
    work = seen.work_dir.rstrip("/") + "/"
    layout_roots = tuple(v.rstrip("/") + "/" for k, v in seen.layout.items() if k in ("home", "tmp", "run"))
    inside: dict[str, str] = {}
    outside: set[str] = set()
    for path in sorted(seen.seen.read):
        if path.startswith(work):
            entry = _left_out_entry(path[len(work) :], seen.left_out)
            if entry is not None:
                inside[entry] = "read by the job; the code leaves it out (git ignores it), so it is data"
        elif path.startswith(layout_roots) or path.startswith(
            (str(folder) + os.sep, str(code_root) + os.sep)
        ):
            continue
        elif path.endswith(SOURCE_SUFFIXES):
            continue  # an imported module's source: code, wherever it lies (see _code_beyond)
        elif "\0" not in path and Path(path).exists():
            outside.add(str(Path(path).parent))
    kept = sorted(d for d in outside if not any(d != o and d.startswith(o + os.sep) for o in outside))
    elsewhere = [(d, "read by the job outside its folder; mounted read-only at the same path") for d in kept]
    return sorted(inside.items()) + elsewhere


def _left_out_entry(relative: str, left_out: Mapping[str, str]) -> str | None:
    """The left-out file or folder a path in the working copy lies in, if any."""
    parts = PurePosixPath(relative).parts
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end])
        if candidate in left_out:
            return candidate
    return None


# A tool's variables that the shell sets are the job's settings when the run loaded the tool, looked up or
# not: some tools read them all at once (W&B's settings read the environment in bulk).
TOOL_VARIABLES = {
    "WANDB_": ("wandb",),
    "MLFLOW_": ("mlflow", "mlflow-skinny"),
    "HF_": ("huggingface-hub",),
    "HUGGINGFACE_": ("huggingface-hub",),
    "TRANSFORMERS_": ("transformers",),
    "DATASETS_": ("datasets",),
    "TOKENIZERS_": ("tokenizers",),
    "ACCELERATE_": ("accelerate",),
    "DIFFUSERS_": ("diffusers",),
    "COMET_": ("comet-ml",),
    "NEPTUNE_": ("neptune", "neptune-client"),
    "LIGHTNING_": ("lightning", "pytorch-lightning"),
    "PL_": ("lightning", "pytorch-lightning"),
    "TIMM_": ("timm",),
}


def _tool_settings(distributions: Mapping[str, str], environ: Mapping[str, str]) -> set[str]:
    loaded = {image.normalize_name(name) for name in distributions}
    return {
        name
        for name in environ
        for prefix, tools in TOOL_VARIABLES.items()
        if name.startswith(prefix) and loaded & set(tools)
    }


def _env(names: set[str], environ: Mapping[str, str], folder: Path) -> list[tuple[str, str, bool]]:
    found = []
    for name in sorted(names):
        if name not in environ or name in NOT_JOB_SETTINGS or name.startswith(NOT_JOB_PREFIXES):
            continue
        secret = bool(SECRET_PATTERN.search(name))
        value = f"${{{name}}}" if secret else _portable(environ[name], folder)
        found.append((name, value, secret))
    return found


def _portable(value: str, folder: Path) -> str:
    """A path list (PYTHONPATH) into the folder becomes relative to the working copy the job starts in."""
    parts = value.split(os.pathsep)
    if not all(Path(p).is_absolute() for p in parts if p):
        return value
    moved = []
    for part in parts:
        path = Path(part)
        moved.append(
            "." if path == folder else path.relative_to(folder).as_posix() if folder in path.parents else part
        )
    return os.pathsep.join(moved)


def _missing(distributions: Mapping[str, str]) -> dict[str, str]:
    """Distributions the job imported that the image's lock does not pin."""
    project = image.project_files()
    pinned = {
        image.normalize_name(line.name)
        for lock in sorted(project.env_dir.glob("requirements-*.lock"))
        for line in image.lock_lines(lock)
    }
    return {
        name: version
        for name, version in sorted(distributions.items())
        if image.normalize_name(name) not in pinned | NOT_PACKAGES
    }


def _framework(modules: set[str], outputs: list[Output]) -> str | None:
    if "transformers" in modules and any(STEP_FOLDER.search(o.path) for o in outputs):
        return "transformers"
    if modules & {"lightning", "pytorch_lightning"} and any(o.path.endswith(".ckpt") for o in outputs):
        return "lightning"
    return None
