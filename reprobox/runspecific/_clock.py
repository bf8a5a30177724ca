"""Readings of a run's own clock, known by evidence: a value whose digits decode to an instant inside the
run's recorded wall-clock window.

A list of layouts misses the next one a script invents (``"run" + strftime("%Y_%m_%d_%H_%M_%S")``), so
digits are decoded instead: groups of digits with any separators or none, year first (``20261128``,
``2026_11_28_00_37_27``, ISO 8601 with fractions and zones), day or month first (``28/11/2026``), a time of
day alone (``00:37:27``, Hydra's ``00-37-27``), month names (ctime, RFC 2822, ``Nov28_00-37-27``) and Unix
time in s, ms, us or ns, as a number or as text. Each reading is then tested against the window, read as
UTC and as the local time in force (a job stamps ``datetime.now()``); a reading that only has whole
seconds, minutes or days counts when its span meets the window. The same shape outside the window is a
real value, so the window, not the layout, is the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timezone

from reprobox.runspecific._window import DAY, Window, is_reading

_MIN_DIGITS = 5  # the shortest reading: a time of day "0:00:00"
_MAX_GROUPS = 16

_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH = rf"(?P<mon>(?<![A-Za-z])(?i:{'|'.join(_MONTH_NAMES)})[a-z]*\.?)"
_WEEKDAY = r"(?:(?<![A-Za-z])(?i:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+)?"
_TIME = r"(?P<H>\d{1,2})[:_-](?P<M>\d{2})(?:[:_-](?P<S>\d{2})(?P<frac>[.,]\d+)?)?"
_ZONE = r"(?:\s?(?P<zone>Z|UTC|GMT|[+-]\d{2}:?\d{2})(?![\d:]))?"
# ctime and TensorBoard's folder: Sat Nov 28 00:37:27 2026, Nov28_00-37-27 (no year)
_MONTH_FIRST = re.compile(
    _WEEKDAY
    + _MONTH
    + r"[ _-]?(?P<day>\d{1,2})(?!\d)(?:,?\s(?P<year0>\d{4}))?[ _T,-]+"
    + _TIME
    + r"(?:\s(?P<year>\d{4})(?!\d))?"
    + _ZONE
)
# RFC 2822 and its kin: Sat, 28 Nov 2026 00:37:27 +0000, 28Nov2026, 28-Nov-2026 00:37
_DAY_FIRST = re.compile(
    _WEEKDAY
    + r"(?<!\d)(?P<day>\d{1,2})[ _-]?"
    + _MONTH
    + r"[ _-]?(?P<year>\d{4})(?!\d)"
    + r"(?:[ _T,:-]+"
    + _TIME
    + ")?"
    + _ZONE
)
_ANY_MONTH = re.compile(f"(?<![a-z])(?:{'|'.join(_MONTH_NAMES)})")  # searched in lower case
_DIGITS = re.compile(r"(?<!\d)\d+(?:(?:[-_:/.,T ]|, )\d+)*")
_GROUP = re.compile(r"\d+")
_PLAIN_NUMBER = re.compile(r"(\d+)(?:[.,](\d+))?")
_CACHE_SIZE = 1 << 16
# what any reading holds: a year of four digits, Unix time's nine or more, or three groups of a time
_PLAUSIBLE = re.compile(r"(?<!\d)(?:19|2[0-2])\d\d|\d{9}|(?<!\d)\d{1,2}\D\d\d\D\d\d(?!\d)")
_ZONE_AFTER = re.compile(r"\s?(Z|UTC|GMT|[+-]\d{2}:?\d{2})(?![\d:])")
_YEAR_FIRST_WIDTHS = (4, 2, 2, 2, 2, 2)
# (first field, length of a group of digits run together) -> where its fields start: "20261128" at 0
_SPLITS = {
    (first, sum(_YEAR_FIRST_WIDTHS[first:last])): tuple(
        sum(_YEAR_FIRST_WIDTHS[first:k]) for k in range(first, last + 1)
    )
    for first in range(6)
    for last in range(first + 1, 7)
}


def mask_clock(text: str, window: Window, mark: str = "<time>") -> tuple[str, list[str]]:
    """The text with each reading of the run's clock replaced by ``mark``, and the readings found."""
    found: list[str] = []
    if not _PLAUSIBLE.search(text):  # every reading holds a year, nine digits or a time: most values none
        return text, found
    pieces: list[str] = []
    position = 0
    for match in _named_months(text):  # a date named so is read whole, never by its digits alone
        pieces.append(_mask_digits(text[position : match.start()], window, mark, found))
        if _named_month_reading(match, window):
            pieces.append(mark)
            found.append(match.group())
        else:
            pieces.append(match.group())
        position = match.end()
    pieces.append(_mask_digits(text[position:], window, mark, found))
    return "".join(pieces) if found else text, found


