"""Durations and rates judged on the writer's own tag, never the step or index around it, and values judged
by each run's own record: its clock window, pids, host names and memory addresses."""

from __future__ import annotations

import calendar
import json

import pytest

from reprobox.runspecific import (
    ADDRESS_BY_LOOK,
    DURATION,
    DURATION_BY_NAME,
    HOSTNAME,
    PROCESS_ID,
    TIMESTAMP,
    RunContext,
    Window,
    judge_value,
    last_key,
    mask,
    reason_by_key,
)

START = calendar.timegm((2026, 11, 28, 0, 37, 20, 0, 0, 0))
RUN_A = RunContext(
    paths=("/runs/j/a",),
    run_id="a1",
    hostname="gpu7",
    window=Window(START, START + 30),
    pids=frozenset({2264}),
)
RUN_B = RunContext(
    paths=("/runs/j/b",),
    run_id="b2",
    hostname="gpu7",
    window=Window(START + 60, START + 90),
    pids=frozenset({3974, 3980}),
)


@pytest.mark.parametrize(
    ("name", "tag"),
    [
        ("charts/SPS.step_1024", "charts/SPS"),
        ("log_history.3.train_runtime", "train_runtime"),
        ("step_3._runtime", "_runtime"),
        ("12.time/fps", "time/fps"),
        ("loss/train.step_1.wall_time", "wall_time"),
    ],
)
def test_the_tag_is_the_writers_name_without_steps_and_indices(name: str, tag: str) -> None:
    assert last_key(name) == tag


@pytest.mark.parametrize(
    "name",
    [
        "charts/SPS.step_1024",  # CleanRL
        "3.time/fps",  # SB3's progress.csv
        "time/time_elapsed.step_2048",
        "train_samples_per_second",
        "log_history.1.train_steps_per_second",
        "tokens_per_sec",
        "throughput/tokens",
        "perf/frames_per_second",
        "it/s",
        "samples/s.step_3",
        "train/epoch_time",
        "step_time_ms",
        "step_2._runtime",
        "eval_runtime",
        "duration",
        "stepsPerSecond",
        "0.t",  # a monitor row, judged with its r and l (below)
    ],
)
def test_durations_and_rates_are_known_by_their_tag(name: str) -> None:
    names = {"0.r", "0.l", "0.t"}
    assert reason_by_key(name, names) == DURATION, name


@pytest.mark.parametrize(
    "name",
    [
        "charts/episodic_return.step_1024",
        "losses/entropy.step_256",
        "train/entropy_loss",
        "losses/value_loss",
        "val_acc",
        "rollout/ep_rew_mean",
        "time/total_timesteps",
        "time/iterations",
        "global_step",
        "learning_rate",
        "total_flos",
        "loss_per_second",  # a computed number, whatever it is named next to
        "t",  # a lone t is no monitor's
        "0.t",
    ],
)
def test_numbers_the_training_computes_are_never_excused_by_name(name: str) -> None:
    assert reason_by_key(name, {"0.t", "0.x"}) is None, name


def test_sb3_episode_records_have_a_monitor_time() -> None:
    assert reason_by_key("ep_info_buffer.3.t") == DURATION
    assert reason_by_key("ep_info_buffer.3.r") is None


def test_a_rate_is_excused_by_its_name_with_the_name_as_evidence() -> None:
    excuse = judge_value("charts/SPS.step_1024", 21.0, 24.0, RUN_A, RUN_B)
    assert excuse is not None and (excuse.reason, excuse.evidence) == (DURATION_BY_NAME, "its name")
    assert judge_value("losses/entropy.step_256", 0.69, 0.70, RUN_A, RUN_B) is None


def test_unix_times_inside_each_runs_own_window_are_readings_of_its_clock() -> None:
    excuse = judge_value("start_time", (START + 5) * 10**9, (START + 65) * 10**9, RUN_A, RUN_B)
    assert excuse is not None and excuse.reason == TIMESTAMP
    assert excuse.evidence == "the run's own record"
    # the same shape, but b's is a reading of a's window, not its own: a real value
    assert judge_value("start_time", (START + 5) * 10**9, (START + 6) * 10**9, RUN_A, RUN_B) is None
    assert judge_value("loss", START + 5.0, START + 65.0, RUN_A, RUN_B) is not None  # evidence, not name


def test_a_timestamp_key_is_judged_by_the_window_when_values_are_read() -> None:
    old_a, old_b = "2025-10-24 08:54:50", "2025-10-24 08:54:52"
    assert judge_value("saved_at", old_a, old_b, RUN_A, RUN_B) is None
    assert reason_by_key("saved_at") == TIMESTAMP  # the name alone, where no value can be read


