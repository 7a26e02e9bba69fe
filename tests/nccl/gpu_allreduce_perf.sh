#!/usr/bin/env bash
# NCCL's own tests (nccl-tests) through libnccl-net-sumcast.so, on a GPU machine: builds the
# plugin, all_reduce_perf and alltoall_perf, starts an appliance unless one is given, and runs
# three phases, each under a time limit (a hang fails), each checked in NCCL's own log:
#
#   1. all_reduce_perf with NCCL_NET_PLUGIN=sumcast NCCL_COLLNET_ENABLE=1: host memory only and
#      CollNet through the appliance:
#        "Using network sumcast"                NCCL took the plugin's ncclNet
#        "NET/sumcast: plugin sumcast: ..."      the plugin's init ran (its device list)
#        no "/GDRDMA" on NET/sumcast connections, no refused NCCL_PTR_CUDA regMr: NCCL staged
#                                                GPU data itself (the plugin offers host memory only)
#        "via COLLNET/sumcast", "Connected CollNet"   CollNet set up through the plugin
#        "CollNet closeColl ... <n> iallreduce"  n > 0 chunks went through the appliance
#        "Out of bounds values : 0 OK"           (-c 1: every result checked on the GPU)
#   2. alltoall_perf with GPUS_PER_NODE GPUs per node and PXN forced (NCCL_P2P_PXN_LEVEL=2), the
#      case in which NCCL would group receives: it must finish, with results checked, and no
#      "grouped receives are not offered" WARN (the plugin advertises maxRecvs 1). Skipped, and
#      said so, with GPUS_PER_NODE=1.
#   3. all_reduce_perf with a wrong token: the plugin's CollNet connect must fail at set-up
#      ("rejected the token"), NCCL must say "Cannot initialize CollNet" and the run must still
#      finish with every result correct, over the plugin's ncclNet.
#
# usage: tests/nccl/gpu_allreduce_perf.sh NCCL_TESTS_DIR [BUILD_DIR]
#   NCCL_TESTS_DIR   a checkout of https://github.com/NVIDIA/nccl-tests (not fetched here)
#   BUILD_DIR        the Sumcast build directory (default: build/ at the top)
# Environment:
#   NCCL_HOME        NCCL's prefix (include/nccl.h, lib/libnccl.so); default: CUDA_HOME
#   CUDA_HOME        default /usr/local/cuda
#   MPI_HOME         default: from `mpicc -showme:incdirs` (OpenMPI)
#   GPUS_PER_NODE    ranks per simulated node (default 1; 2 or more also runs phase 2)
#   NRANKS           MPI ranks (default 2 * GPUS_PER_NODE). On one host every group of
#                    GPUS_PER_NODE ranks gets its own NCCL_HOSTID, so NCCL sees
#                    NRANKS / GPUS_PER_NODE nodes (CollNet needs >= 2) and the ranks share GPUs.
#   MPI_HOSTS        "h1,h2,..." to run on real hosts instead (then no NCCL_HOSTID); every host
#                    needs the same paths.
#   SUMCAST_APPLIANCES, SUMCAST_TOKEN_FILE   a running appliance (sumcastd); default: the embedded
#                    test appliance (nccl_test_appliance) on 127.0.0.1 (single host only).
#   SIZES            size range (default "-b 8 -e 64M -f 4")
#   RUN_TIMEOUT      seconds per phase before it counts as a hang (default 600)
#   EXTRA_NCCL_ENV   e.g. "NCCL_ALGO=allreduce:collnetchain,collnetdirect,ring" (space-separated
#                    VAR=VALUE, passed to all ranks; docs/nccl.md says when it is needed)
# Exit 0 when every check passed; 77 when there is no GPU.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"

tests_dir=${1:?usage: gpu_allreduce_perf.sh NCCL_TESTS_DIR [BUILD_DIR]}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${2:-$root/build}
cuda=${CUDA_HOME:-/usr/local/cuda}
nccl_home=${NCCL_HOME:-$cuda}
gpn=${GPUS_PER_NODE:-1}
nranks=${NRANKS:-$((2 * gpn))}
sizes=${SIZES:-"-b 8 -e 64M -f 4"}
run_timeout=${RUN_TIMEOUT:-600}

