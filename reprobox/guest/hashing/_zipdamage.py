"""What a damaged or hostile zip archive raises while it is read: the archive's fault, never the machine's.

Every reader of a zip (torch's, NumPy's, an archive of checkpoints) catches these as the file's note.
"""

from __future__ import annotations

import errno
import lzma
import struct
import zipfile
import zlib


def damaged_stream(exc: OSError) -> bool:
    """Whether an OSError met while decoding a file says the file is damaged, not that the machine failed.

    Decompressors report a broken stream as an OSError without an errno (bz2's "Invalid data stream"), and
    a zip directory that points before the file's first byte makes the reader seek there (EINVAL). What
    the machine did (permissions, a file removed while read, a full disk, an I/O error) carries its errno.
    """
    return exc.errno is None or exc.errno == errno.EINVAL


ZIP_DAMAGE: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    EOFError,
    KeyError,
    IndexError,  # a member whose name is empty
    NotImplementedError,  # a zip version or compression this Python does not have
    RuntimeError,  # an encrypted member
    ValueError,
    struct.error,
    zlib.error,  # a damaged deflate stream
    lzma.LZMAError,
)
"""What zipfile and its decompressors raise on a damaged or hostile archive: every reader of a zip (torch's,
NumPy's, an archive of checkpoints) catches these, and ``damaged_stream``'s OSErrors, as the file's fault."""
