#!/usr/bin/env bash
# NCCL's own all_reduce_perf (nccl-tests) through libnccl-net-sumcast.so, on a GPU machine:
# builds the plugin and all_reduce_perf, starts an appliance unless one is given, runs
# all_reduce_perf with NCCL_NET_PLUGIN=sumcast NCCL_COLLNET_ENABLE=1 and checks, in NCCL's own
# log, the lines that prove the plugin carried the traffic and CollNet the all-reduce:
#   "Using network sumcast"                  NCCL took the plugin's ncclNet
#   "NET/sumcast: plugin sumcast: ..."        the plugin's init ran (its device list)
#   "via COLLNET/sumcast"                     CollNet connections through the plugin
#   "Connected CollNet"                       NCCL set up its CollNet algorithms
#   "CollNet closeColl ... <n> iallreduce"    n > 0 chunks went through the appliance
#   all_reduce_perf "Out of bounds values : 0 OK"   (-c 1: every result checked on the GPU)
#
# usage: tests/nccl/gpu_allreduce_perf.sh NCCL_TESTS_DIR [BUILD_DIR]
#   NCCL_TESTS_DIR   a checkout of https://github.com/NVIDIA/nccl-tests (not fetched here)
#   BUILD_DIR        the Sumcast build directory (default: build/ at the top)
# Environment:
#   NCCL_HOME        NCCL's prefix (include/nccl.h, lib/libnccl.so); default: CUDA_HOME
#   CUDA_HOME        default /usr/local/cuda
#   MPI_HOME         default: from `mpicc -showme:incdirs` (OpenMPI)
#   NRANKS           MPI ranks (default 2). On one host every rank gets its own NCCL_HOSTID, so
#                    NCCL sees NRANKS nodes (CollNet needs >= 2) and the ranks share the GPUs.
#   MPI_HOSTS        "h1,h2,..." to run one rank per real host instead (then no NCCL_HOSTID);
#                    every host needs the same paths.
#   SUMCAST_APPLIANCES, SUMCAST_TOKEN_FILE   a running appliance (sumcastd); default: the embedded
#                    test appliance (nccl_test_appliance) on 127.0.0.1 (single host only).
#   SIZES            all_reduce_perf size range (default "-b 8 -e 64M -f 4")
#   EXTRA_NCCL_ENV   e.g. "NCCL_ALGO=CollNetChain" (space-separated VAR=VALUE, passed to all ranks)
# Exit 0 when every check passed; 77 when there is no GPU.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"

tests_dir=${1:?usage: gpu_allreduce_perf.sh NCCL_TESTS_DIR [BUILD_DIR]}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${2:-$root/build}
cuda=${CUDA_HOME:-/usr/local/cuda}
nccl_home=${NCCL_HOME:-$cuda}
nranks=${NRANKS:-2}
sizes=${SIZES:-"-b 8 -e 64M -f 4"}

if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then echo "skipped: no GPU"; exit 77; fi
[ -f "$nccl_home/include/nccl.h" ] || { echo "no nccl.h under NCCL_HOME=$nccl_home"; exit 1; }
mpi_home=${MPI_HOME:-$(dirname "$(mpicc -showme:incdirs | awk '{print $1}')")}

echo "== building the plugin and the test appliance in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target nccl_net_sumcast nccl_test_appliance
plugin_dir=$build/worker_shim/nccl
[ -f "$plugin_dir/libnccl-net-sumcast.so" ] || { echo "plugin not built"; exit 1; }

echo "== building all_reduce_perf in $tests_dir"
make -C "$tests_dir" -j"$(nproc)" MPI=1 MPI_HOME="$mpi_home" CUDA_HOME="$cuda" NCCL_HOME="$nccl_home" \
  src.build >/dev/null
perf=$tests_dir/build/all_reduce_perf
[ -x "$perf" ] || { echo "all_reduce_perf was not built"; exit 1; }

work=$(mktemp -d /tmp/sumcast-gpu.XXXXXX)
app_pid=""
cleanup() {
  [ -z "$app_pid" ] || { kill -TERM "$app_pid" 2>/dev/null; wait "$app_pid" 2>/dev/null || true; }
  echo "logs kept in $work"
}
trap cleanup EXIT

