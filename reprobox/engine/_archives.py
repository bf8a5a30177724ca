"""Image archives (docker save / docker load), for air-gapped bundles."""

from __future__ import annotations

import functools
import re
from typing import IO

from reprobox.engine._client import Engine
from reprobox.engine._errors import ImageMissing, LoadFailed
from reprobox.engine._images import ImageInfo
from reprobox.engine._translate import translated

_LOADED_ID = re.compile(r"Loaded image ID:\s*(\S+)")
_LOADED_TAG = re.compile(r"Loaded image:\s*(\S+)")


def save_image(engine: Engine, ref: str, out: IO[bytes]) -> int:
    """Write `docker save REF` to `out` as it streams from the engine; returns the bytes written.

    Saving by tag keeps the tag in the archive, so `load_image` gives the image back under its name.
    """
    missing = functools.partial(
        ImageMissing, ref, where="on this Docker engine, so it cannot be saved", fix="build or load it first"
    )
    written = 0
    with translated(f"saving image {ref} failed", missing=missing):
        for chunk in engine.client.api.get_image(ref):
            out.write(chunk)
            written += len(chunk)
    return written


def load_image(engine: Engine, stream: IO[bytes]) -> list[ImageInfo]:
    """`docker load` from an archive stream; returns the images it loaded (no registry is contacted)."""
    loaded: list[str] = []
    with translated("loading an image archive failed"):
        for event in engine.client.api.load_image(stream) or ():
            if event.get("error") or event.get("errorDetail"):
                raise LoadFailed(str((event.get("errorDetail") or {}).get("message") or event.get("error")))
            text = str(event.get("stream", ""))
            for pattern in (_LOADED_ID, _LOADED_TAG):
                match = pattern.search(text)
                if match:
                    loaded.append(match.group(1))
    if not loaded:
        raise LoadFailed()
    infos: dict[str, ImageInfo] = {}
    for ref in loaded:
        info = engine.inspect_image(ref)
        infos[info.id] = info
    return list(infos.values())
