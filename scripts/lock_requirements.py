#!/usr/bin/env python3
"""Write a job's hash-locked extra requirements (`image: {requirements: ...}`) from a requirements.in.

The extra lock is installed on top of the image's own lock (env/requirements-cpu.lock by default), so it
is resolved against that lock's pins and leaves them out: torch, numpy and the rest come from the image,
exactly as locked there. pip resolves for the image's Python (CPython 3.11, manylinux x86_64) and the
lock keeps the sha256 of each chosen wheel, which pip checks at build time (`--require-hashes`).

Usage: python scripts/lock_requirements.py REQUIREMENTS_IN -o LOCK [--base LOCK] [--python-version X.Y]
Then put the wheels in a wheelhouse: scripts/fill-wheelhouse.sh --lock LOCK --dest WHEELHOUSE
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "linux_x86_64")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def base_pins(lock: Path) -> dict[str, str]:
    """{name: version} of the image's own lock: the extra lock must agree with these and leave them out."""
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        match = _PIN.match(line.strip())
        if match:
            pins[normalize(match.group(1))] = match.group(2)
    return pins


def resolve(requirements: Path, pins: dict[str, str], python_version: str) -> list[dict[str, object]]:
    """What pip would install for the image's Python, with the base pins as constraints (pip's report)."""
    with tempfile.TemporaryDirectory() as scratch:
        constraints = Path(scratch) / "constraints.txt"
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in pins.items()))
        report = Path(scratch) / "report.json"
        platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
        abi = "cp" + python_version.replace(".", "")
        command = [
            sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
            "--only-binary=:all:", "--target", str(Path(scratch) / "target"),
            "--implementation", "cp", "--python-version", python_version,
            "--abi", abi, "--abi", "abi3", "--abi", "none", *platforms,
            "--constraint", str(constraints), "--report", str(report), "--requirement", str(requirements),
        ]  # fmt: skip
        subprocess.run(command, check=True)
        installed: list[dict[str, object]] = json.loads(report.read_text())["install"]
        return installed


def lock_text(installed: list[dict[str, object]], pins: dict[str, str], source: str, base: str) -> str:
    lines = [
        f"# Hash-locked extra requirements of this job, from {source}, installed on top of {base}",
        "# (whose pins it leaves out). CPython 3.11, Linux x86_64. Regenerate with:",
        f"#   python scripts/lock_requirements.py {source} -o LOCK",
    ]
    entries = []
    for item in installed:
        metadata = item["metadata"]
        info = item["download_info"]
        assert isinstance(metadata, dict) and isinstance(info, dict)
        name = normalize(str(metadata["name"]))
        if name in pins:
            continue
        digest = info["archive_info"]["hashes"]["sha256"]
        wheel = str(info["url"]).rsplit("/", 1)[-1]
        entries.append((name, f"{name}=={metadata['version']} \\\n    --hash=sha256:{digest}\n    # {wheel}"))
    return "\n".join(lines + [entry for _, entry in sorted(entries)]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("requirements", type=Path, help="a requirements.in (names, optionally with versions)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the lock file to write")
    parser.add_argument("--base", type=Path, default=ROOT / "env" / "requirements-cpu.lock")
    parser.add_argument("--python-version", default="3.11")
    args = parser.parse_args()
    pins = base_pins(args.base)
    installed = resolve(args.requirements, pins, args.python_version)
    source = args.requirements.as_posix()
    base = (
        args.base.resolve().relative_to(ROOT).as_posix()
        if ROOT in args.base.resolve().parents
        else str(args.base)
    )
    args.output.write_text(lock_text(installed, pins, source, base), encoding="utf-8")
    print(f"lock_requirements.py: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
