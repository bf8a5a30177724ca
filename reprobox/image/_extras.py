"""A job's extra packages as one layer over the shared image: the Dockerfile that installs them, and the
lock as pip reads it, which names the result.

The shared image (the Dockerfile at the top of the checkout) carries the whole stack; a job with
`image.requirements` gets that image plus one layer holding only the files its extras add. They are
installed into the shared image's venv by pip, hashes checked (from the wheelhouse alone where one is
set), their bytecode compiled as the shared image's is, and then copied, with every mtime set to a fixed
epoch, to a staging tree that the last stage copies onto the shared image. So the layer depends only on
the wheels: a rebuild gives the same layer digest. The first stage, which holds the wheels, is removed
after the build.

Jobs whose locks pin the same packages share one image: the lock enters the context and the tag without
its comments and blank lines, which pip never reads. The labels are written into the Dockerfile as one
instruction after the digests are taken (they hold the digests), so the context digest of an extras
image is that of its context without that LABEL line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from reprobox.image._context import CONTEXT_MTIME

EXTRAS_SOURCE = Path(__file__)
"""Where the extras Dockerfile comes from (a build plan names each context file's source)."""
EXTRAS_LOCK = "requirements.lock"
"""The job's lock inside the extras context, as `extras_lock_text` renders it."""

EXTRAS_DOCKERFILE = f"""\
# A job's extra packages over the shared reprobox image, rendered by reprobox/image/_extras.py.
# Build args: SHARED_IMAGE (the shared image), WHEELHOUSE ("wheelhouse" when the context's wheelhouse/
# holds every wheel of {EXTRAS_LOCK}: pip then installs from it alone), SOURCE_DATE_EPOCH.
ARG SHARED_IMAGE
FROM ${{SHARED_IMAGE}} AS extras
ARG WHEELHOUSE=
ARG SOURCE_DATE_EPOCH={CONTEXT_MTIME}
USER 0:0
COPY . /build/extra/
# Every path pip and compileall add under /opt/venv, and nothing else, is staged under /build/layer/.
RUN cd /; \\
    find opt/venv | LC_ALL=C sort >/build/before; \\
    source_args=""; \\
    if [ -n "${{WHEELHOUSE}}" ]; then source_args="--no-index --find-links /build/extra/wheelhouse"; fi; \\
    PYTHONDONTWRITEBYTECODE=1 /opt/venv/bin/python -m pip install \\
        --require-hashes --only-binary=:all: --no-compile --no-cache-dir --disable-pip-version-check \\
        --no-warn-script-location ${{source_args}} --requirement /build/extra/{EXTRAS_LOCK}; \\
    PYTHONDONTWRITEBYTECODE=1 /opt/venv/bin/python -m pip check --disable-pip-version-check; \\
    find opt/venv -name '*.py' | LC_ALL=C sort | LC_ALL=C comm -13 /build/before - | sed 's|^|/|' \\
        >/build/sources; \\
    if [ -s /build/sources ]; then \\
        PYTHONHASHSEED=0 /opt/venv/bin/python -B -m compileall -q --invalidation-mode unchecked-hash \\
            -i /build/sources >/dev/null || true; \\
    fi; \\
    find opt/venv | LC_ALL=C sort | LC_ALL=C comm -13 /build/before - >/build/added; \\
    mkdir /build/layer; \\
    tar -c --no-recursion -T /build/added -f - | tar -x -C /build/layer -f -; \\
    find /build/layer -exec touch -h -d "@${{SOURCE_DATE_EPOCH}}" {{}} +

FROM ${{SHARED_IMAGE}}
COPY --from=extras /build/layer/ /
"""


def extras_dockerfile(labels: Mapping[str, str]) -> bytes:
    """EXTRAS_DOCKERFILE with the image's labels in one LABEL instruction: the engine would take one build
    step (a container and a commit, about a second each) per label passed to it."""
    pairs = " \\\n      ".join(f"{key}={json.dumps(value)}" for key, value in sorted(labels.items()))
    return f"{EXTRAS_DOCKERFILE}LABEL {pairs}\n".encode()


def extras_lock_text(lock: Path) -> bytes:
    """The lock as pip reads it: its lines without comments, blank lines or trailing spaces, in order."""
    kept = []
    for raw in lock.read_text(encoding="utf-8").splitlines():
        text = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if text:
            kept.append(text)
    return ("\n".join(kept) + "\n").encode()


def extras_names(lock_text: bytes) -> str:
    """`name==version` of each requirement, space-separated: the label that lets an image explain itself."""
    names = [
        line.split()[0]
        for line in lock_text.decode().splitlines()
        if line and not line.startswith((" ", "\t", "-"))
    ]
    return " ".join(names)
