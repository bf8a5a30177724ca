"""A job's wheelhouse and extra lock add to the shared ones; a missing wheel or a bad lock is one sentence."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import pytest

from reprobox import image
from reprobox.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EnvironmentProblem, UsageError
from reprobox.jobfile import ImageSpec
from reprobox.pipfailure import explain_pip_failure
from tests.image_checkout import copy_image_files
from tests.offline_messages import assert_names_the_offline_path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_LOCKS = sorted(ROOT.glob("examples/*/requirements.lock"))
HASH = "--hash=sha256:" + "ab" * 32


@pytest.fixture
def project(tmp_path: Path) -> image.ProjectFiles:
    return copy_image_files(tmp_path / "checkout")


def wheels_for(directory: Path, *locks: Path, skip: str | None = None) -> Path:
    """Files named like the wheels the locks pin (a plan reads names and sizes, not contents)."""
    directory.mkdir(exist_ok=True)
    for lock in locks:
        for name, version in image.locked_pins(lock).items():
            if name != skip:
                (directory / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"wheel")
    return directory


def extra_lock(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def plan(project: image.ProjectFiles, **kwargs: object) -> image.BuildPlan:
    kwargs.setdefault("environ", {})
    return image.plan_build(project=project, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A job's extra lock of two packages, as scripts/lock_requirements.py writes it."""
    return extra_lock(
        tmp_path / "requirements.lock",
        "# the job's own packages\n"
        f"tqdm==4.70.1 \\\n    {HASH}\n    # tqdm-4.70.1-py3-none-any.whl\n"
        f"regex==2026.11.15 \\\n    {HASH}\n",
    )


# -- the job's wheelhouse adds to the shared one ----------------------------------------------------------


def test_job_wheelhouse_adds_to_the_shared_one(
    project: image.ProjectFiles, tmp_path: Path, job: Path
) -> None:
    shared = wheels_for(tmp_path / "shared", project.env_dir / "requirements-cpu.lock")
    own = wheels_for(tmp_path / "wheels", job)
    made = plan(project, image=ImageSpec(requirements=job, wheelhouse=own), wheelhouse=shared)
    assert made.lock == "env/requirements-cpu.lock"
    assert made.wheelhouses == (own, shared)
    assert made.offline and made.buildargs["WHEELHOUSE"] == image.CONTEXT_WHEELHOUSE
    assert made.shared is not None and made.shared.wheelhouses == (own, shared)
    names = {wheel.name for wheel in made.wheels}
    assert names == {"tqdm-4.70.1-py3-none-any.whl", "regex-2026.11.15-py3-none-any.whl"}
    assert "torch-2.13.0+cpu-py3-none-any.whl" in {wheel.name for wheel in made.shared.wheels}
    for build, wanted in ((made, names), (made.shared, {w.name for w in made.shared.wheels})):
        full = io.BytesIO()
        image.write_build_context(build, full)
        with tarfile.open(fileobj=io.BytesIO(full.getvalue())) as archive:
            members = {name for name in archive.getnames() if name.startswith("wheelhouse/")}
        assert members == {f"wheelhouse/{name}" for name in wanted}
    assert image.render_build_plan(made)["wheelhouses"] == [str(own), str(shared)]


def test_the_shared_wheelhouse_may_come_from_the_environment(
    project: image.ProjectFiles, tmp_path: Path, job: Path
) -> None:
    shared = wheels_for(tmp_path / "shared", project.env_dir / "requirements-cpu.lock")
    own = wheels_for(tmp_path / "wheels", job)
    environ = {image.WHEELHOUSE_VARIABLE: str(shared)}
    made = plan(project, image=ImageSpec(requirements=job, wheelhouse=own), environ=environ)
    assert made.wheelhouses == (own, shared)
    assert made.lock == "env/requirements-cpu.lock"


def test_a_wheel_in_both_wheelhouses_is_taken_once_from_the_jobs(
    project: image.ProjectFiles, tmp_path: Path, job: Path
) -> None:
    shared = wheels_for(tmp_path / "shared", project.env_dir / "requirements-cpu.lock", job)
    own = wheels_for(tmp_path / "wheels", job)
    made = plan(project, image=ImageSpec(requirements=job, wheelhouse=own), wheelhouse=shared)
    tqdm = [wheel for wheel in made.wheels if wheel.name.startswith("tqdm-")]
    assert [wheel.source.parent for wheel in tqdm] == [own]
    assert len({wheel.name for wheel in made.wheels}) == len(made.wheels)
    assert made.shared is not None and not [w for w in made.shared.wheels if w.name.startswith("tqdm-")]


