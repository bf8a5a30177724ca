"""Durations, rates, random ids and addresses are excused by the run's own record (what its Python read
of its clocks, drew from the OS's entropy and mapped in memory), never by their names or looks.

Pure parts first: the guest's bounded recorder and what it costs a clock call, the merge of the
processes' records, the evidence functions against hand-made records (including numbers that merely
resemble a duration or a draw). Then a real job on the local runtime, without torch: a skorch-like
history whose ``dur`` is measured across two callbacks, durations and a rate named nothing special, a
decimal ``id()`` and a ``uuid4`` study name; and its two controls that really differ (a loss named like a
duration, an id computed from a generator seeded from os.urandom), which stay exit 1 and are named.
"""

from __future__ import annotations

import _thread
import itertools
import json
import math
import os
import random
import secrets
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from reprobox import cli
from reprobox.guest import processes, readings, readings_merge
from reprobox.runspecific import (
    DURATION_BY_NAME,
    DURATION_COARSE,
    DURATION_OF_CLOCK,
    MEAN_OF_CLOCK,
    MEMORY_ADDRESS,
    RANDOM_ID,
    RATE_OF_CLOCK,
    RunContext,
    judge_value,
    mask,
)
from reprobox.runspecific._drawn import DrawRecord, MemoryMap
from reprobox.runspecific._durations import (
    UNTESTABLE,
    explains,
    precision,
)
from reprobox.runspecific._series import duration_series

JOBS = Path(__file__).parents[1] / "jobs"


def clock_facts(values: list[float], sites: list[int] | None = None, dropped: int = 0) -> dict[str, Any]:
    sites = sites if sites is not None else list(range(len(values)))
    names = [f"train.py:{s}" for s in range(max(sites) + 1)]
    entry = {"pid": 7, "clock": "time", "site_names": names, "sites": sites, "values": values}
    return {"clocks": [{**entry, "skipped": 0, "dropped": 0}], "draws": [], "memory": [], "dropped": dropped}


def context(facts: dict[str, Any]) -> RunContext:
    return RunContext.from_record("/runs/j/r1", {"run_facts": {"readings": facts}})


# --- the guest's recorder ---------------------------------------------------------------------------


def test_readings_keep_their_sites_and_a_loop_keeps_only_its_last() -> None:
    recorder = readings.Recorder()
    clock = recorder.wrap_clock("time", iter(range(1000)).__next__)
    start = clock()
    for _ in range(readings.SAME_SITE_RUN + 50):
        clock()
    end = clock()
    record = recorder.clocks["time"].finish()
    assert record["values"][0] == start and record["values"][-1] == end
    assert record["skipped"] == 49  # the loop's readings past SAME_SITE_RUN, all but its last
    loop_last = readings.SAME_SITE_RUN + 50
    assert loop_last in record["values"]  # the reading a later one is measured from
    assert len(set(record["sites"])) == 3


def test_readings_past_their_bound_are_counted_as_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readings, "MAX_READINGS", 4)
    recorder = readings.Recorder()
    clock = recorder.wrap_clock("time", time.time)
    for _ in range(3):
        clock()
        clock()  # two sites, alternating: nothing is a loop at one site
    record = recorder.clocks["time"].finish()
    assert len(record["values"]) == 4 and record["dropped"] == 2


def test_the_first_and_latest_draws_are_kept_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readings, "MAX_DRAWS", 3)
    recorder = readings.Recorder()
    recorder.latest_draws = readings.deque(maxlen=3)
    counter = itertools.count()
    draw = recorder.wrap_urandom(lambda size: bytes([next(counter)]) * size)
    drawn = [draw(4).hex() for _ in range(10)]
    kept = recorder.to_json()["draws"]
    assert kept == drawn[:3] + drawn[-3:] and recorder.draws_dropped == 4


def test_a_clock_read_with_no_python_frame_above_is_kept() -> None:
    recorder = readings.Recorder()
    clock = recorder.wrap_clock("monotonic", time.monotonic)
    done = threading.Event()
    _thread.start_new_thread(lambda: (clock(), done.set()), ())
    assert done.wait(5)
    _thread.start_new_thread(clock, ())  # the thread's own function: no Python frame above the reading
    time.sleep(0.2)
    data = recorder.to_json()
    assert len(data["clocks"]["monotonic"]["values"]) == 2
    assert "<no Python frame>" in data["sites"]


