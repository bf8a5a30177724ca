#!/usr/bin/env bash
# Build a small local base image (Debian bookworm + python3 + venv) for machines that cannot pull images.
# Run by `reprobox offline-base` (this file ships in the package, so an installed reprobox has it).
#
# The rootfs comes from debootstrap (Debian's mirror only), is cleaned of caches and logs, and is packed
# with sorted names, numeric owners and clamped mtimes; the image is then loaded with a fixed config and
# creation date, so the same rootfs always gives the same image id. The rootfs tarball is cached under
# ${REPROBOX_CACHE:-$HOME/.cache/reprobox}/offline-base so reruns take seconds.
#
# Usage: reprobox offline-base [--tag IMAGE] [--force] [--refresh]
#   --tag IMAGE  image name to create (default: ${REPROBOX_OFFLINE_BASE:-reprobox/offline-base:bookworm})
#   --force      load the image again even if it exists (reuses the cached rootfs)
#   --refresh    run debootstrap again instead of using the cached rootfs (implies --force)
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian), SOURCE_DATE_EPOCH (default: the
# mirror's Release date), REPROBOX_CACHE.
set -euo pipefail
me="reprobox offline-base"
script="$(realpath "$0")"
arguments=("$@")

# debootstrap needs root: a normal user's run goes through sudo once it gets there (it asks for the
# password); without sudo, it says to run as root.
as_root() {
    [[ ${EUID} -eq 0 ]] && return 0
    if command -v sudo >/dev/null 2>&1; then
        echo "${me}: ${1} needs root; running it again through sudo" >&2
        exec sudo -- bash "${script}" "${arguments[@]}"
    fi
    echo "${me}: ${1} needs root, and there is no sudo here: run it as root" >&2
    exit 4
}

tag="${REPROBOX_OFFLINE_BASE:-reprobox/offline-base:bookworm}"
force=0
refresh=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --tag) tag="$2"; shift 2 ;;
        --force) force=1; shift ;;
        --refresh) refresh=1; force=1; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "${me}: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

suite=bookworm
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
packages="python3,python3-venv"
cache_dir="${REPROBOX_CACHE:-${HOME}/.cache/reprobox}/offline-base"
rootfs_tar="${cache_dir}/${suite}-rootfs.tar"
epoch_file="${cache_dir}/${suite}-rootfs.epoch"

if ! docker info >/dev/null 2>&1; then
    echo "${me}: no Docker engine answers; start one (sudo systemctl start docker, or dockerd) and run it again" >&2
    exit 4
fi

if [[ ${force} -eq 0 ]] && docker image inspect "${tag}" >/dev/null 2>&1; then
    echo "${me}: ${tag} already exists ($(docker image inspect --format '{{.Id}}' "${tag}")); use --force to load it again."
    exit 0
fi