def test_the_same_wheelhouse_twice_counts_once(
    project: image.ProjectFiles, tmp_path: Path, job: Path
) -> None:
    shared = wheels_for(tmp_path / "shared", project.env_dir / "requirements-cpu.lock", job)
    made = plan(project, image=ImageSpec(requirements=job, wheelhouse=shared), wheelhouse=shared)
    assert made.wheelhouses == (shared,)


def test_the_extra_lock_does_not_decide_the_base_lock(
    project: image.ProjectFiles, tmp_path: Path, job: Path
) -> None:
    """A missing extra wheel is named as such, not as "lacks wheels for every lock"."""
    shared = wheels_for(tmp_path / "shared", project.env_dir / "requirements-cpu.lock")
    with pytest.raises(EnvironmentProblem) as caught:
        plan(project, image=ImageSpec(requirements=job), wheelhouse=shared)
    assert "every lock" not in caught.value.message
    assert "tqdm==4.70.1" in caught.value.message


# -- a missing wheel: one sentence, the lock line, the fix ---------------------------------------------------


def test_missing_extra_wheel_names_the_lock_line_and_the_fix(
    project: image.ProjectFiles, tmp_path: Path, job: Path
) -> None:
    shared = wheels_for(tmp_path / "shared", project.env_dir / "requirements-cpu.lock")
    own = wheels_for(tmp_path / "wheels", job, skip="regex")
    with pytest.raises(EnvironmentProblem) as caught:
        plan(project, image=ImageSpec(requirements=job, wheelhouse=own), wheelhouse=shared)
    message = caught.value.message
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    assert "\n" not in message
    assert message.startswith(f"neither wheelhouse {own} nor {shared} has a wheel for regex==2026.11.15")
    assert f"regex==2026.11.15 ({job}:5)" in message
    assert "tqdm" not in message
    assert_names_the_offline_path(message, f"reprobox lock --wheelhouse {own} --locked {job}", own)


def test_missing_base_wheel_names_its_line(project: image.ProjectFiles, tmp_path: Path) -> None:
    cpu = project.env_dir / "requirements-cpu.lock"
    house = wheels_for(tmp_path / "shared", cpu, skip="numpy")
    with pytest.raises(EnvironmentProblem) as caught:
        plan(project, wheelhouse=house, lock="cpu")
    (numpy,) = [line for line in image.lock_lines(cpu) if line.name == "numpy"]
    assert f"numpy=={numpy.version} (" in caught.value.message
    assert f"requirements-cpu.lock:{numpy.line})" in caught.value.message
    assert cpu.read_text().splitlines()[numpy.line - 1].startswith("numpy==")
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    assert_names_the_offline_path(
        caught.value.message, f"reprobox lock --base cpu --wheelhouse {house}", house
    )


def test_a_wheelhouse_that_serves_no_lock_names_the_offline_path(
    project: image.ProjectFiles, tmp_path: Path
) -> None:
    house = wheels_for(tmp_path / "shared", project.env_dir / "requirements-cpu.lock", skip="numpy")
    with pytest.raises(EnvironmentProblem) as caught:
        plan(project, wheelhouse=house)
    assert caught.value.message.startswith(
        f"wheelhouse {house} lacks wheels for every lock (for the CPU lock: numpy=="
    )
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    assert_names_the_offline_path(
        caught.value.message, f"reprobox lock --base cpu --wheelhouse {house}", house
    )


def test_a_wheelhouse_that_is_not_there_names_the_offline_path(
    project: image.ProjectFiles, tmp_path: Path
) -> None:
    house = tmp_path / "not-yet"
    with pytest.raises(UsageError) as caught:
        plan(project, environ={image.WHEELHOUSE_VARIABLE: str(house)})
    assert caught.value.message.startswith(f"wheelhouse {house} is not a directory; ")
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert_names_the_offline_path(
        caught.value.message, f"reprobox lock --base cpu --wheelhouse {house}", house
    )


