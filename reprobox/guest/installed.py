"""Which installed distributions provide a top-level module the job imported, and the local folder one
was installed from: read from the metadata of the distributions a question needs, never of all (the
standard library's `packages_distributions()` parses every RECORD of the environment: over a second in
a large one, at the exit of every process of the job).

Every file of a distribution is read as what it may be: missing, unreadable, a folder or a pipe where a
file was expected, a link, bytes that are no text, a malformed line: each is read as nothing known,
never as an error. Only a `.pth` directly in a site directory is a path file (what Python's `site`
reads, and read as it reads it); one anywhere else is data (torchmetrics' model weights).
"""

from __future__ import annotations

import csv
import json
import locale
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from importlib.machinery import all_suffixes
from pathlib import Path
from urllib.parse import unquote, urlsplit

INFO_SUFFIXES = (".dist-info", ".egg-info")
MAX_HEADERS = 64 << 10  # of METADATA: its headers come before the long description
MAX_FILE_LIST = 32 << 20  # of a RECORD (torch's is 1.5 MB)
MAX_SMALL = 1 << 20  # top_level.txt, direct_url.json, a path file
MAX_LISTED = 20_000  # files under a namespace package's parts, looked for in the distributions' lists
MODULE_SUFFIXES = tuple(sorted(all_suffixes(), key=len, reverse=True))  # `.cpython-311-x86_64-linux-gnu.so`


def read_bounded(path: Path, limit: int) -> bytes | None:
    """A regular file's first `limit` bytes (a link followed); None for anything else or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))  # a pipe: no wait
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _text(path: Path, limit: int) -> str | None:
    data = read_bounded(path, limit)
    return None if data is None else data.decode("utf-8", errors="replace")


class Distribution:
    """One `.dist-info` or `.egg-info` folder, each of its files read once, when first asked for."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.site = str(folder.parent)
        self._declared: frozenset[str] | None = None
        self._files: list[str] | None = None
        self._identity: tuple[str, str] | None = None

    @property
    def label(self) -> str:
        """Its folder's name without the suffix (`PyYAML-6.0.1`): what is known before reading it."""
        return self.folder.name.rpartition(".")[0]

    def declared(self) -> frozenset[str]:
        """The top-level names its top_level.txt declares (none when it has none)."""
        if self._declared is None:
            text = _text(self.folder / "top_level.txt", MAX_SMALL) or ""
            self._declared = frozenset(line.strip() for line in text.splitlines() if line.strip())
        return self._declared

    def files(self) -> list[str]:
        """Its installed files, relative to its site directory (RECORD, or an egg's installed-files.txt);
        none when the list is missing or unreadable."""
        if self._files is None:
            self._files = self._read_files()
        return self._files

    def _read_files(self) -> list[str]:
        record = _text(self.folder / "RECORD", MAX_FILE_LIST)
        if record is not None:
            return [path for path in map(_record_path, record.splitlines()) if path]
        listed = _text(self.folder / "installed-files.txt", MAX_FILE_LIST)
        name = self.folder.name
        # an egg's list is relative to its .egg-info folder
        paths = (os.path.normpath(Path(name, line.strip())) for line in (listed or "").splitlines())
        return [path.replace(os.sep, "/") for path in paths if path != "." and "\0" not in path]

    def top_level(self) -> frozenset[str]:
        """The top-level modules it installs: as declared, else as its files show (what the standard
        library's `packages_distributions()` reads too)."""
        return self.declared() or frozenset(filter(None, map(_top_name, self.files())))

    def identity(self) -> tuple[str, str] | None:
        """(name, version) as its METADATA (an egg's PKG-INFO) says, else as its folder's name says;
        None where neither names a version."""
        if self._identity is None:
            headers: dict[str, str] = {}
            for file in ("METADATA", "PKG-INFO"):
                text = _text(self.folder / file, MAX_HEADERS)
                if text is not None:
                    headers = _headers(text)
                    break
            name, _dash, version = self.label.partition("-")
            name, version = headers.get("name") or name, headers.get("version") or version.partition("-")[0]
            self._identity = (name, version) if name and version else ("", "")
        return self._identity if all(self._identity) else None


def _record_path(line: str) -> str:
    """The path of one RECORD line (CSV: path, hash, size); "" for a line that names none."""
    if not line.startswith('"'):
        return line.partition(",")[0].strip()
    try:
        row = next(csv.reader([line]), [])
    except csv.Error:
        return ""
    return row[0] if row else ""


