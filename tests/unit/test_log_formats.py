"""Logging tools' files (TensorBoard, MLflow, W&B) read as named values, from files the libraries wrote.

Each format is written by its real library, read back by reprobox's own reader (no TensorFlow, tensorboard
or wandb import), and checked: names and values as logged, clocks named so that ``runspecific`` excuses
them, equal digests for equal numbers written at other times, one differing digest for one differing
value. Damaged and hostile files are refused with a note, never an exception or a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import time
import warnings
import zlib
from pathlib import Path

import pytest
import torch

from reprobox import compare, outputvalues
from reprobox.guest.hashing import format_of, hash_outputs
from reprobox.guest.hashing._crc32c import crc32c, masked_crc32c
from reprobox.guest.hashing._logformats import log_format_of, plan_log, read_log_values
from reprobox.guest.hashing._mlflow import mlflow_entry
from reprobox.guest.hashing._protowire import Message, WireError
from reprobox.guest.hashing._wandb import BLOCK, FULL, HEADER
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import DURATION, TIMESTAMP, reason_by_key
from reprobox.timestamps import utc_now

LOSSES = [1.0, 0.75, 0.5]


# --- writing real files --------------------------------------------------------------------------


def write_tensorboard(folder: Path, loss_at_2: float = 0.5) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(folder))
    for step, loss in enumerate([*LOSSES[:2], loss_at_2]):
        writer.add_scalar("loss/train", loss, step)
    writer.add_histogram("weights", torch.arange(10.0), 2)
    writer.add_scalar("lr", 0.25, 2, new_style=True)  # a tensor summary (TensorProto float_val)
    writer.add_text("note", "hello", 0)
    writer.close()
    (event_file,) = folder.glob("events.out.tfevents.*")
    return event_file


def run_script(script: str, root: Path, env: dict[str, str]) -> None:
    """Write with the library in a process of its own: its global state and threads stay there."""
    subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(root)],
        check=True,
        env={**os.environ, **env},
        capture_output=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def mlflow_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three MLflow file-store runs: two with the same numbers at other times, one with another loss."""
    pytest.importorskip("mlflow")
    root = tmp_path_factory.mktemp("mlflow")
    script = """
        import json, sys, time
        from pathlib import Path
        import mlflow

        root = Path(sys.argv[1])
        found = {}
        for name, last in (("a", 0.5), ("b", 0.5), ("c", 0.625)):
            mlflow.set_tracking_uri((root / name / "mlruns").as_uri())
            with mlflow.start_run() as run:
                mlflow.log_param("lr", 0.1)
                for step, loss in enumerate([1.0, 0.75, last]):
                    mlflow.log_metric("loss", loss, step=step)
                    time.sleep(0.01)
            found[name] = str(root / name / "mlruns" / "0" / run.info.run_id)
        (root / "runs.json").write_text(json.dumps(found))
    """
    run_script(script, root, {"MLFLOW_ALLOW_FILE_STORE": "true"})
    return {k: Path(v) for k, v in json.loads((root / "runs.json").read_text()).items()}


@pytest.fixture(scope="module")
def wandb_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three offline W&B runs' .wandb files: two with the same numbers, one with another loss."""
    pytest.importorskip("wandb")
    root = tmp_path_factory.mktemp("wandb")
    script = """
        import json, sys, time
        from pathlib import Path
        import wandb

        root = Path(sys.argv[1])
        found = {}
        for name, last in (("a", 0.5), ("b", 0.5), ("c", 0.625)):
            (root / name).mkdir()
            run = wandb.init(project="reprobox-test", config={"lr": 0.1, "layers": [4, 2]}, dir=root / name)
            for loss in (1.0, 0.75, last):
                run.log({"loss": loss, "acc": {"top1": 0.5}})
                time.sleep(0.01)
            run.finish()
            (found[name],) = map(str, (root / name).glob("wandb/offline-run-*/run-*.wandb"))
        (root / "runs.json").write_text(json.dumps(found))
    """
    env = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONFIG_DIR": str(root / "config")}
    run_script(script, root, {**env, "WANDB_CACHE_DIR": str(root / "cache"), "WANDB_DATA_DIR": str(root)})
    return {k: Path(v) for k, v in json.loads((root / "runs.json").read_text()).items()}


