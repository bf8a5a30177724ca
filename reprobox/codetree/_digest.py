"""Digest the selected files of a code folder into a CodeTree."""

from __future__ import annotations

from pathlib import Path

from reprobox.codetree._select import IGNORE_FILE, Selection, select_files
from reprobox.codetree._tree import CodeTree, entry_digest, tree_digest
from reprobox.errors import UsageError


def digest_tree(root: Path, *, exclude: tuple[Path, ...] = ()) -> CodeTree:
    """The code in `root` as a tree of per-file digests; `exclude` lists extra folders to skip."""
    return digest_selection(select_files(root, exclude=exclude))


def digest_selection(selection: Selection) -> CodeTree:
    files: dict[str, str] = {}
    for relative in selection.files:
        path = selection.root / relative
        try:
            files[relative] = entry_digest(path)
        except FileNotFoundError:
            continue  # removed since it was listed: it is not part of the code any more
        except OSError as exc:
            raise UsageError(
                f"cannot read {path} ({exc.strerror}) to digest the code; make it readable, or list it in "
                f"{selection.root / IGNORE_FILE} (or .gitignore) if it is not code"
            ) from None
    return CodeTree(digest=tree_digest(files), files=files, git=selection.git, selection=selection.mode)
