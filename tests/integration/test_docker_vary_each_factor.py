"""`verify --vary all` on docker: every factor reaches the job in its container, alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from vary_each_factor import JOB, assert_each_factor_changes_only_its_own_file

from reprobox.guest.variation import find_libfaketime

pytestmark = pytest.mark.integration


def test_each_factor_changes_exactly_what_it_varies(
    vary_job, monkeypatch: pytest.MonkeyPatch, offline_base: str, wheelhouse: Path
) -> None:
    if find_libfaketime() is None:
        pytest.skip("varying the clock lends the container the host's libfaketime: apt-get install faketime")
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))
    code, data = vary_job(JOB, "all", "--no-attestation", runtime="docker")
    assert code == 1, data["sentence"]
    assert_each_factor_changes_only_its_own_file(data, "docker", set())