@pytest.fixture(scope="module")
def tensorboard_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tensorboard")
    found = {}
    for name, last in (("a", 0.5), ("b", 0.5), ("c", 0.625)):
        found[name] = write_tensorboard(root / name, last)
        time.sleep(0.01)
    return found


def values(path: Path) -> dict[str, object]:
    return dict(read_log_values(path))


def differing_digests(a: Path, b: Path) -> set[str]:
    plan_a, plan_b = plan_log(a), plan_log(b)
    assert plan_a.note is None and plan_b.note is None, (plan_a.note, plan_b.note)
    assert set(plan_a.metadata) == set(plan_b.metadata)
    return {name for name in plan_a.metadata if plan_a.metadata[name] != plan_b.metadata[name]}


def clocks(names: set[str]) -> set[str]:
    return {n for n in names if reason_by_key(n) in (TIMESTAMP, DURATION)}


# --- TensorBoard ---------------------------------------------------------------------------------


def test_crc32c_matches_the_published_check_value_and_tensorboards_own() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    reference = pytest.importorskip("tensorboard.compat.tensorflow_stub.pywrap_tensorflow")
    for data in (b"", b"a", b"hello world", bytes(range(256)) * 3):
        assert masked_crc32c(data) == reference.masked_crc32c(data)


def test_event_files_give_each_tag_and_step_with_its_clock(tensorboard_files: dict[str, Path]) -> None:
    path = tensorboard_files["a"]
    assert log_format_of(path) == format_of(path) == "tensorboard"
    found = values(path)
    assert [found[f"loss/train.step_{s}"] for s in range(3)] == LOSSES
    assert found["file_version"] == "brain.Event:2"
    assert found["weights.step_2.num"] == 10.0
    assert (found["weights.step_2.sum"], found["weights.step_2.max"]) == (45.0, 9.0)
    assert sum(found["weights.step_2.bucket"]) == 10.0  # type: ignore[arg-type]
    assert (found["lr.step_2"], found["lr.step_2.dtype"], found["lr.step_2.shape"]) == (0.25, "DT_FLOAT", [])
    assert found["note/text_summary.step_0"] == ["hello"]
    assert found["note/text_summary.step_0.plugin"] == "text"
    wall_times = [n for n in found if n.endswith("wall_time")]
    assert "loss/train.step_1.wall_time" in wall_times
    assert {reason_by_key(n) for n in wall_times} == {TIMESTAMP}
    assert all(isinstance(found[n], float) and found[n] > 1e9 for n in wall_times)  # type: ignore[operator]


def test_event_files_written_again_differ_only_in_their_clocks(tensorboard_files: dict[str, Path]) -> None:
    differing = differing_digests(tensorboard_files["a"], tensorboard_files["b"])
    assert differing
    assert differing == clocks(differing)
    assert all(n.endswith(".wall_time") for n in differing)


def test_a_different_logged_value_is_exactly_that_tag_and_step(tensorboard_files: dict[str, Path]) -> None:
    differing = differing_digests(tensorboard_files["a"], tensorboard_files["c"])
    assert differing - clocks(differing) == {"loss/train.step_2"}


def test_event_field_numbers_are_tensorboards() -> None:
    proto = pytest.importorskip("tensorboard.compat.proto.event_pb2")
    summary = pytest.importorskip("tensorboard.compat.proto.summary_pb2")
    tensor = pytest.importorskip("tensorboard.compat.proto.tensor_pb2")
    from reprobox.guest.hashing import _tensorboard as tb

    def numbers(message: type) -> dict[str, int]:
        return {f.name: f.number for f in message.DESCRIPTOR.fields}  # type: ignore[attr-defined]

    event = numbers(proto.Event)
    assert (event["wall_time"], event["step"], event["file_version"], event["summary"]) == (
        tb._WALL_TIME,
        tb._STEP,
        tb._FILE_VERSION,
        tb._SUMMARY,
    )
    assert (event["graph_def"], event["session_log"], event["source_metadata"]) == (
        tb._GRAPH_DEF,
        tb._SESSION_LOG,
        tb._SOURCE_METADATA,
    )
    value = numbers(summary.Summary.Value)
    assert (value["tag"], value["simple_value"], value["image"], value["histo"]) == (
        tb._TAG,
        tb._SIMPLE_VALUE,
        tb._IMAGE,
        tb._HISTO,
    )
    assert (value["audio"], value["tensor"], value["metadata"]) == (tb._AUDIO, tb._TENSOR, tb._METADATA)
    assert list(numbers(summary.HistogramProto).values()) == [1, 2, 3, 4, 5, 6, 7]
    fields = numbers(tensor.TensorProto)
    assert (fields["dtype"], fields["tensor_shape"], fields["tensor_content"]) == (
        tb._DTYPE,
        tb._SHAPE,
        tb._CONTENT,
    )
    assert {fields[n] for n in ("float_val", "double_val", "int_val", "int64_val", "bool_val")} <= set(
        tb._VAL_FIELDS
    )


