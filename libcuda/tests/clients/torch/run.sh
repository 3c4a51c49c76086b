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
# shellcheck source=../client-venv.sh
. "$here/../client-venv.sh"
client_venv "${PTXVK_TORCH_VENV:-/tmp/ptxvk-torch-venv}" "$here/requirements.txt"
cd /tmp
echo "== PyTorch =="
"$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::UserWarning "$@" "$here"
