"""Ids cut from the run's clock (a ``uuid1``, or its first hex digits as Ray Tune's trial ids) and readings
of its monotonic clocks are excused by the run's own record of them, never by their look.

The guest's record first (each uuid1 as it returned, within its bound, merged), then the evidence against
hand-made records: every way such an id is written, its controls (hex of the same shape that no uuid1 of
the run begins with, another run's id), the number of first digits that is no chance, file names that
pair, and monotonic readings saved whole. Then a real job on the local runtime, without torch: Ray-like
trial folders and ids that reproduce, and its control (one trial id drawn from a generator seeded from
os.urandom), which stays exit 1 and is named.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli
from reprobox.guest import clock_ids, readings_merge
from reprobox.runspecific import CLOCK_ID, CLOCK_READING, RunContext, judge_value, mask, mask_file_name
from reprobox.runspecific._clockids import MIN_PREFIX, ClockIdRecord, prefix_length
from reprobox.runspecific._readings import ReadingRecord
from reprobox.timestamps import utc_stamp

JOBS = Path(__file__).parents[1] / "jobs"
START = 1_795_920_000.0  # the window the runs below ran in (Unix seconds)


def run_with(
    made: list[str] | None = None, monotonic: list[float] | None = None, start: float = START
) -> RunContext:
    """A run's context from its facts: the uuid1s it made, its monotonic readings, a 60 s window."""
    facts: dict[str, Any] = {"clock_ids": made or [], "clocks": []}
    if monotonic:
        entry = {"pid": 7, "clock": "monotonic", "site_names": ["t.py:1"], "sites": [0] * len(monotonic)}
        facts["clocks"] = [{**entry, "values": monotonic, "skipped": 0, "dropped": 0}]
    clock = {"start": utc_stamp(start), "end": utc_stamp(start + 60)}
    return RunContext.from_record("/runs/j/r1", {"run_facts": {"readings": facts, "clock": clock}})


def uuid1_at(seconds: float) -> uuid.UUID:
    """A uuid1 as ``uuid.uuid1`` makes it at that instant (100 ns since 1582, a clock sequence, a node)."""
    ticks = int(seconds * 1e7) + 0x01B21DD213814000
    time_fields = (ticks & 0xFFFFFFFF, (ticks >> 32) & 0xFFFF, (ticks >> 48) & 0x0FFF | 0x1000)
    return uuid.UUID(fields=(*time_fields, 0x81, 0x6B, 0x02FC0001))


# --- the guest's record ------------------------------------------------------------------------------


def test_the_guest_records_each_uuid1_as_it_returned(tmp_path: Path) -> None:
    script = (
        f"from reprobox.guest import readings; readings.install({str(tmp_path)!r})\n"
        "from uuid import uuid1\n"
        "import uuid, pickle, inspect, json\n"
        "made = [uuid1().hex, str(uuid.uuid1())]\n"
        "by_reference = pickle.loads(pickle.dumps(uuid.uuid1)) is uuid.uuid1\n"
        "print(json.dumps([made, by_reference, list(inspect.signature(uuid.uuid1).parameters)]))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    made, by_reference, parameters = json.loads(out.stdout)
    assert by_reference and parameters == ["node", "clock_seq"]  # the wrapper passes for the original
    facts = readings_merge.merged(tmp_path / ".reprobox")
    assert facts["clock_ids"] == sorted([made[0], made[1].replace("-", "")])
    assert facts["clock_ids_dropped"] == 0 and facts["dropped"] == 0


def test_past_the_bound_the_first_and_latest_uuid1s_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock_ids, "MAX_IDS", 3)
    kept = clock_ids.ClockIds()
    module = type(uuid)("fake_uuid")
    module.uuid1 = lambda: uuid.UUID(int=next(counter))  # type: ignore[attr-defined]
    counter = iter(range(1, 100))
    kept.wrap_module(module)
    kept.wrap_module(module)  # wrapped once, however often the hook fires
    made = [module.uuid1().hex for _ in range(10)]  # type: ignore[attr-defined]
    assert kept.kept() == made[:3] + made[-3:] and kept.dropped == 4


def test_the_merge_keeps_only_uuids_as_32_hex_digits(tmp_path: Path) -> None:
    folder = tmp_path / ".reprobox"
    folder.mkdir()
    good = uuid.uuid1().hex
    record = {"pid": 5, "clock_ids": [good, "zz" * 16, good[:5], 7, good.upper()], "clock_ids_dropped": 2}
    (folder / "readings-5.json").write_text(json.dumps(record))
    facts = readings_merge.merged(folder)
    assert facts["clock_ids"] == [good] and facts["clock_ids_dropped"] == 2
    assert facts["dropped"] == 0  # an id past its bound leaves the clock's record whole


# --- the evidence ------------------------------------------------------------------------------------


def test_ray_trial_ids_are_excused_by_the_uuid1_each_run_made() -> None:
    made_a, made_b = uuid1_at(START + 3), uuid1_at(START + 3603)
    run_a, run_b = run_with([made_a.hex]), run_with([made_b.hex], start=START + 3600)
    id_a, id_b = made_a.hex[:5] + "_00003", made_b.hex[:5] + "_00003"  # BasicVariantGenerator's
    excuse = judge_value("3.trial_id", id_a, id_b, run_a, run_b)
    assert excuse is not None and (excuse.reason, excuse.evidence) == (CLOCK_ID, "the run's own record")
    # the trial's folder: the id, the experiment tag and datetime.now(); the runs' files pair by it
    folder_a = f"objective_{id_a}_3_a=1.0000,b=2_2026-11-29_{_hms(START + 4)}/result.json"
    folder_b = f"objective_{id_b}_3_a=1.0000,b=2_2026-11-29_{_hms(START + 3604)}/result.json"
    assert mask_file_name(folder_a, run_a)[0] == mask_file_name(folder_b, run_b)[0]
    assert "<clock-id>_00003_3_a=1.0000,b=2_<time>" in mask_file_name(folder_a, run_a)[0]


