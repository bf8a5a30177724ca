#!/usr/bin/env bash
# Runs the corpus of library quickstarts (tests/corpus/) through `reprobox init` and
# `reprobox verify --runtime local --runs 2`, compares each verdict with the case's measured truth,
# and prints one line per case and `N/M right`. Exit 1 when a verdict is wrong.
#   scripts/corpus.sh [--fast] [NAME...]      (--fast: only the cases marked fast in case.yaml)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${REPROBOX_VENV:-$root/.venv}"
[ -x "$venv/bin/python" ] || { echo "corpus.sh: no $venv; run scripts/setup.sh first (or set REPROBOX_VENV)" >&2; exit 2; }
source "$venv/bin/activate"
export PYTHONPATH="$root"
exec python "$root/scripts/corpus_case.py" "$@"