def test_pids_are_run_specific_by_the_recorded_pids() -> None:
    line_a, line_b = "INFO MainThread:2264 [wandb_setup.py]", "INFO MainThread:3974 [wandb_setup.py]"
    excuse = judge_value("line 1", line_a, line_b, RUN_A, RUN_B)
    assert excuse is not None and excuse.reason == PROCESS_ID
    assert judge_value("line 1", "worker 2264", "worker 4000", RUN_A, RUN_B) is None  # not b's pid
    assert judge_value("pid", 2264, 3980, RUN_A, RUN_B) is not None
    assert judge_value("pid", 2264, 4000, RUN_A, RUN_B) is None
    assert mask("0.2264 and 12264", RUN_A)[0] == "0.2264 and 12264"


def test_pids_are_judged_by_name_only_where_no_run_recorded_any() -> None:
    bare = RunContext(paths=(), run_id="", hostname=None)
    assert judge_value("pid", 11, 12, bare, bare) is not None
    assert judge_value("hostname", "n1", "n2", bare, bare) is not None
    assert judge_value("hostname", "gpu7", "gpu8", RUN_A, RUN_B) is None  # recorded: gpu8 is not b's


def test_host_names_are_masked_wherever_they_appear() -> None:
    other = RunContext(paths=(), run_id="", hostname="gpu9", hostnames=("gpu9.cluster",))
    excuse = judge_value("args.note", "ran on gpu7 ok", "ran on gpu9 ok", RUN_A, other)
    assert excuse is not None and excuse.reason == HOSTNAME


def test_memory_addresses_in_reprs_are_run_specific() -> None:
    a = "<stable_baselines3.common.policies.ActorCriticPolicy object at 0x7f3a1c2b9d90>"
    b = "<stable_baselines3.common.policies.ActorCriticPolicy object at 0x7f11aa03e2b0>"
    excuse = judge_value("policy_class", a, b, RUN_A, RUN_B)
    assert excuse is not None and excuse.reason == ADDRESS_BY_LOOK  # no memory map recorded
    assert judge_value("policy_class", a, b.replace("ActorCritic", "Other"), RUN_A, RUN_B) is None
    assert judge_value("mask", "0x7f3a1c2b", "0x7f11aa03", RUN_A, RUN_B) is None  # a bare number


def test_a_stable_baselines3_data_member_read_as_json() -> None:
    """SB3's model zip holds a JSON ``data`` member: start_time is time.time_ns(), ep_info_buffer's t the
    seconds since the start, class reprs carry addresses. Its values, read as flat names, as the
    archive reader gives them."""

    def data(window: Window, address: str, seconds: float) -> dict[str, object]:
        return {
            "start_time": int((window.start + 1) * 1e9),
            "policy_class.__repr__": f"<class at 0x{address}>",
            "ep_info_buffer.0.r": 12.0,
            "ep_info_buffer.0.l": 12,
            "ep_info_buffer.0.t": seconds,
            "learning_rate": 0.0003,
        }

    a = data(RUN_A.window, "7f3a1c2b9d90", 0.41)  # type: ignore[arg-type]
    b = data(RUN_B.window, "7f11aa03e2b0", 0.57)  # type: ignore[arg-type]
    for name in a:
        if a[name] != b[name]:
            assert judge_value(name, a[name], b[name], RUN_A, RUN_B, names=a) is not None, name
    b["ep_info_buffer.0.r"] = 13.0
    assert judge_value("ep_info_buffer.0.r", 12.0, 13.0, RUN_A, RUN_B, names=a) is None


def test_a_saved_config_holding_a_run_name_stamped_from_the_clock() -> None:
    a = {"wandb_run_name": "run2026_11_28_00_37_27", "lr": 0.1}
    b = {"wandb_run_name": "run2026_11_28_00_38_24", "lr": 0.1}
    excuse = judge_value("config", a, b, RUN_A, RUN_B)
    assert excuse is not None and excuse.reason == TIMESTAMP
    assert judge_value("config", a, {**b, "lr": 0.2}, RUN_A, RUN_B) is None
    assert judge_value("config", json.dumps(a), json.dumps(b), RUN_A, RUN_B) is not None


def test_a_containers_small_pids_are_masked_only_where_they_name_a_process() -> None:
    """In a container the job's pid is small and may differ (7, 9): as a number of its own it reads like
    an epoch, so it is masked only after ``pid``, ``Thread:``, ``Process-`` or a host name's dot."""
    small_a = RunContext(paths=(), run_id="", hostname="reprobox", pids=frozenset({9}))
    small_b = RunContext(paths=(), run_id="", hostname="reprobox", pids=frozenset({7}))
    excuse = judge_value("line 1", "INFO MainThread:9 [x.py]", "INFO MainThread:7 [x.py]", small_a, small_b)
    assert excuse is not None and excuse.reason == PROCESS_ID
    assert judge_value("line 2", "epoch 9", "epoch 7", small_a, small_b) is None
    assert judge_value("epoch", 9, 7, small_a, small_b) is None
    assert judge_value("pid", 9, 7, small_a, small_b) is not None
    name_a, name_b = "events.out.tfevents.1.reprobox.9.0", "events.out.tfevents.1.reprobox.7.0"
    assert mask(name_a, small_a)[0] == mask(name_b, small_b)[0]
