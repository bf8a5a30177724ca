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

from reprobox.image import LABEL_PREFIX
from reprobox.reproduce._classify import NAMED_FIELDS
from reprobox.reproduce._flow import reproduce
from reprobox.reproduce._image import image_mismatch
from reprobox.reproduce._model import (
    BIT_IDENTICAL,
    CODE_MISMATCH,
    DIFFERENT_STACK,
    FAILED,
    IMAGE_MISMATCH,
    NONDETERMINISTIC,
    REPRODUCED,
    SENTENCE_IDENTICAL,
    ReproduceOptions,
    ReproduceResult,
)
from reprobox.reproduce._replay import THREAD_VARIABLES, replay_job
from reprobox.reproduce._report import RESULT_NAME

__all__ = [
    "BIT_IDENTICAL",
    "CODE_MISMATCH",
    "DIFFERENT_STACK",
    "FAILED",
    "IMAGE_MISMATCH",
    "LABEL_PREFIX",
    "NAMED_FIELDS",
    "NONDETERMINISTIC",
    "REPRODUCED",
    "RESULT_NAME",
    "SENTENCE_IDENTICAL",
    "THREAD_VARIABLES",
    "ReproduceOptions",
    "ReproduceResult",
    "image_mismatch",
    "replay_job",
    "reproduce",
]
