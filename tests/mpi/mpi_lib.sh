# Helpers shared by the MPI interposer test scripts (sourced).
#   mpi_launch FLAVOR NP [HOSTS] -- ENV=VALUE... -- PROGRAM ARGS...
# runs PROGRAM under Open MPI's mpirun (FLAVOR ompi) or MPICH's mpiexec (FLAVOR mpich) with the
# given environment exported to every rank. HOSTS: "" for this host, or "w0:3,w1:3" (namespace test
# bed: TB_PREFIX and the netns agent) — then MPI_LAUNCH_NS names the namespace mpirun runs in.
# Open MPI across namespaces uses the tcp BTL only: its shared-memory BTL (vader) crashes there
# (a segfault in mca_btl_vader_poll_handle_frag, without the interposer).

mpi_launch() {
  local flavor=$1 np=$2 hosts=$3
  shift 3
  [ "$1" = "--" ] && shift
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local args=()
  if [ "$flavor" = ompi ]; then
    args=(mpirun --allow-run-as-root --oversubscribe -np "$np" --mca mpi_yield_when_idle 1)
    local e
    for e in "${envs[@]}"; do args+=(-x "$e"); done
    if [ -n "$hosts" ]; then
      local hf
      hf=$(mktemp /tmp/sumcast-mpi-hosts.XXXXXX)
      tr ',' '\n' <<<"$hosts" | sed 's/:\(.*\)/ slots=\1/' >"$hf"
      args+=(--hostfile "$hf" --mca plm_rsh_agent "$MPI_AGENT" -x TB_PREFIX
             --mca btl tcp,self --mca btl_tcp_if_include "$MPI_CIDR" --mca oob_tcp_if_include "$MPI_CIDR")
    else
      args+=(--mca btl tcp,self,vader --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
    fi
  else
    args=(mpiexec.mpich -n "$np" -genv UCX_TLS tcp,self,sm)
    local e
    for e in "${envs[@]}"; do args+=(-genv "${e%%=*}" "${e#*=}"); done
    if [ -n "$hosts" ]; then
      args+=(-launcher ssh -launcher-exec "$MPI_AGENT" -hosts "$hosts" -iface "$MPI_IFACE"
             -genv UCX_NET_DEVICES "$MPI_IFACE" -genv TB_PREFIX "$TB_PREFIX")
    else
      args+=(-genv UCX_NET_DEVICES lo)
    fi
  fi
  if [ -n "$hosts" ]; then
    ip netns exec "$MPI_LAUNCH_NS" env TB_PREFIX="$TB_PREFIX" "${args[@]}" "$@"
  else
    "${args[@]}" "$@"
  fi
}

# check_lines FILE: the program's per-check lines (results and their hashes), for comparison. The
# launcher forwards the ranks' stdout and stderr in chunks into one file, so a library message
# ("sumcast-mpi: ...") can land after a check line's text and before its newline (seen once with
# MPICH's hydra: "...: ok 5e4ffed465c4d591sumcast-mpi: communicator of 2 ranks ..."): cut it off.
check_lines() { sed -n '/^check /{s/sumcast-mpi: .*//;p}' "$1"; }

# stat_calls FILE KIND: "taken" calls of KIND (MPI_Allreduce, ...) in the statistics of FILE.
stat_calls() { sed -n "s/^sumcast-mpi:   $2 *taken \([0-9]*\) calls.*/\1/p" "$1" | head -1; }

# eligible FILE KIND: what the program says a size threshold admits (allreduce, iallreduce, ...).
eligible() { sed -n "s/^# eligible at threshold [0-9]*:.* $2 \([0-9]*\).*/\1/p" "$1" | head -1; }