if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then echo "skipped: no GPU"; exit 77; fi
[ -f "$nccl_home/include/nccl.h" ] || { echo "no nccl.h under NCCL_HOME=$nccl_home"; exit 1; }
ngpus=$(nvidia-smi -L | wc -l)
if [ -z "${MPI_HOSTS:-}" ] && [ "$gpn" -gt "$ngpus" ]; then
  echo "GPUS_PER_NODE=$gpn needs as many GPUs on this host ($ngpus): NCCL refuses two ranks of a node on one GPU"
  exit 1
fi
mpi_home=${MPI_HOME:-$(dirname "$(mpicc -showme:incdirs | awk '{print $1}')")}

echo "== building the plugin and the test appliance in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target nccl_net_sumcast nccl_test_appliance
plugin_dir=$build/worker_shim/nccl
[ -f "$plugin_dir/libnccl-net-sumcast.so" ] || { echo "plugin not built"; exit 1; }

echo "== building all_reduce_perf and alltoall_perf in $tests_dir"
make -C "$tests_dir" -j"$(nproc)" MPI=1 MPI_HOME="$mpi_home" CUDA_HOME="$cuda" NCCL_HOME="$nccl_home" \
  src.build >/dev/null
for b in all_reduce_perf alltoall_perf; do
  [ -x "$tests_dir/build/$b" ] || { echo "$b was not built"; exit 1; }
done

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
  chmod 600 "$work/token"
  "$build/tests/nccl/nccl_test_appliance" --bind 127.0.0.1 --token-file "$work/token" >"$work/appliance.log" 2>&1 &
  app_pid=$!
  for _ in $(seq 200); do grep -q '^ready ' "$work/appliance.log" && break; read -rt 0.05 <> <(:) || true; done
  SUMCAST_APPLIANCES=$(sed -n 's/^ready //p' "$work/appliance.log")
  [ -n "$SUMCAST_APPLIANCES" ] || { cat "$work/appliance.log"; echo "nccl_test_appliance printed no ready line within 10 s (its log above)"; exit 1; }
  SUMCAST_TOKEN_FILE=$work/token
fi

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/wrong-token"
chmod 600 "$work/wrong-token"

# Each rank: on one host, the NCCL_HOSTID of its simulated node (GPUS_PER_NODE ranks each).
cat >"$work/rank.sh" <<EOF
#!/usr/bin/env bash
r=\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}
[ -n "${MPI_HOSTS:-}" ] || export NCCL_HOSTID=sumcast-node-\$((r / $gpn))
export CUDA_VISIBLE_DEVICES=\${CUDA_VISIBLE_DEVICES:-\$((r % \$(nvidia-smi -L | wc -l)))}
exec "\$@"
EOF
chmod +x "$work/rank.sh"
hosts=()
[ -z "${MPI_HOSTS:-}" ] || hosts=(-H "$MPI_HOSTS")