make_rootfs() {
    as_root "debootstrap"
    command -v debootstrap >/dev/null 2>&1 || {
        echo "${me}: debootstrap is missing; install it with: apt-get install debootstrap" >&2
        exit 4
    }
    mkdir -p "${cache_dir}"
    local work
    work="$(mktemp -d "${cache_dir}/rootfs.XXXXXX")"
    trap 'rm -rf "${work}"' EXIT
    local root="${work}/root"
    echo "${me}: debootstrap --variant=minbase --include=${packages} ${suite} (about a minute) ..."
    debootstrap --variant=minbase --include="${packages}" "${suite}" "${root}" "${mirror}" \
        >"${work}/debootstrap.log" 2>&1 || {
        echo "${me}: debootstrap failed; the end of its log:" >&2
        tail -n 20 "${work}/debootstrap.log" >&2
        exit 4
    }

    # The mirror's Release date bounds every packaged file's mtime: clamping to it keeps packaged
    # files (and so the .pyc files that record their mtimes) untouched and fixes everything else.
    local epoch="${SOURCE_DATE_EPOCH:-}"
    if [[ -z "${epoch}" ]]; then
        local release_date
        release_date="$(sed -n 's/^Date: //p' "${root}"/var/lib/apt/lists/*_InRelease 2>/dev/null | head -n 1)"
        epoch="$(date -d "${release_date:-@0}" +%s)"
    fi

    # Caches, logs and host-specific files vary from run to run and are useless in an image.
    rm -rf "${root}"/var/cache/apt/* "${root}"/var/lib/apt/lists/* "${root}"/var/log/* \
        "${root}"/var/cache/ldconfig/aux-cache "${root}"/var/cache/debconf/*-old "${root}"/var/lib/dpkg/*-old \
        "${root}"/etc/shadow- "${root}"/etc/gshadow- "${root}"/etc/passwd- "${root}"/etc/group- \
        "${root}"/etc/resolv.conf "${root}"/etc/hostname "${root}"/etc/hosts "${root}"/tmp/* "${root}"/var/tmp/*
    mkdir -p "${root}"/var/lib/apt/lists/partial "${root}"/var/cache/apt/archives/partial
    # Password-change dates are stored as a day count of "today"; fix them to the epoch's day.
    sed -i -E "s/^([^:]*:[^:]*:)[0-9]+:/\1$((epoch / 86400)):/" "${root}/etc/shadow"
    find "${root}/dev" -mindepth 1 -delete

    echo "${me}: packing the rootfs (SOURCE_DATE_EPOCH=${epoch}) ..."
    (cd "${root}" && LC_ALL=C ls -A) >"${work}/top-level"
    # Top-level names are listed sorted; --sort=name sorts the rest.
    tar -C "${root}" --create --file "${work}/rootfs.tar" --format=gnu --sort=name --numeric-owner \
        --mtime="@${epoch}" --clamp-mtime --no-xattrs --no-acls --no-selinux --files-from "${work}/top-level"
    mv "${work}/rootfs.tar" "${rootfs_tar}"
    echo "${epoch}" >"${epoch_file}"
    rm -rf "${work}"
    trap - EXIT
}

if [[ ${refresh} -eq 1 || ! -s ${rootfs_tar} || ! -s ${epoch_file} ]]; then
    make_rootfs
else
    echo "${me}: using the cached rootfs ${rootfs_tar}"
fi

echo "${me}: loading ${tag} ..."
# A docker-load archive with a fixed config (no "created: now" as with `docker import`) gives the same
# image id for the same rootfs on every machine.
python3 - "${rootfs_tar}" "${tag}" "$(cat "${epoch_file}")" "$(dpkg --print-architecture)" <<'EOF' | docker load
import datetime
import hashlib
import io
import json
import sys
import tarfile

rootfs, tag, epoch, arch = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
digest = hashlib.sha256()
with open(rootfs, "rb") as handle:
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        digest.update(chunk)
created = datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
config = {
    "architecture": {"amd64": "amd64", "arm64": "arm64"}.get(arch, arch),
    "os": "linux",
    "created": created,
    "config": {
        "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"],
        "Cmd": ["/bin/bash"],
        "Labels": {"io.reprobox.offline-base": "debian-bookworm-minbase-python3"},
    },
    "rootfs": {"type": "layers", "diff_ids": [f"sha256:{digest.hexdigest()}"]},
    # the recipe's first name, kept: the same rootfs gives the same image id as it always did
    "history": [{"created": created, "created_by": "scripts/build-offline-base.sh: debootstrap --variant=minbase"}],
}
config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
manifest = json.dumps([{"Config": config_name, "RepoTags": [tag], "Layers": ["layer/layer.tar"]}]).encode()

with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.GNU_FORMAT) as archive:
    for name, data in (("manifest.json", manifest), (config_name, config_bytes)):
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(data), epoch, 0o644
        archive.addfile(info, io.BytesIO(data))
    info = archive.gettarinfo(rootfs, arcname="layer/layer.tar")
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime, info.mode = epoch, 0o644
    with open(rootfs, "rb") as handle:
        archive.addfile(info, handle)
EOF

docker run --rm --network none "${tag}" python3 -c "import ensurepip, venv, sys; print('python', sys.version.split()[0])" >/dev/null
echo "${me}: ${tag} is ready ($(docker image inspect --format '{{.Id}}' "${tag}")); use it with:"
echo "  export REPROBOX_BASE_IMAGE=${tag}"
