#!/usr/bin/env bash
# The main job: installs what is needed, then translates an example PTX
# kernel and runs it on the default Vulkan device (lavapipe when there is
# no GPU), printing its result.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo run --release -p ptxvk-examples -- "$@"
