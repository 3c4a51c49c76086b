#!/usr/bin/env bash
# The differential tester (tests/difftest/README.md) with nvcc from the
# real-client virtual environment (libcuda/tests/clients/run.sh creates it)
# and the release libcuda.so.1:
#
#   tests/difftest/run.sh --short          # the test command's fixed-seed runs
#   tests/difftest/run.sh --short-numba    #   (both are in scripts/test.sh)
#   tests/difftest/run.sh --seed 7 --count 10000 --minimize   # a long run
#
# Environment: PTXVK_CLIENT_VENV (default /tmp/ptxvk-client-venv).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${PTXVK_CLIENT_VENV:-/tmp/ptxvk-client-venv}"
if [[ -z "${NVCC:-}" ]]; then
    NVCC=$(ls "$venv"/lib/python3*/site-packages/nvidia/cu*/bin/nvcc 2>/dev/null | tail -n 1 || true)
    if [[ -z "$NVCC" ]]; then
        echo "difftest: no nvcc in $venv (run libcuda/tests/clients/run.sh first, or set NVCC)" >&2
        exit 2
    fi
fi
export NVCC
# Mode numba compiles with numba-cuda from the same environment.
export NUMBA_PYTHON="${NUMBA_PYTHON:-$venv/bin/python}"
libdir="$("$root/libcuda/build-libcuda.sh")"
if [[ -z "${VK_ICD_FILENAMES:-}" && -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json && -z "${PTXVK_DEVICE:-}" ]]; then
    export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
fi
exec python3 "$here/difftest.py" --lib "$libdir/libcuda.so.1" "$@"
