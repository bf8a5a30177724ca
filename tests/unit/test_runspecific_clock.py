"""Readings of a run's own clock: digits in any layout that decode to an instant inside the run's window
(UTC or local), with a small margin; the same shape outside the window is a real value."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone

import pytest

from reprobox.runspecific._clock import mask_clock
from reprobox.runspecific._window import MARGIN_S, Window, is_reading, window_of

# The run: 2026-11-28 00:37:20 to 00:37:50 UTC, in a zone one hour ahead (01:37 local).
START = calendar.timegm((2026, 11, 28, 0, 37, 20, 0, 0, 0))
WINDOW = Window(START, START + 30, (3600,))
AT = datetime.fromtimestamp(START + 7, timezone.utc)  # 00:37:27 UTC, inside
LOCAL = AT + timedelta(hours=1)
LATER = AT + timedelta(days=1)  # the same shape, a day later: outside


def masked(text: str) -> str:
    return mask_clock(text, WINDOW)[0]


@pytest.mark.parametrize(
    "layout",
    [
        "run%Y_%m_%d_%H_%M_%S",  # nanoGPT-derived run names
        "%Y%m%d",
        "%Y%m%d-%H%M%S",
        "%Y%m%dT%H%M%SZ",
        "%Y%m%d%H%M%S",
        "%Y_%m_%d_%H_%M_%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S.123456",
        "%Y-%m-%d %H:%M:%S,123 INFO MainThread",  # Python's logging
        "ckpt-%Y.%m.%d-%H.%M",
        "%Y/%m/%d",
        "outputs/%Y-%m-%d/%H-%M-%S/",  # Hydra
        "%d/%m/%Y",
        "%m/%d/%Y %H:%M",
        "%d.%m.%Y",
        "%a %b %d %H:%M:%S %Y",  # ctime
        "%a, %d %b %Y %H:%M:%S +0000",  # RFC 2822
        "%d-%b-%Y %H:%M",
        "runs/%b%d_%H-%M-%S_host",  # TensorBoard's and the HF Trainer's run folder
        "%B %d, %Y %H:%M:%S",
        "at %H:%M:%S",
        "%H_%M_%S.25",
    ],
)
def test_every_common_layout_inside_the_window_is_a_reading(layout: str) -> None:
    text = AT.strftime(layout)
    result, found = mask_clock(text, WINDOW)
    assert found and "<time>" in result, (text, result)
    assert not any(c.isdigit() for c in result.replace("+0000", "")), (text, result)


@pytest.mark.parametrize(
    "layout",
    [
        "run%Y_%m_%d_%H_%M_%S",
        "%Y%m%d",
        "%Y-%m-%dT%H:%M:%S",
        "%a %b %d %H:%M:%S %Y",
        "%a, %d %b %Y %H:%M:%S +0000",
        "runs/%b%d_%H-%M-%S_host",
        "%d/%m/%Y",
    ],
)
def test_the_same_layout_outside_the_window_is_a_real_value(layout: str) -> None:
    text = LATER.strftime(layout)
    assert mask_clock(text, WINDOW) == (text, []), text


def test_local_time_counts_as_the_zone_in_force() -> None:
    local = LOCAL.strftime("%Y-%m-%d %H:%M:%S")
    assert masked(local) == "<time>"
    assert masked(local) != local
    elsewhere = Window(START, START + 30, (0,))  # a run in UTC: 01:37 is outside (its date is not)
    assert mask_clock(local, elsewhere)[0] == "<time> 01:37:27"
    assert mask_clock((AT - timedelta(hours=5)).strftime("%Y-%m-%d %H:%M:%S"), WINDOW)[1] == []


def test_an_explicit_zone_decides_alone() -> None:
    assert masked(LOCAL.strftime("%Y-%m-%dT%H:%M:%S+01:00")) == "<time>+01:00"
    assert masked(AT.strftime("%Y-%m-%dT%H:%M:%SZ")) == "<time>Z"
    shifted = AT.strftime("%Y-%m-%dT%H:%M:%S-05:00")  # 00:37 at -05:00 is 05:37 UTC: outside
    assert masked(shifted) == shifted
    rfc = LOCAL.strftime("%a, %d %b %Y %H:%M:%S +0100")
    assert masked(rfc) == "<time>"
    wrong = LOCAL.strftime("%a, %d %b %Y %H:%M:%S +0000")  # 01:37 UTC: outside
    assert masked(wrong) == wrong


@pytest.mark.parametrize("unit", [1, 1_000, 1_000_000, 1_000_000_000])
def test_unix_time_in_any_unit_as_number_or_text(unit: int) -> None:
    inside, outside = int((START + 7) * unit), int((START + 7 + 86400) * unit)
    assert is_reading(inside, WINDOW) and not is_reading(outside, WINDOW)
    assert masked(f"events.out.tfevents.{inside}.host") == "events.out.tfevents.<time>.host"
    assert masked(f"stamp {outside}") == f"stamp {outside}"


def test_fractional_unix_seconds_as_float_and_text() -> None:
    assert is_reading(START + 7.25, WINDOW)
    assert masked(f't_start": {START + 7.57:.2f}') == 't_start": <time>'
    assert not is_reading(0.5, WINDOW) and not is_reading(float("nan"), WINDOW)
    assert not is_reading(True, WINDOW)


def test_the_margin_is_small_and_coarse_readings_count_by_their_span() -> None:
    assert is_reading(START - MARGIN_S + 0.1, WINDOW) and not is_reading(START - MARGIN_S - 1.5, WINDOW)
    assert is_reading(START + 30 + MARGIN_S - 0.1, WINDOW)
    assert not is_reading(START + 30 + MARGIN_S + 0.5, WINDOW)
    assert masked("20261128") == "<time>"  # a date: the whole day meets the window
    assert masked("20261127") == "20261127"
    assert masked(AT.strftime("%Y%m%d%H%M")) == "<time>"  # to the minute
    assert masked((AT + timedelta(minutes=2)).strftime("%Y%m%d%H%M")) != "<time>"


def test_a_date_with_a_counter_reads_only_the_date() -> None:
    assert masked("ckpt_20261128_000001") == "ckpt_<time>_000001"


def test_parts_of_a_date_outside_the_window_are_never_read_alone() -> None:
    text = "run2025_11_28_00_37_27"  # a year off: its time of day must not be read on its own
    assert masked(text) == text


def test_plain_numbers_and_versions_are_not_readings() -> None:
    for text in ("loss 0.5 step 10", "lr=0.001 batch=1024", "torch 2.13.0", "192.168.1.10", "1795828848"):
        assert masked(text) == text, text


def test_a_time_of_day_outside_the_window_is_not_a_reading() -> None:
    assert masked("12:00:01") == "12:00:01"
    assert masked("at 00:37:27 and 12:00:01") == "at <time> and 12:00:01"


def test_a_run_longer_than_a_day_holds_every_time_of_day() -> None:
    long_run = Window(START, START + 2 * 86400)
    assert mask_clock("12:00:01", long_run)[0] == "<time>"


def test_readings_around_text_keep_their_prefix_and_suffix() -> None:
    name = f"CartPole-v1__ppo__1__{int(START + 7)}"  # CleanRL's run name
    assert masked(name) == "CartPole-v1__ppo__1__<time>"
    wandb = AT.strftime("offline-run-%Y%m%d_%H%M%S-1a2b3c4d")
    assert masked(wandb) == "offline-run-<time>-1a2b3c4d"


def test_a_window_needs_both_ends() -> None:
    assert window_of(None, START) is None and window_of(START, None) is None
    assert window_of(START + 5, START) is None
    assert window_of(START, START + 1, (3600, 0, 3600)) == Window(START, START + 1, (0, 3600))