def test_images_and_tensor_content_are_compared_by_digest_and_value(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tmp_path))
    writer.add_image("sample", torch.zeros(3, 4, 5), 7)
    writer.close()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    found = values(path)
    assert isinstance(found["sample.step_7"], str) and len(found["sample.step_7"]) == 64
    assert (found["sample.step_7.height"], found["sample.step_7.width"]) == (4, 5)


# --- MLflow --------------------------------------------------------------------------------------


def test_mlflow_entries_are_recognised_by_their_place(tmp_path: Path) -> None:
    run = tmp_path / "out" / "mlruns" / "0" / "0123abcd"
    assert mlflow_entry(run / "metrics" / "loss") == ("metrics", "loss")
    assert mlflow_entry(run / "metrics" / "train" / "loss") == ("metrics", "train/loss")
    assert mlflow_entry(run / "tags" / "mlflow.user") == ("tags", "mlflow.user")
    assert mlflow_entry(run / "meta.yaml") is None
    assert mlflow_entry(tmp_path / "mlruns" / "metrics" / "loss") is None
    assert log_format_of(run / "meta.yaml") is None  # YAML, read as such


def test_mlflow_metrics_params_and_tags_are_values(mlflow_runs: dict[str, Path]) -> None:
    run = mlflow_runs["a"]
    metric = values(run / "metrics" / "loss")
    assert [metric[f"loss.step_{s}"] for s in range(3)] == LOSSES
    stamps = [n for n in metric if n.endswith(".timestamp")]
    assert len(stamps) == 3 and {reason_by_key(n) for n in stamps} == {TIMESTAMP}
    assert values(run / "params" / "lr") == {"lr": "0.1"}
    user = values(run / "tags" / "mlflow.user")
    assert list(user) == ["mlflow.user"] and isinstance(user["mlflow.user"], str)
    assert format_of(run / "metrics" / "loss") == "mlflow"


def test_mlflow_runs_written_again_differ_only_in_their_clocks(mlflow_runs: dict[str, Path]) -> None:
    a, b, c = (mlflow_runs[k] / "metrics" / "loss" for k in "abc")
    differing = differing_digests(a, b)
    assert differing and differing == clocks(differing)
    assert differing_digests(a, c) - clocks(differing_digests(a, c)) == {"loss.step_2"}
    for entry in ("params/lr", "tags/mlflow.user", "tags/mlflow.source.name"):
        assert not differing_digests(mlflow_runs["a"] / entry, mlflow_runs["b"] / entry)


# --- W&B -----------------------------------------------------------------------------------------


def test_wandb_history_summary_and_config_are_values(wandb_runs: dict[str, Path]) -> None:
    path = wandb_runs["a"]
    assert log_format_of(path) == format_of(path) == "wandb"
    found = values(path)
    assert [found[f"loss.step_{s}"] for s in range(3)] == LOSSES
    assert found["acc.top1.step_1"] == 0.5  # W&B logs a nested dict as nested keys
    assert found["summary.loss"] == 0.5
    assert (found["config.lr"], found["config.layers"]) == (0.1, [4, 2])
    assert found["run.project"] == "reprobox-test"
    assert found["exit.exit_code"] == 0
    for name in ("step_0._timestamp", "step_2._runtime", "summary._timestamp", "run.start_time"):
        assert reason_by_key(name) in (TIMESTAMP, DURATION), name
    assert "step_0._step" not in found and "_step.step_0" not in found


