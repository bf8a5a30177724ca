"""Publish and reproduce against the real engine: verify -> attest -> pack -> remove the image -> reproduce
the bundle, the image coming back from the bundle with `docker load` (no registry exists here)."""

from __future__ import annotations

import getpass
import json
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest
from publishing import machine_strings_in

from reprobox import attest, bundle
from reprobox.engine import Engine
from reprobox.image import SHARED_IMAGE_LABEL
from reprobox.jobfile import load_job
from reprobox.reproduce import BIT_IDENTICAL, ReproduceOptions, reproduce
from reprobox.runner import RunOptions
from reprobox.runtimes.docker import DockerRuntime
from reprobox.verify import VerifyOptions, verify

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "examples" / "tiny-mlp"


def test_a_packed_bundle_reproduces_after_the_image_is_deleted(
    engine: Engine, built_image, created, tmp_path: Path
) -> None:
    code = tmp_path / "paper"
    shutil.copytree(EXAMPLE, code)
    spec = load_job(code / "job.yaml")
    runtime = DockerRuntime(built_image.info, engine=engine)
    comparison, records = verify(
        spec, runtime, RunOptions(runs_dir=tmp_path / "author-runs"), VerifyOptions(runs=2)
    )
    assert comparison.verdict == "identical"
    attestation = attest.write_attestation(
        attest.attestation_path_for(spec.job_file), attest.build_attestation(records)
    )
    image = attest.read_attestation(attestation).image
    assert image is not None and image["id"] == built_image.info.id
    assert image["lock_digest"] == built_image.plan.labels["io.reprobox.lock-digest"]

    started = time.monotonic()
    packed = bundle.pack(
        attestation, tmp_path / "share" / "paper.tar", published=records[0].run_dir, engine=engine
    )
    pack_seconds = time.monotonic() - started
    assert packed.image == built_image.info.id

    # the jobs' extras images of this session are layers over it: gone first, or it would only be untagged
    over_it = [
        child for tag in built_image.info.tags for child in engine.list_images({SHARED_IMAGE_LABEL: tag})
    ]
    for child in over_it:
        engine.remove_image(child.id, force=True)
    for tag in built_image.info.tags or (built_image.info.id,):
        engine.remove_image(tag, force=True)
    assert not engine.image_exists(built_image.info.id)

    started = time.monotonic()
    result = reproduce(
        packed.path,
        ReproduceOptions(runtime="docker", runs_dir=tmp_path / "review", engine=engine, runs=1),
    )
    reproduce_seconds = time.monotonic() - started
    assert (result.verdict, result.exit_code) == (BIT_IDENTICAL, 0), result.sentence
    assert result.image is not None and result.image["how"] == "loaded from the bundle"
    assert engine.image_exists(built_image.info.id)  # loaded back, same id: nothing was pulled or rebuilt
    manifest = json.loads((result.runs[0] / "manifest.json").read_text())
    assert manifest["runtime"]["image"]["id"] == built_image.info.id
    assert manifest["runtime"]["container"]["network_mode"] == "none"
    assert result.bundle is not None and result.bundle["digest_checked_against"] == "recorded"
    print(f"pack {pack_seconds:.1f} s ({packed.size / 1e6:.0f} MB), reproduce {reproduce_seconds:.1f} s")


def test_claims_hold_in_the_image_on_another_thread_count(
    engine: Engine, built_image, created, tmp_path: Path
) -> None:
    """A paper job in the real image: attested with its claims, reproduced with another thread count:
    the bits differ, the claimed numbers hold, and `--accept claims` passes it."""
    code = tmp_path / "paper"
    shutil.copytree(Path(__file__).parents[2] / "examples" / "paper-claims", code)
    spec = load_job(code / "job.yaml")
    runtime = DockerRuntime(built_image.info, engine=engine)
    comparison, records = verify(
        spec, runtime, RunOptions(runs_dir=tmp_path / "author-runs"), VerifyOptions(runs=2)
    )
    assert comparison.verdict == "identical"
    assert [c["name"] for c in records[0].claims] == ["val_acc", "val_loss", "logged_acc"]
    attestation = attest.write_attestation(
        attest.attestation_path_for(spec.job_file), attest.build_attestation(records)
    )
    statement = json.loads(attestation.read_text())  # safe to publish: nothing names this machine
    folders = [code, tmp_path / "author-runs", Path(sys.prefix), Path.home()]
    assert (
        machine_strings_in(statement, folders=folders, names=[socket.gethostname(), getpass.getuser()]) == []
    )
    used = records[0].fingerprint["software"]["threads"]["torch_intra_op"]
    result = reproduce(
        attestation,
        ReproduceOptions(
            runtime="docker",
            runs_dir=tmp_path / "review",
            engine=engine,
            threads=1 if used != 1 else 2,
            accept="claims",
        ),
    )
    assert (result.verdict, result.grade, result.exit_code) == ("different-stack", "claims-hold", 0), (
        result.sentence
    )
    assert [c["holds"] for c in result.claims] == [True, True, True]
    assert result.sentence.startswith("every claim holds (val_acc, ")


def test_seed_spread_in_the_image(engine: Engine, built_image, created, tmp_path: Path) -> None:
    """verify --seeds 2 then reproduce --seeds 2, both in the real image."""
    from reprobox import seeds

    code = tmp_path / "paper"
    shutil.copytree(Path(__file__).parents[2] / "examples" / "paper-claims", code)
    spec = load_job(code / "job.yaml")
    runtime = DockerRuntime(built_image.info, engine=engine)
    result = seeds.verify_seeds(
        spec, runtime, RunOptions(runs_dir=tmp_path / "author-runs"), VerifyOptions(), 2
    )
    assert result.verdict == "identical"
    assert result.spread["val_loss"].seeds == (0, 1) and result.spread["val_loss"].std > 0
    attestation = attest.write_attestation(
        attest.attestation_path_for(spec.job_file),
        attest.build_attestation(result.records[0], extra={"seeds": result.attestation_entry()}),
    )
    reproduced = reproduce(
        attestation, ReproduceOptions(runtime="docker", runs_dir=tmp_path / "review", engine=engine, seeds=2)
    )
    assert (reproduced.grade, reproduced.exit_code) == ("bit-identical", 0), reproduced.sentence
    assert all(spread["holds"] for spread in reproduced.seed_spread.values())
    assert [run["identical_to_published"] for run in reproduced.seed_runs] == [True, True]
