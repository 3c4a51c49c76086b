#!/usr/bin/env bash
# Which kernels of NVIDIA's libraries ptxvk translates (issue 22): downloads
# the pip wheels of cuBLAS, cuRAND, cuFFT, cuSPARSE, cuSOLVER, cuDNN and
# NCCL for CUDA 13 (about 1.8 GB), takes their shared libraries out, and runs
# `ptx-survey` (libcuda/src/bin/ptx-survey.rs) over them: every PTX image of
# every fat binary, every `.entry` lowered on its own. Prints the Markdown
# tables that docs/library-ptx.md keeps. Not part of CI (the downloads).
#
#   scripts/library-ptx-survey.sh [WORK_DIR]     (default: /tmp/ptxvk-library-survey)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-/tmp/ptxvk-library-survey}"
mkdir -p "$work/wheels" "$work/lib"
# The versions surveyed in docs/library-ptx.md; cuFFT and cuSPARSE for CUDA
# 13 are published under their unsuffixed names with manylinux2014 tags.
wheels=(
    "nvidia-cublas==13.8.2.12"
    "nvidia-curand==10.4.5.25"
    "nvidia-cufft==12.5.0.14"
    "nvidia-cusparse==12.9.4.2"
    "nvidia-cusolver==12.4.1.2"
    "nvidia-cudnn-cu13==9.28.1.4"
    "nvidia-nccl-cu13==2.32.6"
)
python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --python-version 3.11 -d "$work/wheels" "${wheels[@]}"
for w in "$work"/wheels/*.whl; do
    python3 - "$w" "$work/lib" <<'EOF'
import sys, zipfile, os
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        base = os.path.basename(n)
        if "/lib/" in n and ".so" in base and not base.endswith(".py"):
            with z.open(n) as src, open(os.path.join(out, base), "wb") as dst:
                dst.write(src.read())
EOF
done
(cd "$root" && cargo build --release -q -p ptxvk-cuda --bin ptx-survey)
libs=()
for name in libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libcufft.so.12 libcusparse.so.12 \
    libcusolver.so.12 libcusolverMg.so.12 libcudnn_adv.so.9 libcudnn_cnn.so.9 \
    libcudnn_engines_precompiled.so.9 libcudnn_engines_runtime_compiled.so.9 \
    libcudnn_engines_tensor_ir.so.9 libcudnn_graph.so.9 libcudnn_ops.so.9 libnccl.so.2; do
    libs+=("$work/lib/$name")
done
"$root/target/release/ptx-survey" "${libs[@]}"