def test_wandb_runs_written_again_differ_only_in_clocks_and_run_id(wandb_runs: dict[str, Path]) -> None:
    differing = differing_digests(wandb_runs["a"], wandb_runs["b"])
    # W&B draws each run's id from `secrets`: it names the run (and its files), not what it computed
    assert differing - clocks(differing) == {"run.run_id"}
    other = differing_digests(wandb_runs["a"], wandb_runs["c"])
    assert other - clocks(other) == {"run.run_id", "loss.step_2", "summary.loss"}


def test_wandb_field_numbers_are_wandbs() -> None:
    pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")
    from reprobox.guest.hashing import _wandb as wb

    record = {f.name: f.number for f in pb.Record.DESCRIPTOR.fields}
    assert (record["history"], record["summary"], record["config"], record["run"], record["exit"]) == (
        wb._HISTORY,
        wb._SUMMARY,
        wb._CONFIG,
        wb._RUN,
        wb._EXIT,
    )
    assert {record[name] for name in wb._DIGESTED.values()} == set(wb._DIGESTED)
    assert {record[n] for n in ("stats", "environment", "output", "header")} <= wb._LEFT_OUT
    assert {record[n] for n in ("num", "control", "uuid", "_info")} == wb._RECORD_OWN
    run = {f.name: f.number for f in pb.RunRecord.DESCRIPTOR.fields}
    ours = {name: number for name, (number, _) in wb._RUN_FIELDS.items()}
    assert ours == {name: run[name] for name in wb._RUN_FIELDS}
    item = {f.name: f.number for f in pb.HistoryItem.DESCRIPTOR.fields}
    assert (item["key"], item["nested_key"], item["value_json"]) == (
        wb._ITEM_KEY,
        wb._ITEM_NESTED_KEY,
        wb._ITEM_VALUE_JSON,
    )
    summary = {f.name: f.number for f in pb.SummaryRecord.DESCRIPTOR.fields}
    assert (summary["update"], summary["remove"]) == (wb._UPDATE, wb._REMOVE)


# --- through hashing and compare -------------------------------------------------------------------


STARTED_AT = utc_now()


def make_run(root: Path, run_id: str, files: dict[str, Path]) -> RunRecord:
    run_dir = root / "runs" / "job" / run_id
    outputs = run_dir / "outputs"
    for relative, source in files.items():
        (outputs / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, outputs / relative)
    data = {
        "run_id": run_id,
        "status": "succeeded",
        "job": {},
        "started_at": STARTED_AT,  # the logs were written by this session: the runs' clock window
        "ended_at": utc_now(),
        "fingerprint": {"hardware": {"hostname": "node1"}},
        "checkpoints": [d.to_json() for d in hash_outputs(outputs, [])],
    }
    return RunRecord(run_dir.resolve(), data)


EVENTS = "runs/Nov26_12-00-01_node1/events.out.tfevents.1795680000.node1.42.0"
METRIC = "mlruns/0/0123456789abcdef0123456789abcdef/metrics/loss"


def logs(tensorboard: dict[str, Path], mlflow: dict[str, Path], which: str) -> dict[str, Path]:
    """One run's outputs: an event file and an MLflow metric, each under the same name in every run."""
    return {EVENTS: tensorboard[which], METRIC: mlflow[which] / "metrics" / "loss"}


def test_equal_numbers_logged_at_other_times_are_reproduced(
    tmp_path: Path, tensorboard_files: dict[str, Path], mlflow_runs: dict[str, Path]
) -> None:
    a = make_run(tmp_path, "20261126T120000Z-aaaaaa", logs(tensorboard_files, mlflow_runs, "a"))
    b = make_run(tmp_path, "20261126T120100Z-bbbbbb", logs(tensorboard_files, mlflow_runs, "b"))
    assert a.checkpoint(EVENTS)["format"] == "tensorboard"  # type: ignore[index]
    result = compare.compare_runs([a, b])
    assert (result.verdict, result.grade) == (compare.IDENTICAL, compare.REPRODUCED), result.sentence
    excused = {e["name"] for e in result.run_specific}
    assert "loss/train.step_2.wall_time" in excused and "loss.step_2.timestamp" in excused
    assert not result.value_differences


