#!/usr/bin/env bash
# CuPy 14.2 on the built libcuda.so.1 (test_cupy.py), in its own virtual
# environment (about 2 GB with the CUDA toolkit wheels CuPy's [ctk] extra
# pulls; needs PyPI the first time). Not part of scripts/test.sh.
#
#   libcuda/tests/clients/cupy/run.sh [pytest args...]
#
# Environment: PTXVK_CUPY_VENV (default /tmp/ptxvk-cupy-venv).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../client-venv.sh
. "$here/../client-venv.sh"
client_venv "${PTXVK_CUPY_VENV:-/tmp/ptxvk-cupy-venv}" "$here/requirements.txt"
# CuPy's own kernels as PTX (NVRTC), which the shim translates.
export CUPY_COMPILE_WITH_PTX=1
cd /tmp
echo "== CuPy =="
"$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning "$@" "$here"
