#!/usr/bin/env bash
# nm -D of libnccl-net-sumcast.so must show exactly the six tables NCCL looks up, nothing else
# defined (undefined imports from libc/libstdc++ are fine).
#   nccl_plugin_symbols_test.sh PLUGIN
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
plugin=$1
want=$(printf '%s\n' ncclCollNetPlugin_v10 ncclCollNetPlugin_v8 ncclCollNetPlugin_v9 ncclNetPlugin_v10 \
  ncclNetPlugin_v8 ncclNetPlugin_v9 | sort)
got=$(nm -D --defined-only "$plugin" | awk '{print $NF}' | sort)
if [ "$got" != "$want" ]; then
  echo "FAIL: exported symbols differ from the six plugin tables:"
  diff <(echo "$want") <(echo "$got") || true
  exit 1
fi
for s in $want; do
  nm -D --defined-only "$plugin" | grep -q " [DdBb] $s\$" || { echo "FAIL: $s is not a data symbol"; exit 1; }
done
echo "PASS: $plugin exports exactly: $(echo $want)"
