#!/usr/bin/env bash
# The topology checks that need an NVIDIA GPU (docs/topology.md §6): builds the CUDA executor for
# this GPU, runs its test with SUMCAST_REQUIRE_GPU=1 (a missing GPU fails instead of skipping), and
# shows what sumcast-topo detects next to `nvidia-smi topo -m`.
#   tests/topology/gpu_checks.sh [BUILD_DIR]      (default: build-gpu/ at the top of the repo)
# Environment: SUMCAST_JOBS (default nproc).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build-gpu}
jobs=${SUMCAST_JOBS:-$(nproc)}

command -v nvidia-smi >/dev/null || { echo "gpu_checks: nvidia-smi not found: not a GPU machine" >&2; exit 1; }
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSUMCAST_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="${SUMCAST_CUDA_ARCHITECTURES:-native}" >/dev/null
cmake --build "$build" -j"$jobs" --target topology_cuda_test topology_executor_test sumcast-topo

echo "== CUDA executor"
SUMCAST_REQUIRE_GPU=1 "$build/tests/topology/topology_cuda_test"
echo "== CPU executor (same plans, host memory)"
"$build/tests/topology/topology_executor_test" --gtest_brief=1
echo "== nvidia-smi topo -m"
nvidia-smi topo -m || true
echo "== sumcast-topo (live, hwloc)"
"$build/tools/sumcast-topo/sumcast-topo" --bytes 256M
