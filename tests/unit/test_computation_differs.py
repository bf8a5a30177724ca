"""Equal checkpoints from runs that computed differently (the loss in their trails differs, as a GPU's
atomics can leave it): not reproducible, with the step and both losses named, never bit-identical."""

from __future__ import annotations

import json
from pathlib import Path

from reprobox import cli
from reprobox.records.trail import StepRecord
from reprobox.trails import first_divergence

JOBS = Path(__file__).parents[1] / "jobs"


def test_equal_weights_and_a_differing_loss_are_not_reproducible(tmp_path: Path, capsys) -> None:
    code = cli.main(
        [
            "verify",
            str(JOBS / "loss-wobbles"),
            *("--runtime", "local", "--runs-dir", str(tmp_path), "--no-attestation", "--no-drill-down"),
            *("--json", "-q"),
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["verdict"] == "different"
    assert [c["identical"] for c in data["checkpoints"]] == [True]  # the weights saved are equal
    first = data["first_divergence"]
    assert (first["step"], first["parameters"], first["values"]) == (1, [], ["loss"])
    assert data["sentence"].startswith("not reproducible: the loss at step 1 differs (")
    assert "although every saved value is equal" in data["sentence"]
    assert data["explanation"]["same_stack"] is True


def test_only_the_trails_own_loss_is_compared_and_nan_equals_nan() -> None:
    """A value the job logs itself (a throughput, a time) may differ; two NaN losses are the same."""
    from reprobox.records.trail import HashTrail

    def trail(**scalars: float) -> HashTrail:
        made = HashTrail()
        made.add(StepRecord(1, {"w": ["d", 0.0, 0.0]}, "m", dict(scalars)))
        return made

    assert (
        first_divergence(trail(loss=float("nan"), seconds=1.0), trail(loss=float("nan"), seconds=2.0)) is None
    )
    assert first_divergence(trail(loss=0.5), trail(loss=0.25)) is not None
