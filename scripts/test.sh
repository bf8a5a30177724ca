#!/usr/bin/env bash
# The test command: lint, types, the docs site, then every test, integration tests included when an engine
# answers (the shell examples of README.md and docs/ among them: tests/doc_examples.py).
#
# Usage: scripts/test.sh [pytest arguments...]     (after scripts/setup.sh)
#        REPROBOX_TEST_WORKERS=N scripts/test.sh   (N test processes; default 2, 0 for none)
#        scripts/test.sh --repeat N TEST...        (only the chosen tests, each N times, alone in one process
#                                                   unless REPROBOX_TEST_WORKERS says otherwise: a flaky test
#                                                   shows as a count of failures before CI meets it)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -x .venv/bin/python ]] || { echo "test.sh: no .venv; run scripts/setup.sh first" >&2; exit 2; }
[[ -f .venv/bin/activate ]] && source .venv/bin/activate

if [[ "${1:-}" == "--repeat" ]]; then
    count="${2:-}"
    [[ "$count" =~ ^[1-9][0-9]*$ && $# -ge 3 ]] || {
        echo "test.sh: --repeat needs a count and at least one test, e.g. scripts/test.sh --repeat 20 tests/unit/test_x.py::test_y" >&2
        exit 2
    }
    shift 2
    engines=()
    docker info >/dev/null 2>&1 && engines=(--integration)
    # Every repetition runs, failed or not (no -x), so the closing line reads "N failed, M passed".
    exec python -m pytest -n "${REPROBOX_TEST_WORKERS:-0}" --count "$count" --repeat-scope function \
        "${engines[@]}" "$@"
fi

ruff check .
ruff format --check .
mypy
lint-imports  # the import contracts in pyproject.toml: no circle inside a package; the guest apart
# Every warning (a broken link or anchor, a page missing from the nav) fails the build; the site goes to
# site/ (git-ignored). Not --quiet: it hides the warnings from --strict too. NO_MKDOCS_2_WARNING: Material's
# notice about its successor is not a warning.
NO_MKDOCS_2_WARNING=1 mkdocs build --strict

integration=()
if docker info >/dev/null 2>&1; then
    integration=(--integration)
else
    echo "test.sh: no Docker engine answers; integration tests will be skipped (scripts/start-docker.sh)" >&2
fi
# Two workers (pytest-xdist): the tests against the engines run in order in one of them, the rest go
# out file by file (tests/conftest.py says how); REPROBOX_TEST_WORKERS=0 runs everything in this process.
# --durations=25: the 25 slowest tests, so the suite's time budget (15 minutes of pytest on 2 cores) is watched.
python -m pytest -n "${REPROBOX_TEST_WORKERS:-2}" --durations=25 "${integration[@]}" "$@"
