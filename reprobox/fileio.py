"""How every record is written and parsed: atomically, with JSON's nesting bounded.

A write goes to a temporary file in the target's own folder, is flushed to disk, and is renamed over
the target, so a reader (or a crash, or a full disk) sees the old file or the new one, never half of
one; a failed write removes its temporary file, and a full disk's error names the file it was writing.
``json.loads`` recurses once per level: a file of a million ``[`` ends in a RecursionError, and a
structure a few hundred levels deep parses but breaks the code that walks it later; every document
reprobox reads is far shallower than MAX_JSON_DEPTH.

A leaf: the standard library and ``diskspace`` only (not ``tempfile``, which costs more to import than the
rest), because the guest imports it in the job's processes.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path

from reprobox.diskspace import is_full

TYPE_CHECKING = False  # typing costs more to import than this module: the guest imports it
if TYPE_CHECKING:
    from types import TracebackType
    from typing import IO, Any

MAX_JSON_DEPTH = 64  # a manifest nests about 8 levels, an attestation about 8, a bundle index 4
PRIVATE = 0o600  # a record's mode unless told otherwise: it may carry the job's environment
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW


class JsonTooDeep(ValueError):
    """The document nests deeper than MAX_JSON_DEPTH (or than the parser can recurse)."""


def write_bytes_atomic(
    path: Path, data: bytes, *, mode: int | None = PRIVATE, sync_folder: bool = False
) -> None:
    """Write a file so that readers see the old one or the new one, never half of one.

    Not a `with` block: a signal is taken between any two calls, also as `__exit__` is entered, where
    nothing would remove the temporary file; here a signal anywhere leaves none.
    """
    atomic = AtomicFile(path, mode=mode, sync_folder=sync_folder)
    try:
        atomic.open().write(data)
        atomic.commit()
    except BaseException as exc:
        atomic.abandon()
        if isinstance(exc, OSError) and _naming(exc, path) is not exc:
            raise _naming(exc, path) from exc
        raise


def write_text_atomic(
    path: Path, text: str, *, mode: int | None = PRIVATE, sync_folder: bool = False
) -> None:
    write_bytes_atomic(path, text.encode("utf-8"), mode=mode, sync_folder=sync_folder)


def write_json_atomic(
    path: Path,
    data: Any,
    *,
    indent: int | None = 2,
    mode: int | None = PRIVATE,
    sync_folder: bool = False,
) -> None:
    """A JSON record: keys sorted, `indent` spaces (None: one line), ending in a newline."""
    text = json.dumps(data, indent=indent, sort_keys=True) + "\n"
    write_text_atomic(path, text, mode=mode, sync_folder=sync_folder)


class AtomicFile:
    """A file streamed to a temporary name beside `path` and renamed over it when the `with` block
    succeeds (the temporary file is removed when it fails); or, outside a `with`, `open`, then
    `commit` (or `abandon`).

    `mode` is the file's permission bits (None: as any new file, 0o666 less the umask). With
    `sync_folder` the rename itself is flushed too, for records that must survive a power cut.
    """

    def __init__(self, path: Path, *, mode: int | None = PRIVATE, sync_folder: bool = False) -> None:
        self.path = path
        self.mode = mode
        self.sync_folder = sync_folder
        self.temporary: Path | None = None  # the file being written, once it is named
        self.handle: IO[bytes] | None = None

    def __enter__(self) -> IO[bytes]:
        return self.open()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is None:
            self.commit()
            return
        self.abandon()
        if isinstance(error, OSError) and _naming(error, self.path) is not error:
            raise _naming(error, self.path) from error

    def open(self) -> IO[bytes]:
        """The temporary file, open for writing; nothing is left when this fails."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.handle = os.fdopen(self._create_temporary(), "wb")
        except BaseException:
            self.abandon()
            raise
        return self.handle

    def commit(self) -> None:
        """Flush the file to disk and rename it over the target; on any failure nothing is left."""
        try:
            assert self.handle is not None and self.temporary is not None, "commit() before open()"
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self.handle.close()
            self.temporary.replace(self.path)
            self.temporary = None
        except BaseException as exc:
            self.abandon()
            if isinstance(exc, OSError) and _naming(exc, self.path) is not exc:
                raise _naming(exc, self.path) from exc
            raise
        if self.sync_folder:
            sync_directory(self.path.parent)

    def abandon(self) -> None:
        """Closed, and the temporary file removed (none once it is renamed over the target)."""
        if self.handle is not None:
            with contextlib.suppress(OSError):  # what it held is given up with the file
                self.handle.close()
        if self.temporary is not None:
            self.temporary.unlink(missing_ok=True)

    def _create_temporary(self) -> int:
        """A new file beside the target, named after it (`.<name>.<random>.tmp`), open for writing;
        `temporary` names it from before it exists, so that whatever stops us next can remove it."""
        mode = self.mode
        while True:
            self.temporary = self.path.with_name(f".{self.path.name}.{os.urandom(4).hex()}.tmp")
            try:
                fd = os.open(self.temporary, _CREATE, 0o666 if mode is None else PRIVATE)
            except FileExistsError:
                self.temporary = None  # another's: never ours to remove
                continue
            break
        if mode is not None and mode != PRIVATE:
            try:
                os.fchmod(fd, mode)
            except BaseException:
                os.close(fd)
                raise
        return fd


def _naming(error: OSError, path: Path) -> OSError:
    """A full disk met while writing `path`, as an error that names it (a write's own error names no
    file, and the sentence the user gets says which disk is full); any other error as it is."""
    if error.filename is not None or not is_full(error):
        return error
    return OSError(error.errno, error.strerror, str(path))


def replace_symlink(link: Path, target: str) -> None:
    """Point `link` at `target` in one step: a reader finds the old link or the new one."""
    temporary: Path | None = None
    try:
        while True:
            temporary = link.with_name(f".{link.name}.{os.urandom(4).hex()}")
            try:
                temporary.symlink_to(target)
                break
            except FileExistsError:
                temporary = None  # another's: never ours to remove
        temporary.replace(link)
    except BaseException:  # also a signal between any two calls: no temporary link is left
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise


def sync_directory(folder: Path) -> None:
    """Flush a folder's entries (a rename into it) to disk; a file system that cannot is left be."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads`, refusing a document nested deeper than `max_depth` with JsonTooDeep.

    Other malformed input raises what `json.loads` raises (JSONDecodeError, UnicodeDecodeError).
    """
    try:
        document = json.loads(text)
    except RecursionError:
        raise JsonTooDeep(f"nests deeper than {max_depth} levels") from None
    if json_depth(document) > max_depth:
        raise JsonTooDeep(f"nests deeper than {max_depth} levels")
    return document


def json_depth(document: Any) -> int:
    """How deeply lists and objects nest in a parsed document (a scalar is 0), found without recursion."""
    if not isinstance(document, (dict, list)):
        return 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in value.values() if isinstance(value, dict) else value:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return deepest


def json_number(value: float | None) -> float | str | None:
    """A float as JSON can hold it: NaN and the infinities, which JSON has no literal for, as text."""
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
