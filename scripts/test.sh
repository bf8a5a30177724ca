#!/usr/bin/env bash
# The test command: lint, types, then every test, integration tests included when an engine answers.
#
# Usage: scripts/test.sh [pytest arguments...]     (after scripts/setup.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -x .venv/bin/python ]] || { echo "test.sh: no .venv; run scripts/setup.sh first" >&2; exit 2; }
[[ -f .venv/bin/activate ]] && source .venv/bin/activate

ruff check .
ruff format --check .
mypy

integration=()
if docker info >/dev/null 2>&1; then
    integration=(--integration)
else
    echo "test.sh: no Docker engine answers; integration tests will be skipped (scripts/start-docker.sh)" >&2
fi
python -m pytest "${integration[@]}" "$@"
