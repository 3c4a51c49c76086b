#!/usr/bin/env bash
# Taichi 1.7.4 (its CUDA backend, which JIT-compiles kernels to PTX with its
# own LLVM) on the built libcuda.so.1 (test_taichi.py), in its own virtual
# environment (about 500 MB; needs PyPI the first time). Not part of
# scripts/test.sh: each test starts Taichi afresh, and lavapipe compiles
# Taichi's runtime module for about a minute each time.
#
#   libcuda/tests/clients/taichi/run.sh [pytest args...]
#
# Environment: PTXVK_TAICHI_VENV (default /tmp/ptxvk-taichi-venv).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
venv="${PTXVK_TAICHI_VENV:-/tmp/ptxvk-taichi-venv}"
if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
fi
stamp="$venv/.ptxvk-requirements"
if ! cmp -s "$here/requirements.txt" "$stamp"; then
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
    cp "$here/requirements.txt" "$stamp"
fi
libdir="$("$root/libcuda/build-libcuda.sh")"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ -z "${VK_ICD_FILENAMES:-}" && -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json && -z "${PTXVK_DEVICE:-}" ]]; then
    export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
fi
cd /tmp
echo "== Taichi =="
"$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning "$@" "$here"
