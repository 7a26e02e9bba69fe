# Sumcast's namespace test bed, as a bash library: the appliance, the workers and their switch as
# network namespaces on one machine, so end-to-end tests need no second host and no NIC. Source it, then:
#   tb_up N [RATE]    appliance namespace + N worker namespaces on one L2 "switch" (a bridge in
#                     its own namespace); RATE (e.g. 200mbit) shapes every worker link with tbf in
#                     both directions and the appliance's data link to N x RATE (its tbf bucket N
#                     times as deep, so that it holds as many milliseconds as the workers' do;
#                     TB_APP_BURST, e.g. 64kb, sets it; TB_BURST the workers' links' and
#                     tb_add_node's, default 64kb). The switch forwards without the IP layer's
#                     netfilter hooks (TB_BRIDGE_NF=1: with them, where the kernel has
#                     br_netfilter). TB_MTU (default 1500; e.g. 9000 for jumbo frames) is the MTU of
#                     every link, both ends (tb_add_node's too); tb_agg_conf follows it (below).
#                     TB_RPS=1: every veth steers what it receives to a CPU by flow (RPS over all
#                     CPUs), so that no frame overtakes an earlier one of its flow (below).
#                     TB_REPAIR_DSCP=D: every tbf serves DSCP D first (_tb_shape, below).
#   tb_add_node NAME IP [RATE]  one more host on the switch (scale-out aggregation nodes)
#   tb_gro            the workers' links coalesce what they receive (GRO), as a NIC's do (below)
#   tb_loss PCT       random loss (percent, e.g. 1 or 0.1) on every switch port, with nftables
#                     (on the routed bed: of the RoCEv2 frames the router forwards, counted).
#   tb_nft_packets NS FAMILY TABLE NAME   packets of nftables named counter NAME in namespace NS.
#   tb_marks_count DSCP REPAIR   the switch starts counting the contributions (UDP to 4791) it
#                     forwards: all, those with DSCP DSCP and ECT(0), those with DSCP REPAIR (another
#                     value) and ECT(0).
#   tb_marks_check WHAT DSCP REPAIR   reads and removes those counters; fails unless every
#                     contribution was one or the other and most had DSCP; prints the counts.
#   tb_up_routed N    the routed bed instead: N workers in two subnets (even ranks TB_NET_A, odd
#                     ranks TB_NET_B), the appliance in a third (TB_NET_APP, its management veth in
#                     TB_NET_MGMT), joined by a router namespace "rt" with forwarding on; a fourth
#                     worker subnet (TB_NET_C) for a host the appliance may have no route to.
#   tb_add_routed_node NAME IP   one more host in one of the routed bed's worker subnets.
#   tb_down           removes every namespace of this test bed and the hugepage files of its DPDK
#                     prefix (also run on EXIT by tb_up's trap).
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
TB_MTU=${TB_MTU:-1500}

# _tb_mtu NS DEV: TB_MTU on a link end (veths take up to 65535; the bridge follows its ports).
_tb_mtu() {
  [ "$TB_MTU" = 1500 ] || ip netns exec "$1" ip link set "$2" mtu "$TB_MTU"
}

tb_ns() { printf '%s-%s' "$TB_PREFIX" "$1"; }
tb_exec() { local ns; ns=$(tb_ns "$1"); shift; ip netns exec "$ns" "$@"; }

