"""Explaining two fingerprints: numerics differences first, and the verdict sentence they lead to."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.fake_nvml import (
    A100_SXM4_80GB,
    H100_SXM5_80GB,
    FakeNVML,
    NVMLError_DriverNotLoaded,
    NVMLError_LibraryNotFound,
)

from reprobox.guest.fingerprint import absent, collect, iter_fields, stack_digest
from reprobox.stackdiff import SAME_STACK, diff_fingerprints, equal_fields, same_stack, stack_verdict

torch = pytest.importorskip("torch")


@pytest.fixture
def restore_threads() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def h100() -> dict[str, Any]:
    return collect(
        nvml=FakeNVML(gpus=(H100_SXM5_80GB,), driver_version="550.54.15", cuda_driver_version=12040)
    )


@pytest.fixture(scope="module")
def a100() -> dict[str, Any]:
    return collect(
        nvml=FakeNVML(gpus=(A100_SXM4_80GB,), driver_version="535.161.08", cuda_driver_version=12020)
    )


def test_h100_against_a100_names_the_gpu_fields_first(h100: dict[str, Any], a100: dict[str, Any]) -> None:
    diffs = diff_fingerprints(h100, a100)

    assert [d.field for d in diffs[:3]] == [
        "hardware.gpus[0].name",
        "hardware.gpus[0].compute_capability",
        "hardware.gpus[0].sm_count",
    ]
    assert (diffs[0].a, diffs[0].b) == ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB")
    assert diffs[2].describe() == "GPU SM count: 132 -> 108"
    numerics = [d.field for d in diffs if d.affects_numerics]
    assert "hardware.nvidia.driver_version" in numerics
    assert "hardware.nvidia.cuda_driver_version" in numerics
    context = [d.field for d in diffs if not d.affects_numerics]
    assert "hardware.gpus[0].memory_total_bytes" in context
    assert "hardware.gpus[0].uuid_sha256" in context
    assert diffs.index(next(d for d in diffs if not d.affects_numerics)) == len(numerics)


def test_h100_against_a100_is_a_different_stack(h100: dict[str, Any], a100: dict[str, Any]) -> None:
    verdict = stack_verdict(diff_fingerprints(h100, a100))

    assert verdict == (
        "different stack: bitwise equality is not expected across GPU model, GPU compute capability,"
        " GPU SM count and 2 more; compare with tolerance"
    )
    assert not same_stack(h100, a100)


def test_closeness_is_appended_to_the_verdict(h100: dict[str, Any], a100: dict[str, Any]) -> None:
    closeness = "max abs difference 3.1e-07 over 14 tensors"

    verdict = stack_verdict(diff_fingerprints(h100, a100), closeness=closeness)

    assert verdict.endswith(f"; compare with tolerance ({closeness})")


def test_only_the_hostname_differs_so_the_stack_is_the_same(h100: dict[str, Any]) -> None:
    other = copy.deepcopy(h100)
    other["hardware"]["hostname"] = "gpu-node-17"
    other["hardware"]["memory_total_bytes"] += 2**30

    diffs = diff_fingerprints(h100, other)

    assert [(d.field, d.affects_numerics) for d in diffs] == [
        ("hardware.memory_total_bytes", False),
        ("hardware.hostname", False),
    ]
    assert stack_verdict(diffs) == SAME_STACK == "same stack, different result: a real nondeterminism"
    assert same_stack(h100, other)


def test_thread_counts_one_against_two_name_the_thread_fields(restore_threads: None) -> None:
    torch.set_num_threads(1)
    one = collect(nvml=FakeNVML())
    torch.set_num_threads(2)
    two = collect(nvml=FakeNVML())

    diffs = diff_fingerprints(one, two)

    numerics = [d for d in diffs if d.affects_numerics]
    assert [(d.field, d.a, d.b) for d in numerics] == [("software.threads.torch_intra_op", 1, 2)]
    assert stack_verdict(diffs) == (
        "different stack: bitwise equality is not expected across torch intra-op threads;"
        " compare with tolerance"
    )


def test_cpu_flags_compare_as_sets_showing_what_was_added_and_removed(h100: dict[str, Any]) -> None:
    a = copy.deepcopy(h100)
    b = copy.deepcopy(h100)
    a["hardware"]["cpu"]["flags"] = ["avx", "avx2", "fma", "avx512f"]
    b["hardware"]["cpu"]["flags"] = ["fma", "avx2", "avx", "amx_tile"]

    (difference,) = diff_fingerprints(a, b)

    assert difference.label == "CPU ISA flags"
    assert (difference.added, difference.removed) == (("amx_tile",), ("avx512f",))
    assert difference.describe() == "CPU ISA flags: +amx_tile -avx512f"
    b["hardware"]["cpu"]["flags"] = ["avx512f", "fma", "avx2", "avx"]
    assert diff_fingerprints(a, b) == []


def test_torch_absent_on_one_side_is_a_numerics_difference(h100: dict[str, Any]) -> None:
    without_torch = copy.deepcopy(h100)
    without_torch["software"]["torch"] = absent("torch not imported by this process")

    diffs = diff_fingerprints(h100, without_torch)

    assert [(d.field, d.label, d.affects_numerics) for d in diffs] == [("software.torch", "torch", True)]
    assert "torch" in stack_verdict(diffs)


def test_absent_for_different_reasons_is_not_a_numerics_difference() -> None:
    no_library = collect(nvml=FakeNVML(init_error=NVMLError_LibraryNotFound))
    no_driver = collect(nvml=FakeNVML(init_error=NVMLError_DriverNotLoaded))

    diffs = diff_fingerprints(no_library, no_driver)

    assert {d.field for d in diffs} == {"hardware.nvidia", "hardware.gpus"}
    assert not any(d.affects_numerics for d in diffs)
    assert same_stack(no_library, no_driver)
    assert stack_digest(no_library) == stack_digest(no_driver)


def test_an_extra_gpu_is_named_field_by_field(h100: dict[str, Any]) -> None:
    two = collect(nvml=FakeNVML(gpus=(H100_SXM5_80GB, H100_SXM5_80GB)))

    diffs = diff_fingerprints(h100, two)

    assert diffs[0].field == "hardware.nvidia.gpu_count"
    assert (diffs[0].a, diffs[0].b) == (1, 2)
    added = {d.field: d for d in diffs if d.field.startswith("hardware.gpus[1].")}
    assert added["hardware.gpus[1].name"].b == "NVIDIA H100 80GB HBM3"
    assert added["hardware.gpus[1].name"].affects_numerics
    assert added["hardware.gpus[1].name"].a == {"absent": "not recorded in this fingerprint"}


def test_same_stack_agrees_with_the_stack_digest(h100: dict[str, Any], a100: dict[str, Any]) -> None:
    renamed = copy.deepcopy(h100)
    renamed["hardware"]["hostname"] = "elsewhere"

    for a, b in [(h100, a100), (h100, renamed), (a100, a100)]:
        assert same_stack(a, b) == (stack_digest(a) == stack_digest(b))


def test_unknown_fields_are_reported_but_not_counted_as_numerics(h100: dict[str, Any]) -> None:
    newer = copy.deepcopy(h100)
    newer["software"]["note"] = "added by a later schema"

    (difference,) = diff_fingerprints(h100, newer)

    assert (difference.field, difference.label, difference.affects_numerics) == (
        "software.note",
        "software.note",
        False,
    )


def test_explain_does_not_import_torch() -> None:
    code = "import sys, reprobox.stackdiff; print('torch' in sys.modules, 'numpy' in sys.modules)"

    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )

    assert done.stdout.split() == ["False", "False"]


def test_equal_fields_are_every_field_but_the_differing_ones(h100: dict[str, Any]) -> None:
    """What a report folds: a reordered flag list is equal, the digest only when it agrees, the
    per-rank copies of a multi-rank run are not counted, and the two counts add up to the fields."""
    other = copy.deepcopy(h100)
    other["hardware"]["cpu"]["flags"] = list(reversed(other["hardware"]["cpu"]["flags"]))
    other["software"]["threads"]["OMP_NUM_THREADS"] = "2"
    other["stack_digest"] = stack_digest(other)
    other["ranks"] = {"1": copy.deepcopy(other)}

    equal = equal_fields(h100, other)

    assert "software.threads.OMP_NUM_THREADS" not in equal and "stack_digest" not in equal
    assert "hardware.cpu.flags" in equal and "software.torch.version" in equal
    assert not any(path.startswith("ranks.") for path in equal)
    assert len(equal) == len(list(iter_fields(h100))) - 2
    assert "stack_digest" in equal_fields(h100, copy.deepcopy(h100))
