"""Tar headers from someone else, checked while tarfile parses them, before any member's data is read.

tarfile reads a PAX or GNU long-name header extension whole into memory, and rebuilds a sparse
member's map (a few blocks that declare terabytes of holes) block by block. Bundles hold neither, so
both are refused from inside tarfile's own header parser (its ``_proc_*`` hooks on TarInfo).
"""

from __future__ import annotations

import tarfile
from typing import Any

MAX_HEADER_BYTES = 1 << 20  # a PAX or GNU long-name header extension (a long path is a few KiB)
_EXTENSION_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


class Unsafe(Exception):
    """Raised from inside tarfile's header parsing, before a member's data is read."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


class CheckedTarInfo(tarfile.TarInfo):
    """The TarInfo tarfile builds each member with: sparse members and oversized extensions raise."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise Unsafe(self.name, "is a sparse file (GNU sparse member); bundles hold regular files only")
        if self.type in _EXTENSION_TYPES and self.size > MAX_HEADER_BYTES:
            raise Unsafe(
                self.name, f"has a {self.size}-byte header extension, over the {MAX_HEADER_BYTES} allowed"
            )
        member: tarfile.TarInfo = super()._proc_member(tarfile_)  # type: ignore[misc]
        return member

    def _proc_gnusparse_00(self, next_: tarfile.TarInfo, *_args: Any) -> None:
        _refuse_pax_sparse(next_)

    def _proc_gnusparse_01(self, next_: tarfile.TarInfo, *_args: Any) -> None:
        _refuse_pax_sparse(next_)

    def _proc_gnusparse_10(self, next_: tarfile.TarInfo, *_args: Any) -> None:
        _refuse_pax_sparse(next_)


def _refuse_pax_sparse(member: tarfile.TarInfo) -> None:
    raise Unsafe(member.name, "is a sparse file (PAX sparse member); bundles hold regular files only")


def is_sparse(member: tarfile.TarInfo) -> bool:
    return member.sparse is not None or any(key.startswith("GNU.sparse") for key in member.pax_headers)
