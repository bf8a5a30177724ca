"""Air-gapped bundles: one tar with the attestation, the code, the job, the image and (optionally) the
author's checkpoints and data, so a reviewer can reproduce with no registry and no network.

Layout (plain tar, deterministic: sorted names, owner 0, fixed mtime, modes 644/755):

    index.json          first member: schema, what is where, and every member's size and sha256
    attestation.json    the attestation exactly as published (signed or not)
    attestation.reprobox.model.sig   the checkpoints' OpenSSF model signature, when one lies beside it
    tree/...            the attested code files, the job file and packed data at their relative places
    published/...       the author's checkpoints (outputs/...) and trail, when packed
    image.tar           `docker save` of the job's image, when the job ran in one

The bundle's own sha256 is written next to it as ``BUNDLE.sha256`` (sha256sum format). Opening a bundle
checks everything before anything runs (see ``_extract``).
"""

from __future__ import annotations

from reprobox.bundle._extract import (
    open_bundle,
)
from reprobox.bundle._model import (
    BUNDLE_SCHEMA,
    MEMBER_MTIME,
    TRAIL_NAME,
    Bundle,
    digest_file_for,
    looks_like_bundle,
)
from reprobox.bundle._pack import (
    describe_changes,
    pack,
)
from reprobox.bundle._published import (
    check_published,
)

__all__ = [
    "BUNDLE_SCHEMA",
    "MEMBER_MTIME",
    "TRAIL_NAME",
    "Bundle",
    "check_published",
    "describe_changes",
    "digest_file_for",
    "looks_like_bundle",
    "open_bundle",
    "pack",
]
