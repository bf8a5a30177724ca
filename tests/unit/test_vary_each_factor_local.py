"""`verify --vary all` on the local runtime: every factor it can apply reaches the job, alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from vary_each_factor import assert_each_factor_changes_only_its_own_file, vary_all

from reprobox.guest.variation import find_libfaketime


def test_each_factor_changes_exactly_what_it_varies(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if find_libfaketime() is None:
        pytest.skip("varying the clock needs libfaketime: apt-get install faketime (scripts/setup.sh)")
    code, data = vary_all(capsys, tmp_path, "local")
    assert code == 1, data["sentence"]
    assert_each_factor_changes_only_its_own_file(data, "local", {"user"})