def test_a_clock_call_costs_little_more_than_the_clock() -> None:
    recorder = readings.Recorder()
    wrapped = recorder.wrap_clock("perf_counter", time.perf_counter)
    calls = 20000

    def cost(clock: Any) -> float:
        best = math.inf
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(calls):
                clock()
            best = min(best, (time.perf_counter() - start) / calls)
        return best

    overhead = cost(wrapped) - cost(time.perf_counter)
    assert overhead < 2e-6, f"{overhead * 1e9:.0f} ns a reading"  # about 0.2 us on a laptop core


def test_a_job_process_records_its_clocks_draws_and_memory(tmp_path: Path) -> None:
    script = (
        f"import time, uuid, json; from reprobox.guest import readings; readings.install({str(tmp_path)!r});"
        "import os, pickle; ok = pickle.loads(pickle.dumps(time.time)) is time.time"
        " and pickle.loads(pickle.dumps(os.urandom)) is os.urandom;"
        "t = time.time(); u = uuid.uuid4(); d = time.time() - t; print(json.dumps([d, str(u), ok]))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    duration, drawn, pickled = json.loads(out.stdout)
    assert pickled  # the wrapped clock and urandom pickle by reference, as the originals do
    facts = readings_merge.merged(tmp_path / ".reprobox")
    run = context(facts)
    assert run.clock is not None and explains(run.clock, duration) == DURATION_OF_CLOCK
    assert run.drawn is not None and run.drawn.holds(drawn)
    assert run.memory is not None and facts["dropped"] == 0


def test_the_merge_refuses_what_is_not_a_reading(tmp_path: Path) -> None:
    folder = tmp_path / ".reprobox"
    folder.mkdir()
    (folder / "readings-1.json").write_text(
        json.dumps(
            {
                "pid": 1,
                "sites": ["a.py:1"],
                "clocks": {"time": {"sites": [0, 0, 5], "values": [1.0, "x", 2.0]}, "evil": {}},
                "draws": ["zz", "00ff"],
                "memory": [[10, 5], [4096, 8192]],
            }
        )
    )
    (folder / "readings-2.json").write_text("{not json")
    facts = readings_merge.merged(folder)
    assert [c["values"] for c in facts["clocks"]] == [[1.0]]
    assert facts["draws"] == ["00ff"] and facts["memory"] == [[4096, 8192]]
    assert facts["dropped"] == 1  # the file that is no JSON


def test_a_long_lived_program_that_kept_no_record_leaves_the_record_incomplete() -> None:
    def seen(program: str, parent: str = "python3.11", alive: float = 2.0) -> dict[str, Any]:
        return {"program": program, "parent": parent, "seen_s": alive}

    programs = {
        "11": seen("wandb-core"),
        "12": seen("readlink", parent="bash"),  # pyenv's shim at start-up
        "13": seen("git", alive=0.0),  # a moment: its clocks are unknown all the same
        "14": seen("python3.11", parent="python3.11"),  # a worker ended by os._exit
        "15": seen("python3.11"),  # recorded
        "x": seen("evil"),
    }
    assert readings_merge.unrecorded(programs, recorded={15}) == ["git", "python3.11", "wandb-core"]
    facts = {**clock_facts([1.0, 2.0]), "unrecorded_programs": ["wandb-core"]}
    run = context(facts)
    assert run.clock is not None and not run.clock.complete
    excuse = judge_value("step_3._runtime", 0.4721188, 0.4251246, run, run)  # W&B's, timed in Go
    assert excuse is not None and excuse.reason == DURATION_BY_NAME


def test_the_watch_names_each_process_program_and_parent() -> None:
    script = "import subprocess; subprocess.run(['sleep', '1.6'], check=True)"
    code, record = processes.run_command([sys.executable, "-c", script], dict(os.environ))
    assert code == 0
    programs = (record.run_facts or {})["programs"]
    (sleep,) = [p for p in programs.values() if p["program"] == "sleep"]
    assert sleep["parent"].startswith("python") and sleep["seen_s"] > 0


# --- durations and rates ----------------------------------------------------------------------------


def test_a_duration_is_a_reading_minus_the_latest_reading_of_a_site() -> None:
    series, cut = duration_series([0, 1, 0, 1], [10.0, 10.5, 20.0, 21.25], limit=100)
    assert series == [[0.5, 1.25], [10.0], [9.5], [10.75]] and not cut  # per pair of sites, in order
    assert duration_series([0, 1, 0, 1], [10.0, 10.5, 20.0, 21.25], limit=2) == ([[0.5], [10.0]], True)


def test_precision_is_what_the_value_shows() -> None:
    assert precision(0.0569) == pytest.approx(5e-5)
    assert precision(57) == 0.5
    assert precision(0.05690312385559123) < 1e-16
    assert precision(0.05690312385559082) == pytest.approx(2**-28)  # a float32's, as TensorBoard keeps it


def test_durations_rates_and_means_of_the_runs_clock() -> None:
    base = 1_764_000_000.0
    values = [base, base + 0.0569031, base + 12.25, base + 14.8]
    run = context(clock_facts(values, [0, 1, 2, 3]))
    assert run.clock is not None
    duration = values[1] - values[0]
    assert explains(run.clock, duration) == DURATION_OF_CLOCK  # every digit
    assert explains(run.clock, round(duration, 4)) == DURATION_OF_CLOCK  # as written: 0.0569
    assert explains(run.clock, round(duration * 1000, 1)) == DURATION_OF_CLOCK  # in ms
    span = values[3] - values[2]
    assert explains(run.clock, 3000 / span) == RATE_OF_CLOCK  # steps per second
    assert explains(run.clock, (values[3] - values[0]) / 7) == MEAN_OF_CLOCK  # seven steps' mean
    assert explains(run.clock, 0.0569031 * 1.001) is None  # a loss beside it, every digit shown


def test_a_number_near_many_differences_is_no_evidence() -> None:
    """With readings every few ms, every small rounded number is near some difference: too coarse."""
    values = [1_764_000_000.0 + 0.003 * k + 1e-4 * (k % 7) for k in range(400)]
    run = context(clock_facts(values, [k % 20 for k in range(400)]))
    assert run.clock is not None
    assert explains(run.clock, 0.03) == UNTESTABLE
    assert explains(run.clock, 0.5) is None  # no two readings this far apart: the record says no
    assert explains(run.clock, 0.1234567891234) is None


def test_a_duration_named_value_is_judged_by_the_record_where_it_can_be() -> None:
    base = 1_764_000_000.0
    run_a = context(clock_facts([base, base + 0.25]))
    run_b = context(clock_facts([base, base + 0.5]))
    excuse = judge_value("0.dur", 0.25, 0.5, run_a, run_b)
    assert excuse is not None and (excuse.reason, excuse.evidence) == (
        DURATION_OF_CLOCK,
        "the run's own record",
    )
    assert judge_value("t_phase", 0.25, 0.5, run_a, run_b) is not None  # its name says nothing
    assert judge_value("0.dur", 0.2511111111111, 0.5, run_a, run_b) is None  # not a reading's difference
    assert judge_value("epoch_time", 0.3333333333333, 0.5, run_a, run_b) is None
    assert judge_value("val_loss", 0.25, 0.5, run_a, run_b) is None  # a computed number, whatever it equals


def test_names_are_the_fallback_where_no_complete_record_can_test_a_value() -> None:
    bare = RunContext.from_record("/runs/j/r1", {})
    excuse = judge_value("epoch_time", 0.2511, 0.5, bare, bare)
    assert excuse is not None and (excuse.reason, excuse.evidence) == (DURATION_BY_NAME, "its name")
    incomplete = context(clock_facts([1.0, 2.0], dropped=3))
    assert judge_value("epoch_time", 0.2511, 0.5, incomplete, incomplete) is not None
    values = [1_764_000_000.0 + 0.003 * k for k in range(400)]
    dense = context(clock_facts(values, [k % 20 for k in range(400)]))
    excuse = judge_value("time/time_elapsed", 2, 3, dense, dense)
    assert excuse is not None and excuse.reason == DURATION_COARSE
    assert judge_value("train_loss", 0.2511, 0.5, bare, bare) is None  # a computed number, never


def test_a_log_lines_durations_are_masked_by_the_record_and_its_losses_are_not() -> None:
    base = 1_764_000_000.0
    run = context(clock_facts([base, base + 1.23456789, base + 3.5]))
    line = "epoch 1 took 1.23457s loss 0.693147"
    assert mask(line, run) == ("epoch 1 took <duration>s loss 0.693147", {DURATION_OF_CLOCK})
    assert mask("epoch 1 took 1.23461s loss 0.693147", run)[1] == set()  # no reading's difference


# --- random ids and addresses -----------------------------------------------------------------------


def test_ids_written_from_a_draw_in_every_common_form() -> None:
    draws = [secrets.token_bytes(16), secrets.token_bytes(8), secrets.token_bytes(16)]
    record = DrawRecord.from_readings({"draws": [d.hex() for d in draws]})
    assert record is not None
    study = "no-name-" + str(uuid.UUID(bytes=draws[0], version=4))
    assert mask(study, RunContext(paths=(), run_id="", hostname=None, drawn=record))[0] == "no-name-<random>"
    assert record.holds(uuid.UUID(bytes=draws[0], version=4).hex)
    assert record.holds(draws[1].hex()[:8])  # uuid4().hex[:8], a short run name
    urlsafe = __import__("base64").urlsafe_b64encode(draws[2]).decode().rstrip("=")
    assert mask(f"session={urlsafe}!", RunContext(paths=(), run_id="", hostname=None, drawn=record))[0] == (
        "session=<random>!"
    )
    assert record.holds_number(int.from_bytes(draws[1], "big"))  # secrets.randbits(64)


def test_ids_a_seeded_generator_computed_are_never_drawn() -> None:
    seed_draw = os.urandom(8)
    record = DrawRecord.from_readings({"draws": [seed_draw.hex()]})
    assert record is not None
    seeded = random.Random(int.from_bytes(seed_draw, "little"))
    computed = uuid.UUID(int=seeded.getrandbits(128), version=4)
    assert not record.holds(str(computed)) and not record.holds(computed.hex)
    assert not record.holds_number(seeded.getrandbits(64))
    run_a = RunContext(paths=(), run_id="", hostname=None, drawn=record)
    assert judge_value("run_id", str(computed), str(uuid.uuid4()), run_a, run_a) is None


def test_addresses_inside_the_runs_memory_map_in_hex_and_decimal() -> None:
    memory = MemoryMap.from_readings({"memory": [[0x7F0000000000, 0x7F0000100000]]})
    assert memory is not None
    run = RunContext(paths=(), run_id="", hostname=None, memory=memory)
    inside, outside = 0x7F0000000F00, 0x6F0000000F00
    excuse = judge_value("shared_object_id", inside, inside + 64, run, run)
    assert excuse is not None and excuse.reason == MEMORY_ADDRESS
    assert judge_value("shared_object_id", inside, outside, run, run) is None
    assert mask(f"<Layer object at {hex(inside)}>", run) == ("<Layer object at <address>>", {MEMORY_ADDRESS})
    assert mask(f"<Layer object at {hex(outside)}>", run)[1] == set()  # no address of this run
    assert mask(f"id {inside}", run)[0] == "id <address>"
    assert judge_value("n", 70000, 70001, run, run) is None  # a count is no address


# --- a real job, end to end -------------------------------------------------------------------------


def verify(capsys: pytest.CaptureFixture[str], job: Path, runs: Path) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli.main(["verify", str(job), "--runtime", "local", "--runs-dir", str(runs), "--json", "-q"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_what_the_run_measured_and_drew_is_excused_by_its_record(tmp_path: Path, capsys) -> None:
    code, data = verify(capsys, JOBS / "run-record", tmp_path / "runs")
    assert (code, data["grade"]) == (0, "reproduced"), data["sentence"]
    assert data["sentence"].startswith("reproduced: every tensor and value is equal across 2 runs")
    reasons = {e["name"]: (e["reason"], e["evidence"]) for e in data["run_specific"]}
    record = "the run's own record"
    assert {reasons[f"{epoch}.dur"] for epoch in range(6)} == {(DURATION_OF_CLOCK, record)}
    assert reasons["warmup"] == reasons["took"] == (DURATION_OF_CLOCK, record)  # seconds, ms
    assert reasons["speed"] == (RATE_OF_CLOCK, record)
    assert reasons["line 1"] == (DURATION_OF_CLOCK, record)  # train.log: "epoch 1 took 0.0123s ..."
    assert reasons["layers.0.shared_object_id"] == (MEMORY_ADDRESS, record)
    for name in ("study_name", "session", "nonce", "trace"):
        assert reasons[name] == (RANDOM_ID, record), name
    assert not [e for e in data["run_specific"] if e["evidence"] == "its name"]

    code, data = verify(capsys, JOBS / "run-record" / "loss-named-duration.yaml", tmp_path / "control")
    assert (code, data["grade"]) == (1, "not reproducible")
    assert [e["name"] for e in data["value_differences"]] == [f"{epoch}.epoch_time" for epoch in range(6)]
    assert "named like a duration" in data["value_differences"][0]["note"]  # and how to say it is one
    assert "0.epoch_time" in data["sentence"]

    code, data = verify(capsys, JOBS / "run-record" / "seeded-id.yaml", tmp_path / "seeded")
    assert (code, data["grade"]) == (1, "not reproducible")
    assert [e["name"] for e in data["value_differences"]] == ["run_uuid"]


def test_a_random_number_named_like_a_duration_is_untestable_only_as_a_duration() -> None:
    """A complete record whose readings make nearly any number some whole count per second can still
    refute a duration: a number named epoch_time that no duration, in any unit, explains is real, as
    the corpus's control showed (random milliseconds saved as epoch_time were excused by name)."""
    base = 1_764_000_000.0
    values, sites = [base, base + 0.11], [0, 1]
    t = base + 2.9
    for batch in range(50):  # a library's fit loop: one reading where a batch starts, eleven inside it
        values.append(t)
        sites.append(2)
        for i in range(11):
            t += 0.0047 + 0.0003 * ((batch * 11 + i) % 7)
            values.append(t)
            sites.append(3)
    run = context(clock_facts(values, sites))
    assert run.clock is not None
    assert explains(run.clock, 59.527) == UNTESTABLE  # as some rate the readings could make
    assert explains(run.clock, 59.527, "0.epoch_time", (DURATION_OF_CLOCK, MEAN_OF_CLOCK)) is None
    assert judge_value("0.epoch_time", 59.527, 33.313, run, run) is None
    # named a rate, the same number stays untestable as a rate, and its name excuses it, saying so
    excuse = judge_value("charts/SPS", 59.527, 33.313, run, run)
    assert excuse is not None and excuse.reason == DURATION_COARSE


def test_a_decimal_equal_in_both_runs_is_never_masked_as_one_runs_duration() -> None:
    """A log line's loss, the same in both runs, is kept in both even where its digits meet a difference
    of one run's readings: masking it in one run alone made equal lines differ (a false difference)."""
    base = 1_764_000_000.0
    run_a = context(clock_facts([base, base + 0.03, base + 0.03 + 0.04964]))  # 0.04964: a duration of a
    run_b = context(clock_facts([base, base + 0.031, base + 0.031 + 0.052]))
    line_a, line_b = "epoch 2 took 0.03000s train_loss 0.04964", "epoch 2 took 0.03100s train_loss 0.04964"
    assert "0.04964" not in mask(line_a, run_a)[0]  # alone, run a's mask takes the loss for a duration
    excuse = judge_value("line 3", line_a, line_b, run_a, run_b)
    assert excuse is not None and excuse.reason == DURATION_OF_CLOCK

    other = "epoch 2 took 0.03100s train_loss 0.05000"  # the loss differs: a real difference
    assert judge_value("line 3", line_a, other, run_a, run_b) is None
