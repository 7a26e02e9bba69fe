#!/usr/bin/env bash
# Results that cross a router: the routed bed (tools/testbed/testbed.sh tb_up_routed: workers in
# 10.77.0.0/24 and 10.78.0.0/24, the appliance in 10.79.0.0/24, a router namespace between them).
# The appliance resolves its next hops itself (ARP) and addresses every result to the gateway's
# MAC; the workers' kernels route their contributions. MODE:
#   exact_loss1  port.gateway; 4 ranks, fp32 and bf16 with --check while the router drops 1% of the
#                RoCEv2 frames it forwards each way (its own counters): exact, every rank
#                retransmitted, the appliance answered at least the lost results; the log shows
#                the gateway resolved by ARP.
#   router_mac   port.gateway, port.arp_refresh_ms 1000: the router's MAC on the appliance subnet
#                changes mid-job (no gratuitous ARP: the kernel sends none by default); results
#                to the old MAC are lost until the appliance re-resolves the gateway. Exact; the
#                log names the new MAC; the job was still running when the MAC changed.
#   no_route     port.routes for the two worker subnets only, no gateway: a 2-rank job across
#                them is exact (static routes), and a rank in 10.80.0.0/24 (reachable from the
#                router, but not routed by the appliance) is refused at registration at once,
#                naming its address.
#   ecn          port.ecn on, port.cnp_interval_us 1000, --ecn on the workers; the router marks 10% of
#                the ECT(0) contributions CE (nftables, counted), and 10% of the results (the
#                workers see them: rx_ce_results, at most as many): the appliance counts exactly those
#                (ce_marked), per core and, in a quiet moment of the running job (--gap-us), the
#                same per job and summed over its members (sumcastctl jobs); it sends CNPs
#                (cnps_sent), rank 0's capture, decoded by tshark, holds CNPs (BTH opcode 0x81) to
#                its QPN, and every rank received CNPs, cut its window and grew it back
#                (cnps_received, window_cuts, window_grows); results exact.
#   hosts        scale-out across the router: the appliance and the 4 worker hosts' own summation
#                services (sumcast-allreduce --serve, the embedded service sumcast-serve runs; kernel
#                routing) share every call; exact, and every host aggregator took part.
#   dscp         port.dscp 26 and port.ecn on the appliance, --dscp 26 --ecn on the workers: every
#                RoCEv2 frame the router forwards carries DSCP 26 and ECT(0), both directions
#                (nftables counters on the router: all frames vs. the marked ones); exact.
#
# usage: routed_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR MODE
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
shift 4
MODE=$1
N=4
IT_BED=routed
IT_JOB_TIMEOUT_MS=10000
gw_conf="prefix_len = 24; gateway = \"10.79.0.254\";"
case $MODE in
  exact_loss1) TB_PORT_EXTRA=$gw_conf ;;
  router_mac) TB_PORT_EXTRA="$gw_conf arp_refresh_ms = 1000;" ;;
  dscp) TB_PORT_EXTRA="$gw_conf dscp = 26; ecn = true;" ;;
  hosts) TB_PORT_EXTRA=$gw_conf ;;
  ecn) TB_PORT_EXTRA="$gw_conf ecn = true; cnp_interval_us = 1000;" ;;
  no_route) N=2 TB_PORT_EXTRA='prefix_len = 24; routes = [ "10.77.0.0/24 via 10.79.0.254", "10.78.0.0/24 via 10.79.0.254" ];' ;;
  *) fail "unknown mode $MODE" ;;
esac
export TB_PORT_EXTRA

it_begin $N
it_start_appliance
note "workers at ${TB_WORKER_IP[*]}; appliance data $TB_APP_IP behind gateway $TB_GW_IP"

router_mac() { tb_exec rt cat "/sys/class/net/$TB_ROUTER_IF/address"; }