def test_a_differing_logged_value_is_named_with_its_tag_and_step(
    tmp_path: Path, tensorboard_files: dict[str, Path], mlflow_runs: dict[str, Path]
) -> None:
    a = make_run(tmp_path, "20261126T120000Z-aaaaaa", logs(tensorboard_files, mlflow_runs, "a"))
    c = make_run(tmp_path, "20261126T120100Z-cccccc", logs(tensorboard_files, mlflow_runs, "c"))
    result = compare.compare_runs([a, c])
    assert result.grade == compare.NOT_REPRODUCIBLE
    assert sorted((e["checkpoint"], e["name"], e["a"], e["b"]) for e in result.value_differences) == [
        (METRIC, "loss.step_2", 0.5, 0.625),
        (EVENTS, "loss/train.step_2", 0.5, 0.625),
    ]
    assert "loss" in result.sentence and "step_2" in result.sentence


# --- hostile files -------------------------------------------------------------------------------


def pb_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def pb_len(number: int, payload: bytes) -> bytes:
    return pb_varint(number << 3 | 2) + pb_varint(len(payload)) + payload


def tfrecord(data: bytes, *, length: int | None = None) -> bytes:
    header = struct.pack("<Q", len(data) if length is None else length)
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


def wandb_file(*records: bytes) -> bytes:
    """A .wandb file as W&B writes one: header, then records cut into chunks at block boundaries."""
    out = bytearray(HEADER)
    for record in records:
        rest, first = record, True
        while True:
            left = BLOCK - len(out) % BLOCK
            if left < 7:
                out += bytes(left)
                left = BLOCK
            piece, rest = rest[: left - 7], rest[left - 7 :]
            kind = (FULL if first else 4) if not rest else (2 if first else 3)
            out += struct.pack("<IHB", zlib.crc32(bytes((kind,)) + piece), len(piece), kind) + piece
            first = False
            if not rest:
                break
    return bytes(out)


def history(key: bytes, value_json: bytes) -> bytes:
    return pb_len(2, pb_len(1, pb_len(1, key) + pb_len(16, value_json)))


def refused(path: Path) -> str:
    """The note hashing records for a file it could not read as values; the file is bytes then."""
    started = time.monotonic()
    plan = plan_log(path)
    assert plan.format == "file", plan
    assert outputvalues.load_values(path) is None
    (digest,) = hash_outputs(path.parent, [path.name])
    assert digest.format == "file" and digest.note == plan.note
    assert time.monotonic() - started < 10
    assert plan.note is not None and plan.note.startswith("values not read")
    return plan.note


@pytest.fixture
def event_file(tensorboard_files: dict[str, Path], tmp_path: Path) -> Path:
    path = tmp_path / "events.out.tfevents.1.host.1.0"
    shutil.copyfile(tensorboard_files["a"], path)
    return path


def test_a_cut_short_event_file_is_refused(event_file: Path) -> None:
    event_file.write_bytes(event_file.read_bytes()[:-3])
    assert "checksum" in refused(event_file) or "claims" in refused(event_file)
    event_file.write_bytes(event_file.read_bytes()[:5])
    assert "cut short" in refused(event_file)


def test_an_event_file_whose_checksums_fail_is_refused(event_file: Path) -> None:
    data = bytearray(event_file.read_bytes())
    data[20] ^= 0xFF  # inside the first record's data
    event_file.write_bytes(bytes(data))
    assert "checksum of its data fails" in refused(event_file)
    data = bytearray(tfrecord(b"x"))
    data[0] ^= 1  # the length, not matching its checksum
    event_file.write_bytes(bytes(data))
    assert "checksum of its length fails" in refused(event_file)


def test_an_absurd_record_length_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.host.1.0"
    path.write_bytes(tfrecord(b"", length=1 << 62) + bytes(16))
    assert "claims 4611686018427387904 bytes" in refused(path)


def test_hostile_protocol_buffers_inside_good_records_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.host.1.0"
    cases = {
        "varint runs over 10 bytes": b"\x10" + b"\xff" * 11,  # step
        "wire type 3": b"\x2b",  # a group start in field 5
        "more than the": pb_varint(5 << 3 | 2) + pb_varint(1 << 40) + b"x",  # summary of 2**40 bytes
        "not the 64-bit value": b"\x08\x01",  # wall_time as a varint
        "not UTF-8": pb_len(3, b"\xff\xfe"),  # file_version
    }
    for expected, event in cases.items():
        path.write_bytes(tfrecord(b"\x09" + struct.pack("<d", 1.0)) + tfrecord(event))
        assert expected in refused(path), expected