def _top_name(path: str) -> str:
    """The top-level name a file installs, as the standard library infers it (`yaml/__init__.py`: yaml;
    `_cffi_backend.cpython-311-x86_64-linux-gnu.so`: _cffi_backend), or "" for one that installs none
    (its metadata, scripts and data beside the site directory: `../../bin/tool`)."""
    first, slash, _rest = path.partition("/")
    if not slash:
        first = next((first[: -len(s)] for s in MODULE_SUFFIXES if first.endswith(s)), first)
    return first if first and "." not in first else ""


def _headers(text: str) -> dict[str, str]:
    """The first value of each header of an email-style metadata file (names in lower case)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, colon, value = line.partition(":")
        if colon and not line[:1].isspace():
            found.setdefault(key.strip().lower(), value.strip())
    return found


def path_file_entries(path: Path, site: str) -> Iterator[str]:
    """The folders a path file adds to sys.path, read as `site` reads it: UTF-8 (a BOM allowed) or else
    the locale's encoding, comments, blank lines and `import` lines skipped, each other line a folder
    relative to the site directory, kept where it exists."""
    data = read_bounded(path, MAX_SMALL) or b""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            text = data.decode(locale.getpreferredencoding(False), errors="replace")
        except LookupError:
            text = data.decode("latin-1")
    for line in text.splitlines():
        if not line.strip() or line.startswith(("#", "import ", "import\t")):
            continue
        folder = os.path.abspath(os.path.join(site, line.rstrip()))  # noqa: PTH100, PTH118
        if "\0" not in folder and os.path.isdir(folder):  # noqa: PTH112
            yield folder


class Installed:
    """The distributions on a search path: each folder listed once, each file read only when a question
    needs it."""

    def __init__(self, search: Sequence[str]) -> None:
        self.search = [os.path.abspath(p) for p in dict.fromkeys(search) if p and "\0" not in p]  # noqa: PTH100
        self._all: list[Distribution] | None = None
        self._real: set[str] | None = None

    def distributions(self) -> list[Distribution]:
        if self._all is None:
            self._all = []
            for folder in self.search:
                try:
                    names = sorted(p.name for p in Path(folder).iterdir())
                except (OSError, ValueError):  # gone, a zip file, not a folder
                    continue
                self._all += [Distribution(Path(folder, n)) for n in names if n.endswith(INFO_SUFFIXES)]
        return self._all

    def providing(self, root: str, location: str, modules: Sequence[str] = ()) -> list[Distribution]:
        """The distributions that install the top-level module `root`, found at `location` (a folder
        ending in a separator for a namespace package): those whose top_level.txt names it, then those
        without one whose files hold it, read most likely first (in the module's own site directory,
        named like it: `sklearn`, scikit-learn). A module or a regular package is one file of one
        distribution, so the search stops at its first owner; a namespace package may have several, and
        of those, with `modules` (the names imported under it: `google.protobuf`), only the ones holding
        one (protobuf, not google-auth), or all where none does. A module that lies at the top of no
        folder of the search path (one a package put in `sys.modules` under a short name) is installed
        as a top-level module by none. One of each name, the first on the search path (the one an
        import finds)."""
        namespace = location.endswith(os.sep)
        own_site = _site_of(root, location)
        if namespace and modules:
            held = self._holding(root, modules, own_site)
            if held:
                return _first_of_each_name(held, own_site)
        candidates = self.distributions()
        found = [d for d in candidates if root in d.declared()]
        top_level = namespace or not location or self._searched(own_site)
        if top_level and (not found or namespace):
            undeclared = sorted(
                (d for d in candidates if not d.declared()), key=lambda d: _unlikeness([root], d, own_site)
            )
            for distribution in undeclared:
                if root in distribution.top_level():
                    found.append(distribution)
                    if not namespace:
                        break
        return _first_of_each_name(found, own_site)

    def _holding(self, root: str, modules: Sequence[str], own_site: str) -> list[Distribution]:
        """Those of the distributions that may hold namespace package `root` whose files hold one of
        `modules`, read most likely first (`google.auth`: google-auth), until the files on disk there
        (`google/auth/...`) are each one's that was read: those that hold them all are then found."""
        wanted = {"/".join(name.split(".")[:2]) for name in modules}
        unread = self._files_under(wanted)  # None: not known, so every candidate is read
        names = [w.replace("/", "_") for w in wanted] + [w.partition("/")[2] for w in wanted]
        candidates = sorted(
            (d for d in self.distributions() if root in d.declared() or not d.declared()),
            key=lambda d: _unlikeness(names, d, own_site),
        )
        found = []
        for distribution in candidates:
            files = distribution.files()
            if any(f"{w}.py" in files or any(n.startswith(f"{w}/") for n in files) for w in wanted):
                found.append(distribution)
            if unread is not None:
                unread.difference_update((distribution.site, name) for name in files)
                if not unread:
                    break
        return found

    def _files_under(self, paths: Iterable[str]) -> set[tuple[str, str]] | None:
        """Every file a distribution installs as one of `paths` (`google/auth.py`, or under
        `google/auth/`) in each folder of the search path, as (folder, path in it); bytecode caches
        aside. None where one has none there, or too many to list, or cannot be listed."""
        present: set[tuple[str, str]] = set()
        for path in paths:
            before = len(present)
            for site in self.search:
                if os.path.isfile(os.path.join(site, f"{path}.py")):  # noqa: PTH113, PTH118
                    present.add((site, f"{path}.py"))
                for folder, subfolders, names in os.walk(os.path.join(site, path)):  # noqa: PTH118
                    subfolders[:] = [name for name in subfolders if name != "__pycache__"]
                    inside = os.path.relpath(folder, site).replace(os.sep, "/")
                    present.update((site, f"{inside}/{name}") for name in names)
                    if len(present) > MAX_LISTED:
                        return None
            if len(present) == before:
                return None
        return present

    def _searched(self, folder: str) -> bool:
        """Whether `folder` is one of the search path's (as written, or where its links lead)."""
        if self._real is None:
            self._real = {os.path.realpath(p) for p in self.search}
        return folder in self.search or os.path.realpath(folder) in self._real

    def installed_from(self, distribution: Distribution) -> str | None:
        """The local folder a distribution was installed from (`pip install .`, `pip install -e .`,
        metadata in a source tree, or a path file naming a source tree), if any: code of a repository
        rather than a package."""
        direct = _text(distribution.folder / "direct_url.json", MAX_SMALL)
        if direct:
            try:
                url = json.loads(direct).get("url", "")
            except (ValueError, AttributeError):
                url = ""
            if isinstance(url, str) and url.startswith("file://"):
                where = unquote(urlsplit(url).path)
                return where if where and "\0" not in where else None
        site = distribution.site
        if "-packages" + os.sep not in site + os.sep:  # metadata in a source tree (setup.py develop)
            return site
        for relative in distribution.files():
            if "/" in relative or not relative.endswith(".pth"):
                continue  # not directly in the site directory: not a path file
            for folder in path_file_entries(Path(site, relative), site):
                if not folder.startswith(site.rstrip(os.sep) + os.sep):
                    return folder
        return None


