"""Benchmark a job with fifteen extra packages: its first `verify --runs 2` in containers against two bare
local runs of the same script.

The job trains a small torch model and uses fifteen small pure-Python packages the image lacks (their
wheels from the wheelhouse, hash-locked as `reprobox lock` writes them). Its image is the shared image
plus one layer of those packages; the shared image is built first when missing (timed apart: every job
shares it). Then, side by side:
  containers   `reprobox build JOB` (the job's image: seconds, bytes it adds over the shared image, layers)
               and `reprobox verify JOB --runs 2 --runtime docker` (seconds, verdict)
  bare local   `python train.py` twice with the same packages on PYTHONPATH (seconds), and the verdict of
               `reprobox verify JOB --runs 2 --runtime local`
Exits 1 when the image build takes over 30 s or the verdicts differ.

Usage: python3 scripts/bench_extras.py [--base-image IMAGE] [--wheelhouse DIR] [--lock cpu]
The defaults suit this machine's offline setup (REPROBOX_BASE_IMAGE, REPROBOX_WHEELHOUSE).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reprobox import image, progress
from reprobox.engine import connect
from reprobox.imageuse import size_text
from reprobox.jobfile import ImageSpec
from reprobox.runtimes.docker import ensure_image

BUILD_TARGET = 30.0
CACHE = Path(os.environ.get("REPROBOX_CACHE", Path.home() / ".cache" / "reprobox"))
# Small pure-Python packages, none pinned by the image's lock; their dependencies are among them.
PACKAGES = [
    "beautifulsoup4",
    "colorama",
    "defusedxml",
    "idna",
    "markdown-it-py",
    "mdurl",
    "platformdirs",
    "pyparsing",
    "python-dateutil",
    "sortedcontainers",
    "soupsieve",
    "tinycss2",
    "tqdm",
    "tzdata",
    "webencodings",
]
TRAIN = '''\
"""A small model trained on synthetic data, using each extra package on the way."""
import json, os, sys
from pathlib import Path
import bs4, colorama, defusedxml.ElementTree, idna, markdown_it, platformdirs, pyparsing, sortedcontainers
import tinycss2, tqdm, tzdata
from dateutil import parser as dates
import torch

words = sortedcontainers.SortedList(["delta", "alpha", "charlie", "bravo"])
facts = {
    "words": list(words),
    "html": bs4.BeautifulSoup("<p><b>bold</b> text</p>", "html.parser").get_text(),
    "date": dates.parse("2000-01-01T00:00:00Z").isoformat(),
    "idna": idna.encode("bücher.example").decode(),
    "markdown": markdown_it.MarkdownIt().render("*hi*"),
    "xml": defusedxml.ElementTree.fromstring("<a><b>1</b></a>").find("b").text,
    "number": int(pyparsing.Word(pyparsing.nums).parse_string("42")[0]),
    "css": len(tinycss2.parse_stylesheet("p { color: red }")),
    "red": colorama.Fore.RED,
    "dirs": bool(platformdirs.user_cache_dir("bench")),
    "tzdata": tzdata.IANA_VERSION,
}
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data, labels = torch.randn(256, 16), torch.randint(0, 4, (256,))
for _ in tqdm.trange(20, file=sys.stdout, mininterval=60):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(data), labels)
    loss.backward()
    optimizer.step()
out = Path(os.environ.get("REPROBOX_OUTPUT_DIR") or sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
torch.save(model.state_dict(), out / "model.pt")
(out / "facts.json").write_text(json.dumps(facts, sort_keys=True))
'''


def locked(wheelhouse: Path, folder: Path) -> Path:
    """requirements.lock for PACKAGES from the wheels in `wheelhouse` (the newest of each)."""
    lines = []
    missing = []
    for name in PACKAGES:
        wheels = sorted(
            (p for p in wheelhouse.glob("*.whl") if (image.wheel_pin(p.name) or ("",))[0] == name),
            key=lambda p: p.name,
        )
        if not wheels:
            missing.append(name)
            continue
        version = wheels[-1].name.split("-")[1]
        digest = hashlib.sha256(wheels[-1].read_bytes()).hexdigest()
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{digest}\n")
    if missing:
        sys.exit(
            f"bench_extras: wheelhouse {wheelhouse} lacks {', '.join(missing)}; fetch them with "
            f"`pip download --only-binary=:all: --no-deps -d {wheelhouse} {' '.join(missing)}`"
        )
    lock = folder / "requirements.lock"
    lock.write_text("# fifteen small packages over the image's lock\n" + "".join(lines))
    return lock


def timed(command: list[str], **kwargs: object) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if done.returncode not in (0, 1):
        said = done.stdout[-3000:] + done.stderr[-3000:]
        sys.exit(f"bench_extras: {' '.join(command)} exited {done.returncode}:\n{said}")
    return time.perf_counter() - started, done


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--base-image", default=os.environ.get("REPROBOX_BASE_IMAGE", "reprobox/offline-base:bookworm")
    )
    parser.add_argument(
        "--wheelhouse", type=Path, default=Path(os.environ.get("REPROBOX_WHEELHOUSE") or CACHE / "wheelhouse")
    )
    parser.add_argument("--lock", default="cpu")
    args = parser.parse_args()
    engine = connect()
    with tempfile.TemporaryDirectory(prefix="bench-extras-") as tmp:
        work = Path(tmp)
        job = work / "job"
        job.mkdir()
        (job / "train.py").write_text(TRAIN)
        lock = locked(args.wheelhouse, job)
        (job / "job.yaml").write_text(
            "version: 1\nname: bench-extras\ncommand: [python, train.py]\ncheckpoints: ['*.pt', '*.json']\n"
            "seed: 0\ntimeout: 900\nimage: {requirements: requirements.lock}\n"
        )
        plan = image.plan_build(
            ImageSpec(requirements=lock),
            base_image=args.base_image,
            lock=args.lock,
            wheelhouse=args.wheelhouse,
        )
        assert plan.shared is not None
        shared_seconds = None
        if not engine.image_exists(plan.shared.tag):
            started = time.perf_counter()
            with progress.reporting(progress.Recorder()):
                ensure_image(
                    ImageSpec(),
                    engine=engine,
                    base_image=args.base_image,
                    lock=args.lock,
                    wheelhouse=args.wheelhouse,
                )
            shared_seconds = time.perf_counter() - started
        if engine.image_exists(plan.tag):
            engine.remove_image(plan.tag)  # the first verify of this job builds its image
        flags = ["--base-image", args.base_image, "--wheelhouse", str(args.wheelhouse), "--lock", args.lock]
        reprobox = [sys.executable, "-m", "reprobox"]
        build_seconds, _ = timed([*reprobox, "build", str(job / "job.yaml"), *flags, "-q"])
        built = engine.inspect_image(plan.tag)
        shared = engine.inspect_image(plan.shared.tag)
        verify = [*reprobox, "verify", str(job / "job.yaml"), "--runs", "2", "--json", "-q"]
        runs_seconds, docker = timed(
            [
                *verify,
                "--runtime",
                "docker",
                "--runs-dir",
                str(work / "runs-docker"),
                *flags,
                "--attestation",
                str(work / "docker.attestation.json"),
            ]
        )
        # Bare local runs: the same packages from the same wheels, on PYTHONPATH.
        site = work / "site"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-index",
                "--require-hashes",
                "--find-links",
                str(args.wheelhouse),
                "--target",
                str(site),
                "-r",
                str(lock),
            ],
            check=True,
        )
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
        }
        bare = []
        for index in range(2):
            seconds, _ = timed([sys.executable, "train.py", str(work / f"bare-{index}")], cwd=job, env=env)
            bare.append(seconds)
        _, local = timed(
            [
                *verify,
                "--runtime",
                "local",
                "--runs-dir",
                str(work / "runs-local"),
                "--attestation",
                str(work / "local.attestation.json"),
            ],
            env=env,
        )
        verdicts = [json.loads(done.stdout)["verdict"] for done in (docker, local)]
    added = built.size - shared.size
    rows = [
        ("", "containers: first verify --runs 2", "bare local: python train.py x2"),
        (
            "shared image",
            f"{size_text(shared.size)}, "
            + (
                f"built now in {shared_seconds:.1f} s"
                if shared_seconds
                else "present (built once for every job)"
            ),
            "-",
        ),
        ("job's image build", f"{build_seconds:.1f} s ({len(PACKAGES)} extras over the shared image)", "-"),
        ("image bytes added", f"{size_text(added)} in {len(built.layers) - len(shared.layers)} layer", "-"),
        ("two runs", f"{runs_seconds:.1f} s", f"{sum(bare):.1f} s ({', '.join(f'{s:.1f}' for s in bare)})"),
        ("total", f"{build_seconds + runs_seconds:.1f} s", f"{sum(bare):.1f} s"),
        ("verdict", verdicts[0], f"{verdicts[1]} (reprobox verify --runtime local)"),
    ]
    width = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(width[i]) for i, cell in enumerate(row)).rstrip())
    missed = []
    if build_seconds > BUILD_TARGET:
        missed.append(f"the job's image took {build_seconds:.1f} s > {BUILD_TARGET:.0f} s")
    if verdicts[0] != verdicts[1]:
        missed.append(f"verdicts differ: {verdicts[0]} in containers, {verdicts[1]} locally")
    if missed:
        print("bench_extras: MISSED: " + "; ".join(missed))
        return 1
    print("bench_extras: all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