# -- the extra lock itself ---------------------------------------------------------------------------------


def test_lock_lines_follow_continuations_and_hashes(tmp_path: Path) -> None:
    lock = extra_lock(
        tmp_path / "x.lock",
        f"# header\nAlpha_Pkg==1.0 \\\n    {HASH} \\\n    {HASH}\n    # via beta\nbeta==2.0\n-r other.txt\n",
    )
    lines = image.lock_lines(lock)
    assert [(line.name, line.version, line.line, line.hashed) for line in lines] == [
        ("alpha-pkg", "1.0", 2, True),
        ("beta", "2.0", 6, False),
    ]


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("tqdm\n", r"x\.lock:1: 'tqdm' must be pinned as `name==version --hash"),
        ("# c\ntqdm==4.70.1\n", r"x\.lock:2: 'tqdm' must be pinned"),
        ("tqdm>=4 \\\n    " + HASH + "\n", r"x\.lock:1: 'tqdm>=4' must be pinned"),
    ],
)
def test_an_unhashed_extra_lock_is_bad_input(
    project: image.ProjectFiles, tmp_path: Path, text: str, wanted: str
) -> None:
    lock = extra_lock(tmp_path / "x.lock", text)
    with pytest.raises(UsageError, match=wanted) as caught:
        plan(project, image=ImageSpec(requirements=lock))
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert "`reprobox lock`" in caught.value.message


def test_an_extra_lock_that_moves_a_base_pin_is_bad_input(
    project: image.ProjectFiles, tmp_path: Path
) -> None:
    lock = extra_lock(tmp_path / "x.lock", f"tqdm==4.70.1 \\\n    {HASH}\nnumpy==1.26.4 \\\n    {HASH}\n")
    with pytest.raises(UsageError) as caught:
        plan(project, image=ImageSpec(requirements=lock), lock="cpu")
    base = {line.name: line for line in image.lock_lines(project.env_dir / "requirements-cpu.lock")}
    assert caught.value.message.startswith(
        f"{lock}:3: numpy==1.26.4 conflicts with numpy=={base['numpy'].version}"
    )
    assert f"env/requirements-cpu.lock:{base['numpy'].line}" in caught.value.message


@pytest.mark.parametrize("lock", EXAMPLE_LOCKS, ids=lambda p: p.parent.name)
def test_the_examples_locks_add_to_the_cpu_lock_and_fit_one_wheelhouse(
    project: image.ProjectFiles, tmp_path: Path, lock: Path
) -> None:
    lines = image.check_extra_lock(lock, project.env_dir / "requirements-cpu.lock")
    assert lines and all(line.hashed and line.version for line in lines)
    assert not {line.name for line in lines} & set(
        image.locked_pins(project.env_dir / "requirements-cpu.lock")
    )
    house = wheels_for(tmp_path / "house", project.env_dir / "requirements-cpu.lock", *EXAMPLE_LOCKS)
    made = plan(project, image=ImageSpec(requirements=lock), wheelhouse=house)
    assert made.lock == "env/requirements-cpu.lock"
    assert {f"{line.name}=={line.version}" for line in lines} <= {
        "{}=={}".format(*image.wheel_pin(wheel.name) or ("", "")) for wheel in made.wheels
    }


def test_the_examples_pin_what_their_scripts_import() -> None:
    pins = {lock.parent.name: image.locked_pins(lock) for lock in EXAMPLE_LOCKS}
    assert {"transformers", "accelerate", "tokenizers", "huggingface-hub"} <= set(pins["hf-trainer"])
    assert {"lightning", "torchmetrics", "lightning-utilities"} <= set(pins["lightning"])


# -- pip's failures in a build, told as one sentence ------------------------------------------------------

NO_INDEX_LOG = [
    "Step 12/32 : RUN python3 -m venv /opt/venv; ...",
    "\x1b[91mWARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after "
    "connection broken by 'SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED]'))': "
    "/simple/filelock/",
    "Could not fetch URL https://pypi.org/simple/filelock/: There was a problem confirming the ssl",
    "\x1b[91mERROR: Could not find a version that satisfies the requirement filelock==4.2.11 (from ",
    "\x1b[91mERROR: No matching distribution found for filelock==4.2.11",
]