# _tb_shape NS DEV RATE [BURST]: tbf on DEV's egress. BURST (default 64kb, 2.6 ms at 200 Mbit/s)
# should hold the same time at every rate: a bucket that drains faster than the qdisc's watchdog
# is served on a loaded machine caps the link below RATE.
# TB_REPAIR_DSCP=D: the tbf serves frames of DSCP D first, as a switch's strict-priority queue
# does: its child is an htb of two classes that never reach their rate (so htb orders, tbf
# shapes), the one of DSCP D (a u32 filter on the DS field) served before the other, each a bfifo
# with the byte limit tbf's own queue has (RATE x 50 ms + BURST). Workers' resends sent with
# --repair-dscp D then skip the first transmissions queued before them (communicator.h, Send
# queue). (This kernel's tc has no prio qdisc; htb and u32 are there.)
_tb_shape() {
  [ -n "$3" ] || return 0
  local ns=$1 dev=$2 rate=$3 burst=${4:-64kb} d=${TB_REPAIR_DSCP:-}
  if [ -z "$d" ]; then
    ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms
    return
  fi
  case "$d" in [0-9] | [1-5][0-9] | 6[0-3]) ;; *) echo "testbed: TB_REPAIR_DSCP must be 0..63, not $d" >&2; return 1 ;; esac
  local limit c
  limit=$(_tb_fifo_bytes "$rate" "$burst") || return 1
  ip netns exec "$ns" tc qdisc replace dev "$dev" root handle 1: tbf rate "$rate" burst "$burst" latency 50ms
  ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: htb default 2
  for c in 1 2; do
    ip netns exec "$ns" tc class add dev "$dev" parent 10: classid "10:$c" htb rate 100gbit burst 4mb cburst 4mb quantum 65536 prio "$((c - 1))"
    ip netns exec "$ns" tc qdisc add dev "$dev" parent "10:$c" bfifo limit "$limit"
  done
  ip netns exec "$ns" tc filter add dev "$dev" parent 10: protocol ip prio 1 u32 \
    match ip dsfield "$((d << 2))" 0xfc flowid 10:1
}

# _tb_fifo_bytes RATE BURST: the byte limit tc gives "tbf ... latency 50ms" (RATE x 50 ms +
# BURST), for tc's units (RATE: bit, kbit, mbit, gbit; BURST: b, kb, mb, or bytes).
_tb_fifo_bytes() {
  local r=$1 b=$2 rn rm bn bm
  case "$r" in
    *gbit) rn=${r%gbit} rm=1000000000 ;; *mbit) rn=${r%mbit} rm=1000000 ;;
    *kbit) rn=${r%kbit} rm=1000 ;; *bit) rn=${r%bit} rm=1 ;;
    *) echo "testbed: rate $r: want bit, kbit, mbit or gbit" >&2; return 1 ;;
  esac
  case "$b" in
    *mb) bn=${b%mb} bm=1048576 ;; *kb) bn=${b%kb} bm=1024 ;; *b) bn=${b%b} bm=1 ;; *) bn=$b bm=1 ;;
  esac
  [[ $rn =~ ^[0-9]+$ && $bn =~ ^[0-9]+$ ]] ||
    { echo "testbed: rate $r or burst $b is not a whole number of its unit" >&2; return 1; }
  echo $((rn * rm / 8 / 20 + bn * bm))
}

# _tb_wait_reach NS ADDR: links come up asynchronously; waits (10 pings of 1 s at most) until
# namespace NS reaches ADDR.
_tb_wait_reach() {
  local try=0
  until tb_exec "$1" ping -c1 -W1 -q "$2" >/dev/null 2>&1; do
    try=$((try + 1))
    [ $try -lt 10 ] || { echo "testbed: $1 cannot reach $2" >&2; return 1; }
  done
}

# _tb_no_ipv6 NAME: IPv6 off on every interface of namespace NAME, those made later included.
_tb_no_ipv6() {
  tb_exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}

