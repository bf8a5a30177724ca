"""Durations and rates judged by the name their writer gave them: the tag of a time series or the key of
a record, never the step or index around it (``charts/SPS.step_1024`` is judged on ``charts/SPS``).

Steps, samples, tokens or frames per second, SPS, fps, it/s, throughput, elapsed, runtime, duration, and a
monitor's episode time ``t`` (SB3's monitor.csv rows and ``ep_info_buffer`` entries: ``r``, ``l``, ``t``)
measure the machine, not the training. A number the training computes (a loss, a return, an accuracy, an
entropy) is never excused by its name, whatever it is named next to; the time it took to compute one
(``score_time``) is a duration.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Container

TIMESTAMP = "a wall-clock timestamp"
DURATION = "a duration or throughput figure"
HOSTNAME = "the host name"
PROCESS_ID = "a process id"

_STEP = re.compile(r"^step_\d+$")
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_COMPUTED = frozenset(
    {
        "loss", "losses", "return", "returns", "reward", "rewards", "rew", "acc", "accuracy", "entropy",
        "kl", "score", "perplexity", "ppl", "error", "err", "grad", "norm", "lr", "value", "values", "q",
        "advantage", "precision", "recall", "auc", "bleu", "f1", "mse", "mae", "logits", "logprob",
    }
)  # fmt: skip
_RATES = frozenset({"sps", "fps", "tps", "ips", "throughput", "qps", "rps"})
_SECONDS = frozenset({"s", "sec", "secs", "second", "seconds"})
_DURATIONS = frozenset(
    {"runtime", "duration", "elapsed", "time", "seconds", "secs", "took", "latency", "walltime", "wallclock"}
)
_PER_UNIT = re.compile(
    r"(?:^|[^A-Za-z])(?:it|its|iter|iters|step|steps|sample|samples|token|tokens|frame|frames|image|images|"
    r"example|examples|batch|batches|seq|seqs|ex)\s*/\s*(?:s|sec|second)$",
    re.IGNORECASE,
)
_TIMESTAMP_KEY = re.compile(
    r"(?:^|_)(?:timestamp|date|datetime|wall_time|start_time|end_time|created|creation|saved|started|"
    r"finished|ended|updated|last_update|modified|t_start)(?:_at|_on|_time)?$|_at$",
    re.IGNORECASE,
)
_HOST_KEY = re.compile(r"^(?:hostname|host|host_name|node|nodename|node_name|machine)$", re.IGNORECASE)
_PID_KEY = re.compile(r"^(?:pid|ppid|process_id|processid)$", re.IGNORECASE)
MONITOR_TIME = "t"
MONITOR_RECORDS = ("ep_info_buffer", "ep_success_buffer")


def tag_of(name: str) -> str:
    """The writer's own name for a value: a dotted value name without indices and steps
    (``log_history.3.train_runtime`` -> ``train_runtime``, ``charts/SPS.step_1024`` -> ``charts/SPS``,
    ``step_3._runtime`` -> ``_runtime``)."""
    parts = [p for p in name.split(".") if p and not p.isdigit() and not _STEP.match(p)]
    return parts[-1] if parts else name


def words_of(tag: str) -> list[str]:
    """A tag's words, lower case: ``time/time_elapsed`` -> time, time, elapsed; ``stepsPerSecond`` too."""
    return [w.lower() for w in _WORD.findall(tag)]


def names_computed(name: str) -> bool:
    """Whether the value's own name says the training computed it (a loss, a return, an accuracy); one
    that ends in a word of time says how long computing it took (``mean_score_time``, ``loss_secs``)."""
    words = words_of(tag_of(name))
    return bool(_COMPUTED.intersection(words)) and not _times_it(words)


def _times_it(words: list[str]) -> bool:
    """The last words name a duration: ``..._time``, ``..._seconds``, ``..._time_ms``."""
    if not words:
        return False
    return words[-1] in _DURATIONS or (
        len(words) >= 2 and words[-2] == "time" and words[-1] in (*_SECONDS, "ms")
    )


def names_rate(name: str) -> bool:
    """Whether the value's own name says it is a rate (steps per second, SPS, fps), not a duration."""
    tag = tag_of(name)
    words = words_of(tag)
    per_second = any(w == "per" and nxt in _SECONDS for w, nxt in itertools.pairwise(words))
    return bool(_RATES.intersection(words) or _PER_UNIT.search(tag) or per_second)


def reason_by_key(name: str, names: Container[str] = ()) -> str | None:
    """Why a scalar under this name is run-specific by its name, or None.

    ``names`` are the other value names of the same file, for a monitor's ``t`` beside its ``r`` and ``l``.
    Timestamps named so are judged by the run's clock window when the values can be read
    (``classify_value``); by name only where they cannot.
    """
    tag = tag_of(name)
    key = tag.rsplit("/", 1)[-1]
    words = words_of(tag)
    if names_computed(name):
        return None
    if _TIMESTAMP_KEY.search(key):
        return TIMESTAMP
    if _is_duration(tag, words) or _is_monitor_time(name, key, names):
        return DURATION
    if _HOST_KEY.match(key):
        return HOSTNAME
    if _PID_KEY.match(key):
        return PROCESS_ID
    return None


def _is_duration(tag: str, words: list[str]) -> bool:
    if not words:
        return False
    if _RATES.intersection(words) or _PER_UNIT.search(tag):
        return True
    if any(w == "per" and nxt in _SECONDS for w, nxt in itertools.pairwise(words)):
        return True
    if words[-1] in _DURATIONS or "elapsed" in words or "runtime" in words or "duration" in words:
        return True
    return len(words) >= 2 and words[-2] == "time" and words[-1] in (*_SECONDS, "ms")


def _is_monitor_time(name: str, key: str, names: Container[str]) -> bool:
    """SB3's Monitor: each episode's reward ``r``, length ``l`` and wall time since the start ``t``."""
    if key != MONITOR_TIME:
        return False
    parent = name[: -len(key)]
    if any(record in name.split(".") for record in MONITOR_RECORDS):
        return True
    return f"{parent}r" in names and f"{parent}l" in names
