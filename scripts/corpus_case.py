"""One corpus case through reprobox as a user runs it, then its truth; prints the case's result line.

Used by scripts/corpus.sh and tests/unit/test_corpus.py. The case's folder is copied into a temporary
git repository (a user's checkout), `reprobox init -- COMMAND` writes job.yaml there, `reprobox verify
job.yaml --runtime local --runs 2 --json` gives the verdict, and the case's truth.py (which never uses
reprobox) says what the verdict should have been. `right` when they agree.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
VERDICT_OF = {
    "bit-identical": "reproduced",
    "reproduced": "reproduced",
    "not reproducible": "not reproducible",
}


@dataclass
class Result:
    name: str
    truth: str
    verdict: str
    exit: int
    sentence: str
    seconds: float = 0.0  # init, verify's two runs and the truth's two runs, on this machine

    @property
    def right(self) -> bool:
        return self.truth == self.verdict

    def line(self) -> str:
        mark = "right" if self.right else "WRONG"
        took = f" in {self.seconds:.0f} s" if self.seconds else ""
        return f"{self.name}: truth {self.truth}, verdict {self.verdict} (exit {self.exit}) {mark}{took}"


def case_fields(case: Path) -> dict[str, str]:
    """case.yaml's top-level `key: value` lines (the corpus keeps them flat)."""
    fields = {}
    for line in (case / "case.yaml").read_text().splitlines():
        if ":" in line and not line.startswith((" ", "#")):
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip().strip("'\"")
    return fields


def cases(fast: bool) -> list[Path]:
    found = sorted(p for p in CORPUS.iterdir() if (p / "case.yaml").is_file())
    return [p for p in found if not fast or case_fields(p).get("fast") == "true"]


def reprobox_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_reprobox(case: Path, work: Path, log: Path) -> tuple[str, int, str]:
    """(verdict, exit code, reprobox's sentence) of init then verify in a git checkout of the case."""
    checkout = work / case.name
    shutil.copytree(case, checkout, ignore=shutil.ignore_patterns("truth.py", "case.yaml", "__pycache__"))
    git = ["git", "-c", "user.name=corpus", "-c", "user.email=corpus@example.org"]
    subprocess.run(["git", "init", "-q"], cwd=checkout, check=True)
    subprocess.run([*git, "add", "-A"], cwd=checkout, check=True)
    subprocess.run([*git, "commit", "-qm", "the case as a user checks it out"], cwd=checkout, check=True)
    env = reprobox_env()
    command = shlex.split(case_fields(case).get("command", "python train.py"))
    reprobox = [sys.executable, "-m", "reprobox"]
    verify_args = ["verify", "job.yaml", "--runtime", "local", "--runs", "2", "--json", "-q"]
    with log.open("w") as out:
        init = subprocess.run(
            [*reprobox, "init", "-q", "--", *command],
            cwd=checkout,
            env=env,
            stdout=out,
            stderr=out,
            check=False,
        )
        if init.returncode != 0:
            last_lines = log.read_text().strip().splitlines()[-1:]
            return "init failed", init.returncode, " ".join(last_lines)
        out.write((checkout / "job.yaml").read_text())
        verify = subprocess.run(
            [*reprobox, *verify_args],
            cwd=checkout,
            env=env,
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
            check=False,
        )
    try:
        data = json.loads(verify.stdout)
    except json.JSONDecodeError:
        return "no verdict", verify.returncode, verify.stdout.strip()[-300:]
    (log.parent / f"{case.name}.verify.json").write_text(verify.stdout)
    grade = str(data.get("grade", data.get("verdict", "?")))
    return VERDICT_OF.get(grade, grade), verify.returncode, str(data.get("sentence", ""))


def run_truth(case: Path) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, str(case / "truth.py")], capture_output=True, text=True, check=False
    )
    try:
        data = json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return "truth failed", done.stderr.strip()[-300:]
    return data["truth"], data["why"]


def run_case(case: Path, logs: Path) -> Result:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"corpus-{case.name}-") as work:
        verdict, code, sentence = run_reprobox(case, Path(work), logs / f"{case.name}.log")
    truth, why = run_truth(case)
    (logs / f"{case.name}.truth").write_text(why + "\n")
    return Result(case.name, truth, verdict, code, sentence, time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="only the cases case.yaml marks fast")
    parser.add_argument("--logs", type=Path, default=Path(tempfile.gettempdir()) / "corpus-logs")
    parser.add_argument("names", nargs="*", help="cases to run (default: all)")
    args = parser.parse_args(argv)
    args.logs.mkdir(parents=True, exist_ok=True)
    chosen = [CORPUS / n for n in args.names] if args.names else cases(args.fast)
    results = []
    for case in chosen:
        result = run_case(case, args.logs)
        print(result.line(), flush=True)
        if not result.right:
            print(f"  reprobox said: {result.sentence}", flush=True)
        results.append(result)
    right = sum(r.right for r in results)
    print(f"{right}/{len(results)} right (logs in {args.logs})")
    return 0 if right == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
