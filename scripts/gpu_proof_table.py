"""The Markdown table of scripts/gpu-proof.sh: each check, what it must show, what it showed, and whether
it held. Reads the JSON that `reprobox ... --json` printed, and status.txt: the machine's lines, then
`exit NAME CODE` for each check.

Usage: python scripts/gpu_proof_table.py OUTPUT_DIR   (exit 1 when a check did not hold)
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _status_lines(out: Path) -> list[str]:
    path = out / "status.txt"
    return path.read_text(errors="replace").splitlines() if path.exists() else []


def _exit_code(out: Path, name: str) -> int | None:
    codes = [line.split() for line in _status_lines(out) if line.startswith("exit ")]
    found = [int(parts[2]) for parts in codes if len(parts) == 3 and parts[1] == name and parts[2].isdigit()]
    return found[-1] if found else None


def _json(out: Path, name: str) -> dict[str, Any]:
    try:
        data = json.loads((out / f"{name}.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def tests_row(out: Path) -> tuple[str, str, str, bool]:
    log = (out / "pytest.log").read_text(errors="replace") if (out / "pytest.log").exists() else ""
    tail = log.strip().splitlines()[-1] if log.strip() else "no output"
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", log, re.MULTILINE)
    held = _exit_code(out, "pytest") == 0 and " passed" in tail and "skipped" not in tail
    got = tail.strip("= ") + (f"; failed: {', '.join(failed)}" if failed else "")
    return "GPU tests (`pytest -m gpu`)", "all pass, none skipped", got, held


def verify_row(
    name: str,
    title: str,
    expected_code: int,
    expected: str,
    extra: Callable[[dict[str, Any]], tuple[str, bool]],
) -> Callable[[Path], tuple[str, str, str, bool]]:
    def row(out: Path) -> tuple[str, str, str, bool]:
        data, code = _json(out, name), _exit_code(out, name)
        sentence = str(data.get("sentence") or (data.get("notes") or ["no verdict"])[0])
        more, more_held = extra(data)
        got = f"exit {code}: {sentence}" + (f"; {more}" if more else "")
        return title, expected, got, code == expected_code and more_held

    return row


def _nothing(_data: dict[str, Any]) -> tuple[str, bool]:
    return "", True


def _atomics(data: dict[str, Any]) -> tuple[str, bool]:
    operation = (data.get("first_divergence") or {}).get("operation") or {}
    sentence = str(operation.get("sentence") or "no operation named")
    held = "atomic" in sentence and operation.get("cause") == "operation"
    return f"drill-down: {sentence}", held


def cost_row(out: Path) -> tuple[str, str, str, bool]:
    data, code = _json(out, "cost"), _exit_code(out, "cost")
    recommended = data.get("recommended") or {}
    rows = data.get("settings") or []
    measured = [r for r in rows if r.get("step_seconds")]
    got = (
        f"exit {code}: {len(measured)} of {len(rows)} settings measured on {data.get('device_name')}; "
        f"recommended {recommended.get('name')} ({recommended.get('speedup_over_default') or 0:.2f}x)"
        if data
        else f"exit {code}: no result"
    )
    held = code == 0 and data.get("device") == "cuda" and bool(recommended) and len(measured) == len(rows)
    return "`reprobox cost` on the conv net", "a bit-exact recommendation, every setting timed", got, held


def cost_table(out: Path) -> list[str]:
    data = _json(out, "cost")
    if not data:
        return []
    lines = [
        "",
        f"Cost of determinism, {data.get('job')} on {data.get('device_name')} "
        f"({data.get('max_steps')} steps, {data.get('runs_per_setting')} runs per setting):",
        "",
        "| setting | step (ms) | relative | bit-exact | same numbers as the job's own |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in data.get("settings") or []:
        seconds, relative = row.get("step_seconds"), row.get("relative_time")
        lines.append(
            f"| {_cell(str(row.get('name')))} | {seconds * 1000:.3g} | {relative:.2f}x | "
            f"{row.get('bit_exact')} | {row.get('same_numbers_as_default')} |"
            if seconds and relative
            else f"| {_cell(str(row.get('name')))} | failed: {_cell(str(row.get('failure')))} | | | |"
        )
    block = (data.get("recommended") or {}).get("block")
    if block:
        lines += ["", "Recommended:", "", "```yaml", block, "```"]
    return lines


CHECKS = [
    tests_row,
    verify_row("verify-conv", "verify: CNN with cuDNN convolutions", 0, "bit-identical, exit 0", _nothing),
    verify_row(
        "verify-attention", "verify: bf16 transformer with SDPA", 0, "bit-identical, exit 0", _nothing
    ),
    verify_row(
        "verify-atomics",
        "verify: index_add_ with `algorithms: false`",
        1,
        "not reproducible, exit 1; the drill-down names an atomics op (index_add_, index_put_)",
        _atomics,
    ),
    cost_row,
]


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    lines = [
        f"Machine: {line}" for line in _status_lines(out) if line.strip() and not line.startswith("exit ")
    ]
    lines += ["", "| check | expected | got | held |", "| --- | --- | --- | --- |"]
    all_held = True
    for check in CHECKS:
        title, expected, got, held = check(out)
        all_held = all_held and held
        lines.append(f"| {_cell(title)} | {_cell(expected)} | {_cell(got)} | {'yes' if held else 'NO'} |")
    lines += cost_table(out)
    print("\n".join(lines))
    return 0 if all_held else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