case $MODE in
  exact_loss1)
    tb_loss 1
    before_answered=$(it_stat retransmits_answered)
    for dtype in fp32 bf16; do
      it_ranks "$dtype" "routed-$dtype" $N --dtype "$dtype" --counts 1,257,16385,200000,1048576 --iters 2 --warmup 0 \
        --check --op-timeout-ms 20000
      it_wait 60 || fail "$dtype: hung (no result within 60 s)"
      it_expect_exact "$dtype" $N 5
      note "$dtype exact across the router under 1% loss"
    done
    answered=$(($(it_stat retransmits_answered) - before_answered))
    up=$(tb_nft_packets rt inet sumcast_loss lost_up) down=$(tb_nft_packets rt inet sumcast_loss lost_down)
    [ "$up" -gt 0 ] && [ "$down" -gt 0 ] || fail "the router dropped $up contributions and $down results: not both ways"
    retx=0
    for dtype in fp32 bf16; do
      for ((i = 0; i < N; i++)); do
        r=$(($(it_counter "$dtype" $i retransmissions) + $(it_counter "$dtype" $i fast_retransmissions)))
        [ "$r" -gt 0 ] || fail "$dtype rank $i made no retransmission"
        retx=$((retx + r))
      done
    done
    [ "$retx" -ge $((up + down)) ] || fail "workers retransmitted $retx times for $((up + down)) lost packets"
    [ "$answered" -ge "$down" ] || fail "appliance answered $answered retransmissions for $down lost results"
    grep -q "neighbour $TB_GW_IP is at $(router_mac)" "$IT_WORK/sumcastd.log" ||
      fail "sumcastd did not log the gateway $TB_GW_IP at $(router_mac)"
    [ "$(it_stat drop_next_hop_unresolved)" = 0 ] || fail "results dropped as next_hop_unresolved after the GRANT"
    echo "PASS: exact_loss1: exact across the router; $up contributions and $down results lost, $retx retransmissions, $answered answered"
    ;;
  router_mac)
    old=$(router_mac)
    it_ranks mac routed-mac $N --counts 262144 --iters 40 --warmup 0 --check --op-timeout-ms 30000
    # Mid-job: some slots completed through the old MAC.
    it_until 30 bash -c "[ \"\$('$SUMCASTCTL' --prefix '$TB_PREFIX' stats --json | jq -r .total.slots_completed)\" -ge 200 ]" ||
      fail "the job made no progress through the router"
    new=02:5c:00:00:00:fe
    tb_exec rt ip link set dev "$TB_ROUTER_IF" address "$new"
    for p in "${IT_PIDS[@]}"; do _it_alive "$p" || fail "a rank ended before the MAC changed: the job is too short"; done
    note "router's MAC on the appliance subnet changed from $old to $new mid-job"
    it_wait 90 || fail "hung after the router's MAC changed"
    it_expect_exact mac $N 1
    grep -q "neighbour $TB_GW_IP is at $new (MAC changed)" "$IT_WORK/sumcastd.log" ||
      fail "sumcastd did not learn the gateway's new MAC $new"
    answered=$(it_stat retransmits_answered)
    [ "$answered" -gt 0 ] || fail "no retransmission was answered: the results to the old MAC were not lost?"
    echo "PASS: router_mac: the gateway's MAC changed mid-job ($old -> $new), learned; exact; $answered retransmissions answered"
    ;;
  dscp)
    tb_exec rt nft -f - <<'NFT'
table inet sumcast_dscp {
  counter up_all { }
  counter up_marked { }
  counter down_all { }
  counter down_marked { }
  chain count {
    type filter hook forward priority -10; policy accept;
    udp dport 4791 counter name up_all
    udp dport 4791 ip dscp 26 ip ecn ect0 counter name up_marked
    udp sport 4791 counter name down_all
    udp sport 4791 ip dscp 26 ip ecn ect0 counter name down_marked
  }
}
NFT
    it_ranks dscp routed-dscp $N --counts 1,16385,262144 --iters 2 --warmup 0 --check --dscp 26 --ecn
    it_wait 60 || fail "hung"
    it_expect_exact dscp $N 3
    count() { tb_nft_packets rt inet sumcast_dscp "$1"; }
    ua=$(count up_all) um=$(count up_marked) da=$(count down_all) dm=$(count down_marked)
    note "contributions $um of $ua marked DSCP 26 ECT(0); results $dm of $da"
    [ "$ua" -gt 0 ] && [ "$da" -gt 0 ] || fail "no RoCEv2 frame crossed the router"
    [ "$ua" = "$um" ] || fail "$((ua - um)) of $ua contributions without DSCP 26 / ECT(0)"
    [ "$da" = "$dm" ] || fail "$((da - dm)) of $da results without DSCP 26 / ECT(0)"
    echo "PASS: dscp: $ua contributions and $da results all DSCP 26, ECT(0); exact"
    ;;
  ecn)
    command -v tshark >/dev/null || fail "tshark is not installed (the CNP capture needs it)"
    tb_exec rt nft -f - <<'NFT'
