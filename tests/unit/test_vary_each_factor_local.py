"""`verify --vary` on the local runtime: every factor it can apply reaches the job, alone; and the
factors torch reads reach torch itself (the thread count it uses, the CPU capability it dispatches to)."""

from __future__ import annotations

import pytest
from vary_each_factor import JOB, TORCH_FACTORS, TORCH_JOB, assert_each_factor_changes_only_its_own_file

from reprobox.guest.variation import find_libfaketime


def test_each_factor_changes_exactly_what_it_varies(vary_job) -> None:
    if find_libfaketime() is None:
        pytest.skip("varying the clock needs libfaketime: apt-get install faketime (scripts/setup.sh)")
    code, data = vary_job(JOB, "all", "--no-attestation", runtime="local")
    assert code == 1, data["sentence"]
    assert_each_factor_changes_only_its_own_file(data, "local", {"user"})


def test_each_factor_torch_reads_changes_what_torch_does(vary_job) -> None:
    code, data = vary_job(TORCH_JOB, ",".join(sorted(TORCH_FACTORS)), "--no-attestation", runtime="local")
    assert code == 1, data["sentence"]
    assert_each_factor_changes_only_its_own_file(data, "local", set(), TORCH_FACTORS)
