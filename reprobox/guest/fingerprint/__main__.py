"""``python -m reprobox.guest.fingerprint``: print this machine's fingerprint, as JSON or a table."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from reprobox.guest.fingerprint import TORCH_NOT_IMPORTED, _collect, format_table
from reprobox.guest.fingerprint._absent import _reason
from reprobox.records.files import write_text_atomic


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reprobox.guest.fingerprint",
        description="Print this machine's reprobox fingerprint as JSON.",
    )
    parser.add_argument(
        "--import-torch", action="store_true", help="import torch (and numpy) first, as a job would"
    )
    parser.add_argument("--output", type=Path, help="write the JSON here (atomically) instead of printing it")
    parser.add_argument("--table", action="store_true", help="print a readable table instead of JSON")
    args = parser.parse_args(argv)
    torch_reason = TORCH_NOT_IMPORTED
    if args.import_torch:
        try:
            importlib.import_module("torch")
        except Exception as exc:
            torch_reason = f"import torch failed ({_reason(exc)})"
        with contextlib.suppress(Exception):  # recorded as not imported
            importlib.import_module("numpy")
    fp = _collect(nvml=None, image=None, torch_reason=torch_reason)
    text = json.dumps(fp, indent=2) + "\n"
    if args.output is not None:
        write_text_atomic(args.output, text, mode=None)
    if args.table:
        sys.stdout.write(format_table(fp) + "\n")
    elif args.output is None:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
