"""The report's figure: how far two runs drift apart per optimizer step, and their loss curves."""

from __future__ import annotations

import io
from collections.abc import Sequence

Series = Sequence[tuple[int, float]]


def divergence_figure(
    drift: Series,
    losses: Sequence[tuple[str, Series]],
    first_step: int | None,
    *,
    fmt: str = "svg",
) -> bytes:
    """Two panels sharing the step axis; `fmt` is "svg" or "png". Needs matplotlib (the `report` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if any(series for _, series in losses) else 1
    figure, axes = plt.subplots(panels, 1, figsize=(8, 2.6 * panels + 0.6), sharex=True, squeeze=False)
    top = axes[0][0]
    if drift:
        steps = [s for s, _ in drift]
        values = [max(v, 1e-12) if v > 0 else 0.0 for _, v in drift]
        top.plot(steps, values, marker=".", linewidth=1.2, color="#c0392b", label="max parameter drift")
        if any(v > 0 for v in values):
            top.set_yscale("symlog", linthresh=1e-9)
    top.set_ylabel("max |difference|")
    top.set_title("Divergence between the runs per optimizer step")
    if panels == 2:
        bottom = axes[1][0]
        styles = ["-", "--", ":", "-."]
        for index, (label, series) in enumerate(losses):
            if series:
                bottom.plot(
                    [s for s, _ in series],
                    [v for _, v in series],
                    linestyle=styles[index % len(styles)],
                    linewidth=1.4,
                    label=label,
                )
        bottom.set_ylabel("loss")
        bottom.legend(loc="upper right", fontsize="small")
    for row in axes:
        axis = row[0]
        axis.grid(True, alpha=0.3)
        if first_step is not None:
            axis.axvline(first_step, color="#2c3e50", linestyle="--", linewidth=1)
    if first_step is not None:
        top.annotate(
            f"first divergence: step {first_step}",
            xy=(first_step, 0.95),
            xycoords=("data", "axes fraction"),
            xytext=(6, 0),
            textcoords="offset points",
            va="top",
            fontsize="small",
        )
    axes[-1][0].set_xlabel("optimizer step")
    figure.tight_layout()
    buffer = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {}
    figure.savefig(buffer, format=fmt, dpi=110, metadata=metadata)
    plt.close(figure)
    return buffer.getvalue()
