"""``python -m reprobox.guest.fingerprint``: print this machine's fingerprint, as JSON or a table.

The guest side of `reprobox fingerprint`, run inside the job's container where the controller's CLI is
not imported. It takes three fixed flags, read once here into a `Request`; anything else is refused.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reprobox.fileio import write_text_atomic
from reprobox.guest.fingerprint import TORCH_NOT_IMPORTED, _collect, format_table
from reprobox.guest.fingerprint._absent import _reason

USAGE = "usage: python -m reprobox.guest.fingerprint [--import-torch] [--table] [--output FILE]"
HELP = """Print this machine's reprobox fingerprint as JSON.
  --import-torch  import torch (and numpy) first, as a job would
  --table         print a readable table instead of JSON
  --output FILE   write the JSON here (atomically) instead of printing it
"""


@dataclass(frozen=True)
class Request:
    import_torch: bool = False  # import torch (and numpy) first, as a job would
    table: bool = False  # print a readable table instead of JSON
    output: Path | None = None  # write the JSON here (atomically) instead of printing it


def parse(argv: Sequence[str]) -> Request:
    """The request the flags make; ValueError naming the flag it cannot take."""
    flags = list(argv)
    import_torch = table = False
    output: Path | None = None
    while flags:
        flag = flags.pop(0)
        if flag == "--import-torch":
            import_torch = True
        elif flag == "--table":
            table = True
        elif flag == "--output" and flags:
            output = Path(flags.pop(0))
        elif flag.startswith("--output="):
            output = Path(flag.partition("=")[2])
        else:
            raise ValueError(f"cannot take {flag!r}" + (" without a FILE" if flag == "--output" else ""))
    return Request(import_torch=import_torch, table=table, output=output)


def main(argv: Sequence[str] | None = None) -> int:
    flags = sys.argv[1:] if argv is None else list(argv)
    if "-h" in flags or "--help" in flags:
        sys.stdout.write(f"{USAGE}\n{HELP}")
        return 0
    try:
        args = parse(flags)
    except ValueError as exc:
        sys.stderr.write(f"{USAGE}\nerror: {exc}\n")
        return 2
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
