#!/usr/bin/env bash
# Regenerates the PTX corpus in tests/corpus/ptx from the sources in
# tests/corpus/src (see tests/corpus/README.md). No GPU is needed, only the
# compilers from pip:
#
#   python3 -m venv /tmp/venv-nvcc
#   /tmp/venv-nvcc/bin/pip install nvidia-cuda-nvcc nvidia-cuda-cccl
#   python3 -m venv /tmp/venv-numba
#   /tmp/venv-numba/bin/pip install numba-cuda nvidia-nvvm nvidia-cuda-nvrtc
#
#   scripts/gen-corpus.sh            # NVCC=... NUMBA_PYTHON=... JOBS=... to override
#
# Writes, for every source S.cu and architecture A:
#   ptx/S.A.O3.ptx   nvcc -ptx -arch=A -O3 S.cu
#   ptx/S.A.G.ptx    nvcc -ptx -arch=A -G  S.cu   (the sources in DEBUG_SOURCES)
# and ptx/numba_K_T.sm_XY.ptx for every kernel K and signature T in
# src/numba_kernels.py.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/tests/corpus/src"
out="$root/tests/corpus/ptx"

NVCC="${NVCC:-$(find /tmp/venv-nvcc -name nvcc -type f 2>/dev/null | head -n1)}"
NUMBA_PYTHON="${NUMBA_PYTHON:-/tmp/venv-numba/bin/python}"
JOBS="${JOBS:-2}"
[ -x "$NVCC" ] || { echo "nvcc not found (set NVCC)" >&2; exit 1; }
[ -x "$NUMBA_PYTHON" ] || { echo "numba python not found (set NUMBA_PYTHON)" >&2; exit 1; }

ARCHS="sm_75 sm_80 sm_86 sm_89 sm_90 sm_90a"
# -G output is several times larger: only these sources.
DEBUG_SOURCES="recursion printf_assert predication local_mem device_funcs convert shared_mem control_flow sreg tma
cluster_sm90 reductions"

rm -rf "$out"
mkdir -p "$out"

jobs_file="$(mktemp)"
trap 'rm -f "$jobs_file"' EXIT
for cu in "$src"/*.cu; do
    name="$(basename "$cu" .cu)"
    for arch in $ARCHS; do
        echo "$cu $arch -O3 $out/$name.$arch.O3.ptx" >>"$jobs_file"
        for d in $DEBUG_SOURCES; do
            if [ "$d" = "$name" ]; then
                echo "$cu $arch -G $out/$name.$arch.G.ptx" >>"$jobs_file"
            fi
        done
    done
done

# The .cu files name no absolute path, and the corpus should not depend on
# where it was generated: compile from inside src/ with a relative name (the
# -G output still records the compiler's working directory in .file).
export NVCC
xargs -P "$JOBS" -L 1 sh -c 'cd "$(dirname "$0")" && "$NVCC" -ptx -arch="$1" "$2" "$(basename "$0")" -o "$3"' <"$jobs_file"

"$NUMBA_PYTHON" "$src/numba_kernels.py" "$out"

echo "$(ls "$out" | wc -l) files, $(du -sh "$out" | cut -f1) in $out"