table inet sumcast_ce {
  counter ce_set { }
  counter ce_down { }
  chain marking {
    type filter hook forward priority 0; policy accept;
    udp dport 4791 ip ecn ect0 numgen random mod 100 < 10 counter name ce_set ip ecn set ce
    udp sport 4791 ip ecn ect0 numgen random mod 100 < 10 counter name ce_down ip ecn set ce
  }
}
NFT
    # Live decode (-l: a line per CNP as it is seen): BTH opcode, DestQP and P_Key of each CNP.
    tb_exec w0 tshark -l -i "$TB_WORKER_IF" -f "udp src port 4791" -Y "infiniband.bth.opcode == 129" -T fields \
      -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.p_key >"$IT_WORK/cnps.log" 2>"$IT_WORK/tshark.log" &
    cap=$!
    IT_EXTRA_PIDS+=($cap)
    tb_wait_line "$IT_WORK/tshark.log" "Capturing on" 20 $cap || fail "tshark did not start capturing"
    it_ranks ecn routed-ecn $N --counts 1,16385,262144 --iters 1 --warmup 0 --check --ecn --gap-us 2000000
    # While the job is registered and idle between two calls (--gap-us), the appliance's CE count
    # per core (the only job since it started), the job's, and the sum of its members' agree.
    ce_agree() {
      local total line job sum
      total=$(it_stat ce_marked)
      line=$("$SUMCASTCTL" --prefix "$TB_PREFIX" jobs 2>/dev/null | grep -m1 'ECN:') || return 1
      job=$(sed -E 's/.*ECN: ([0-9]+) contributions.*/\1/' <<<"$line")
      sum=$(grep -oE '[0-9]+:[0-9]+' <<<"$line" | awk -F: '{ n += $2 } END { print n + 0 }')
      [ "$job" -gt 0 ] && [ "$job" = "$total" ] && [ "$sum" = "$job" ] && [ "$(it_stat ce_marked)" = "$total" ] ||
        return 1
      CE_LINE=$line
    }
    it_until 40 ce_agree || fail "no moment of the running job when its CE marks, its members' and the cores' agreed"
    note "in a pause of the job: ${CE_LINE#"${CE_LINE%%ECN*}"}"
    it_wait 60 || fail "hung"
    it_expect_exact ecn $N 3
    received=0 ce_seen=0
    for ((i = 0; i < N; i++)); do
      ce_seen=$((ce_seen + $(it_counter ecn $i rx_ce_results)))
      r=$(it_counter ecn $i cnps_received) c=$(it_counter ecn $i window_cuts) g=$(it_counter ecn $i window_grows)
      note "rank $i: $r CNPs received, window cut $c times, grown $g times, smallest $(it_counter ecn $i window_min), at the end $(it_counter ecn $i window_now)"
      [ "$r" -gt 0 ] && [ "$c" -gt 0 ] && [ "$g" -gt 0 ] || fail "rank $i did not receive CNPs, cut and regrow its window"
      received=$((received + r))
    done
    # tshark decodes what dumpcap wrote with some delay: wait (bounded) for the first CNP line,
    # then for a quiet moment of its output, before stopping it.
    it_until 10 grep -q '^129' "$IT_WORK/cnps.log" || true
    it_until 5 bash -c "s=\$(wc -c <'$IT_WORK/cnps.log'); read -rt 0.3 <> <(:); [ \"\$s\" = \"\$(wc -c <'$IT_WORK/cnps.log')\" ]" || true
    # SIGTERM, not SIGINT: a background job of a script ignores SIGINT.
    kill -TERM $cap
    it_until 10 bash -c "! kill -0 $cap 2>/dev/null" || fail "tshark did not stop"
    wait $cap || true
    marked=$(tb_nft_packets rt inet sumcast_ce ce_set)
    ce=$(it_stat ce_marked) cnps=$(it_stat cnps_sent)
    decoded=$(awk '$1 == 129 { n++ } END { print n + 0 }' "$IT_WORK/cnps.log")
    note "router marked $marked contributions CE; appliance counted $ce, sent $cnps CNPs; tshark decoded $decoded CNPs to rank 0: $(sort -u "$IT_WORK/cnps.log" | head -3 | tr '\t\n' ' ;')"
    [ "$marked" -gt 0 ] || fail "the router marked nothing"
    [ "$ce" = "$marked" ] || fail "the appliance counted $ce CE-marked contributions, the router marked $marked"
    [ "$cnps" -gt 0 ] || fail "no CNP sent"
    [ "$received" -le "$cnps" ] || fail "the workers received $received CNPs, the appliance sent $cnps"
    down=$(tb_nft_packets rt inet sumcast_ce ce_down)
    note "router marked $down results (and CNPs) CE; the workers saw $ce_seen CE-marked results"
    [ "$ce_seen" -gt 0 ] && [ "$ce_seen" -le "$down" ] || fail "the workers saw $ce_seen CE-marked results of $down marked"
    [ "$decoded" -gt 0 ] || fail "tshark decoded no CNP in rank 0's capture"
    awk '$3 != "0xffff" && $3 != "65535" { bad = 1 } END { exit bad }' "$IT_WORK/cnps.log" ||
      fail "a CNP with another P_Key: $(sort -u "$IT_WORK/cnps.log" | head -3)"
    echo "PASS: ecn: $marked CE marks all counted (per core, job and member), $cnps CNPs sent, decoded by tshark and received by the workers, which cut and regrew their windows; exact"
    ;;
  hosts)
    aggs=(--appliance "$TB_MGMT_IP:4790")
    for ((i = 0; i < N; i++)); do aggs+=(--host-agg "$i=${TB_WORKER_IP[$i]}:4790"); done
    for ((i = 0; i < N; i++)); do
      ip netns exec "$(tb_ns "w$i")" "$ALLREDUCE" "${aggs[@]}" --serve "${TB_WORKER_IP[$i]}:4790" \
        --token-file "$IT_WORK/token" --job routed-hosts --rank "$i" --world $N --bind "${TB_WORKER_IP[$i]}" \
        --check --iters 2 --warmup 0 --counts 1,257,65537,1000003 >"$IT_WORK/hosts.r$i.log" 2>&1 &
      IT_PIDS+=($!)
    done
    it_wait 90 || fail "no result within 90 s"
    it_expect_exact hosts $N 4
    used=$(grep -c '^#   [0-9].*[0-9]$' "$IT_WORK/hosts.r0.log" || true)
    [ "$used" = $((N + 1)) ] || fail "$used aggregators used, want the appliance and $N hosts"
    echo "PASS: hosts: the appliance and $N host aggregators in two subnets, exact across the router"
    ;;
  no_route)
    it_ranks near routed-near 2 --counts 1,16385 --iters 2 --warmup 0 --check
    it_wait 60 || fail "hung"
    it_expect_exact near 2 2
    note "ranks in 10.77.0.0/24 and 10.78.0.0/24 exact through port.routes"
    far=$TB_NET_C.10
    tb_add_routed_node far "$far" || fail "no host in $TB_NET_C.0/24"
    t0=$EPOCHREALTIME
    rc=0
    tb_exec far timeout 30 "$ALLREDUCE" --appliance "$TB_MGMT_IP:4790" --token-file "$IT_WORK/token" --job far \
      --rank 1 --world 2 --bind "$far" --counts 1 --iters 1 --warmup 0 >"$IT_WORK/far.log" 2>&1 || rc=$?
    ms=$(it_elapsed_ms "$t0" "$EPOCHREALTIME")
    [ "$rc" != 0 ] || fail "the rank at $far was accepted"
    [ "$rc" != 124 ] || fail "the rank at $far hung instead of being refused"
    grep -q "unreachable" "$IT_WORK/far.log" && grep -q "no route to $far" "$IT_WORK/far.log" ||
      fail "the refusal does not name the address: $(tail -n 3 "$IT_WORK/far.log")"
    [ "$ms" -lt 10000 ] || fail "the refusal took $ms ms"
    note "refused in $ms ms: $(grep -o 'no route to [^;]*' "$IT_WORK/far.log" | head -1)"
    echo "PASS: no_route: static routes carry results; a member without a route is refused at registration"
    ;;
esac
