"""YAML, JSON attestations and .npz checkpoints from someone else: bounded, refused by name, never a crash;
and what they say, shown in a report as text, never as markup."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobox import attest, codetree
from reprobox.compare import Comparison
from reprobox.errors import EXIT_BAD_INPUT, SpecError
from reprobox.fileio import MAX_JSON_DEPTH, JsonTooDeep, loads_bounded
from reprobox.forensics.variation import SENSITIVE, FactorResult, VariationResult
from reprobox.guest.hashing import hash_checkpoint
from reprobox.guest.hashing._numpy_files import MAX_NPZ_RATIO, _npz_bomb
from reprobox.records.attestation import PREDICATE_SCHEMA, PREDICATE_TYPE, STATEMENT_TYPE
from reprobox.render.html import html_page
from reprobox.render.markdown import markdown_page
from reprobox.render.variation_document import (
    AUTHOR_HEADERS,
    MATRIX_HEADERS,
    author_matrix_blocks,
    matrix_blocks,
    matrix_title,
    matrix_verdict,
)
from reprobox.yamlsource import MAX_YAML_BYTES, load_yaml, parse_yaml

DOCUMENT_ERRORS = (SpecError,)


def billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


# -- YAML ---------------------------------------------------------------------------------------------


def test_a_billion_laughs_job_file_is_refused_quickly_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(billion_laughs())
    start = time.monotonic()
    with pytest.raises(SpecError, match=r"job\.yaml:\d+: expands to more than") as caught:
        load_yaml(path)
    assert time.monotonic() - start < 0.5
    assert caught.value.exit_code == EXIT_BAD_INPUT


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[" * 50_000 + "]" * 50_000, "nests deeper than"),
        ("a: " + "{b: " * 200 + "1" + "}" * 200, "nests deeper than"),
        ("a: &a [1, *a]\n", "refers to its own anchor"),
        ("a: &a {k: *a}\n", "refers to its own anchor"),
    ],
    ids=["deep-flow-list", "deep-mapping", "self-alias-list", "self-alias-map"],
)
def test_deep_or_self_referring_yaml_is_refused(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=words):
        load_yaml(path)


def test_an_oversized_yaml_file_is_refused_without_parsing_it(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(b"# " + b"x" * MAX_YAML_BYTES + b"\n")
    with pytest.raises(SpecError, match="too large for a job file"):
        load_yaml(path)


def test_ordinary_anchors_and_merge_keys_still_load(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "base: &base {seed: 3, env: {A: '1'}}\nrun:\n  <<: *base\n  name: x\nlist: [*base, *base]\n"
    )
    located = load_yaml(path)
    assert located.data["run"] == {"seed": 3, "env": {"A": "1"}, "name": "x"}
    assert located.line("run.name") == 4
    assert located.data["list"][1]["seed"] == 3


def test_yaml_text_embedded_elsewhere_is_bounded_too() -> None:
    with pytest.raises(SpecError, match=r"statement\.json:\d+: expands"):
        parse_yaml(billion_laughs(), Path("statement.json"))


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="[]{}&*ab:, -\n'\"!", max_size=300))
def test_arbitrary_yaml_text_loads_or_raises_a_spec_error(text: str) -> None:
    with contextlib.suppress(SpecError):
        parse_yaml(text, Path("job.yaml"))


# -- JSON ---------------------------------------------------------------------------------------------


def test_bounded_json_refuses_depth_without_recursion_error() -> None:
    for depth in (MAX_JSON_DEPTH + 1, 5_000, 1_000_000):
        with pytest.raises(JsonTooDeep):
            loads_bounded("[" * depth + "]" * depth)
    assert loads_bounded("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None


# -- attestations -------------------------------------------------------------------------------------

JOB_TEXT = "version: 1\nname: demo\ncommand: [python, train.py]\nenv:\n  LD_LIBRARY_PATH: /opt/lib\n"
DIGEST = "a" * 64


def statement() -> dict[str, Any]:
    """A valid statement as `reprobox attest` writes it today."""
    files = {"job.yaml": "b" * 64, "train.py": "c" * 64}
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": "model.pt", "digest": {"sha256": DIGEST}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "schema": PREDICATE_SCHEMA,
            "job": {
                "name": "demo",
                "file": "job.yaml",
                "code": ".",
                "text": JOB_TEXT,
                "sha256": hashlib.sha256(JOB_TEXT.encode()).hexdigest(),
            },
            "code": {"sha256": codetree.tree_digest(files), "files": files, "git": None},
            "runtime": "local",
            "image": None,
            "execution": {
                "seed": 7,
                "determinism": {"algorithms": True, "threads": None, "nccl_algo": "Ring"},
                "threads": {"torch_intra_op": 4, "torch_inter_op": {"absent": "no torch"}},
                "world_size": 2,
                "launcher": {"type": "torchrun", "nproc_per_node": 2, "nnodes": 1},
                "env": {"LD_LIBRARY_PATH": "/opt/lib", "MODE": "fast", "API_TOKEN": "<redacted>"},
                "trail_every": None,
            },
            "fingerprint": {"software": {}},
            "runs": {"verified": 2},
            "checkpoints": [{"path": "model.pt", "file_sha256": DIGEST, "content_sha256": DIGEST}],
        },
    }


def write(tmp_path: Path, document: Any, name: str = "a.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def test_a_current_format_attestation_still_reads(tmp_path: Path) -> None:
    read = attest.read_attestation(write(tmp_path, statement()))
    assert read.execution["seed"] == 7


def test_a_deeply_nested_attestation_is_refused_naming_the_file(tmp_path: Path) -> None:
    for depth in (200, 200_000):
        path = tmp_path / f"deep{depth}.json"
        path.write_text('{"a":' * depth + "1" + "}" * depth)
        with pytest.raises(SpecError, match=rf"deep{depth}\.json: nests deeper than"):
            attest.read_attestation(path)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"seed": -1}, "execution.seed: is -1, outside"),
        ({"seed": 2**40}, "execution.seed: is"),
        ({"seed": "7"}, "execution.seed: must be int"),
        ({"threads": "abc"}, "execution.threads: must be dict"),
        ({"threads": {"torch_intra_op": "abc"}}, "execution.threads.torch_intra_op: must be a thread count"),
        ({"threads": {"OMP_NUM_THREADS": "0"}}, "execution.threads.OMP_NUM_THREADS: is 0, outside"),
        ({"threads": {"torch_intra_op": 10**9}}, "execution.threads.torch_intra_op: is 1000000000"),
        ({"determinism": {"threads": "abc"}}, "execution.determinism.threads: must be a whole number"),
        ({"determinism": {"algorithms": "yes"}}, "execution.determinism.algorithms: must be bool"),
        ({"env": {"MODE": 5}}, "execution.env.MODE: must be a string"),
        ({"env": {"MODE": ["a"]}}, "execution.env.MODE: must be a string"),
        ({"env": {"LD_PRELOAD": "/tmp/evil.so"}}, "execution.env.LD_PRELOAD: is a dynamic-loader"),
        ({"env": {"PYTHONSTARTUP": "/tmp/x.py"}}, "execution.env.PYTHONSTARTUP: is a dynamic-loader"),
        ({"env": {"BAD-NAME": "1"}}, "execution.env.BAD-NAME: is not a valid"),
        ({"env": {"MODE": "a\0b"}}, "execution.env.MODE: must be text without NUL"),
        ({"world_size": 10**9}, "execution.world_size: is 1000000000, outside"),
        ({"world_size": 0}, "execution.world_size: is 0, outside"),
        ({"world_size": "big"}, "execution.world_size: must be a whole number"),
        ({"launcher": {"nnodes": -3}}, "execution.launcher.nnodes: is -3"),
        ({"launcher": "torchrun"}, "execution.launcher: must be an object"),
        ({"trail_every": 0}, "execution.trail_every: is 0"),
    ],
)
def test_execution_fields_are_checked_as_types_and_ranges(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    document = statement()
    document["predicate"]["execution"].update(change)
    with pytest.raises(SpecError, match=f"predicate.{field}") as caught:
        attest.read_attestation(write(tmp_path, document))
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_a_loader_variable_the_job_text_sets_is_accepted(tmp_path: Path) -> None:
    document = statement()
    document["predicate"]["execution"]["env"]["LD_LIBRARY_PATH"] = "/opt/lib"
    assert attest.read_attestation(write(tmp_path, document)).execution["env"]["LD_LIBRARY_PATH"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


PATHS = _paths(statement())[1:]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(PATHS), JSON), min_size=1, max_size=4))
def test_any_field_replaced_by_any_value_reads_or_is_a_spec_error(
    tmp_path: Path, changes: list[tuple[tuple[Any, ...], Any]]
) -> None:
    document = copy.deepcopy(statement())
    for where, value in changes:
        target: Any = document
        try:
            for step in where[:-1]:
                target = target[step]
            target[where[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change replaced the path's parent
    path = write(tmp_path, document)
    with contextlib.suppress(DOCUMENT_ERRORS):
        attest.read_attestation(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400) | JSON.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_as_an_attestation_are_read_or_refused(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "any.json"
    path.write_bytes(data)
    with contextlib.suppress(DOCUMENT_ERRORS):
        attest.read_attestation(path)


# -- report documents ---------------------------------------------------------------------------------

HOSTILE = "<script>alert(1)</script> | </td><img src=x onerror=alert(1)>\n# not a heading"


def _no_markup_from(page: str) -> None:
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def _columns_kept(markdown: str, headers: int) -> None:
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert rows and all(line.count(" | ") == headers - 1 for line in rows)


def test_a_hostile_variation_matrix_in_an_attestation_is_shown_as_text(tmp_path: Path) -> None:
    document = statement()
    document["predicate"]["variation"] = {
        "runtime": HOSTILE,
        "factors": [
            {
                **dict.fromkeys(("factor", "values", "baseline", "varied", "pin"), HOSTILE),
                "status": "sensitive",
                "reason": {"x": HOSTILE},
                "files": [HOSTILE, 5],
                "tensors": HOSTILE,
                "max_abs": "big",
                "first_diverging_step": [1],
            },
            {
                "factor": "tz",
                "status": "invariant",
                "values": "",
                "baseline": "",
                "varied": "",
                "pin": [HOSTILE],
            },
        ],
        "combination": [HOSTILE, 3],
    }
    variation = attest.read_attestation(write(tmp_path, document)).variation
    assert variation is not None
    doc = author_matrix_blocks(variation, {"threads": True})
    page = html_page(HOSTILE, doc, verdict="different")
    _no_markup_from(page)
    assert page.count("<tr class='diff'>") == 1  # the sensitive row, whatever its name
    markdown = markdown_page("matrix", doc)
    _columns_kept(markdown, len(AUTHOR_HEADERS))
    assert "\n# not a heading" not in markdown  # the attested text stays on its line


def test_hostile_names_from_runs_are_shown_as_text_in_the_matrix_report() -> None:
    row = FactorResult(
        "tz",
        SENSITIVE,
        HOSTILE,
        baseline=HOSTILE,
        varied=HOSTILE,
        pin=HOSTILE,
        run=HOSTILE,
        files=[HOSTILE],
        tensors=[HOSTILE],
        values_changed=[HOSTILE],
        note=HOSTILE,
    )
    baseline = Comparison("identical", [HOSTILE, HOSTILE], sentence=HOSTILE)
    result = VariationResult([HOSTILE, HOSTILE], baseline, [row], runtime=HOSTILE)
    doc = matrix_blocks(result)
    _no_markup_from(html_page(matrix_title(HOSTILE), doc, verdict=matrix_verdict(result)))
    _columns_kept(markdown_page(matrix_title(HOSTILE), doc), len(MATRIX_HEADERS))


# -- .npz amplification -------------------------------------------------------------------------------


def test_an_npz_that_would_expand_too_far_is_hashed_as_plain_bytes(tmp_path: Path) -> None:
    path = tmp_path / "bomb.npz"
    array = np.zeros(4 << 20, dtype=np.uint8)  # 4 MiB of zeros: bzip2 packs it into a few dozen bytes
    with (
        zipfile.ZipFile(path, "w", compression=zipfile.ZIP_BZIP2) as archive,
        archive.open("x.npy", "w") as member,
    ):
        np.lib.format.write_array(member, array)
    result = hash_checkpoint(path, relative_to=tmp_path)
    assert result.format == "file"
    assert result.note is not None and f"over {MAX_NPZ_RATIO} times" in result.note
    assert result.content_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_overlapping_members_are_judged_by_their_total(tmp_path: Path) -> None:
    path = tmp_path / "small.npz"
    path.write_bytes(b"PK" + b"\0" * 1000)
    infos = []
    for index in range(2000):  # each within the ratio, together 2000 times one member's data
        info = zipfile.ZipInfo(f"m{index}.npy")
        info.compress_size, info.file_size = 1000, 1000 * 1000
        infos.append(info)
    note = _npz_bomb(path, infos)
    assert note is not None and "members would expand to" in note
    assert _npz_bomb(path, infos[:1]) is None


def test_an_npz_header_claiming_more_than_the_member_holds_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "liar.npz"
    header = {"descr": "<f8", "fortran_order": True, "shape": (10**12,)}
    with zipfile.ZipFile(path, "w") as archive, archive.open("x.npy", "w") as member:
        np.lib.format.write_array_header_1_0(member, header)
        member.write(b"\0" * 64)
    result = hash_checkpoint(path, relative_to=tmp_path)
    assert result.format == "file" and result.note is not None and "truncated" in result.note


def test_an_ordinary_compressed_npz_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "ok.npz"
    np.savez_compressed(path, zeros=np.zeros(1 << 20, dtype=np.float32), r=np.arange(10))
    assert hash_checkpoint(path, relative_to=tmp_path).format == "numpy"
