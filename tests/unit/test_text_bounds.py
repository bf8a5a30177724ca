"""Text files of values are counted while they are read: one over the value limit is refused with the
limit's sentence before its values fill memory, and every other file reads to the values it always did.

The limit is lowered to a few hundred here so that the files stay small; the readers run as they do on
a 64 MiB file."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from reprobox import cli, yamlsource
from reprobox.errors import EXIT_BAD_INPUT, EXIT_OK
from reprobox.guest.hashing import _canonical, _logvalues, _text, _textbounds, hash_checkpoint
from reprobox.guest.hashing._canonical import (
    _metadata_digests,
    canonical_json,
    flatten,
    flatten_rows,
    metadata_sha256,
)
from reprobox.guest.hashing._text import read_bare_json, read_values
from tests.fuzz.forkserver import input_path
from tests.fuzz.mutate import tfrecord
from tests.fuzz.seeds import wandb_frame

LIMIT = 300


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_textbounds, "MAX_TEXT_VALUES", LIMIT)


def csv_column(n: int) -> str:
    return "a\n" + "1\n" * n


def csv_columns(n: int) -> str:
    return "a,b,c,d\n" + "1,2,3,4\n" * (n // 4)


def csv_preamble(n: int) -> str:
    return "#plain\n" * (n - 2) + "a\n1\n"


def csv_long_rows(n: int) -> str:  # rows longer than the header: the rest is one value, its cells many
    return "a\n" + (",".join(["1"] * 10) + "\n") * (n // 10)


def jsonl_objects(n: int) -> str:
    return '{"a":1}\n' * n


def jsonl_arrays(n: int) -> str:  # each line one value, its elements many
    return ("[" + ",".join(["0"] * 10) + "]\n") * (n // 10)


def json_numbers(n: int) -> str:  # one value (a list of plain numbers), its elements many
    return json.dumps([0.5] * n)


def json_objects(n: int) -> str:  # each object is an element of the list and a member inside
    return json.dumps([{"a": 0}] * (n // 2))


WRITERS: dict[str, tuple[str, Callable[[int], str]]] = {
    "one-column CSV": ("m.csv", csv_column),
    "many-column CSV": ("m.csv", csv_columns),
    "CSV preamble": ("m.csv", csv_preamble),
    "CSV rows longer than the header": ("m.csv", csv_long_rows),
    "JSON Lines of objects": ("m.jsonl", jsonl_objects),
    "JSON Lines of arrays": ("m.jsonl", jsonl_arrays),
    "JSON array of numbers": ("m.json", json_numbers),
    "JSON array of objects": ("m.json", json_objects),
    "bare JSON": ("data", lambda n: json.dumps({"a": [{"b": 0}] * (n // 2)})),
}


@pytest.mark.parametrize("shape", list(WRITERS))
def test_a_file_just_over_the_limit_is_refused_with_the_limits_sentence(
    tmp_path: Path, shape: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name, writer = WRITERS[shape]
    path = tmp_path / name
    path.write_text(writer(LIMIT + 12))
    assert cli.main(["hash", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{path} is refused: it holds more than the limit of {LIMIT} values" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("shape", list(WRITERS))
def test_a_file_under_the_limit_is_read_as_values(tmp_path: Path, shape: str) -> None:
    name, writer = WRITERS[shape]
    path = tmp_path / name
    path.write_text(writer(LIMIT - 12))
    assert cli.main(["hash", str(path)]) == EXIT_OK
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.note is None and digest.metadata


def test_a_json_document_over_the_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text("[" + "0," * (LIMIT + 5) + "!")  # broken at its end: the parser would say so
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.note is not None and f"more than the limit of {LIMIT} values" in digest.note


def test_commas_inside_strings_are_not_entries(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"text": "a, [b], {c}, " * LIMIT, "n": [1, 2]}))
    assert read_values(path) == [("text", "a, [b], {c}, " * LIMIT), ("n", [1, 2])]


def test_a_yaml_document_of_more_nodes_than_the_limit_is_refused_while_it_is_composed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(yamlsource, "MAX_YAML_NODES", LIMIT)
    path = tmp_path / "m.yaml"
    path.write_text("- 0\n" * (LIMIT + 5) + "- [unclosed\n")  # composed past the limit, never to its end
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.note is not None and f"holds more than {LIMIT} values" in digest.note
    path.write_text("- 0\n" * (LIMIT - 5))
    assert read_values(path) == [("", [0] * (LIMIT - 5))]


def test_csv_and_json_lines_read_to_the_values_they_always_did(tmp_path: Path) -> None:
    csv_path = tmp_path / "monitor.csv"
    csv_path.write_text('#{"t_start": 1.5, "env_id": "x"}\n#note\nr,l\n1,2\n3\n\n4,5,6,7\n"8,9",10\n')
    assert read_values(csv_path) == [
        ("0.r", "1"),
        ("0.l", "2"),
        ("1.r", "3"),
        ("1.l", None),
        ("2.r", "4"),
        ("2.l", "5"),
        ("2.None", ["6", "7"]),
        ("3.r", "8,9"),
        ("3.l", "10"),
        ("preamble.0.t_start", 1.5),
        ("preamble.0.env_id", "x"),
        ("preamble.1", "note"),
    ]
    lines = tmp_path / "m.jsonl"
    lines.write_text('1\n\n"x"\r\n{"a": {"b": [1, {"c": 2}]}, "d": []}\n[]\n')
    assert read_values(lines) == [
        ("0", 1),
        ("1", "x"),
        ("2.a.b.0", 1),
        ("2.a.b.1.c", 2),
        ("2.d", []),
        ("3", []),
    ]
    lines.write_text("1\n2.5\nnull\n")  # plain lines alone: the file is one value
    assert read_values(lines) == [("", [1, 2.5, None])]
    bare = tmp_path / "data"
    bare.write_text('{"a": [1, 2], "b": {}}')
    assert read_bare_json(bare) == [("a", [1, 2]), ("b", {})]


ROWS: list[list[object]] = [
    [],
    [1, "x", None],
    [1, {"a": 1}, 2],
    [{"a": 1, "b": [1, 2]}, {}, [], [[1]], {"c": {"d": None}}],
    [{"a": float("nan"), None: ["1", "2"]}, (1, 2), True],
]


@pytest.mark.parametrize("rows", ROWS)
def test_rows_flattened_one_at_a_time_name_what_the_whole_list_names(rows: list[object]) -> None:
    assert repr(flatten_rows(iter(rows))) == repr(flatten(rows)[1])


def test_rows_flattened_one_at_a_time_stop_at_the_value_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_canonical, "MAX_VALUES", 10)
    read: list[int] = []

    def rows() -> object:
        for index in range(1000):
            read.append(index)
            yield {"a": index, "b": index}

    with pytest.raises(ValueError, match="more than the limit of 10 values"):
        flatten_rows(rows())
    assert len(read) < 10


def test_digests_are_the_canonical_spellings_hashed() -> None:
    values: list[tuple[str, object]] = [
        ("s", 'é\u2028\ud800"'),
        ("f", -0.0),
        ("f2", 1e300),
        ("n", math.nan),
        ("i", math.inf),
        ("big", 10**5000),
        ("int", -(2**70)),
        ("b", True),
        ("none", None),
        ("twice", 1),
        ("twice", 1),
        ("list", [1, "a"]),
    ]
    digests = _metadata_digests(values)

    def sha(text: str) -> str:
        return hashlib.sha256(text.encode("ascii")).hexdigest()

    for name, value in values:
        if name != "twice":
            assert digests[name] == sha(canonical_json(_canonical.canonical_value(value))), name
    assert digests["twice"] == sha("\n".join([sha("1"), sha("1")]))
    assert metadata_sha256(digests) == sha(canonical_json(dict(digests)))
    many = {f"k{i}\u00e9": str(i) for i in range(20_000)}  # more than one slice of names
    assert metadata_sha256(many) == sha(canonical_json(many))
    assert metadata_sha256({}) == sha("{}")


@pytest.mark.parametrize("name", ["m.json", "m.jsonl", "m.csv"])
def test_a_text_that_decodes_wider_than_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(_textbounds, "MAX_DECODED_BYTES", 4096)
    path = tmp_path / name
    wide = "\U0001f600"  # beyond U+FFFF: the whole text takes 4 bytes a character
    path.write_text(json.dumps([wide + "a" * 1200], ensure_ascii=False) + "\n", encoding="utf-8")
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.note is not None and "once decoded, over the limit of 4096 bytes" in digest.note
    path.write_text(json.dumps([wide + "a" * 800], ensure_ascii=False) + "\n", encoding="utf-8")
    assert hash_checkpoint(path, relative_to=tmp_path).note is None


def test_a_yaml_file_larger_than_yaml_is_read_is_compared_as_bytes(tmp_path: Path) -> None:
    path = tmp_path / "hparams.yaml"
    path.write_text("a: " + "x" * _text.MAX_YAML_TEXT_BYTES + "\n")
    assert cli.main(["hash", str(path)]) == EXIT_OK
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.format == "file"
    assert digest.note is not None and "more than the 1 MiB read as values" in digest.note


def scalar_events(n: int) -> bytes:
    """``n`` TensorBoard events of one scalar each (wall time, step, tag ``loss``, simple_value)."""
    value = b"\x0a\x04loss\x15" + b"\x00\x00\x00\x3f"
    summary = b"\x0a" + bytes([len(value)]) + value
    return b"".join(
        tfrecord(b"\x09" + bytes(8) + b"\x10" + bytes([step]) + b"\x2a" + bytes([len(summary)]) + summary)
        for step in range(n)
    )


LOGS: dict[str, Callable[[int], bytes]] = {
    "mlflow": lambda n: b"".join(b"1700000000000 0.5 %d\n" % step for step in range(n)),
    "wandb": lambda n: wandb_frame([b"\x5a\x00"] * n),  # records of one empty field: one value each
    "tensorboard": scalar_events,
}


@pytest.mark.parametrize("target", list(LOGS))
def test_a_log_over_the_log_value_limit_is_refused_with_the_limits_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    monkeypatch.setattr(_logvalues, "MAX_LOG_VALUES", 50)
    path = input_path(tmp_path / "over", target)
    path.write_bytes(LOGS[target](120))
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.note is not None and "more than the limit of 50 values" in digest.note
    path = input_path(tmp_path / "under", target)
    path.write_bytes(LOGS[target](10))
    digest = hash_checkpoint(path, relative_to=tmp_path)
    assert digest.note is None and 0 < len(digest.metadata) <= 50
