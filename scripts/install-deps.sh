#!/usr/bin/env bash
# Installs what ptxvk needs at run and test time on Debian 12:
# Mesa's lavapipe (a Vulkan driver on the CPU), the Vulkan loader and tools,
# SPIRV-Tools (spirv-val) and the Khronos validation layer; g++ is the host
# compiler nvcc needs for the CUDA runtime client tests (test_cudart.py).
# Uses sudo when not root. Skips packages that are already installed.
set -euo pipefail
pkgs=(mesa-vulkan-drivers libvulkan1 vulkan-tools spirv-tools vulkan-validationlayers python3 g++)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    SUDO=""
    if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "install-deps: cargo not found; install Rust with https://rustup.rs (stable)" >&2
    exit 1
fi