def test_pip_without_wheelhouse_or_index_is_one_sentence(project: image.ProjectFiles) -> None:
    made = plan(project, lock="cpu")
    error = explain_pip_failure(NO_INDEX_LOG, made)
    assert isinstance(error, EnvironmentProblem)
    (filelock,) = [
        line
        for line in image.lock_lines(project.env_dir / "requirements-cpu.lock")
        if line.name == "filelock"
    ]
    assert (
        f"needs filelock==4.2.11 ({project.env_dir / 'requirements-cpu.lock'}:{filelock.line})"
        in error.message
    )
    assert "no wheelhouse and no package index answered" in error.message
    assert error.exit_code == EXIT_ENVIRONMENT
    assert_names_the_offline_path(error.message, "reprobox lock --base cpu --wheelhouse DIR")
    assert "Retry" not in error.message and "\n" not in error.message and not error.log_tail


def test_pip_finding_no_fitting_wheel_in_the_wheelhouse(
    project: image.ProjectFiles, tmp_path: Path, job: Path
) -> None:
    house = wheels_for(tmp_path / "house", project.env_dir / "requirements-cpu.lock", job)
    made = plan(project, image=ImageSpec(requirements=job), wheelhouse=house)
    log = ["ERROR: No matching distribution found for regex==2026.11.15"]
    error = explain_pip_failure(log, made)
    assert isinstance(error, EnvironmentProblem)
    assert f"regex==2026.11.15 ({job}:5)" in error.message
    assert "CPython 3.11, Linux x86_64" in error.message and str(house) in error.message
    assert error.exit_code == EXIT_ENVIRONMENT
    fill = f"reprobox lock --base cpu --image-lock --wheelhouse {house} --locked {job}"
    assert_names_the_offline_path(error.message, fill, house)


def test_pip_hash_mismatch_names_the_wheel(project: image.ProjectFiles, tmp_path: Path, job: Path) -> None:
    house = wheels_for(tmp_path / "house", project.env_dir / "requirements-cpu.lock", job)
    made = plan(project, image=ImageSpec(requirements=job), wheelhouse=house)
    log = [
        "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated ...",
        "    tqdm==4.70.1 from file:///build/wheelhouse/tqdm-4.70.1-py3-none-any.whl (from -r x (line 2)):",
        "        Expected sha256 abab",
        "             Got        cdcd",
    ]
    error = explain_pip_failure(log, made)
    assert isinstance(error, EnvironmentProblem)
    assert error.message.startswith(f"the wheel of tqdm==4.70.1 ({job}:2) in {house} does not match")


def test_pip_missing_dependency_pins_are_bad_input(project: image.ProjectFiles, job: Path) -> None:
    made = plan(project, image=ImageSpec(requirements=job))
    log = [
        "ERROR: Hashes are required in --require-hashes mode, but they are missing from some requirements. "
        "Here is a list of those requirements along with the hashes their downloaded archives actually had.",
        "    click==8.5.1 --hash=sha256:8bb5376d2006950386f8c6427613334a2acadc5f559cb80e638d00b4df957e37",
    ]
    error = explain_pip_failure(log, made)
    assert isinstance(error, UsageError) and error.exit_code == EXIT_BAD_INPUT
    assert re.match(
        rf"{re.escape(str(job))} does not pin click==8\.5\.1, which the packages it locks need", error.message
    )


def test_pip_check_conflict_is_bad_input(project: image.ProjectFiles, job: Path) -> None:
    made = plan(project, image=ImageSpec(requirements=job))
    log = ["tqdm 4.70.1 has requirement colorama>=1, but you have colorama 0.4.6."]
    error = explain_pip_failure(log, made)
    assert isinstance(error, UsageError)
    assert (
        "tqdm 4.70.1 from" in error.message
        and "requires colorama>=1, but the image has colorama 0.4.6" in error.message
    )
    missing = explain_pip_failure(["tqdm 4.70.1 requires colorama, which is not installed."], made)
    assert missing is not None and "requires colorama, which is not installed" in missing.message


def test_an_unrecognised_build_failure_is_left_alone(project: image.ProjectFiles) -> None:
    assert explain_pip_failure(["E: Unable to locate package python3-venv"], plan(project)) is None