def _named_months(text: str) -> list[re.Match[str]]:
    """Dates with a month's name, first come first, none overlapping: looked for only around the
    places a month's name appears (a whole log is scanned once, by plain substring searches)."""
    low = text.lower()
    if not any(month in low for month in _MONTH_NAMES):
        return []
    candidates: list[re.Match[str]] = []
    for hit in _ANY_MONTH.finditer(low):
        start, end = max(0, hit.start() - 16), min(len(text), hit.end() + 48)
        for pattern in (_MONTH_FIRST, _DAY_FIRST):
            found = pattern.search(text, start, end)
            if found is not None and found.start() <= hit.start() < found.end():
                candidates.append(found)
    matches = sorted(candidates, key=lambda m: (m.start(), -m.end()))
    kept: list[re.Match[str]] = []
    for match in matches:
        if not kept or match.start() >= kept[-1].end():
            kept.append(match)
    return kept


def _mask_digits(text: str, window: Window, mark: str, found: list[str]) -> str:
    pieces: list[str] = []
    position = 0
    for match in _DIGITS.finditer(text):
        token = match.group()
        if len(token) < _MIN_DIGITS or not _PLAUSIBLE.search(token):
            continue
        for start, end in _readings(token, text[match.end() : match.end() + 7], window):
            pieces += [text[position : match.start() + start], mark]
            found.append(token[start:end])
            position = match.start() + end
    if not pieces:
        return text
    pieces.append(text[position:])
    return "".join(pieces)


def _named_month_reading(match: re.Match[str], window: Window) -> bool:
    fields = match.groupdict()
    month = _MONTH_NAMES.index(fields["mon"][:3].lower()) + 1
    year_text = fields.get("year") or fields.get("year0")
    years = {int(year_text)} if year_text else window.years()
    zone = _zone_seconds(fields.get("zone"))
    values = [int(fields[k]) if fields.get(k) else None for k in ("H", "M", "S")]
    fraction = float("0" + fields["frac"].replace(",", ".")) if fields.get("frac") else 0.0
    return any(_meets(window, [year, month, int(fields["day"]), *values], fraction, zone) for year in years)


def _meets(window: Window, fields: Sequence[int | None], fraction: float, zone: int | None) -> bool | None:
    """Year, month, day[, hour, minute[, second]] as a span of time (a day, a minute, a second) meets
    the window; None when they are no date at all."""
    year, month, day, hour, minute, second = [*fields, None, None, None, None, None, None][:6]
    if year is None or month is None or day is None or not 1970 <= year <= 2200:
        return None
    try:
        moment = datetime(year, month, day, hour or 0, minute or 0, min(second or 0, 59), tzinfo=timezone.utc)
    except ValueError:
        return None
    span = DAY if hour is None else 3600.0 if minute is None else 60.0 if second is None else 1.0
    naive = moment.timestamp() + fraction
    return window.meets_wall(naive, 0.0 if fraction else span, zone)


def _zone_seconds(text: str | None) -> int | None:
    if not text:
        return None
    if text in ("Z", "UTC", "GMT"):
        return 0
    digits = text[1:].replace(":", "")
    seconds = int(digits[:2]) * 3600 + int(digits[2:4]) * 60
    return -seconds if text[0] == "-" else seconds


def _readings(token: str, after: str, window: Window) -> list[tuple[int, int]]:
    """The spans of a digit token (groups of digits with separators) that read the window's clock."""
    key = (token, after if token[-1:].isdigit() else "")
    found = window.decoded.get(key)
    if found is None:
        if len(window.decoded) >= _CACHE_SIZE:
            window.decoded.clear()
        plain = _PLAIN_NUMBER.fullmatch(token)
        if plain is not None and len(plain.group(1)) not in (8, 12, 14):  # a number: Unix time or none
            value = int(plain.group(1)) + (float("0." + plain.group(2)) if plain.group(2) else 0.0)
            found = (
                [(0, len(token))]
                if (window.meets(value) if plain.group(2) else is_reading(int(value), window))
                else []
            )
        else:
            found = _decode(key[0], key[1], window)
        window.decoded[key] = found
    return found


def _decode(token: str, after: str, window: Window) -> list[tuple[int, int]]:
    groups = [(m.start(), m.end()) for m in _GROUP.finditer(token)][:_MAX_GROUPS]
    texts = [token[s:e] for s, e in groups]
    seps = [""] + [token[groups[i - 1][1] : groups[i][0]] for i in range(1, len(groups))]
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(groups):
        used = 0
        for reader in (_unix_time, _year_first, _day_or_month_first, _time_of_day):
            used = reader(texts, seps, index, after, window)
            if used:
                break
        if used > 0:
            spans.append((groups[index][0], groups[index + used - 1][1]))
        index += abs(used) or 1  # a date outside the window is a real value: none of its parts is read
    return spans


def _fraction_at(texts: list[str], seps: list[str], index: int) -> float | None:
    if index < len(texts) and seps[index] in (".", ","):
        return float("0." + texts[index])
    return None


