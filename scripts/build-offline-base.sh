#!/usr/bin/env bash
# Build the offline base image from a checkout: a thin wrapper of `reprobox offline-base` (its recipe,
# reprobox/image/offline_base.sh, ships in the package). Arguments pass through: --tag IMAGE, --force,
# --refresh, --help.
set -euo pipefail
checkout="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${checkout}/.venv/bin/python"
[[ -x ${python} ]] || python="$(command -v python3)"
exec env PYTHONPATH="${checkout}${PYTHONPATH:+:${PYTHONPATH}}" "${python}" -m reprobox offline-base "$@"
