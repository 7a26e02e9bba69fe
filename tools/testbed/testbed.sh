# Sumcast's namespace test bed (DESIGN.md §6), as a bash library. Source it, then:
#   tb_up N [RATE]    appliance namespace + N worker namespaces on one L2 "switch" (a bridge in
#                     its own namespace); RATE (e.g. 200mbit) shapes every worker link with tbf in
#                     both directions and the appliance's data link to N x RATE.
#   tb_loss PCT       random loss (percent, e.g. 1 or 0.1) on every switch port, with nftables.
#   tb_down           removes every namespace of this test bed (also run on EXIT by tb_up's trap).
#   tb_exec NS CMD... runs CMD in namespace NS (app, sw, w0, w1, ...).
# Addresses: appliance data port TB_APP_IP (answered by sumcastd itself: its veth has no IP),
# appliance management (control plane) TB_MGMT_IP on a second veth, worker i TB_WORKER_IP[i].
# Interfaces: in the appliance namespace TB_APP_DATA_IF (for net_af_packet/net_af_xdp) and
# TB_APP_MGMT_IF; in worker namespaces TB_WORKER_IF.
# Names carry a per-run prefix (TB_PREFIX, default "sc<pid>") so runs never collide.

TB_PREFIX=${TB_PREFIX:-sc$$}
TB_SUBNET=${TB_SUBNET:-10.77.0}
TB_APP_IP=$TB_SUBNET.1
TB_MGMT_IP=$TB_SUBNET.2
TB_APP_DATA_IF=d0
TB_APP_MGMT_IF=m0
TB_WORKER_IF=e0
TB_N=0
TB_WORKER_IP=()

tb_ns() { printf '%s-%s' "$TB_PREFIX" "$1"; }
tb_exec() { local ns; ns=$(tb_ns "$1"); shift; ip netns exec "$ns" "$@"; }

_tb_shape() {  # ns dev rate
  [ -n "$3" ] || return 0
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst 64kb latency 50ms
}

tb_up() {
  local n=$1 rate=${2:-} i
  TB_N=$n
  trap tb_down EXIT
  trap 'exit 130' INT TERM
  ip netns add "$(tb_ns sw)" && ip netns add "$(tb_ns app)" || return 1
  tb_exec sw ip link add br0 type bridge
  tb_exec sw ip link set br0 up
  tb_exec sw ip link set lo up
  tb_exec app ip link set lo up
  # Appliance data link (no IP: sumcastd owns it) and management link (kernel TCP for control).
  ip link add "$TB_APP_DATA_IF" netns "$(tb_ns app)" type veth peer name pd netns "$(tb_ns sw)"
  ip link add "$TB_APP_MGMT_IF" netns "$(tb_ns app)" type veth peer name pm netns "$(tb_ns sw)"
  tb_exec app ip link set "$TB_APP_DATA_IF" up
  tb_exec app ip addr add "$TB_MGMT_IP/24" dev "$TB_APP_MGMT_IF"
  tb_exec app ip link set "$TB_APP_MGMT_IF" up
  # The kernel must not answer for, or send from, the data veth.
  tb_exec app sysctl -qw net.ipv6.conf."$TB_APP_DATA_IF".disable_ipv6=1
  for p in pd pm; do tb_exec sw ip link set "$p" master br0; tb_exec sw ip link set "$p" up; done
  for ((i = 0; i < n; i++)); do
    ip netns add "$(tb_ns w$i)" || return 1
    ip link add "$TB_WORKER_IF" netns "$(tb_ns w$i)" type veth peer name "p$i" netns "$(tb_ns sw)"
    TB_WORKER_IP[$i]=$TB_SUBNET.$((10 + i))
    tb_exec "w$i" ip link set lo up
    tb_exec "w$i" ip addr add "${TB_WORKER_IP[$i]}/24" dev "$TB_WORKER_IF"
    tb_exec "w$i" ip link set "$TB_WORKER_IF" up
    tb_exec sw ip link set "p$i" master br0
    tb_exec sw ip link set "p$i" up
    if [ -n "$rate" ]; then
      _tb_shape "$(tb_ns w$i)" "$TB_WORKER_IF" "$rate"
      _tb_shape "$(tb_ns sw)" "p$i" "$rate"
    fi
  done
  if [ -n "$rate" ]; then
    local num=${rate%%[a-zA-Z]*} unit=${rate##*[0-9.]}
    _tb_shape "$(tb_ns sw)" pd "$((num * n))$unit"
  fi
}

tb_loss() {  # percent of frames dropped on every switch port, both directions
  local pct=$1 per10k
  per10k=$(awk -v p="$pct" 'BEGIN { printf "%d", p * 100 }')
  tb_exec sw nft -f - <<NFT
table bridge sumcast_loss {
  chain impair { type filter hook forward priority 0; policy accept; numgen random mod 10000 < $per10k drop; }
}
NFT
}

tb_down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$TB_PREFIX-" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}
