"""Text files no reader parses, compared line by line, judged by each run's own record.

Each pair of differing lines is first masked with its run's facts (``runspecific.mask_pair``: paths,
hosts, pids, clock readings, drawn ids, addresses; a decimal is never masked as a duration here, as it
has no name): lines the masks make equal are excused together, one entry for the file. A pair they leave
different is judged by the values inside it (``_prose``: numbers, stamps and ids among equal words, each
by the judges structured values get, a number with the words around it as its name), as written, else
as the masks leave it. Lines that do not align (one run wrote more) are masked whole. A string value of
a structured file whose facts masks leave it different is judged the same way (``judged_string``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reprobox import outputvalues
from reprobox.compare._prose import BY_RECORD, JudgedToken, judge_line
from reprobox.runspecific import CLOCK_MARK, Excuse, RunContext, mask_pair


@dataclass
class JudgedText:
    """Both texts with what is run-specific made equal: masked parts, and lines whose differing tokens
    were each excused (``tokens``: line number, token). ``reasons``: why parts were masked; ``masked``:
    the first line a mask made equal (number, both lines as written), if any."""

    a: str
    b: str
    reasons: set[str] = field(default_factory=set)
    masked: tuple[int, str, str] | None = None
    tokens: list[tuple[int, JudgedToken]] = field(default_factory=list)


def judged_texts(text_a: str, text_b: str, contexts: tuple[RunContext, RunContext]) -> JudgedText:
    """Both texts judged line by line where their lines align (a long log is decoded only where it
    differs), masked whole where they do not."""
    lines_a, lines_b = text_a.splitlines(), text_b.splitlines()
    if len(lines_a) != len(lines_b):
        (masked_a, why_a), (masked_b, why_b) = mask_pair(text_a, text_b, *contexts)
        first = outputvalues.first_differing_line(text_a, text_b)
        return JudgedText(masked_a, masked_b, why_a | why_b, first if why_a or why_b else None)
    out_a, out_b = list(lines_a), list(lines_b)
    judged = JudgedText("", "")
    for index, (plain_a, plain_b) in enumerate(zip(lines_a, lines_b, strict=True)):
        if plain_a == plain_b:
            continue
        (line_a, why_a), (line_b, why_b) = mask_pair(plain_a, plain_b, *contexts, durations=False)
        masked = line_a == line_b  # by the run's facts alone (a stamp, a pid): one entry for the file
        tokens = None if masked else judge_line(plain_a, plain_b, *contexts)
        if tokens is None and not masked:
            tokens = judge_line(line_a, line_b, *contexts)  # what the masks leave
            masked = tokens is not None
        if masked:
            judged.reasons |= why_a | why_b
            judged.masked = judged.masked or (index + 1, plain_a, plain_b)
        out_a[index], out_b[index] = (plain_a, plain_a) if masked or tokens else (line_a, line_b)
        judged.tokens += [(index + 1, token) for token in tokens or ()]
    judged.a, judged.b = "\n".join(out_a), "\n".join(out_b)
    return judged


def judged_string(a: object, b: object, contexts: tuple[RunContext, RunContext]) -> Excuse | None:
    """A structured file's string value (a pickled event's message, a JSON field of prose) judged as a
    text is, line by line and token by token: excused only where every line it differs in is made equal
    by the runs' facts or by tokens each excused; the reason names each token and what it is."""
    if not isinstance(a, str) or not isinstance(b, str) or a == b:
        return None
    judged = judged_texts(a, b, contexts)
    if judged.a != judged.b or not (judged.tokens or judged.reasons):
        return None
    reasons = sorted(judged.reasons) + [
        f"{token.a} vs {token.b}{f' ({token.words})' if token.words else ''}: {token.excuse.reason}"
        for _, token in judged.tokens
    ]
    by_name = [token.excuse.evidence for _, token in judged.tokens if token.excuse.evidence != BY_RECORD]
    return Excuse(f"in its text, {'; '.join(reasons)}", by_name[0] if by_name else BY_RECORD)


def stamped_lines_reordered(text_a: str, text_b: str, contexts: tuple[RunContext, RunContext]) -> bool:
    """The same lines in another order, where every line out of place carries a reading of its run's
    clock: a log that concurrent threads or processes write, each line stamped as it was written."""
    lines_a, lines_b = text_a.splitlines(), text_b.splitlines()
    if len(lines_a) != len(lines_b):
        return False
    for index, (plain_a, plain_b) in enumerate(zip(lines_a, lines_b, strict=True)):
        if plain_a != plain_b:
            (lines_a[index], _), (lines_b[index], _) = mask_pair(plain_a, plain_b, *contexts)
    if sorted(lines_a) != sorted(lines_b):
        return False
    return all(CLOCK_MARK in x for x, y in zip(lines_a, lines_b, strict=True) if x != y)
