#!/usr/bin/env bash
# Fuzz one reader family for a while: scripts/fuzz.sh READER SECONDS [SEED]
# READER: npy npz safetensors torch pickle text tensorboard wandb mlflow hdf5 sqlite compressed ubjson
# zstd pt2 torchscript dcp-metadata dcp-shard ocdbt-manifest ocdbt-data (or "all", SECONDS each).
# zstd: the input handed to the Zstandard decompressor itself, max_output 64 MiB.
# dcp-*: a mutated .metadata (or .distcp shard) beside the other files of a DCP save, every file hashed;
# ocdbt-*: a mutated manifest.ocdbt (or data file d/<id>) beside the rest of its database, likewise.
# Each input is hashed as `reprobox hash` does, in a forked child held to 10 s and 512 MiB; an input that
# ends any other way than read or refused (exit 2) is kept under tests/fuzz/regressions/READER/, where the
# unit tests (tests/unit/test_fuzz_readers.py) replay it from then on. FUZZ_ENGINE=atheris runs it
# coverage-guided under atheris instead (libFuzzer's -timeout=10 and -rss_limit_mb=768, the process's
# whole resident memory), with the same mutators.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
    echo "usage: scripts/fuzz.sh READER SECONDS [SEED]" >&2
    exit 2
fi
python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python3
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
if [ "$1" = all ]; then
    status=0
    for reader in npy npz safetensors torch pickle text tensorboard wandb mlflow hdf5 sqlite compressed ubjson \
        zstd pt2 torchscript dcp-metadata dcp-shard ocdbt-manifest ocdbt-data; do
        "$python" -m tests.fuzz "$reader" "$2" "${3:-0}" || status=1
    done
    exit $status
fi
if [ "${FUZZ_ENGINE:-fork}" = atheris ]; then
    # coverage-guided (pip install atheris): libFuzzer's own limits, crashes kept as regression inputs
    corpus="$(mktemp -d)"
    "$python" -m tests.fuzz.seeds "$corpus" "$1"
    mkdir -p "tests/fuzz/regressions/$1"
    exec "$python" -m tests.fuzz.atheris_target "$1" -max_total_time="$2" -timeout=10 -rss_limit_mb=768 -max_len=65536 \
        -seed="${3:-0}" -artifact_prefix="tests/fuzz/regressions/$1/" "$corpus/$1"
fi
exec "$python" -m tests.fuzz "$1" "$2" "${3:-0}"
