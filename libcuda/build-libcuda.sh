#!/usr/bin/env bash
# Builds libcuda.so.1 (the CUDA driver API on ptxvk) and prints the folder
# to put on LD_LIBRARY_PATH:
#
#   export LD_LIBRARY_PATH=$(libcuda/build-libcuda.sh):$LD_LIBRARY_PATH
#
# Options: --debug builds the dev profile instead of release. Build output
# goes to stderr; stdout is only the folder.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
profile=release
if [[ "${1:-}" == "--debug" ]]; then
    profile=debug
fi

cd "$root"
if [[ "$profile" == release ]]; then
    cargo build --release -p ptxvk-cuda >&2
else
    cargo build -p ptxvk-cuda >&2
fi

target_dir="${CARGO_TARGET_DIR:-$root/target}"
out="$target_dir/$profile"
# The SONAME is libcuda.so.1 (see libcuda/build.rs); programs open that name.
ln -sf libcuda.so "$out/libcuda.so.1"
echo "$out"
