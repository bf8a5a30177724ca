"""Two differing lines of text judged by the values inside them: numbers, stamps and ids in prose.

A model card writes ``- **Training**: 0.5 seconds``, a log ``Epoch 3 took 12.41s`` or ``run 3f2a9c1e``:
a line no reader parses, whose run-specific part is one token among words. When two lines differ only
in such tokens (the text between them equal, runs of blanks aside), each token that differs is judged
by the judges structured values get (``runspecific.judge_value``: durations and rates by the run's
record of its clocks, stamps by its clock window, ids by its entropy draws and uuid1s, addresses by its
memory map), named by the words before it and the unit after it (``Training seconds``), a name that
matters only where the record cannot test the value, as for a structured value. The line's whole numbers
equal in both runs may be the count a rate is over (``17 effective words`` beside ``1222 effective
words/s``): they are tried as its count, nearest first. Anything else that
differs, or one token no judge explains, keeps the line a difference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reprobox.runspecific import Excuse, RunContext, judge_value, mask_pair

MAX_TOKENS = 64
"""Differing tokens judged per line at most: a line with more (a dump of numbers) stays a difference."""
MAX_NAME_WORDS = 8
BY_RECORD = "the run's own record"

_MONTH = r"(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_WEEKDAY = r"(?:(?i:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+)?"
_TIME = r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
_ZONE = r"(?:\s?(?:Z|UTC|GMT|[+-]\d{2}:?\d{2})(?![\d:]))?"
# one token each, so that a stamp's parts are judged together: ISO 8601 and logging's asctime, ctime
_TOKEN = re.compile(
    rf"(?P<stamp>(?<!\d)\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]{_TIME})?{_ZONE}(?!\d)"
    rf"|{_WEEKDAY}{_MONTH}\s+\d{{1,2}},?\s+(?:\d{{4}}\s+)?{_TIME}(?:\s+\d{{4}}(?!\d))?{_ZONE})"
    r"|(?P<clock>(?<![\w.:])\d{1,3}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?![\w:]))"  # 0:00:03.2, a time of day
    r"|(?P<word>(?<![\w.-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z\d][\w-]{5,}(?!\w))"  # run-3f2a9c1e
    r"|(?P<number>(?<![\w.])\d+(?:\.\d+)*(?:[eE][-+]?\d+)?)"
)
_UNIT = re.compile(r"^ ?([A-Za-z]+(?:/[A-Za-z]+)?)(?![A-Za-z])")
_TIME_UNITS = frozenset(
    {
        "s", "sec", "secs", "second", "seconds", "ms", "msec", "msecs", "millisecond", "milliseconds",
        "us", "usec", "microseconds", "ns", "nanoseconds", "min", "mins", "minute", "minutes", "h", "hr",
        "hrs", "hour", "hours",
    }
)  # fmt: skip
_RATE_UNIT = re.compile(r"^[A-Za-z]+/(?:s|sec|second)$")
_WORD = re.compile(r"[A-Za-z]+")
_BLANKS = re.compile(r"[ \t]+")


@dataclass(frozen=True)
class JudgedToken:
    """One differing token of a line: both runs' text of it, the words that name it, and why it is
    run-specific."""

    words: str
    a: str
    b: str
    excuse: Excuse


@dataclass(frozen=True)
class _Token:
    kind: str  # stamp, clock, word or number
    text: str
    name: str  # the words before it and its unit, joined by "_" as a value's name is


def judge_line(line_a: str, line_b: str, run_a: RunContext, run_b: RunContext) -> list[JudgedToken] | None:
    """Each differing token of two lines with why it is run-specific; None when the lines differ in
    anything else, or in a token no judge explains."""
    texts_a, tokens_a = _split(line_a)
    texts_b, tokens_b = _split(line_b)
    if len(tokens_a) != len(tokens_b) or [_BLANKS.sub(" ", t) for t in texts_a] != [
        _BLANKS.sub(" ", t) for t in texts_b
    ]:
        return None
    places = [i for i, (x, y) in enumerate(zip(tokens_a, tokens_b, strict=True)) if x.text != y.text]
    if not places or len(places) > MAX_TOKENS:
        return None
    wholes = [
        i for i, x in enumerate(tokens_a) if x.kind == "number" and x.text.isdigit() and i not in places
    ]
    judged = []
    for place in places:
        token_a, token_b = tokens_a[place], tokens_b[place]
        counts = [int(tokens_a[i].text) for i in sorted(wholes, key=lambda i: abs(i - place))]
        excuse = _judge(token_a, token_b, (run_a, run_b), counts)
        if excuse is None:
            return None
        judged.append(JudgedToken(token_a.name.replace("_", " "), token_a.text, token_b.text, excuse))
    return judged


def _split(line: str) -> tuple[list[str], list[_Token]]:
    """The line's text between tokens (one more than the tokens) and its tokens, each named."""
    texts: list[str] = []
    found: list[tuple[str, str]] = []
    end = 0
    for match in _TOKEN.finditer(line):
        texts.append(line[end : match.start()])
        found.append((str(match.lastgroup), match.group()))
        end = match.end()
    texts.append(line[end:])
    tokens = []
    for index, (kind, text) in enumerate(found):
        before = texts[index]
        if index:  # the unit of the token before is no word of this one's name
            before = before[len(_unit_text(before)) :]
        words = _WORD.findall(before)[-MAX_NAME_WORDS:]
        unit = _unit(texts[index + 1], kind)
        tokens.append(_Token(kind, text, "_".join([*words, *unit])))
    return texts, tokens


