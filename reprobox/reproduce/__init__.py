"""The reviewer's side: an attestation (or a bundle) -> the author's job run again here -> one sentence.

Order matters, and nothing runs until every check before it passed: read the attestation (and check
its signature), check the code tree file by file, check or load or rebuild the image, then replay the
author's settings (seed, determinism, effective thread count, environment), run the job N times and
classify the result against the published hashes:

- ``bit-identical to the published checkpoints`` (exit 0);
- ``same stack, different result: a real nondeterminism`` (exit 1);
- ``different stack: bitwise equality not expected; ...`` naming the fingerprint fields that differ
  (exit 1, or 0 when ``tolerance`` is given and met);
- code mismatch (exit 2) or image mismatch (exit 4), before anything runs.
"""

from __future__ import annotations

from reprobox.reproduce._flow import (
    reproduce,
)
from reprobox.reproduce._model import (
    BIT_IDENTICAL,
    CODE_MISMATCH,
    DIFFERENT_STACK,
    IMAGE_MISMATCH,
    NONDETERMINISTIC,
    SENTENCE_IDENTICAL,
    ReproduceOptions,
    ReproduceResult,
)

__all__ = [
    "BIT_IDENTICAL",
    "CODE_MISMATCH",
    "DIFFERENT_STACK",
    "IMAGE_MISMATCH",
    "NONDETERMINISTIC",
    "SENTENCE_IDENTICAL",
    "ReproduceOptions",
    "ReproduceResult",
    "reproduce",
]