fail=0
phase_logs=()
need() {  # pattern what: in the current phase's NCCL logs
  if grep -qE "$1" "${phase_logs[@]}"; then echo "ok: $2"; else echo "MISSING: $2 (/$1/ in the NCCL logs)"; fail=1; fi
}
never() {  # pattern what
  if grep -qE "$1" "${phase_logs[@]}"; then echo "FOUND: $2 (/$1/ in the NCCL logs)"; fail=1; else echo "ok: $2"; fi
}
results_ok() {  # output file
  if grep -q "Out of bounds values : 0 OK" "$1"; then
    echo "ok: every result checked on the GPU"
  else
    echo "MISSING: 'Out of bounds values : 0 OK' in $1"; fail=1
  fi
}
run_phase() {  # name token_file binary [VAR=VALUE...]: one mpirun under the time limit
  local name=$1 token_file=$2 binary=$3; shift 3
  mkdir -p "$work/$name"
  local env_args=(-x NCCL_NET_PLUGIN=sumcast -x NCCL_COLLNET_ENABLE=1 -x NCCL_DEBUG=INFO
    -x NCCL_DEBUG_SUBSYS=INIT,NET,ENV,COLL -x "NCCL_DEBUG_FILE=$work/$name/nccl.%h.%p.log"
    -x "LD_LIBRARY_PATH=$plugin_dir:$nccl_home/lib:${LD_LIBRARY_PATH:-}"
    -x "SUMCAST_APPLIANCES=$SUMCAST_APPLIANCES" -x "SUMCAST_TOKEN_FILE=$token_file")
  for kv in ${EXTRA_NCCL_ENV:-} "$@"; do env_args+=(-x "$kv"); done
  echo "== $name: $binary, $nranks ranks ($gpn per node), appliance $SUMCAST_APPLIANCES"
  # shellcheck disable=SC2086 # $sizes is a list of options
  if ! timeout "$run_timeout" mpirun --allow-run-as-root --oversubscribe -np "$nranks" "${hosts[@]}" \
    "${env_args[@]}" "$work/rank.sh" "$tests_dir/build/$binary" $sizes -g 1 -c 1 -n 20 -w 5 \
    >"$work/$name/out.txt" 2>&1; then
    echo "FAILED: $name did not finish within ${run_timeout}s or exited non-zero (a hang counts)"; fail=1
  fi
  cat "$work/$name/out.txt"
  phase_logs=("$work/$name"/nccl.*.log)
  [ -e "${phase_logs[0]}" ] || { echo "MISSING: NCCL logs of $name"; fail=1; phase_logs=(/dev/null); }
}

# 1. Host memory only; CollNet through the appliance.
run_phase collnet "${SUMCAST_TOKEN_FILE:-}" all_reduce_perf
need "Using network sumcast" "NCCL uses the plugin's ncclNet"
need "NET/sumcast: plugin sumcast:" "the plugin initialised"
never "NET/sumcast[^ ]*/GDRDMA" "no GPUDirect on the plugin's connections (host memory only)"
never "NCCL_PTR_CUDA memory, but the plugin offers host memory only" "NCCL never registered device memory"
need "via COLLNET/sumcast" "CollNet connections through the plugin"
need "Connected CollNet" "NCCL connected its CollNet algorithms"
need "CollNet closeColl rank [0-9]+/[0-9]+ job [^:]*: [1-9][0-9]* iallreduce" "all-reduce chunks went through the appliance"
results_ok "$work/collnet/out.txt"
grep -h "CollNet closeColl" "${phase_logs[@]}" | sed 's/^.*NET\/sumcast: /plugin: /' | sort -u || true

# 2. Several GPUs per node through PXN: where NCCL would group receives.
if [ "$gpn" -ge 2 ]; then
  run_phase pxn "${SUMCAST_TOKEN_FILE:-}" alltoall_perf NCCL_P2P_PXN_LEVEL=2
  never "grouped receives are not offered" "NCCL never grouped receives (maxRecvs 1)"
  need "Using network sumcast" "NCCL uses the plugin's ncclNet"
  results_ok "$work/pxn/out.txt"
else
  echo "skipped: phase 2 (PXN, grouped receives) needs GPUS_PER_NODE >= 2"
fi

# 3. CollNet set-up failure: a wrong token; training goes on over the ncclNet.
run_phase badtoken "$work/wrong-token" all_reduce_perf
need "CollNet connect: .*rejected the token" "the plugin's CollNet connect failed at set-up, naming the cause"
need "Cannot initialize CollNet" "NCCL set CollNet aside for the communicator"
never "CollNet closeColl rank [0-9]+/[0-9]+ job [^:]*: [1-9][0-9]* iallreduce" "nothing went through the appliance"
results_ok "$work/badtoken/out.txt"
exit $fail
