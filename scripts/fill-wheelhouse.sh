#!/usr/bin/env bash
# Fill a wheelhouse with every wheel the locks need, hashes checked, so the image build needs no network:
# `reprobox lock --wheelhouse DIR` (see `reprobox lock --help`), under its old name and flags. This
# checkout's reprobox runs it, installed or not.
#
# pip downloads each pinned wheel for the lock's target (CPython 3.11, manylinux x86_64 by default) and
# refuses any file whose sha256 is not in the lock. torch 2.13.0+cpu is not on PyPI: pip finds it through
# its find-links (pip's config, or --find-links DIR). Wheels already present are checked, not fetched again.
#
# Usage: scripts/fill-wheelhouse.sh [--lock FILE]... [--dest DIR] [--find-links DIR] [--python-version X.Y]
#   --lock FILE         repeatable; default env/requirements-cpu.lock and the examples' extra locks
#                       (examples/*/requirements.lock), so their images build offline too.
#   --dest DIR          default ${REPROBOX_WHEELHOUSE:-${REPROBOX_CACHE:-$HOME/.cache/reprobox}/wheelhouse}
#   --find-links DIR    an extra directory of local wheels (e.g. the torch CPU wheel)
#   --python-version    default 3.11 (Debian bookworm's python3)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
locks=()
dest="${REPROBOX_WHEELHOUSE:-${REPROBOX_CACHE:-${HOME}/.cache/reprobox}/wheelhouse}"
options=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --lock) locks+=(--locked "$2"); shift 2 ;;
        --dest) dest="$2"; shift 2 ;;
        --find-links) options+=(--find-links "$2"); shift 2 ;;
        --python-version) options+=(--python-version "$2"); shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "fill-wheelhouse.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

if [[ ${#locks[@]} -eq 0 ]]; then
    options+=(--base cpu --image-lock)
    for extra in "${repo_root}"/examples/*/requirements.lock; do
        [[ -f ${extra} ]] && locks+=(--locked "${extra}")
    done
fi
PYTHONPATH="${repo_root}${PYTHONPATH:+:${PYTHONPATH}}" exec "${PYTHON:-python3}" -m reprobox lock \
    --wheelhouse "${dest}" "${locks[@]}" "${options[@]}"