if [ -z "${SUMCAST_APPLIANCES:-}" ]; then
  [ -z "${MPI_HOSTS:-}" ] || { echo "MPI_HOSTS needs SUMCAST_APPLIANCES (a sumcastd all hosts reach)"; exit 1; }
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
  "$build/tests/nccl/nccl_test_appliance" --bind 127.0.0.1 --token-file "$work/token" >"$work/appliance.log" 2>&1 &
  app_pid=$!
  for _ in $(seq 200); do grep -q '^ready ' "$work/appliance.log" && break; read -rt 0.05 <> <(:) || true; done
  SUMCAST_APPLIANCES=$(sed -n 's/^ready //p' "$work/appliance.log")
  [ -n "$SUMCAST_APPLIANCES" ] || { cat "$work/appliance.log"; echo "nccl_test_appliance printed no ready line within 10 s (its log above)"; exit 1; }
  SUMCAST_TOKEN_FILE=$work/token
fi

# Each rank: its own NCCL log file; on one host, its own NCCL_HOSTID (a "node" of its own).
cat >"$work/rank.sh" <<EOF
#!/usr/bin/env bash
r=\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}
[ -n "${MPI_HOSTS:-}" ] || export NCCL_HOSTID=sumcast-node-\$r
export CUDA_VISIBLE_DEVICES=\${CUDA_VISIBLE_DEVICES:-\$((r % \$(nvidia-smi -L | wc -l)))}
exec "\$@"
EOF
chmod +x "$work/rank.sh"

env_args=(-x NCCL_NET_PLUGIN=sumcast -x NCCL_COLLNET_ENABLE=1 -x NCCL_DEBUG=INFO
  -x NCCL_DEBUG_SUBSYS=INIT,NET,ENV,COLL -x "NCCL_DEBUG_FILE=$work/nccl.%h.%p.log"
  -x "LD_LIBRARY_PATH=$plugin_dir:$nccl_home/lib:${LD_LIBRARY_PATH:-}"
  -x "SUMCAST_APPLIANCES=$SUMCAST_APPLIANCES" -x "SUMCAST_TOKEN_FILE=${SUMCAST_TOKEN_FILE:-}")
for kv in ${EXTRA_NCCL_ENV:-}; do env_args+=(-x "$kv"); done
hosts=()
[ -z "${MPI_HOSTS:-}" ] || hosts=(-H "$MPI_HOSTS")

echo "== all_reduce_perf, $nranks ranks, NCCL_NET_PLUGIN=sumcast NCCL_COLLNET_ENABLE=1, appliance $SUMCAST_APPLIANCES"
# shellcheck disable=SC2086 # $sizes is a list of options
mpirun --allow-run-as-root --oversubscribe -np "$nranks" "${hosts[@]}" "${env_args[@]}" \
  "$work/rank.sh" "$perf" $sizes -g 1 -c 1 -n 20 -w 5 | tee "$work/all_reduce_perf.txt"

logs=("$work"/nccl.*.log)
fail=0
need() {  # pattern what
  if grep -qE "$1" "${logs[@]}"; then echo "ok: $2"; else echo "MISSING: $2 (/$1/ in the NCCL logs)"; fail=1; fi
}
need "Using network sumcast" "NCCL uses the plugin's ncclNet"
need "NET/sumcast: plugin sumcast:" "the plugin initialised"
need "via COLLNET/sumcast" "CollNet connections through the plugin"
need "Connected CollNet" "NCCL connected its CollNet algorithms"
need "CollNet closeColl rank [0-9]+/[0-9]+ job [^:]*: [1-9][0-9]* iallreduce" "all-reduce chunks went through the appliance"
if grep -q "Out of bounds values : 0 OK" "$work/all_reduce_perf.txt"; then
  echo "ok: all_reduce_perf checked every result"
else
  echo "MISSING: all_reduce_perf's 'Out of bounds values : 0 OK'"; fail=1
fi
grep -h "CollNet closeColl" "${logs[@]}" | sed 's/^.*NET\/sumcast: /plugin: /' | sort -u
exit $fail
