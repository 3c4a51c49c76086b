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
# shellcheck source=../client-venv.sh
. "$here/../client-venv.sh"
client_venv "${PTXVK_TAICHI_VENV:-/tmp/ptxvk-taichi-venv}" "$here/requirements.txt"
cd /tmp
echo "== Taichi =="
"$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning "$@" "$here"