def test_deep_nesting_is_never_descended(tmp_path: Path) -> None:
    """Only the fields the schema names are parsed: a million nested messages are bytes to skip."""
    nested = b""
    for _ in range(100_000):
        nested = pb_len(1, nested) if len(nested) < 1 << 20 else nested
    shape = pb_len(2, pb_len(2, pb_len(99, nested)))  # TensorShapeProto.dim with an unknown deep field
    tensor = pb_len(8, pb_varint(1 << 3) + pb_varint(1) + shape + pb_len(5, struct.pack("<f", 1.5)))
    event = b"\x10\x03" + pb_len(5, pb_len(1, pb_len(1, b"t") + tensor))
    path = tmp_path / "events.out.tfevents.1.host.1.0"
    path.write_bytes(tfrecord(event))
    started = time.monotonic()
    found = values(path)
    assert time.monotonic() - started < 10
    assert found["t.step_3"] == [1.5] and found["t.step_3.shape"] == [0]


def test_protowire_reads_packed_and_unpacked_repeated_fields_alike() -> None:
    packed = pb_len(6, struct.pack("<2d", 1.0, 2.0))
    unpacked = b"".join(pb_varint(6 << 3 | 1) + struct.pack("<d", v) for v in (1.0, 2.0))
    assert Message(packed).doubles(6) == Message(unpacked).doubles(6) == [1.0, 2.0]
    assert Message(pb_len(7, b"\x01" + b"\xff" * 9 + b"\x01")).varints(7) == [1, (1 << 64) - 1]
    with pytest.raises(WireError):
        Message(pb_len(6, b"\x00" * 7)).doubles(6)


def test_hostile_wandb_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "run-abcdefgh.wandb"
    good = wandb_file(history(b"loss", b"0.5"))
    path.write_bytes(good)
    assert values(path)["loss.step_0"] == 0.5
    cases = {
        "W&B's header": b"PK\x03\x04" + good[4:],
        "checksum fails": good[:-1] + bytes([good[-1] ^ 1]),
        "past its block or the file": good[:-2],
        "cut short": wandb_file(history(b"loss", b"0" * 40_000))[:BLOCK],
        "out of order or unknown": good[:7] + struct.pack("<IHB", zlib.crc32(b"\x09"), 0, 9),
        "not JSON": wandb_file(history(b"loss", b"{")),
        "nests deeper": wandb_file(history(b"loss", b"[" * 100_000 + b"]" * 100_000)),
        "levels, more than": wandb_file(pb_len(3, pb_len(1, pb_len(2, b"k") * 10_000 + pb_len(16, b"1")))),
        "padding at byte": good[:7] + struct.pack("<IHB", 0, 0, 0) + b"\x01",
        "claims": wandb_file(pb_len(2, pb_varint(1 << 3 | 2) + pb_varint(1 << 60))),
    }
    for expected, data in cases.items():
        path.write_bytes(data)
        assert expected in refused(path), expected


def test_a_wandb_record_over_several_blocks_is_put_back_together(tmp_path: Path) -> None:
    path = tmp_path / "run-abcdefgh.wandb"
    long_text = json.dumps("x" * 100_000).encode()
    path.write_bytes(wandb_file(history(b"a", b"1"), history(b"text", long_text), history(b"b", b"2")))
    found = values(path)
    assert found["text.step_1"] == "x" * 100_000  # no step recorded: rows are numbered
    assert (found["a.step_0"], found["b.step_2"]) == (1, 2)


def test_hostile_mlflow_entries_are_refused(tmp_path: Path) -> None:
    metrics = tmp_path / "mlruns" / "0" / "abc" / "metrics"
    metrics.mkdir(parents=True)
    path = metrics / "loss"
    cases = {
        "line 2 is not": b"1 0.5 0\nnot a metric line\n",
        "line 1 is not": b"1 0.5 " + b"9" * 5000 + b"\n",
        "utf-8": b"\xff\xfe\n",
    }
    for expected, data in cases.items():
        path.write_bytes(data)
        assert expected in refused(path).lower() or expected in refused(path), expected


