#!/usr/bin/env bash
# PyTorch 2.15 on the built libcuda.so.1 (test_torch.py), in its own virtual
# environment (about 5.4 GB with the CUDA 13 wheels torch pulls; needs PyPI
# the first time). Not part of scripts/test.sh.
#
#   libcuda/tests/clients/torch/run.sh [pytest args...]
#
# Environment: PTXVK_TORCH_VENV (default /tmp/ptxvk-torch-venv).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
venv="${PTXVK_TORCH_VENV:-/tmp/ptxvk-torch-venv}"
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
echo "== PyTorch =="
"$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::UserWarning "$@" "$here"
