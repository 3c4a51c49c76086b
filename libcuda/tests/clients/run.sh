#!/usr/bin/env bash
# Runs the real-client smoke tests (numba-cuda, cuda-python) against the
# built libcuda.so.1. Creates (or reuses) a virtual environment with the
# clients; needs PyPI. Not part of `cargo test`.
#
#   libcuda/tests/clients/run.sh [--suite]
#
# --suite also runs numba-cuda's own test suite (numba.cuda.tests.cudapy;
# hours on lavapipe) and prints its pass count.
# Environment: PTXVK_CLIENT_VENV (default /tmp/ptxvk-client-venv).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
venv="${PTXVK_CLIENT_VENV:-/tmp/ptxvk-client-venv}"

if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
fi
# nvidia-nvvm gives numba libnvvm; nvidia-nvjitlink must stay out (numba
# would link cubins, which this driver cannot run).
"$venv/bin/pip" install -q numba-cuda cuda-python nvidia-nvvm nvidia-cuda-nvrtc \
    pytest filecheck ml_dtypes cffi >&2
"$venv/bin/pip" uninstall -q -y nvidia-nvjitlink pynvjitlink >/dev/null 2>&1 || true

libdir="$("$root/libcuda/build-libcuda.sh")"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ -z "${VK_ICD_FILENAMES:-}" && -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json && -z "${PTXVK_DEVICE:-}" ]]; then
    export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
fi

echo "== numba-cuda smoke test =="
"$venv/bin/python" "$here/numba_smoke.py"
echo "== cuda-python smoke test =="
"$venv/bin/python" "$here/cuda_python_smoke.py"

if [[ "${1:-}" == "--suite" ]]; then
    echo "== numba-cuda test suite (numba.cuda.tests.cudapy) =="
    cd /tmp
    PYTHONPATH="$here" "$venv/bin/python" -m pytest -q --import-mode=importlib -p no:cacheprovider \
        -p numba_suite_plugin --pyargs numba.cuda.tests.cudapy || true
fi
