"""The `claims:` section (the numbers a paper reports, where the job writes them, how close a
reproduction must come) and `accept:` (whether holding claims is enough for `reproduce` to pass)."""

from __future__ import annotations

import math
import re
from pathlib import PurePosixPath
from typing import Any

from reprobox.jobfile._checker import Checker, describe
from reprobox.jobfile.schema import ACCEPT_LEVELS, Claim

CLAIM_KEYS = ("name", "file", "key", "tolerance", "at_least", "at_most")
CLAIM_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@/-]{0,127}$")
STDOUT = "stdout"
STRUCTURED_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".csv", ".tsv")
# Checkpoints read by name, the way hashing names their values (a timm checkpoint's `metric`), unpickled never
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".tar", ".safetensors", ".npz", ".pkl", ".pickle")
MAX_CLAIMS = 256
_RELATIVE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*%\s*$")


def is_text_source(file: str) -> bool:
    """Whether a claim's key is a regex: the job's log, or a file no structured reader knows."""
    return file == STDOUT or not file.lower().endswith(STRUCTURED_SUFFIXES + CHECKPOINT_SUFFIXES)


def is_checkpoint_source(file: str) -> bool:
    return file.lower().endswith(CHECKPOINT_SUFFIXES)


def check_claims(c: Checker, value: Any) -> tuple[Claim, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        c.fail("claims", f"must be a list of {{name, file, key, tolerance}} mappings, not {describe(value)}")
        return ()
    if len(value) > MAX_CLAIMS:
        c.fail("claims", f"lists {len(value)} claims, more than {MAX_CLAIMS}; keep those the paper reports")
        return ()
    claims: list[Claim] = []
    seen: set[str] = set()
    for index, entry in enumerate(value):
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name in seen:
            c.fail(f"claims.{index}.name", f"'{name}' is claimed twice; give each claim its own name")
            continue
        if isinstance(name, str):
            seen.add(name)
        claim = _check_claim(c, entry, f"claims.{index}")
        if claim is not None:
            claims.append(claim)
    return tuple(claims)


def check_accept(c: Checker, value: Any) -> str:
    if value is None:
        return "bits"
    if value not in ACCEPT_LEVELS:
        c.fail(
            "accept",
            f"must be one of {', '.join(ACCEPT_LEVELS)} ('claims': a reproduction on another stack passes "
            f"when every claim holds), not {describe(value)}",
        )
        return "bits"
    return str(value)


def _check_claim(c: Checker, entry: Any, dotted: str) -> Claim | None:
    if not isinstance(entry, dict):
        c.fail(dotted, f"must be a mapping with name, file, key and tolerance, not {describe(entry)}")
        return None
    c.check_keys(entry, CLAIM_KEYS, dotted)
    name, file, key = entry.get("name"), entry.get("file"), entry.get("key")
    ok = True
    if not isinstance(name, str) or not CLAIM_NAME.match(name):
        c.fail(
            f"{dotted}.name",
            f"must name the claim as the paper does, e.g. val_acc (letters, digits, _ . - / @), not "
            f"{describe(name)}",
        )
        ok = False
    file_ok = isinstance(file, str) and _inside_outputs(file)
    if not file_ok:
        c.fail(
            f"{dotted}.file",
            "must be a file under the outputs folder such as metrics.json (no leading '/' or '..'), or "
            f"'{STDOUT}' for the job's log, not {describe(file)}",
        )
        ok = False
    if not isinstance(key, str) or not key:
        c.fail(
            f"{dotted}.key",
            "must say where the number is: a key path such as eval.accuracy, a CSV column, or for "
            f"'{STDOUT}' and text files a regex with one group, not {describe(key)}",
        )
        ok = False
    elif file_ok and is_text_source(str(file)) and not _one_group_regex(c, key, f"{dotted}.key"):
        ok = False
    tolerance, relative = _tolerance(c, entry.get("tolerance"), f"{dotted}.tolerance")
    at_least = _bound(c, entry.get("at_least"), f"{dotted}.at_least")
    at_most = _bound(c, entry.get("at_most"), f"{dotted}.at_most")
    criteria = ("tolerance", "at_least", "at_most")
    if ok and not any(key in entry for key in criteria) and set(entry) <= set(CLAIM_KEYS):
        c.fail(
            dotted,
            "says no criterion; add tolerance (absolute such as 0.01, or relative such as '1%'; 0 for an "
            "exact value), at_least or at_most",
        )
        ok = False
    if at_least is not None and at_most is not None and at_least > at_most:
        c.fail(f"{dotted}.at_most", f"is {at_most:g}, below at_least {at_least:g}; no value could hold")
        ok = False
    if not ok:
        return None
    return Claim(
        name=str(name),
        file=str(file),
        key=str(key),
        tolerance=tolerance,
        relative=relative,
        at_least=at_least,
        at_most=at_most,
    )


def _inside_outputs(file: str) -> bool:
    if file == STDOUT:
        return True
    if not file or file.startswith("/") or "\\" in file or "\0" in file:
        return False
    return ".." not in PurePosixPath(file).parts


def _one_group_regex(c: Checker, key: str, dotted: str) -> bool:
    try:
        pattern = re.compile(key)
    except re.error as exc:
        c.fail(dotted, f"is not a valid regex ({exc}); e.g. 'val_acc=([0-9.]+)'")
        return False
    if pattern.groups != 1:
        c.fail(
            dotted,
            f"has {pattern.groups} groups; a regex over text needs exactly one, around the number, "
            "e.g. 'val_acc=([0-9.]+)'",
        )
        return False
    return True


def _tolerance(c: Checker, value: Any, dotted: str) -> tuple[float | None, bool]:
    if value is None:
        return None, False
    if isinstance(value, str) and (match := _RELATIVE.match(value)):
        return float(match.group(1)) / 100.0, True
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        c.fail(
            dotted,
            f"must be a non-negative number such as 0.01 or a percentage such as '1%', not {describe(value)}",
        )
        return None, False
    return float(value), False


def _bound(c: Checker, value: Any, dotted: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        c.fail(dotted, f"must be a number such as 0.97, not {describe(value)}")
        return None
    return float(value)