def _hms(seconds: float) -> str:
    return time.strftime("%H-%M-%S", time.gmtime(seconds))


def test_every_written_form_of_a_uuid1_the_run_made() -> None:
    made = uuid1_at(START + 1)
    record = ClockIdRecord.from_readings({"clock_ids": [made.hex]})
    assert record is not None
    run = run_with([made.hex])
    for written in (str(made), made.hex, made.hex[:8], made.hex[8:20], made.hex[:5], str(made).upper()):
        assert record.holds(written), written
    assert mask(f"run-{made.hex[:5]}00042.ckpt", run)[0] == "run-<clock-id>00042.ckpt"  # a counter after it
    assert mask(f"{{'session': '{made}'}}", run)[0] == "{'session': '<clock-id>'}"
    assert record.holds_number(made.int) and not record.holds_number(made.int + 1)


def test_hex_of_the_same_shape_that_no_uuid1_of_the_run_began_is_a_real_value() -> None:
    """The controls: a seeded generator's hex, and another run's id written into this one's file."""
    made_a, made_b = uuid1_at(START + 3), uuid1_at(START + 63)
    run_a, run_b = run_with([made_a.hex]), run_with([made_b.hex])
    seeded = random.Random(0)
    for _ in range(200):
        fake_a, fake_b = f"{seeded.getrandbits(20):05x}", f"{seeded.getrandbits(20):05x}"
        if fake_a in (made_a.hex[:5], made_b.hex[:5]) or fake_b in (made_a.hex[:5], made_b.hex[:5]):
            continue  # one in a million: the generator met the uuid1 itself
        assert judge_value("trial_id", f"{fake_a}_00000", f"{fake_b}_00000", run_a, run_b) is None
    swapped = judge_value("trial_id", made_b.hex[:5] + "_0", made_a.hex[:5] + "_0", run_a, run_b)
    assert swapped is None  # each run's value must be its own run's id
    assert judge_value("trial_id", made_a.hex[:4] + "_0", made_b.hex[:4] + "_0", run_a, run_b) is None
    assert judge_value("n", made_a.int, made_b.int + 1, run_a, run_b) is None


def test_the_first_digits_that_count_grow_with_the_ids_recorded() -> None:
    assert prefix_length(1) == MIN_PREFIX == 5
    assert prefix_length(1024) == 5 and prefix_length(4096) == 6  # 4096 ids * 16**-6 < 1e-3
    many = [uuid1_at(START + i * 1e-3).hex for i in range(4096)]
    record = ClockIdRecord.from_readings({"clock_ids": many})
    assert record is not None and record.min_prefix == 6
    assert not record.holds(many[0][:5]) and record.holds(many[0][:6])


def test_a_monotonic_reading_saved_whole_is_the_runs_own() -> None:
    readings_a, readings_b = [4768.851374762, 4770.0314], [4794.343986846]
    run_a, run_b = run_with(monotonic=readings_a), run_with(monotonic=readings_b)
    excuse = judge_value("runner_data._earliest_stopping_actor", 4768.851374762, 4794.343986846, run_a, run_b)
    assert excuse is not None and excuse.reason == CLOCK_READING
    # a value near a reading, one too coarse to tell from a count, and another run's reading are real
    assert judge_value("t", 4768.851374763, 4794.343986846, run_a, run_b) is None
    assert judge_value("t", 4770.0314, 4794.343986846, run_a, run_b) is None
    assert judge_value("t", 4794.343986846, 4768.851374762, run_a, run_b) is None
    assert mask("stopped at 4768.851374762 s", run_a)[0] == "stopped at <reading> s"
    wall = ReadingRecord.from_readings({"clocks": [{"clock": "time", "values": [START + 0.123456789]}]})
    assert wall is None  # the wall clock's readings are the window's to judge


# --- a real job, end to end --------------------------------------------------------------------------


def verify(capsys: pytest.CaptureFixture[str], job: Path, runs: Path) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli.main(["verify", str(job), "--runtime", "local", "--runs-dir", str(runs), "--json", "-q"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_ray_like_trial_folders_and_ids_reproduce_and_a_seeded_id_does_not(tmp_path: Path, capsys) -> None:
    code, data = verify(capsys, JOBS / "clock-ids" / "job.yaml", tmp_path / "runs")
    assert (code, data["grade"]) == (0, "reproduced"), data["sentence"]
    assert not data["one_sided_files"] and not data["renamed_files"]
    reasons = {(e["name"], e["reason"]) for e in data["run_specific"]}
    assert ("trial_id", CLOCK_ID) in reasons
    assert ("runner_data._earliest_stopping_actor", CLOCK_READING) in reasons
    folders = [e for e in data["run_specific"] if e["name"] == "<file>" and "objective_" in e["a"]]
    assert len(folders) == 4 and all(CLOCK_ID in e["reason"] for e in folders)
    assert not [e for e in data["run_specific"] if e["evidence"] == "its name"]

    code, data = verify(capsys, JOBS / "clock-ids" / "seeded-id.yaml", tmp_path / "seeded")
    assert (code, data["grade"]) == (1, "not reproducible")
    assert [e["name"] for e in data["value_differences"]] == ["trial_id"]
    assert data["sentence"].startswith("not reproducible: trial_id ")
