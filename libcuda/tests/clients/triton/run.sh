#!/usr/bin/env bash
# Stock Triton 3.9 on the built libcuda.so.1 (test_triton.py): Triton's
# tutorial kernels through `kernel[grid](...)`, with Triton's own launcher
# and ptxvk's `ptxas` stand-in (target/release/ptxas) as Triton's
# assembler. Runs the tests at compute capability 8.0 and 9.0 (PTXVK_CC).
# Own virtual environment (about 1.1 GB; needs PyPI the first time).
#
#   libcuda/tests/clients/triton/run.sh [pytest args...]
#
# Environment: PTXVK_TRITON_VENV (default /tmp/ptxvk-triton-venv),
# PTXVK_TRITON_CCS (default "80 90").
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
venv="${PTXVK_TRITON_VENV:-/tmp/ptxvk-triton-venv}"
if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
fi
stamp="$venv/.ptxvk-requirements"
if ! cmp -s "$here/requirements.txt" "$stamp"; then
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
    cp "$here/requirements.txt" "$stamp"
fi
libdir="$("$root/libcuda/build-libcuda.sh")"
(cd "$root" && cargo build --release -q -p ptx2spv --bin ptxas >&2)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ -z "${VK_ICD_FILENAMES:-}" && -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json && -z "${PTXVK_DEVICE:-}" ]]; then
    export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
fi
# Triton assembles with ptxas; the stand-in writes PTX that the shim loads.
export TRITON_PTXAS_PATH="${CARGO_TARGET_DIR:-$root/target}/release/ptxas"
export TRITON_PTXAS_BLACKWELL_PATH="$TRITON_PTXAS_PATH"
export TRITON_DEFAULT_FP_FUSION=1
# A fresh cache per run: cached kernels would skip the stand-in.
TRITON_CACHE_DIR="$(mktemp -d)"
export TRITON_CACHE_DIR
trap 'rm -rf "$TRITON_CACHE_DIR"' EXIT
cd "$here"
for cc in ${PTXVK_TRITON_CCS:-80 90}; do
    echo "== Triton (compute capability $cc) =="
    PTXVK_CC=$cc "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" test_triton.py
done
