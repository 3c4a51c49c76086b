#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test of the
# workspace on lavapipe (or on the GPU that PTXVK_DEVICE selects), and checks
# formatting and lints.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Without a GPU, lavapipe is the device; pin it so other ICDs are not tried.
if [[ -z "${VK_ICD_FILENAMES:-}" && -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json && -z "${PTXVK_DEVICE:-}" ]]; then
    export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace
# Float arithmetic of the built library against the host's C library
# (tests/float_stress: f64 and f32 fma, mul, add, div, sqrt, cvt in every
# rounding mode, 20,000 operands each, weighted to huge, tiny and subnormal
# values; about 20 s).
python3 tests/float_stress/float_stress.py --lib "$(libcuda/build-libcuda.sh)/libcuda.so.1" --count 20000
# The real clients (numba-cuda, cuda-python, cuda.h programs) through the
# built libcuda.so.1, in a virtual environment with pinned versions (needs
# PyPI; PTXVK_SKIP_CLIENTS=1 skips them offline).
if [[ "${PTXVK_SKIP_CLIENTS:-0}" != 1 ]]; then
    libcuda/tests/clients/run.sh
    # The differential tester's short fixed-seed runs (150 generated kernels
    # through nvcc -O3 and -G, 50 through numba, 60 with spin loops and locks
    # and 40 with lock-step exchanges through -O3 and -G, each on ptxvk against a host reference; nvcc and numba come from the clients' environment;
    # PTXVK_SKIP_DIFFTEST=1 skips them).
    if [[ "${PTXVK_SKIP_DIFFTEST:-0}" != 1 ]]; then
        tests/difftest/run.sh --short
        tests/difftest/run.sh --short-numba
        # Spin loops and locks in generated kernels (--features spin), with
        # warp-synchronous exchanges after a __syncwarp (warpsync).
        tests/difftest/run.sh --short-spin
        # Warp-synchronous exchanges through shared memory that rely on lock
        # step, one after another (--features warpsync).
        tests/difftest/run.sh --short-warpsync
        # Multiply-add contraction (docs/contraction.md): 150 generated
        # programs, each checked against ptxas's SASS (ptxas and nvdisasm
        # from the clients' environment) and run bit for bit.
        venv="${PTXVK_CLIENT_VENV:-/tmp/ptxvk-client-venv}"
        nvbin=$(ls -d "$venv"/lib/python3*/site-packages/nvidia/cu*/bin | tail -n 1)
        PATH="$nvbin:$PATH" python3 tests/difftest/contract.py --require-ptxas \
            --lib "$(libcuda/build-libcuda.sh)/libcuda.so.1" --count 150 --seed 1
    fi
fi
# Stock Triton 3.9 (its own environment, about 1.1 GB): the tutorial
# kernels through kernel[grid](...) with ptxvk's ptxas stand-in, at compute
# capability 8.0 (mma.sync, ldmatrix) and 9.0 (wgmma), about 5 minutes;
# PTXVK_SKIP_TRITON=1 skips them.
if [[ "${PTXVK_SKIP_CLIENTS:-0}" != 1 && "${PTXVK_SKIP_TRITON:-0}" != 1 ]]; then
    libcuda/tests/clients/triton/run.sh
fi
# NVIDIA Warp 1.19 (its own environment, about 400 MB): a selection of
# Warp's own tests (CUB scans and radix sort, NanoVDB volumes, conditional
# graph nodes, APIC graph replays), about 2 minutes; PTXVK_SKIP_WARP=1 skips it.
if [[ "${PTXVK_SKIP_CLIENTS:-0}" != 1 && "${PTXVK_SKIP_WARP:-0}" != 1 ]]; then
    libcuda/tests/clients/warp/run.sh
fi
