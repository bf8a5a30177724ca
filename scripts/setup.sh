#!/usr/bin/env bash
# Set everything up on a fresh machine and verify the example job, in one command.
#
#   1. a Docker engine (Debian's docker.io, docker-compose, debootstrap; dockerd started if none answers),
#      and Debian's chromium for the browser test of the HTML report
#   2. Slurm clusters (Debian's slurm-wlm) for --runtime slurm and its tests: one node, and two nodes in
#      network namespaces beside it (scripts/start-slurm.sh --nodes 2)
#   3. .venv with reprobox, torch (2.13.0, the CPU build), the examples' frameworks, the test tools and
#      the docs site's (MkDocs)
#   4. the offline base image (debootstrap, docker import) and a wheelhouse (the image's lock and the
#      examples' extra locks), for machines that cannot pull images; .venv/bin/activate exports
#      REPROBOX_BASE_IMAGE and REPROBOX_WHEELHOUSE for them
#   5. the reprobox image, built by `reprobox build`
#   6. `reprobox verify examples/tiny-mlp/job.yaml --runs 2` in containers
# With --podman, also Podman from Debian (scripts/install-podman.sh), for --runtime podman and its test.
#
# Usage: scripts/setup.sh [--no-verify] [--podman]   (as root, or as a user who may sudo: it asks)
# Machines that can pull the pinned CUDA base may skip step 4 by setting REPROBOX_BASE_IMAGE themselves.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/as-root.sh"
# A normal user who may sudo gets the whole set-up, through sudo; one who may not gets what needs no root.
if command -v sudo >/dev/null 2>&1; then
    as_root "installing Docker, Slurm and Debian packages"
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."

verify=1
podman=0
for argument in "$@"; do
    case "${argument}" in
        --no-verify) verify=0 ;;
        --podman) podman=1 ;;
        *) echo "setup.sh: unknown argument '${argument}' (use --no-verify, --podman)" >&2; exit 2 ;;
    esac
done

step() { printf '\n==> %s\n' "$*"; }

step "Docker engine"
scripts/start-docker.sh

if ! command -v chromium >/dev/null 2>&1; then
    step "Chromium (the report test renders the HTML report in a real headless browser)"
    if [[ ${EUID} -eq 0 ]]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
    else
        echo "setup.sh: not root; skipping chromium (the browser test will be skipped)" >&2
    fi
fi

if ! compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null; then
    step "libfaketime (verify --vary time shifts a local job's wall clock with it)"
    if [[ ${EUID} -eq 0 ]]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends faketime >/dev/null
    else
        echo "setup.sh: not root; skipping faketime (the local runtime will refuse to vary the clock)" >&2
    fi
fi

step "Slurm (a one-node cluster, and a two-node one in network namespaces, for the Slurm runtime's tests)"
if [[ ${EUID} -eq 0 ]]; then
    scripts/start-slurm.sh
    scripts/start-slurm.sh --nodes 2
else
    echo "setup.sh: not root; skipping Slurm (its tests will be skipped)" >&2
fi

if [[ ${podman} -eq 1 ]]; then
    step "Podman (for --runtime podman: rootless where the kernel allows, as root otherwise)"
    scripts/install-podman.sh
fi

step "Python environment (.venv)"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# torch first and pinned: 2.13.0 is the CPU build on this kind of machine's disk; anything looser may
# fetch a multi-GB CUDA build.
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[torch,report,dev,trackers,docs,signing,rl,sklearn]"
# The examples' frameworks (examples/hf-trainer, examples/lightning) at exactly the versions their image
# locks pin, so `--runtime local` runs them on the same packages; --no-deps leaves torch as installed.
example_locks=()
for lock in examples/*/requirements.lock; do example_locks+=(--requirement "${lock}"); done
.venv/bin/python -m pip install --quiet --require-hashes --no-deps "${example_locks[@]}"
.venv/bin/python -m pip check
torch_version="$(.venv/bin/python -c 'import torch; print(torch.__version__)')"
if [[ ${torch_version} != 2.13.0* ]]; then
    echo "setup.sh: .venv has torch ${torch_version}, not 2.13.0; reinstall it with pip install torch==2.13.0" >&2
    exit 1
fi

step "Offline base image and wheelhouse"
export REPROBOX_CACHE="${REPROBOX_CACHE:-${HOME}/.cache/reprobox}"
base_image="${REPROBOX_BASE_IMAGE:-reprobox/offline-base:bookworm}"
# Inside the checkout (git-ignored) so `docker compose` can build from it too.
wheelhouse="${REPROBOX_WHEELHOUSE:-$PWD/wheelhouse}"
if [[ "${base_image}" == reprobox/offline-base:* ]]; then
    scripts/build-offline-base.sh --tag "${base_image}"
fi
PATH="$PWD/.venv/bin:$PATH" scripts/fill-wheelhouse.sh --dest "${wheelhouse}"

marker="# reprobox: offline base and wheelhouse"
if ! grep -qF "${marker}" .venv/bin/activate; then
    {
        echo "${marker}"
        echo "export REPROBOX_BASE_IMAGE='${base_image}'"
        echo "export REPROBOX_WHEELHOUSE='${wheelhouse}'"
    } >>.venv/bin/activate
fi
export REPROBOX_BASE_IMAGE="${base_image}" REPROBOX_WHEELHOUSE="${wheelhouse}"
if [[ "${wheelhouse}" == "$PWD/wheelhouse" ]]; then
    # What `docker compose` reads: the same offline base, the CPU lock, the wheelhouse in the context.
    printf 'REPROBOX_BASE_IMAGE=%s\nREPROBOX_LOCK_FILE=env/requirements-cpu.lock\nREPROBOX_COMPOSE_WHEELHOUSE=wheelhouse\n' \
        "${base_image}" >.env
fi

step "reprobox image"
.venv/bin/reprobox build examples/tiny-mlp/job.yaml

if [[ ${verify} -eq 1 ]]; then
    step "Verify the example job in containers"
    .venv/bin/reprobox verify examples/tiny-mlp/job.yaml --runs 2 --runtime docker --quiet
fi

printf '\nReady. Run `source .venv/bin/activate`, then `reprobox --help`.\n'