def _first_of_each_name(found: list[Distribution], own_site: str) -> list[Distribution]:
    """One distribution of each name: the one in the module's own site directory, else the first."""
    found = sorted(found, key=lambda d: d.site != own_site)
    unique: dict[str, Distribution] = {}
    for distribution in found:
        identity = distribution.identity()
        if identity is not None:
            unique.setdefault(_normalized(identity[0]), distribution)
    return list(unique.values())


def _site_of(root: str, location: str) -> str:
    """The folder on the search path that a module at `location` was found in."""
    if location.endswith(os.sep):  # a namespace package's folder
        return str(Path(location).parent)
    folder = Path(location).parent
    return str(folder.parent if folder.name == root else folder)


def _unlikeness(wanted: Sequence[str], distribution: Distribution, own_site: str) -> tuple[bool, int, str]:
    """How unlikely a distribution is to hold what is named `wanted`: elsewhere than the module's site
    directory, then named otherwise (the same name, then one holding the other or its letters in order:
    sklearn in scikit_learn, PIL in Pillow, cv2 in opencv_python, reprobox in _editable_impl_reprobox)."""
    name = _normalized(distribution.label.partition("-")[0])
    rank = 2
    for each in map(_normalized, wanted):
        letters = iter(name)
        spelt = [c for c in each if c.isalpha()] or each  # cv2 in opencv_python
        rank = min(rank, 0 if name == each else 1 if name in each or all(c in letters for c in spelt) else 2)
    return distribution.site != own_site, rank, name


def _normalized(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")