# _tb_cpu_mask: every online CPU as the kernel's hex bitmap (32-bit words, comma-separated),
# for rps_cpus; built digit by digit, as bash's 64-bit shifts would wrap from 64 CPUs on.
_tb_cpu_mask() {
  local cpus digits="" words="" i
  cpus=$(nproc --all) || return 1
  for ((i = 0; i < cpus / 4; i++)); do digits+=f; done
  [ $((cpus % 4)) = 0 ] || digits=$(printf '%x' $(((1 << (cpus % 4)) - 1)))$digits
  while [ ${#digits} -gt 8 ]; do
    words=,${digits: -8}$words
    digits=${digits:0:${#digits}-8}
  done
  echo "$digits$words"
}

tb_up() {
  local n=$1 rate=${2:-} i
  TB_N=$n
  trap tb_down EXIT
  trap 'exit 130' INT TERM
  ip netns add "$(tb_ns sw)" && ip netns add "$(tb_ns app)" || return 1
  # IPv4 only: no IPv6 link-local chatter (router/neighbour solicitations, MLD reports) that the
  # bridge would flood into the appliance's data port, where every such frame is a counted drop.
  _tb_no_ipv6 sw
  _tb_no_ipv6 app
  tb_exec sw ip link add br0 type bridge
  tb_exec sw ip link set br0 up
  # A switch forwards frames without showing them to the IP layer's netfilter hooks, as
  # br_netfilter (built into some kernels, this machine's included) does in every namespace: on
  # the shaped n = 8 bed its hooks ran for every frame the bridge forwarded, in the softirq the
  # appliance's transmissions pay for (docs/performance.md). The bed's own nftables tables are of
  # the bridge and netdev families, which need none of it. TB_BRIDGE_NF=1 keeps the kernel's default.
  # Without br_netfilter there is nothing to turn off; with it, failing to is an error.
  if [ "${TB_BRIDGE_NF:-0}" != 1 ] && tb_exec sw test -e /proc/sys/net/bridge/bridge-nf-call-iptables; then
    tb_exec sw sysctl -qw net.bridge.bridge-nf-call-{iptables,ip6tables,arptables}=0 || return 1
  fi
  tb_exec sw ip link set lo up
  tb_exec app ip link set lo up
  # Appliance data link (no IP: sumcastd owns it) and management link (kernel TCP for control).
  ip link add "$TB_APP_DATA_IF" netns "$(tb_ns app)" type veth peer name pd netns "$(tb_ns sw)"
  ip link add "$TB_APP_MGMT_IF" netns "$(tb_ns app)" type veth peer name pm netns "$(tb_ns sw)"
  _tb_mtu "$(tb_ns app)" "$TB_APP_DATA_IF"
  _tb_mtu "$(tb_ns app)" "$TB_APP_MGMT_IF"
  _tb_mtu "$(tb_ns sw)" pd
  _tb_mtu "$(tb_ns sw)" pm
  tb_exec app ip link set "$TB_APP_DATA_IF" up
  tb_exec app ip addr add "$TB_MGMT_IP/24" dev "$TB_APP_MGMT_IF"
  tb_exec app ip link set "$TB_APP_MGMT_IF" up
  # The kernel must not answer for, or send from, the data veth.
  tb_exec app sysctl -qw net.ipv6.conf."$TB_APP_DATA_IF".disable_ipv6=1
  # Nor forward what arrives there: new namespaces inherit the host's ip_forward (1 on hosts with
  # Docker or podman bridge networks), and a forwarding appliance namespace would route every
  # contribution addressed to the data IP out of the management veth, back onto the bridge and into
  # the data veth again (a loop bounded only by the TTL: ~60 duplicates per frame).
  tb_exec app sysctl -qw net.ipv4.conf.all.forwarding=0
  for p in pd pm; do tb_exec sw ip link set "$p" master br0; tb_exec sw ip link set "$p" up; done
  for ((i = 0; i < n; i++)); do
    ip netns add "$(tb_ns w$i)" || return 1
    _tb_no_ipv6 "w$i"
    ip link add "$TB_WORKER_IF" netns "$(tb_ns w$i)" type veth peer name "p$i" netns "$(tb_ns sw)"
    _tb_mtu "$(tb_ns w$i)" "$TB_WORKER_IF"
    _tb_mtu "$(tb_ns sw)" "p$i"
    TB_WORKER_IP[$i]=$TB_SUBNET.$((10 + i))
    tb_exec "w$i" ip link set lo up
    tb_exec "w$i" ip addr add "${TB_WORKER_IP[$i]}/24" dev "$TB_WORKER_IF"
    tb_exec "w$i" ip link set "$TB_WORKER_IF" up
    tb_exec sw ip link set "p$i" master br0
    tb_exec sw ip link set "p$i" up
    if [ -n "$rate" ]; then
      _tb_shape "$(tb_ns w$i)" "$TB_WORKER_IF" "$rate" "${TB_BURST:-}"
      _tb_shape "$(tb_ns sw)" "p$i" "$rate" "${TB_BURST:-}"
    fi
  done
  if [ -n "$rate" ]; then
    local num=${rate%%[a-zA-Z]*} unit=${rate##*[0-9.]}
    # n x RATE with an n times deeper bucket (TB_APP_BURST overrides it): with 64kb (0.33 ms at
    # 1.6 Gbit/s) it delivered only about 0.90 R per worker at n = 8 on 2 CPUs (docs/performance.md).
    _tb_shape "$(tb_ns sw)" pd "$((num * n))$unit" "${TB_APP_BURST:-$((64 * n))kb}"
  fi
  # A veth hands each frame to the backlog of the CPU that sends it; when a sender's frames are
  # sent from two CPUs in turn (the process moved, or tbf's watchdog dequeued on the other), the
  # later ones can be delivered first. A switch keeps a flow's order, and the protocol's loss
  # notices rely on it (docs/protocol.md §7): on the shaped n = 8 bed about 1 frame in 400 arrived
  # behind a later one of its rank. RPS picks the CPU by the flow's hash, so a flow's frames queue
  # on one CPU in order, at the cost of handing frames to other CPUs (docs/performance.md, "The
  # bed reorders a flow's frames"). Off by default: that cost.
  if [ "${TB_RPS:-0}" = 1 ]; then
    local mask ns
    mask=$(_tb_cpu_mask) || return 1
    for ns in sw app $(for ((i = 0; i < n; i++)); do echo "w$i"; done); do
      # shellcheck disable=SC2016 # expanded by the namespace's shell
      tb_exec "$ns" sh -ec 'for dev in $(ip -j link show type veth | jq -r ".[].ifname"); do
                              for q in /sys/class/net/$dev/queues/rx-*; do echo "$1" >"$q/rps_cpus"; done
                            done' sh "$mask" || return 1
    done
  fi
  for ((i = 0; i < n; i++)); do _tb_wait_reach "w$i" "$TB_MGMT_IP" || return 1; done
}

# tb_add_node NAME IP [RATE]: one more host on the switch (e.g. an aggregation node for scale-out,
# docs/scale-out.md): namespace NAME with interface TB_WORKER_IF at IP, shaped to RATE in both
# directions like a worker's link when given. Removed by tb_down with the rest.
tb_add_node() {
  local name=$1 addr=$2 rate=${3:-}
  ip netns add "$(tb_ns "$name")" || return 1
  ip link add "$TB_WORKER_IF" netns "$(tb_ns "$name")" type veth peer name "p$name" netns "$(tb_ns sw)"
  _tb_mtu "$(tb_ns "$name")" "$TB_WORKER_IF"
  _tb_mtu "$(tb_ns sw)" "p$name"
  tb_exec "$name" ip link set lo up
  tb_exec "$name" ip addr add "$addr/24" dev "$TB_WORKER_IF"
  tb_exec "$name" ip link set "$TB_WORKER_IF" up
  tb_exec sw ip link set "p$name" master br0
  tb_exec sw ip link set "p$name" up
  if [ -n "$rate" ]; then
    _tb_shape "$(tb_ns "$name")" "$TB_WORKER_IF" "$rate" "${TB_BURST:-}"
    _tb_shape "$(tb_ns sw)" "p$name" "$rate" "${TB_BURST:-}"
  fi
  _tb_wait_reach "$name" "${TB_WORKER_IP[0]:-$TB_MGMT_IP}"
}

tb_nft_packets() {  # NS FAMILY TABLE NAME -> packets of that named counter
  tb_exec "$1" nft -j list counter "$2" "$3" "$4" | jq -r '[.nftables[] | .counter? | select(.) | .packets][0]'
}

tb_marks_count() {  # DSCP REPAIR_DSCP: counters on the switch (tb_marks_check reads them)
  [ "$1" != "$2" ] || { echo "testbed: tb_marks_count: DSCP and REPAIR must differ, both $1" >&2; return 1; }
  tb_exec sw nft -f - <<NFT
table bridge sumcast_marks {
  counter up_all { }
  counter up_marked { }
  counter up_repair { }
  chain count {
    type filter hook forward priority -10; policy accept;
    ether type ip udp dport 4791 counter name up_all
    ether type ip udp dport 4791 ip dscp $1 ip ecn ect0 counter name up_marked
    ether type ip udp dport 4791 ip dscp $2 ip ecn ect0 counter name up_repair
  }
}
NFT
}

tb_marks_check() {  # WHAT DSCP REPAIR_DSCP: every contribution since tb_marks_count was marked
  local what=$1 ua um ur
  ua=$(tb_nft_packets sw bridge sumcast_marks up_all)
  um=$(tb_nft_packets sw bridge sumcast_marks up_marked)
  ur=$(tb_nft_packets sw bridge sumcast_marks up_repair)
  tb_exec sw nft delete table bridge sumcast_marks
  if [ "$ua" -eq 0 ]; then
    echo "FAIL: $what: no contribution crossed the switch" >&2; return 1
  elif [ "$ua" -ne $((um + ur)) ]; then
    echo "FAIL: $what: $((ua - um - ur)) of $ua contributions without DSCP $2 or $3 and ECT(0)" >&2; return 1
  elif [ "$um" -le "$ur" ]; then
    echo "FAIL: $what: $um contributions with DSCP $2, $ur with the repair DSCP $3" >&2; return 1
  fi
  echo "$what: $ua contributions all ECT(0), $um with DSCP $2 and $ur resends with DSCP $3"
}

tb_loss() {  # percent of frames dropped on every switch port, both directions
  local pct=$1 per10k
  per10k=$(awk -v p="$pct" 'BEGIN { printf "%d", p * 100 }')
  if [ "$TB_ROUTED" = 1 ]; then
    # Named counters: lost_up (contributions) and lost_down (results) the router dropped.
    tb_exec rt nft -f - <<NFT
table inet sumcast_loss {
  counter lost_up { }
  counter lost_down { }
  chain impair {
    type filter hook forward priority 0; policy accept;
    udp dport 4791 numgen random mod 10000 < $per10k counter name lost_up drop
    udp sport 4791 numgen random mod 10000 < $per10k counter name lost_down drop
  }
}
NFT
    return
  fi
  tb_exec sw nft -f - <<NFT
table bridge sumcast_loss {
  chain impair { type filter hook forward priority 0; policy accept; numgen random mod 10000 < $per10k drop; }
}
NFT
}

# --- The routed bed ---------------------------------------------------------------------------
# Results must cross a router here: the appliance resolves its gateway (TB_GW_IP) by ARP and
# addresses results to it. Worker i's address is TB_WORKER_IP[i], its default route its subnet's
# .254 on the router; the appliance's management veth routes through the router too.
TB_ROUTED=0
TB_NET_A=10.77.0
TB_NET_B=10.78.0
TB_NET_C=10.80.0
TB_NET_APP=10.79.0
TB_NET_MGMT=10.79.1
TB_GW_IP=$TB_NET_APP.254
TB_ROUTER_IF=ra  # the router's interface on the appliance subnet (its MAC is the gateway's)

_tb_router_bridge() {  # NAME NET: a bridge in rt holding NET.254/24
  tb_exec rt ip link add "$1" type bridge
  tb_exec rt ip addr add "$2.254/24" dev "$1"
  tb_exec rt ip link set "$1" up
}

# _tb_routed_host NS IF NET IP BRIDGE: namespace NS with IF at IP/24 on BRIDGE, default via NET.254.
_tb_routed_host() {
  local ns=$1 if=$2 net=$3 addr=$4 br=$5 peer="q${1}"
  ip netns add "$(tb_ns "$ns")" || return 1
  _tb_no_ipv6 "$ns"
  ip link add "$if" netns "$(tb_ns "$ns")" type veth peer name "$peer" netns "$(tb_ns rt)"
  tb_exec "$ns" ip link set lo up
  tb_exec "$ns" ip addr add "$addr/24" dev "$if"
  tb_exec "$ns" ip link set "$if" up
  tb_exec "$ns" ip route add default via "$net.254"
  tb_exec rt ip link set "$peer" master "$br"
  tb_exec rt ip link set "$peer" up
}

tb_up_routed() {
  local n=$1 i net br
  TB_N=$n
  TB_ROUTED=1
  TB_APP_IP=$TB_NET_APP.1
  TB_MGMT_IP=$TB_NET_MGMT.2
  trap tb_down EXIT
  trap 'exit 130' INT TERM
  ip netns add "$(tb_ns rt)" && ip netns add "$(tb_ns app)" || return 1
  _tb_no_ipv6 rt
  _tb_no_ipv6 app
  tb_exec rt ip link set lo up
  tb_exec app ip link set lo up
  tb_exec rt sysctl -qw net.ipv4.conf.all.forwarding=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
  _tb_router_bridge bra "$TB_NET_A"
  _tb_router_bridge brb "$TB_NET_B"
  _tb_router_bridge brc "$TB_NET_C"
  # The appliance's data link straight to the router (no IP on the appliance's side: sumcastd).
  ip link add "$TB_APP_DATA_IF" netns "$(tb_ns app)" type veth peer name "$TB_ROUTER_IF" netns "$(tb_ns rt)"
  tb_exec app ip link set "$TB_APP_DATA_IF" up
  tb_exec app sysctl -qw net.ipv6.conf."$TB_APP_DATA_IF".disable_ipv6=1 net.ipv4.conf.all.forwarding=0
  tb_exec rt ip addr add "$TB_GW_IP/24" dev "$TB_ROUTER_IF"
  tb_exec rt ip link set "$TB_ROUTER_IF" up
  # Its management link, routed too.
  ip link add "$TB_APP_MGMT_IF" netns "$(tb_ns app)" type veth peer name rm netns "$(tb_ns rt)"
  tb_exec app ip addr add "$TB_MGMT_IP/24" dev "$TB_APP_MGMT_IF"
  tb_exec app ip link set "$TB_APP_MGMT_IF" up
  tb_exec app ip route add default via "$TB_NET_MGMT.254"
  tb_exec rt ip addr add "$TB_NET_MGMT.254/24" dev rm
  tb_exec rt ip link set rm up
  for ((i = 0; i < n; i++)); do
    if ((i % 2 == 0)); then net=$TB_NET_A br=bra; else net=$TB_NET_B br=brb; fi
    TB_WORKER_IP[$i]=$net.$((10 + i))
    _tb_routed_host "w$i" "$TB_WORKER_IF" "$net" "${TB_WORKER_IP[$i]}" "$br" || return 1
  done
  for ((i = 0; i < n; i++)); do _tb_wait_reach "w$i" "$TB_MGMT_IP" || return 1; done
}

# tb_add_routed_node NAME IP: one more host at IP in TB_NET_A, TB_NET_B or TB_NET_C (by its
# first three parts), routed like the workers. Removed by tb_down.
tb_add_routed_node() {
  local name=$1 addr=$2 net=${2%.*} br
  case $net in
    "$TB_NET_A") br=bra ;;
    "$TB_NET_B") br=brb ;;
    "$TB_NET_C") br=brc ;;
    *) echo "testbed: $addr is in none of the routed bed's worker subnets" >&2; return 1 ;;
  esac
  _tb_routed_host "$name" "$TB_WORKER_IF" "$net" "$addr" "$br" || return 1
  _tb_wait_reach "$name" "$TB_MGMT_IP"
}

tb_down() {
  local ns m
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$TB_PREFIX-" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  [ -n "$TB_PREFIX" ] || return 0
  # The temporary directories tools/testbed/netns-agent gave the launchers' daemons here.
  rm -rf /tmp/netns-agent."$TB_PREFIX"-* 2>/dev/null || true
  # A DPDK process killed (as the appliance is at the end of a test) leaves its hugepage files;
  # the next DPDK start on the machine would clear them, until then they hold its pages.
  for m in $(awk '$3 == "hugetlbfs" { print $2 }' /proc/mounts 2>/dev/null); do
    rm -f "$m/${TB_PREFIX}map_"* 2>/dev/null || true
  done
}

# tb_gro: lets the kernel coalesce (GRO) the datagrams each worker receives, as a NIC's GRO does:
# GRO (NAPI) on the worker's veth, threaded NAPI there, and TSO off on its switch port (veth
# passes only frames from a sender without TSO, or a local socket's, to its peer's GRO). Linux
# coalesces only UDP datagrams with a checksum: the appliance needs dataplane.udp_checksum.
tb_gro() {
  local i
  for ((i = 0; i < TB_N; i++)); do
    tb_exec sw ethtool -K "p$i" tso off >/dev/null || return 1
    tb_exec "w$i" ethtool -K "$TB_WORKER_IF" gro off >/dev/null || return 1
    tb_exec "w$i" ethtool -K "$TB_WORKER_IF" gro on >/dev/null || return 1
    tb_exec "w$i" sh -c "echo 1 >/sys/class/net/$TB_WORKER_IF/threaded" || return 1
  done
}

# tb_agg_conf FILE TOKEN_FILE [PMD] [extra dataplane settings]; TB_PORT_EXTRA: extra port settings
# (on the routed bed: the subnet and the gateway or routes); TB_SLOTS: dataplane.slots_per_job (64).
# Writes an agg.conf for sumcastd on this test bed's appliance data veth. PMD: af_packet (default),
# af_xdp (with TB_XDP_PROG set: xdp_prog=$TB_XDP_PROG) or pcap (libpcap on the veth). The control
# plane listens on the management address. port.mtu is TB_MTU, dataplane.max_payload_bytes the
# largest RoCE payload (1024, 2048, 4096) it carries (port.mtu >= payload + 84, docs/agg.conf.md).
# Above 1500, net_af_packet gets ring frames that hold a whole frame (framesz=, four frames per
# block; sumcastd then leaves the MTU to the kernel interface: docs/agg.conf.md). net_af_xdp takes
# no MTU above 3542 (a frame fits one page), and this refuses it above that. TB_IDLE_POLL:
# dataplane.idle_poll where EXTRA does not set it (unset: agg.conf's default, busy); the test
# suite sets adaptive, the bed being a host the appliance shares with its workers.
tb_agg_conf() {
  local file=$1 token=$2 pmd=${3:-af_packet} extra=${4:-} payload=1024
  case $pmd in
    af_xdp) [ "$TB_MTU" -le 3542 ] || { echo "testbed: net_af_xdp takes no MTU above 3542 (TB_MTU $TB_MTU): use af_packet or pcap" >&2; return 1; } ;;
  esac
  if [ "$TB_MTU" -ge 4180 ]; then payload=4096; elif [ "$TB_MTU" -ge 2132 ]; then payload=2048; fi
  local vdev="net_${pmd}0,iface=$TB_APP_DATA_IF"
  # framesz: the frame at byte 66 of its ring frame and a VLAN tag (sumcastd checks it), rounded to
  # 1 KiB so that four make a block of whole pages.
  if [ "$pmd" = af_packet ] && [ "$TB_MTU" -gt 1500 ]; then
    local fs=$(((TB_MTU + 84 + 1023) / 1024 * 1024))
    vdev="$vdev,framesz=$fs,blocksz=$((4 * fs))"
  fi
  # TB_AF_PACKET_FRAMES: the rings' frames (framecnt=); unset, sumcastd sizes them (docs/agg.conf.md).
  if [ "$pmd" = af_packet ] && [ -n "${TB_AF_PACKET_FRAMES:-}" ]; then vdev="$vdev,framecnt=$TB_AF_PACKET_FRAMES"; fi
  [ "$pmd" = af_xdp ] && vdev="net_af_xdp0,iface=$TB_APP_DATA_IF,start_queue=0,queue_count=1"
  if [ -n "${TB_IDLE_POLL:-}" ] && [[ $extra != *idle_poll* ]]; then extra="idle_poll = \"$TB_IDLE_POLL\"; $extra"; fi
  # TB_XDP_PROG: the Sumcast XDP program (nic_offload/xdp, sumcast_xdp.o) for the af_xdp PMD to load.
  if [ "$pmd" = af_xdp ] && [ -n "${TB_XDP_PROG:-}" ]; then vdev="$vdev,xdp_prog=$TB_XDP_PROG"; fi
  cat >"$file" <<CONF
# Generated by tools/testbed/testbed.sh for test bed $TB_PREFIX.
eal = {
  lcores = "${TB_LCORES:-0,1}";
  file_prefix = "$TB_PREFIX";
  memory_mb = ${TB_MEMORY_MB:-256};
  huge_pages = "${TB_HUGE:-auto}";
  vdevs = [ "$vdev" ];
};
port = {
  device = "net_${pmd}0";
  ipv4 = "$TB_APP_IP";
  mtu = $TB_MTU;
  ${TB_PORT_EXTRA:-}
};
dataplane = {
  worker_cores = 1;
  slots_per_job = ${TB_SLOTS:-64};
  max_payload_bytes = $payload;
  $extra
};
control = {
  listen_address = "$TB_MGMT_IP";
  port = 4790;
  token_file = "$token";
  job_timeout_ms = ${TB_JOB_TIMEOUT_MS:-3000};
};
CONF
}

# tb_pause SECS: waits SECS, a poll interval (never synchronisation), without starting a process:
# read's timeout on a pipe no one writes to, opened once per shell (a `<(:)` per poll forked one,
# hundreds of times per test while the processes under test wanted the CPUs).
tb_pause() {
  [ -n "${_TB_PAUSE_FD:-}" ] || exec {_TB_PAUSE_FD}<> <(:)
  read -rt "$1" -u "$_TB_PAUSE_FD" || true
}

# tb_token FILE: writes a fresh random token, readable by its owner only (the readers refuse others).
tb_token() { (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$1" && echo >>"$1"); }

# tb_wait_line FILE PATTERN SECONDS PID: waits until FILE has a line matching PATTERN; fails if the
# process PID exits first or the deadline passes (polls the file; no fixed sleeps).
tb_wait_line() {
  local file=$1 pattern=$2 secs=$3 pid=$4 deadline
  deadline=$((SECONDS + secs))
  while ! grep -q "$pattern" "$file" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then echo "process $pid exited before '$pattern'" >&2; return 1; fi
    if [ $SECONDS -ge $deadline ]; then echo "timed out after ${secs}s waiting for '$pattern'" >&2; return 1; fi
    tb_pause 0.05
  done
}
