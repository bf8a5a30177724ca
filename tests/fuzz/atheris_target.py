"""``python -m tests.fuzz.atheris_target TARGET [libFuzzer flags] [CORPUS]``: one target, coverage-guided.

atheris (libFuzzer for Python) instruments the readers and keeps the inputs that reach new code; its
mutations are this package's framing-aware ones (``mutate``), and its limits libFuzzer's own
(``-timeout``, ``-rss_limit_mb``). An input that ends otherwise than read or refused (UsageError) is a
crash, which libFuzzer writes to ``-artifact_prefix``. A text input is hashed under each text suffix, a
compressed one under a JSON and an .npy name.
"""

from __future__ import annotations

import contextlib
import random
import sys
import tempfile
import warnings
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["reprobox.guest.hashing"]):
    from reprobox.guest.hashing import hash_checkpoint

from reprobox.errors import UsageError
from tests.fuzz.forkserver import input_path, preload
from tests.fuzz.mutate import MUTATORS

TEXT_SUFFIXES = (".json", ".jsonl", ".yaml", ".csv")
COMPRESSED_SUFFIXES = (".json.gz", ".npy.gz")  # the name picks the reader of what the stream holds


def main(argv: list[str]) -> None:
    target = argv[1]
    folder = Path(tempfile.mkdtemp(prefix="reprobox-atheris-"))
    suffixes = {"text": TEXT_SUFFIXES, "compressed": COMPRESSED_SUFFIXES}.get(target, ("",))
    mutator = MUTATORS[target]
    preload()
    warnings.simplefilter("ignore")

    def one_input(data: bytes) -> None:
        for suffix in suffixes:
            path = input_path(folder, target, suffix)
            path.write_bytes(data)
            with contextlib.suppress(UsageError):  # refused, exit 2: a passing outcome
                hash_checkpoint(path, relative_to=path.parent, workers=1, strict=True)

    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        return mutator(random.Random(seed), data)[:max_size]

    atheris.Setup([argv[0], *argv[2:]], one_input, custom_mutator=mutate)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
