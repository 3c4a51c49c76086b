#!/usr/bin/env bash
# Runs the real-client tests against the built libcuda.so.1: numba-cuda
# `@cuda.jit` kernels (test_numba.py), cuda-python and NVRTC + cuda.core
# (test_cuda_python.py), C programs compiled against NVIDIA's cuda.h
# (test_c_programs.py, c/*.c), and CUDA runtime programs built by nvcc
# (test_cudart.py, cu/*.cu). Creates (or reuses) a virtual environment with
# the pinned clients of requirements.txt; needs PyPI the first time.
#
#   libcuda/tests/clients/run.sh [--suite] [pytest args...]
#
# --suite instead runs numba-cuda's own test suite (numba.cuda.tests.cudapy;
# an hour or more on lavapipe) and prints its pass count.
# Environment: PTXVK_CLIENT_VENV (default /tmp/ptxvk-client-venv).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
venv="${PTXVK_CLIENT_VENV:-/tmp/ptxvk-client-venv}"

if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
fi
stamp="$venv/.ptxvk-requirements"
if ! cmp -s "$here/requirements.txt" "$stamp"; then
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
    cp "$here/requirements.txt" "$stamp"
fi
# nvidia-nvjitlink must stay out: with it numba links cubins.
"$venv/bin/pip" uninstall -q -y nvidia-nvjitlink pynvjitlink >/dev/null 2>&1 || true

libdir="$("$root/libcuda/build-libcuda.sh")"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ -z "${VK_ICD_FILENAMES:-}" && -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json && -z "${PTXVK_DEVICE:-}" ]]; then
    export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
fi

cd /tmp
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
if [[ "${1:-}" == "--suite" ]]; then
    shift
    echo "== numba-cuda test suite (numba.cuda.tests.cudapy) =="
    PYTHONPATH="$here" "$venv/bin/python" -m pytest -q --import-mode=importlib -p no:cacheprovider \
        -p numba_suite_plugin --pyargs numba.cuda.tests.cudapy "$@" || true
    exit 0
fi
echo "== real clients: numba-cuda, cuda-python, cuda.h programs, nvcc programs =="
# Triton, PyTorch and CuPy have their own environments and runners
# (triton/run.sh, torch/run.sh, cupy/run.sh); their directories would also
# shadow the packages of those names here.
"$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning --ignore="$here/triton" \
    --ignore="$here/torch" --ignore="$here/cupy" "$@" "$here"
