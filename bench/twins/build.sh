#!/usr/bin/env bash
# Rebuilds the checked-in outputs of this folder (the benchmark and its
# tests need neither tool): the CUDA twins' PTX with nvcc 13.5 and the
# hand-written shaders' SPIR-V with glslang 12 (Debian's glslang-tools).
#
#   bench/twins/build.sh [path/to/nvcc]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
nvcc="${1:-nvcc}"
"$nvcc" -ptx -arch=sm_80 -O3 twins.cu -o twins.ptx
for comp in *.comp; do
    glslangValidator -V --target-env vulkan1.2 -o "${comp%.comp}.spv" "$comp" >/dev/null
done