def test_a_file_larger_than_the_cap_is_compared_as_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reprobox.guest.hashing import _tensorboard

    monkeypatch.setattr(_tensorboard, "MAX_EVENT_FILE_BYTES", 10)
    path = tmp_path / "events.out.tfevents.1.host.1.0"
    path.write_bytes(tfrecord(b"\x09" + struct.pack("<d", 1.0)))
    assert "MiB of an event file" in refused(path)


def scalar_event(tag: bytes, step: int, value: float, wall_time: float) -> bytes:
    summary = pb_len(1, pb_len(1, tag) + b"\x15" + struct.pack("<f", value))
    return tfrecord(b"\x09" + struct.pack("<d", wall_time) + b"\x10" + pb_varint(step) + pb_len(5, summary))


def test_events_are_named_by_tag_and_step_whatever_their_order(tmp_path: Path) -> None:
    """Two tags interleaved otherwise (two threads logging) are the same numbers; a tag logged twice at
    one step is told apart by its order, the only thing that can."""
    first, second = tmp_path / "a" / "events.out.tfevents.1", tmp_path / "b" / "events.out.tfevents.1"
    first.parent.mkdir()
    second.parent.mkdir()
    first.write_bytes(scalar_event(b"loss", 0, 0.5, 1.0) + scalar_event(b"acc", 0, 0.25, 2.0))
    second.write_bytes(scalar_event(b"acc", 0, 0.25, 3.0) + scalar_event(b"loss", 0, 0.5, 4.0))
    differing = differing_digests(first, second)
    assert differing == {"loss.step_0.wall_time", "acc.step_0.wall_time"}
    first.write_bytes(scalar_event(b"loss", 0, 0.5, 1.0) + scalar_event(b"loss", 0, 0.75, 2.0))
    assert [(n, v) for n, v in read_log_values(first) if "wall_time" not in n] == [
        ("loss.step_0", 0.5),
        ("loss.step_0#2", 0.75),
    ]


# --- graphs (add_graph) --------------------------------------------------------------------------


def graph_event(*attr_order: str, relu_attr: bytes = b"{}") -> bytes:
    """An Event holding a GraphDef of one node whose attr map entries are written in ``attr_order``."""
    shape = pb_len(
        7, pb_len(2, pb_varint(1 << 3) + pb_varint(1)) + pb_len(2, pb_varint(1 << 3) + pb_varint(2))
    )
    entries = {
        "attr": pb_len(1, b"attr") + pb_len(2, pb_len(2, relu_attr)),
        "_output_shapes": pb_len(1, b"_output_shapes") + pb_len(2, pb_len(1, shape)),
    }
    node = pb_len(1, b"Net/relu") + pb_len(2, b"aten::relu") + pb_len(3, b"input/x")
    node += b"".join(pb_len(5, entries[key]) for key in attr_order)
    graph = pb_len(1, node) + pb_len(4, pb_varint(1 << 3) + pb_varint(22))
    return pb_len(4, graph)


def write_events(path: Path, *events: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(tfrecord(event) for event in events))
    return path


def test_a_graphs_attribute_map_compares_as_a_map_whatever_its_byte_order(tmp_path: Path) -> None:
    first = write_events(
        tmp_path / "a" / "events.out.tfevents.1.h.1.0", graph_event("attr", "_output_shapes")
    )
    second = write_events(
        tmp_path / "b" / "events.out.tfevents.2.h.2.0", graph_event("_output_shapes", "attr")
    )
    assert first.read_bytes() != second.read_bytes()
    assert plan_log(first).metadata == plan_log(second).metadata
    found = values(first)
    assert found["graph_def.step_0.node.0.op"] == "aten::relu"
    assert found["graph_def.step_0.node.0.input"] == ["input/x"]
    assert found["graph_def.step_0.node.0.attr._output_shapes"] == {"shape": [[1, 2]]}
    assert found["graph_def.step_0.versions.producer"] == 22
    changed = write_events(
        tmp_path / "c" / "events.out.tfevents.3.h.3.0",
        graph_event("attr", "_output_shapes", relu_attr=b'{"inplace": 1}'),
    )
    assert differing_digests(first, changed) == {"graph_def.step_0.node.0.attr.attr"}


