"""A job's extras as one layer over the shared image: the plan, its tag and context, and what a build
leaves untagged; the sizes `reprobox images` and `clean --images` read off the engine's images."""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reprobox import image, imageuse
from reprobox.engine import ImageInfo
from reprobox.engine._images import _StageImages
from reprobox.jobfile import ImageSpec
from tests.image_checkout import copy_image_files

ROOT = Path(__file__).resolve().parents[2]
HASH = "--hash=sha256:" + "ab" * 32


@pytest.fixture
def project(tmp_path: Path) -> image.ProjectFiles:
    return copy_image_files(tmp_path / "checkout")


def lock(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def plan(project: image.ProjectFiles, requirements: Path | None = None) -> image.BuildPlan:
    return image.plan_build(ImageSpec(requirements=requirements), lock="cpu", project=project, environ={})


def context_files(built: image.BuildPlan) -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(built.context)) as archive:
        return {m.name: archive.extractfile(m).read().decode() for m in archive.getmembers()}  # type: ignore[union-attr]


def test_jobs_with_the_same_pins_share_one_image(project: image.ProjectFiles, tmp_path: Path) -> None:
    one = lock(
        tmp_path / "a.lock", f"# from a/requirements.in\ntqdm==4.70.1 \\\n    {HASH}\n    # tqdm.whl\n"
    )
    two = lock(tmp_path / "b.lock", f"tqdm==4.70.1 \\\n    {HASH}\n\n# from b\n")
    other = lock(tmp_path / "c.lock", f"tqdm==4.70.2 \\\n    {HASH}\n")
    first, second, third = plan(project, one), plan(project, two), plan(project, other)
    assert first.tag == second.tag != third.tag
    assert first.shared == second.shared == third.shared == plan(project)
    assert context_files(first)[image.EXTRAS_LOCK] == f"tqdm==4.70.1 \\\n    {HASH}\n"


def test_the_extras_dockerfile_installs_in_a_stage_and_copies_one_layer(
    project: image.ProjectFiles, tmp_path: Path
) -> None:
    built = plan(project, lock(tmp_path / "x.lock", f"tqdm==4.70.1 {HASH}\nsix==1.17.0 {HASH}\n"))
    dockerfile = context_files(built)["Dockerfile"]
    assert dockerfile.startswith(image.EXTRAS_DOCKERFILE)
    final_stage = dockerfile.split("\nFROM ${SHARED_IMAGE}\n", 1)[1]
    # The last stage adds one layer (the staged files) and the labels, in one instruction.
    assert final_stage.splitlines()[0] == "COPY --from=extras /build/layer/ /"
    assert [line.split()[0] for line in final_stage.splitlines() if not line.startswith(" ")] == [
        "COPY",
        "LABEL",
    ]
    for key, value in built.labels.items():
        assert f'{key}="{value}"' in final_stage
    assert built.labels["io.reprobox.extras"] == "tqdm==4.70.1 six==1.17.0"
    assert built.labels["io.reprobox.shared-image"] == built.buildargs["SHARED_IMAGE"] == plan(project).tag
    shared_labels = plan(project).labels
    assert {k: v for k, v in built.labels.items() if k in shared_labels and "digest" not in k} == {
        k: v for k, v in shared_labels.items() if "digest" not in k
    }


def test_a_build_leaves_no_stage_image_behind_docker_and_buildah() -> None:
    docker = [
        "Step 1/9 : ARG SHARED_IMAGE",
        "Step 2/9 : FROM ${SHARED_IMAGE} AS extras",
        " ---> 2e9b3e745cb5",
        "Step 3/9 : RUN true",
        " ---> Running in 1234567890ab",
        "Removing intermediate container 1234567890ab",
        " ---> f3f6a124a63c",
        "Step 4/9 : FROM ${SHARED_IMAGE}",
        " ---> 2e9b3e745cb5",
        "Step 5/9 : COPY --from=extras /build/layer/ /",
        " ---> Using cache",
        " ---> df34999443e2",
    ]
    stages = _StageImages()
    for line in docker:
        stages.read(line)
    assert stages.left_behind(finished=True) == ["f3f6a124a63c"]
    assert stages.left_behind(finished=False) == ["f3f6a124a63c", "df34999443e2"]
    buildah = _StageImages()
    for line in ["[1/2] STEP 1/3: FROM base AS extras", "--> 0123456789abcdef", "[2/2] STEP 1/2: FROM base"]:
        buildah.read(line)
    assert buildah.left_behind(finished=True) == ["0123456789abcdef"]


