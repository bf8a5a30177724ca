#!/usr/bin/env bash
# Fill a wheelhouse with every wheel the locks need, hashes checked, so the image build needs no network.
#
# pip downloads each pinned wheel for the lock's target (CPython 3.11, manylinux x86_64 by default) and
# refuses any file whose sha256 is not in the lock. torch 2.13.0+cpu is not on PyPI: pip finds it through
# its find-links (pip's config, or --find-links DIR). Wheels already present are checked, not fetched again.
#
# Usage: scripts/fill-wheelhouse.sh [--lock FILE]... [--dest DIR] [--find-links DIR] [--python-version X.Y]
#   --lock FILE         repeatable; default env/requirements-cpu.lock and the examples' extra locks
#                       (examples/*/requirements.lock), so their images build offline too. A job's
#                       extra lock (image.requirements) pins only what it adds: pip gets --no-deps.
#   --dest DIR          default ${REPROBOX_WHEELHOUSE:-${REPROBOX_CACHE:-$HOME/.cache/reprobox}/wheelhouse}
#   --find-links DIR    an extra directory of local wheels (e.g. the torch CPU wheel)
#   --python-version    default 3.11 (Debian bookworm's python3)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
locks=()
dest="${REPROBOX_WHEELHOUSE:-${REPROBOX_CACHE:-${HOME}/.cache/reprobox}/wheelhouse}"
python_version="3.11"
find_links=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --lock) locks+=("$2"); shift 2 ;;
        --dest) dest="$2"; shift 2 ;;
        --find-links) find_links+=(--find-links "$2"); shift 2 ;;
        --python-version) python_version="$2"; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "fill-wheelhouse.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

if [[ ${#locks[@]} -eq 0 ]]; then
    locks=("${repo_root}/env/requirements-cpu.lock")
    for extra in "${repo_root}"/examples/*/requirements.lock; do
        [[ -f ${extra} ]] && locks+=("${extra}")
    done
fi
abi="cp${python_version/./}"
mkdir -p "${dest}"
for lock in "${locks[@]}"; do
    [[ -f ${lock} ]] || { echo "fill-wheelhouse.sh: lock file ${lock} does not exist; pass --lock FILE" >&2; exit 2; }
    echo "fill-wheelhouse.sh: downloading the wheels of ${lock#"${repo_root}"/} for CPython ${python_version} into ${dest} ..."
    python3 -m pip download \
        --require-hashes --no-deps --only-binary=:all: \
        --implementation cp --python-version "${python_version}" --abi "${abi}" --abi abi3 --abi none \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform linux_x86_64 --platform any \
        "${find_links[@]}" --dest "${dest}" --requirement "${lock}" --quiet
done
count="$(find "${dest}" -maxdepth 1 -name '*.whl' | wc -l)"
size="$(du -sh "${dest}" | cut -f1)"
echo "fill-wheelhouse.sh: ${dest} holds ${count} wheels (${size}); build offline with:"
echo "  export REPROBOX_WHEELHOUSE=${dest} REPROBOX_LOCK=cpu"
