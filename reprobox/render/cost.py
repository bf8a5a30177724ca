"""`reprobox cost` as terminal text: the table of settings, the recommendation as a job-file block."""

from __future__ import annotations

from reprobox.cost import CostResult
from reprobox.cost._model import SettingResult
from reprobox.cost._settings import DEFAULT


def cost_text(result: CostResult) -> str:
    lines = [
        f"cost of determinism for {result.job} on {result.device_name} ({result.device}): "
        f"{result.runs_per_setting} runs of up to {result.max_steps} steps per setting, "
        "step times relative to the fastest",
        "",
        f"  {'setting':<44} {'step':>10} {'relative':>9}  {'bit-exact':<10} {'same numbers':<13}",
    ]
    lines += [_row(r) for r in result.results]
    lines.append("")
    recommended = result.recommended
    if recommended is None:
        lines.append("no recommendation: the job is not bit-exact under its own settings")
    elif recommended.name == DEFAULT:
        lines.append(
            "recommended: the job's own settings, its thread count pinned (no setting that keeps the "
            "guarantee was bit-exact and faster beyond the runs' noise); in job.yaml:"
        )
    else:
        speed = f", {recommended.speedup:.2f}x the speed of the job's own" if recommended.speedup else ""
        lines.append(f"recommended: {recommended.name} (the cheapest bit-exact setting{speed}); in job.yaml:")
        lines += ["  " + line for line in recommended.block.splitlines()]
    fast = result.fast_not_bit_exact()
    if fast:
        lines.append(
            "faster but not bit-exact: " + ", ".join(f"{r.setting.name} ({_relative(r)})" for r in fast)
        )
    unguaranteed = result.unguaranteed()
    if unguaranteed:
        lines.append(
            "bit-exact here but not guaranteed (never recommended: the next change may call a kernel "
            "that varies): " + ", ".join(f"{r.setting.name} ({_relative(r)})" for r in unguaranteed)
        )
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def _row(result: SettingResult) -> str:
    name = result.setting.name
    if result.failure and result.bit_exact is None:
        return f"  {name:<44} failed: {result.failure}"
    seconds = result.step_seconds
    step = f"{seconds * 1000:.3g} ms" if seconds else "-"
    exact = {True: "yes", False: "NO", None: "-"}[result.bit_exact]
    same = {True: "yes", False: "no", None: "-"}[result.same_numbers_as_default]
    return f"  {name:<44} {step:>10} {_relative(result):>9}  {exact:<10} {same:<13}"


def _relative(result: SettingResult) -> str:
    return f"{result.relative_time:.2f}x" if result.relative_time else "-"
