#!/usr/bin/env bash
# Prove reprobox's CUDA paths on a machine with an NVIDIA GPU, in one command, and print one Markdown
# table of what held. Made for a bare GPU machine: a CUDA build of torch (with numpy, PyYAML,
# nvidia-ml-py, pytest, pytest-xdist) and no Docker engine. Everything runs on the local runtime.
#
#   1. reprobox installed from this tree into a scratch folder (no dependencies resolved: torch and
#      the machine's packages stay as they are); wheels in ./.whl (docker, cryptography, cffi, ...)
#      go there too, for machines that lack them and cannot reach an index
#   2. the GPU tests: python -m pytest -m gpu (tests/gpu, the on-device checksum tests)
#   3. reprobox verify on three GPU jobs: a cuDNN conv net, a bf16 transformer using SDPA (both must
#      be bit-identical), and index_add_ with deterministic algorithms off (must be caught, and the
#      drill-down must name the op and its atomics)
#   4. reprobox cost on the conv net
#
# Usage: scripts/gpu-proof.sh [OUTPUT_DIR]   (default: $OUT when set, else ./gpu-proof)
#        REPROBOX_PROOF_CHECKS="tests atomics" scripts/gpu-proof.sh   (only these of: tests conv
#        attention atomics cost; e.g. to rerun what failed), REPROBOX_PROOF_COST_ONLY=tf32=true,...
#        (the settings `reprobox cost --only` measures)
# Without a GPU it says so and exits 0, having run nothing. Exit 1 when a check did not hold.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo="$PWD"
out="${1:-${OUT:-$repo/gpu-proof}}"
python="$(command -v "${PYTHON:-python3}")" || { echo "gpu-proof: no ${PYTHON:-python3} here" >&2; exit 2; }

if ! reason="$("${python}" - 2>&1 <<'EOF'
import sys
try:
    import torch
except ImportError:
    sys.exit(f"{sys.executable} has no torch")
if not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} sees no CUDA device")
EOF
)"; then
    echo "gpu-proof: no NVIDIA GPU here (${reason}); nothing was run"
    exit 0
fi

mkdir -p "${out}"
work="$(mktemp -d "${TMPDIR:-/tmp}/reprobox-gpu-proof.XXXXXX")"
site="${work}/site"
step() { printf '\n==> %s\n' "$*" >&2; }

step "reprobox from ${repo} into ${site} (no dependencies resolved)"
pip_install() { "${python}" -m pip install --quiet --no-deps --no-index --no-compile --target "${site}" "$@"; }
if compgen -G "${repo}/.whl/*.whl" >/dev/null && ! pip_install "${repo}"/.whl/*.whl >"${work}/wheels.log" 2>&1; then
    echo "gpu-proof: installing the wheels in ${repo}/.whl failed:" >&2
    tail -5 "${work}/wheels.log" >&2
    exit 1
fi
if ! pip_install --no-build-isolation "${repo}" >"${work}/install.log" 2>&1; then
    # No build backend (hatchling) there, and no index to fetch it from: run it from the tree instead
    # (the same code; the local runtime needs no image files and no entry point).
    echo "gpu-proof: building reprobox failed ($(tail -1 "${work}/install.log")); running it from ${repo}" >&2
    mkdir -p "${site}"
    ln -s "${repo}/reprobox" "${site}/reprobox"
fi
export PYTHONPATH="${site}${PYTHONPATH:+:${PYTHONPATH}}"
# Jobs say `python`: make it this interpreter (a script, not a link: a link to a virtual environment's
# interpreter starts outside that environment).
mkdir -p "${work}/bin"
printf '#!/bin/sh\nexec "%s" "$@"\n' "${python}" >"${work}/bin/python"
chmod +x "${work}/bin/python"
export PATH="${site}/bin:${work}/bin:${PATH}"
export PYTHONUNBUFFERED=1 REPROBOX_RUNS_DIR="${work}/runs"
reprobox=("${python}" -m reprobox)

step "the machine"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 || true
    "${python}" - <<'EOF'
import platform, torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
      f"Python {platform.python_version()}, {torch.cuda.get_device_name(0)}, "
      f"{torch.cuda.get_device_properties(0).multi_processor_count} SMs, kernel {platform.release()}")
EOF
} | tee "${out}/status.txt" >&2

checks=" ${REPROBOX_PROOF_CHECKS:-tests conv attention atomics cost} "
wanted() { [[ "${checks}" == *" $1 "* ]]; }
record_exit() { echo "exit $1 $2" >>"${out}/status.txt"; }  # the table reads each check's exit code
run_check() {  # NAME SECONDS, then reprobox's arguments: JSON to NAME.json, its text to verify.log
    local name="$1" seconds="$2" code
    shift 2
    timeout "${seconds}" "${reprobox[@]}" "$@" --json >"${out}/${name}.json" 2>"${work}/${name}.log"
    code=$?
    record_exit "${name}" "${code}"
    { printf '\n--- %s: reprobox %s (exit %s)\n' "${name}" "$*" "${code}"; cat "${work}/${name}.log"; } >>"${out}/verify.log"
}

step "GPU tests (pytest -m gpu) beside verify of the attention job"
# No two checks run one job at once (the tests run the conv, atomics, probe and histc jobs): runs of
# one job would share its stable paths wherever the local runtime cannot isolate them.
if wanted tests; then
    timeout 240 "${python}" -m pytest -m gpu tests/gpu tests/unit/test_device_checksum.py -p no:cacheprovider \
        -n 8 -p no:benchmark -W ignore::DeprecationWarning -W ignore::FutureWarning -rA >"${out}/pytest.log" 2>&1 &
    tests=$!
fi
wanted attention && run_check verify-attention 150 verify tests/jobs/gpu-attention --runtime local --no-attestation
if wanted tests; then
    wait "${tests}"
    record_exit pytest $?
fi

step "verify the conv net and the atomics job"
wanted conv && run_check verify-conv 100 verify tests/jobs/gpu-conv --runtime local --no-attestation &
wanted atomics && run_check verify-atomics 100 verify tests/jobs/gpu-atomics --runtime local --no-attestation &
wait

step "cost of determinism on the conv net"
# The settings a conv net's speed on a GPU turns on (not the attention kernels, not the CPU's).
settings="fill_uninitialized_memory=false,cudnn_benchmark=true,cublas_workspace_config=:16:8,tf32=true"
settings+=",algorithms=false,no determinism"
wanted cost && run_check cost 200 cost tests/jobs/gpu-conv --runtime local --max-steps 10 \
    --only "${REPROBOX_PROOF_COST_ONLY:-${settings}}"

step "summary"
"${python}" scripts/gpu_proof_table.py "${out}" | tee "${out}/summary.md"
status=${PIPESTATUS[0]}
rm -rf "${work}"
exit "${status}"