def _unit_text(after: str) -> str:
    found = _UNIT.match(after)
    if found is None:
        return ""
    unit = found.group(1)
    return found.group() if unit.lower() in _TIME_UNITS or _RATE_UNIT.match(unit) else ""


def _unit(after: str, kind: str) -> list[str]:
    """The unit a token's name ends with: a unit of time says seconds (as ``h:mm:ss`` does), a rate
    keeps its own (``it/s``, ``samples/s``)."""
    unit = _unit_text(after).strip()
    if unit.lower() in _TIME_UNITS or (kind == "clock" and not unit):
        return ["seconds"]
    return [unit] if unit else []


def _judge(a: _Token, b: _Token, runs: tuple[RunContext, RunContext], counts: list[int]) -> Excuse | None:
    """A number by its value first (a duration, a rate, Unix time, a draw or an address, then its name
    where the record cannot test it), then any token as text masked with each run's facts (a stamp, an
    id, a time of day) where only the record may excuse it. ``counts``: the line's whole numbers equal in
    both runs, nearest first, which a rate may be over (``17 effective words``)."""
    name, (run_a, run_b) = a.name, runs
    if a.kind in ("number", "clock"):
        as_text = _as_text(a.text, b.text, run_a, run_b)
        if a.kind == "clock" and as_text is not None:  # a time of day inside the window
            return as_text
        numbers = _number(a), _number(b)
        if numbers[0] is not None and numbers[1] is not None:
            by_value = judge_value(name, numbers[0], numbers[1], run_a, run_b, counts=counts)
            if by_value is not None:
                return by_value
        return as_text
    return _as_text(a.text, b.text, run_a, run_b)


def _as_text(a: str, b: str, run_a: RunContext, run_b: RunContext) -> Excuse | None:
    """Two tokens equal once each is masked with its own run's facts (a stamp, an id, a pid); a decimal
    is left to ``judge_value`` with its name, never masked as a duration here."""
    (masked_a, why_a), (masked_b, why_b) = mask_pair(a, b, run_a, run_b, durations=False)
    if masked_a != masked_b or not why_a | why_b:
        return None
    return Excuse(" and ".join(sorted(why_a | why_b)), BY_RECORD)


def _number(token: _Token) -> int | float | None:
    """A number token's value (a version's ``1.2.3`` is none), or a ``h:mm:ss`` clock's seconds."""
    text = token.text
    if token.kind == "clock":
        parts = text.replace(",", ".").split(":")
        if len(parts) != 3:  # hh:mm alone is read as a time of day only
            return None
        whole = int(parts[0]) * 3600 + int(parts[1]) * 60
        return whole + (int(parts[2]) if parts[2].isdigit() else float(parts[2]))
    if text.count(".") > 1:
        return None
    try:
        return int(text) if text.isdigit() else float(text)
    except ValueError:
        return None
