#!/usr/bin/env bash
# Make sure Podman can run reprobox's containers here, for `reprobox ... --runtime podman` and its test.
#
# Idempotent and quick when everything is there. Otherwise (as root) it installs from Debian:
#   podman              the engine; reprobox talks to its Docker-compatible API (`podman system service`,
#                       which reprobox starts for each command when no Podman socket answers)
#   netavark            Podman's network backend (without it Podman may not start at all, even for
#                       containers without a network)
#   catatonit           the container init behind --init (Podman's default; a machine with docker.io
#                       already has tini, which satisfies apt's recommendation but not Podman)
#   containers-storage  /usr/share/containers/storage.conf, so rootless users get overlay, not vfs
#   uidmap, slirp4netns, fuse-overlayfs   what rootless Podman needs (subordinate ids, a user-mode
#                       network for jobs with `network: true`, overlay on kernels without native support)
# Run by a normal user (it goes through sudo where it needs root), it also gives that user subordinate
# uids/gids if they have none, so they can run Podman rootless. Rootless needs a kernel that allows unprivileged user namespaces; where it
# does not, root can still use Podman (this script says which applies).
#
# Usage: scripts/install-podman.sh   (as root, or as a user who may sudo)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/as-root.sh"

case "${1:-}" in
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    "") ;;
    *) echo "install-podman.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac

packages=(podman netavark catatonit containers-storage uidmap slirp4netns fuse-overlayfs)
missing=()
for package in "${packages[@]}"; do
    [[ "$(dpkg-query -W -f='${Status}' "${package}" 2>/dev/null)" == *"install ok installed"* ]] || missing+=("${package}")
done

if [[ ${#missing[@]} -gt 0 ]]; then
    as_root "installing ${missing[*]}"
    echo "install-podman.sh: installing ${missing[*]} from Debian ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The user who ran this (through sudo, if any) runs Podman rootless: they need subordinate ids of their own.
if [[ ${EUID} -ne 0 ]] && ! grep -qs "^$(id -un):" /etc/subuid; then
    as_root "giving $(id -un) subordinate ids for rootless Podman"
fi
user="${SUDO_USER:-}"
if [[ -n "${user}" && "${user}" != root && ${EUID} -eq 0 ]]; then
    for file in /etc/subuid /etc/subgid; do
        touch "${file}"
        if ! grep -q "^${user}:" "${file}"; then
            start="$(awk -F: 'BEGIN { end = 100000 } { if ($2 + $3 > end) end = $2 + $3 } END { print end }' "${file}")"
            echo "${user}:${start}:65536" >>"${file}"
            echo "install-podman.sh: gave ${user} subordinate ids ${start}-$((start + 65535)) in ${file}"
        fi
    done
fi

userns="$(cat /proc/sys/kernel/unprivileged_userns_clone 2>/dev/null || echo 1)"
max_userns="$(cat /proc/sys/user/max_user_namespaces 2>/dev/null || echo 1)"
if [[ "${userns}" == 0 || "${max_userns}" == 0 ]]; then
    echo "install-podman.sh: this kernel refuses unprivileged user namespaces: Podman runs as root only" >&2
fi
echo "install-podman.sh: $(podman --version) is ready; use it with: reprobox verify JOB --runtime podman"
