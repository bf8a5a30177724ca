"""How a `verify --vary` variation becomes settings: pure translations, checked without running a job."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from reprobox.errors import UsageError
from reprobox.guest import settings
from reprobox.guest.variation import (
    VariationRefused,
    apply,
    check_clock,
    faketime_offset,
    find_libfaketime,
    parse_umask,
)
from reprobox.jobfile import JobSpec
from reprobox.runtimes.base import RunPlan, Variation
from reprobox.runtimes.docker import container_settings
from reprobox.runtimes.docker._settings import CONTAINER_LIBFAKETIME, container_paths, lend_libfaketime
from reprobox.runtimes.stable_paths import layout_for, varied_layout


def make_plan(tmp_path: Path, variation: Variation) -> RunPlan:
    job = JobSpec(job_file=tmp_path / "job.yaml", name="j", command=("true",), code=tmp_path)
    return RunPlan(
        job=job,
        run_id="r",
        run_dir=tmp_path / "run",
        guest_env={},
        command=("true",),
        timeout=None,
        variation=variation,
    )


def test_the_default_variation_sets_nothing() -> None:
    assert Variation().fields() == {} and Variation().guest_env() == {}
    facts: dict[str, object] = {}
    Variation().record(facts)
    assert facts == {}
    Variation().check_supported("slurm", frozenset())  # nothing asked, nothing refused


def test_an_unsupported_variation_names_what_the_runtime_can_vary() -> None:
    with pytest.raises(UsageError, match=r"cannot vary clock_offset, uid; it varies only home"):
        Variation(uid=5, clock_offset=1.0).check_supported("x", frozenset({"home"}))


def test_umask_and_clock_reach_the_guest_as_variables() -> None:
    assert Variation(umask=0o027, clock_offset=90).guest_env() == {
        settings.UMASK: "027",
        settings.CLOCK_OFFSET: "90.0",
    }
    assert parse_umask("027") == 0o027
    with pytest.raises(VariationRefused):
        parse_umask("9")
    assert (faketime_offset(3600.0), faketime_offset(-1.5)) == ("+3600", "-1.5")


def test_a_clock_offset_without_libfaketime_is_refused(tmp_path: Path) -> None:
    env = {settings.CLOCK_OFFSET: "60", settings.LIBFAKETIME: str(tmp_path / "missing.so")}
    with pytest.raises(VariationRefused, match="libfaketime"):
        apply(env, {})
    (tmp_path / "lib.so").write_bytes(b"")
    child = {"LD_PRELOAD": "other.so"}
    apply({**env, settings.LIBFAKETIME: str(tmp_path / "lib.so")}, child)
    assert child["LD_PRELOAD"] == f"{tmp_path / 'lib.so'}:other.so" and child["FAKETIME"] == "+60"


def test_the_local_layout_moves_under_another_root_and_home(tmp_path: Path) -> None:
    job = make_plan(tmp_path, Variation()).job
    assert varied_layout(job, 7, Path("/tmp"), Variation()) == layout_for(job, 7)
    moved = varied_layout(job, 7, Path("/tmp"), Variation(path_root="/srv/x", home="/home/h"))
    assert moved.code == Path("/srv/x/reprobox-7/j/code") and moved.home == Path("/home/h")
    with pytest.raises(UsageError, match="absolute"):
        varied_layout(job, 7, Path("/tmp"), Variation(home="relative"))


def test_container_settings_apply_the_variation(tmp_path: Path) -> None:
    variation = Variation(
        hostname="h2", uid=2345, user_name="u2", home="/home/u2", path_root="/srv/p", umask=0o077
    )
    plan = make_plan(tmp_path, variation)
    created = container_settings(plan, "sha256:abc", host_uid=0, host_gid=0)
    assert (created["hostname"], created["user"], created["working_dir"]) == (
        "h2",
        "2345:2345",
        "/srv/p/code",
    )
    env = created["environment"]
    assert (env["HOME"], env["USER"], env[settings.UMASK]) == ("/home/u2", "u2", "077")
    assert env[settings.OUTPUT_DIR] == "/srv/p/run/outputs" and env[settings.CODE_DIR] == "/srv/p/code"
    assert "/home/u2" in created["tmpfs"] and "/tmp" in created["tmpfs"]
    assert {m["Target"] for m in created["mounts"]} == {"/srv/p/code", "/srv/p/run"}
    assert container_paths(plan)["home"] == "/home/u2"
    default = container_settings(replace(plan, variation=Variation()), "sha256:abc", host_uid=0, host_gid=0)
    assert default["hostname"] == "reprobox" and default["working_dir"] == "/reprobox/code"
    assert settings.UMASK not in default["environment"]
    with pytest.raises(UsageError, match="root"):
        container_settings(replace(plan, variation=Variation(uid=0)), "sha256:abc", host_uid=0, host_gid=0)


def test_file_order_names_the_code_and_data_folders_the_job_sees(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, Variation(file_order="reversed", path_root="/srv/p"))
    env = container_settings(plan, "sha256:abc", host_uid=0, host_gid=0)["environment"]
    assert (env[settings.FILE_ORDER], env[settings.FILE_ORDER_ROOTS]) == ("reversed", "/srv/p/code")
    default = container_settings(replace(plan, variation=Variation()), "sha256:abc", host_uid=0, host_gid=0)
    assert settings.FILE_ORDER not in default["environment"]
    assert settings.FILE_ORDER_ROOTS not in default["environment"]


def test_a_library_that_does_not_shift_the_clock_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "lib.so"
    fake.write_bytes(b"")  # the loader warns and ignores it: the run would go unvaried
    env = {settings.CLOCK_OFFSET: "90061", settings.LIBFAKETIME: str(fake)}
    child = {"PATH": "/usr/bin:/bin"}
    apply(env, child)
    with pytest.raises(VariationRefused, match="did not shift the clock"):
        check_clock(env, child)
    real = find_libfaketime({})
    if real is not None:
        child = {"PATH": "/usr/bin:/bin"}
        apply({**env, settings.LIBFAKETIME: str(real)}, child)
        check_clock(env, child)  # shifted as asked: nothing refused


def test_docker_lends_the_hosts_libfaketime_read_only(tmp_path: Path) -> None:
    library = tmp_path / "libfaketime.so.1"
    library.write_bytes(b"")
    created = container_settings(
        make_plan(tmp_path, Variation(clock_offset=60.0)), "sha256:abc", host_uid=0, host_gid=0
    )
    lend_libfaketime(created, library)
    mount = created["mounts"][-1]
    assert (mount["Source"], mount["Target"], mount["ReadOnly"]) == (
        str(library),
        CONTAINER_LIBFAKETIME,
        True,
    )
    env = created["environment"]
    assert (env[settings.LIBFAKETIME], env[settings.CLOCK_OFFSET]) == (CONTAINER_LIBFAKETIME, "60.0")


def test_the_job_sees_its_environment_in_one_order_whatever_order_the_engine_gave() -> None:
    from reprobox.guest.entrypoint import canonical_order

    own = json.dumps(["PROBE_C", "PROBE_A", "MISSING"])
    given = {"PROBE_A": "1", "PATH": "/bin", "PROBE_C": "3", "HOME": "/h", settings.ENV_ORDER: own}
    shuffled = dict(reversed(list(given.items())))
    expected = ["HOME", "PATH", settings.ENV_ORDER, "PROBE_C", "PROBE_A"]
    assert list(canonical_order(given)) == list(canonical_order(shuffled)) == expected
    assert canonical_order(given) == given  # the same variables, only their order fixed
    assert list(canonical_order({"B": "", "A": "", settings.ENV_ORDER: "not json"})) == [
        "A",
        "B",
        settings.ENV_ORDER,
    ]