def _zone_at(texts: list[str], seps: list[str], index: int, after: str, last: bool) -> tuple[int | None, int]:
    """A zone written after the time: -05:00 or -0500 inside the token, Z or +01:00 right after it."""
    if index < len(texts) and seps[index] == "-":
        if len(texts[index]) == 4:
            return _zone_seconds("-" + texts[index]), 1
        if (
            len(texts[index]) == 2
            and index + 1 < len(texts)
            and seps[index + 1] == ":"
            and len(texts[index + 1]) == 2
        ):
            return _zone_seconds(f"-{texts[index]}{texts[index + 1]}"), 2
    if last:
        match = _ZONE_AFTER.match(after)
        if match:
            return _zone_seconds(match.group(1)), 0
    return None, 0


def _unix_time(texts: list[str], seps: list[str], first: int, _after: str, window: Window) -> int:
    digits = texts[first]
    if len(digits) not in (9, 10, 12, 13, 15, 16, 18, 19):
        return 0
    fraction = _fraction_at(texts, seps, first + 1)
    if fraction is not None and window.meets(int(digits) + fraction):
        return 2
    return 1 if is_reading(int(digits), window) else 0


def _year_first(texts: list[str], seps: list[str], first: int, after: str, window: Window) -> int:
    """Year, month, day, hour, minute, second: in groups of their own widths, or run together."""
    head = texts[first]
    if len(head) < 4 or not head[:2].isdigit():
        return 0
    low, high = window.year_span
    if not low - 1 <= int(head[:4]) <= high + 1:  # no year near the window's: no reading, no date of it
        year = int(head[:4])
        if not 1970 <= year <= 2200 or len(head) not in (4, 8, 10, 12, 14):
            return 0
    fields: list[int] = []
    per_group: list[int] = []  # how many fields each group gave
    index = first
    while index < len(texts) and len(fields) < 6:
        text, position = texts[index], len(fields)
        if position > 0 and len(text) in (1, 2):
            fields.append(int(text))
        else:
            offsets = _SPLITS.get((position, len(text)))
            if offsets is None:
                break
            fields += [int(text[offsets[k] : offsets[k + 1]]) for k in range(len(offsets) - 1)]
        per_group.append(len(fields) - position)
        index += 1
    if len(fields) < 3:
        return 0
    fraction = _fraction_at(texts, seps, index) if len(fields) == 6 else None
    end = index + (fraction is not None)
    zone, zone_groups = (None, 0)
    if len(fields) >= 5:
        zone, zone_groups = _zone_at(texts, seps, end, after, end == len(texts))
    whole = _meets(window, fields, fraction or 0.0, zone)
    if whole:
        return end - first + zone_groups
    date = _meets(window, fields[:3], 0.0, None) if len(fields) > 3 else whole
    if date and zone is None:  # a date and what follows it: "20261128_000001" holds a date and a counter
        date_groups = next((k for k in range(1, len(per_group) + 1) if sum(per_group[:k]) == 3), 0)
        if date_groups:
            return date_groups
    return 0 if date is None and whole is None else -(end - first)


def _day_or_month_first(texts: list[str], seps: list[str], first: int, after: str, window: Window) -> int:
    """28/11/2026, 11/28/2026, 28.11.2026 [12:00[:01]]: day and month of one or two digits, then a year."""
    if first + 2 >= len(texts) or seps[first + 1] != seps[first + 2] or seps[first + 1] not in "/.-":
        return 0
    a, b, year = texts[first : first + 3]
    if len(a) > 2 or len(b) > 2 or len(year) != 4:
        return 0
    used, time_fields = 3, list[int]()
    while first + used < len(texts) and len(time_fields) < 3 and len(texts[first + used]) == 2:
        time_fields.append(int(texts[first + used]))
        used += 1
    if len(time_fields) == 1:
        time_fields, used = [], 3
    shaped = False
    for day, month in ((int(a), int(b)), (int(b), int(a))):
        fields = [int(year), month, day, *time_fields]
        found = _meets(window, fields, 0.0, None)
        if found:
            return used
        if time_fields and _meets(window, fields[:3], 0.0, None):
            return 3
        shaped = shaped or found is not None
    return -used if shaped else 0


def _time_of_day(texts: list[str], seps: list[str], first: int, _after: str, window: Window) -> int:
    """00:37:27, 00-37-27, 00_37_27.5: an hour, minute and second with one separator."""
    if first + 2 >= len(texts) or seps[first + 1] != seps[first + 2] or seps[first + 1] not in ":-_":
        return 0
    hour, minute, second = texts[first : first + 3]
    if len(hour) > 2 or len(minute) != 2 or len(second) != 2:
        return 0
    h, m, s = int(hour), int(minute), int(second)
    if h > 23 or m > 59 or s > 60:
        return 0
    fraction = _fraction_at(texts, seps, first + 3)
    seconds = h * 3600 + m * 60 + s + (fraction or 0.0)
    used = 3 + (fraction is not None)
    return used if window.meets_time_of_day(seconds, 0.0 if fraction is not None else 1.0) else -used
