#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine, installing and starting Debian's one if needed.
#
# Idempotent and quick when an engine already runs: it only asks `docker info`. Otherwise (as root) it
# installs docker.io, docker-compose and debootstrap from Debian, starts dockerd in the background with
# its log in ${REPROBOX_DOCKERD_LOG:-/var/log/reprobox-dockerd.log}, and waits until the engine answers.
#
# Usage: scripts/start-docker.sh [--timeout SECONDS]   (as root, or as a user who may sudo)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/as-root.sh"

timeout=60
while [[ $# -gt 0 ]]; do
    case "$1" in
        --timeout) timeout="$2"; shift 2 ;;
        -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
        *) echo "start-docker.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

log_file="${REPROBOX_DOCKERD_LOG:-/var/log/reprobox-dockerd.log}"

engine_answers() {
    command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1
}

if engine_answers; then
    echo "start-docker.sh: the Docker engine answers ($(docker version --format '{{.Server.Version}}'))."
    exit 0
fi

as_root "no Docker engine answers, and installing or starting one"

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "start-docker.sh: installing ${missing[*]} from Debian ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "start-docker.sh: starting dockerd (log: ${log_file}) ..."
    mkdir -p "$(dirname "${log_file}")"
    nohup dockerd >>"${log_file}" 2>&1 &
    disown || true
fi

deadline=$((SECONDS + timeout))
until engine_answers; do
    if ((SECONDS >= deadline)); then
        echo "start-docker.sh: dockerd did not answer within ${timeout}s; see the end of ${log_file}:" >&2
        tail -n 20 "${log_file}" >&2 || true
        exit 4
    fi
    sleep 0.5
done
echo "start-docker.sh: the Docker engine answers ($(docker version --format '{{.Server.Version}}'))."