def test_a_graph_pytorch_logs_is_read_node_by_node(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tmp_path))
    with warnings.catch_warnings():  # add_graph traces with torch.jit.trace, which torch deprecates
        warnings.simplefilter("ignore", DeprecationWarning)
        writer.add_graph(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()), torch.zeros(1, 3))
    writer.close()
    (event_file,) = tmp_path.glob("events.out.tfevents.*")
    found = values(event_file)
    ops = {v for k, v in found.items() if k.startswith("graph_def.step_0.node.") and k.endswith(".op")}
    assert {"aten::linear", "aten::relu"} <= ops
    assert "graph_def.step_0.wall_time" in found and "graph_def.step_0" not in found


# --- CSV preambles -------------------------------------------------------------------------------


def test_a_csvs_comment_lines_are_its_preamble_and_their_json_is_values(tmp_path: Path) -> None:
    monitor = tmp_path / "monitor.csv"
    monitor.write_text(
        '#{"t_start": 1795828848.57, "env_id": "CartPole-v1"}\nr,l,t\n12.0,12,0.01\n30.0,30,0.03\n'
    )
    found = outputvalues.load_values(monitor)
    assert found == {
        "0.r": "12.0",
        "0.l": "12",
        "0.t": "0.01",
        "1.r": "30.0",
        "1.l": "30",
        "1.t": "0.03",
        "preamble.0.t_start": 1795828848.57,
        "preamble.0.env_id": "CartPole-v1",
    }
    (digest,) = hash_outputs(tmp_path, ["monitor.csv"])
    assert digest.format == "csv" and set(digest.metadata) == set(found)

    notes = tmp_path / "notes.csv"
    notes.write_text("# written by train.py\n# seed 3\nstep,loss\n0,1.5\n")
    assert outputvalues.load_values(notes) == {
        "0.step": "0",
        "0.loss": "1.5",
        "preamble": ["written by train.py", "seed 3"],  # a list of plain values is one value
    }
    plain = tmp_path / "plain.csv"
    plain.write_text("step,loss\n0,1.5\n")
    assert outputvalues.load_values(plain) == {"0.step": "0", "0.loss": "1.5"}  # names as before


def test_graph_field_numbers_are_tensorflows() -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import attr_value_pb2, graph_pb2, node_def_pb2, tensor_shape_pb2

    from reprobox.guest.hashing import _graphdef as g

    def numbers(message: object) -> dict[str, int]:
        return {f.name: f.number for f in message.DESCRIPTOR.fields}  # type: ignore[attr-defined]

    graph = numbers(graph_pb2.GraphDef)
    assert (graph["node"], graph["library"], graph["version"], graph["versions"], graph["debug_info"]) == (
        g._NODE,
        g._LIBRARY,
        g._VERSION,
        g._VERSIONS,
        g._GRAPH_DEBUG_INFO,
    )
    node = numbers(node_def_pb2.NodeDef)
    assert [node[n] for n in ("name", "op", "input", "device", "attr")] == [
        g._NAME,
        g._OP,
        g._INPUT,
        g._DEVICE,
        g._ATTR,
    ]
    attr = numbers(attr_value_pb2.AttrValue)
    names = ("list", "s", "i", "f", "b", "type", "shape", "tensor", "placeholder", "func")
    assert tuple(attr[n] for n in names) == g._ATTR_MEMBERS
    listed = numbers(attr_value_pb2.AttrValue.ListValue)
    assert [listed[n] for n in ("s", "i", "f", "b", "type", "shape", "tensor", "func")] == [
        g._S,
        g._I,
        g._F,
        g._B,
        g._TYPE,
        g._SHAPE,
        g._TENSOR,
        g._LIST_FUNC,
    ]
    assert numbers(attr_value_pb2.NameAttrList) == {"name": g._FUNC_NAME, "attr": g._FUNC_ATTR}
    shape, dim = numbers(tensor_shape_pb2.TensorShapeProto), numbers(tensor_shape_pb2.TensorShapeProto.Dim)
    assert (shape["dim"], shape["unknown_rank"], dim["size"], dim["name"]) == (
        g._DIM,
        g._UNKNOWN_RANK,
        g._DIM_SIZE,
        g._DIM_NAME,
    )