@dataclass
class Engine:
    """The images of an engine as `imageuse` reads them (the real engine's are in tests/integration)."""

    images: list[ImageInfo]
    intermediates: list[ImageInfo] = field(default_factory=list)

    def list_images(self, labels: object = (), *, intermediate: bool = False) -> list[ImageInfo]:
        found = self.images + (self.intermediates if intermediate else [])
        return [info for info in found if not labels or "io.reprobox.image" in info.labels]


def info(name: str, layers: str, size: int, **labels: str) -> ImageInfo:
    base = {"io.reprobox.image": "reprobox", "io.reprobox.managed": "true"} if name != "base" else {}
    return ImageInfo(
        id=f"sha256:{name}", tags=(f"x/{name}:1",), size=size, layers=tuple(layers), labels={**base, **labels}
    )


def test_clean_frees_what_no_image_that_stays_holds(tmp_path: Path) -> None:
    base = info("base", "a", 100)
    shared = info("shared", "ab", 1100)
    used = info("used", "abx", 1110, **{"io.reprobox.shared-image": "x/shared:1"})
    unused = info("unused", "aby", 1120, **{"io.reprobox.shared-image": "x/shared:1"})
    lonely = info("lonely", "acd", 600)
    step = ImageInfo(id="sha256:step", size=500, layers=("a", "c"))  # an untagged step of lonely's build
    engine = Engine([base, shared, used, unused, lonely], [step])
    run = tmp_path / "runs" / "job" / "run-1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}")  # unreadable as a record: it names no image
    removals = imageuse.unused_images(engine, tmp_path / "runs")  # type: ignore[arg-type]
    # No record reads: all four go, a job's image before its shared image; each frees what it alone held.
    freed = {r.info.id: r.frees for r in removals}
    assert freed == {"sha256:lonely": 500, "sha256:unused": 20, "sha256:used": 10, "sha256:shared": 1000}
    assert removals[-1].info.id == "sha256:shared"
    uses = {use.info.id: use for use in imageuse.image_uses(engine, tmp_path / "runs")}  # type: ignore[arg-type]
    assert uses["sha256:unused"].adds == 20 and uses["sha256:unused"].shared == "x/shared:1"
    assert uses["sha256:shared"].adds == 1100 and uses["sha256:shared"].shared is None


def record_run(runs: Path, job: str, run_id: str, image_id: str) -> None:
    """A run record as far as the image listing reads it: its job and the image it ran in."""
    run = runs / job / run_id
    run.mkdir(parents=True)
    record = {"schema": "reprobox.run/1", "run_id": run_id, "status": "succeeded", "job_name": job}
    (run / "manifest.json").write_text(json.dumps({**record, "runtime": {"image": {"id": image_id}}}))


def test_a_shared_image_stays_while_a_used_image_builds_on_it(tmp_path: Path) -> None:
    shared = info("shared", "ab", 1100)
    used = info("used", "abx", 1110, **{"io.reprobox.shared-image": "x/shared:1"})
    unused = info("unused", "aby", 1120)
    engine = Engine([shared, used, unused])
    record_run(tmp_path, "train", "run-1", used.id)
    record_run(tmp_path, "train", "run-2", used.id)
    (tmp_path / "train" / "latest").symlink_to("run-2")  # as runs/<job>/latest: no run of its own
    removals = imageuse.unused_images(engine, tmp_path)  # type: ignore[arg-type]
    assert [(r.info.id, r.frees) for r in removals] == [("sha256:unused", 20)]
    listed = {use.info.id: use.to_json() for use in imageuse.image_uses(engine, tmp_path)}  # type: ignore[arg-type]
    assert listed["sha256:used"]["jobs"] == {"train": 2}
    assert listed["sha256:used"]["runs"] == [
        str(tmp_path / "train" / "run-1"),
        str(tmp_path / "train" / "run-2"),
    ]
    assert listed["sha256:used"]["adds"] == 10
    assert listed["sha256:unused"]["jobs"] == {} and listed["sha256:shared"]["runs"] == []
