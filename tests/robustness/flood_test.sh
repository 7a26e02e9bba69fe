#!/usr/bin/env bash
# Flood: a legitimate 4-rank fp32 job (--check) on the real appliance while an
# extra namespace on the test bed's switch floods the appliance's data port (flood.py: a raw
# AF_PACKET socket, bounded by FLOOD_COUNT frames and FLOOD_SECS seconds, stopped when the job
# ends) with five classes: non-IPv4 garbage, garbage after a RoCE UDP header, well-formed
# contributions for unknown jobs, the live job with wrong Q_Keys, and the live job with its real
# Q_Key (read off the wire by an on-path observer: the switch's port) from forged sources.
# Asserts:
#   - the job's results are exact, with and without the flood;
#   - its bus bandwidth under the flood >= FLOOD_MIN_RATIO (0.5) x the flood-free figure measured
#     just before, same job shape;
#   - sumcastd's VmRSS and VmHWM after the flood exceed the figures before it by <= 8 MiB;
#   - the flood lasted at least as long as the measured row of the job (so it covered it);
#   - each class's drop counter (not_ipv4, bad_opcode, unknown_job, bad_qkey, foreign_source;
#     deltas over the flood) is <= what was sent of that class, and every flood frame not counted
#     under its reason is accounted for by the kernel's drops on sumcastd's af_packet sockets (their
#     rx rings overflow while the polling lcore is descheduled on this shared 2-CPU machine), read
#     from sumcastd's own counters (`sumcastctl stats`: the port's kernel_ring_drops); no frame was
#     dropped as bad_icrc (the generator's ICRCs are right).
#
# usage: flood_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../integration/lib.sh
IT_LIMIT_S=${IT_LIMIT_S:-85}  # every wait stops by then (ctest TIMEOUT 120), cleanup included
source "$here/../integration/lib.sh"
shift 4
N=4
COUNT=${FLOOD_JOB_COUNT:-65536}  # fp32 elements per call (256 KiB)
ITERS=${FLOOD_JOB_ITERS:-30}
FLOOD_COUNT=${FLOOD_COUNT:-3000000}
FLOOD_SECS=${FLOOD_SECS:-30}
FLOOD_PPS=${FLOOD_PPS:-5000}  # paced: this 2-core machine runs the job, the appliance and the flood
MIN_RATIO=${FLOOD_MIN_RATIO:-0.5}
PY=/usr/bin/python3
CLASSES=(not_ipv4 bad_opcode unknown_job bad_qkey foreign_source)

"$PY" -c 'import scapy.contrib.roce' 2>/dev/null || { echo "skipped: needs scapy for $PY"; exit 77; }
"$PY" "$here/flood.py" selftest || fail "flood.py's frame patching disagrees with scapy"
IT_JOB_TIMEOUT_MS=10000 it_begin $N
# The appliance ARPs for every member at registration, and a worker's kernel learns the
# appliance's data address from that request as a STALE entry: its first contribution then starts
# the kernel's DELAY timer, and 5 s later it probes the appliance by unicast ARP, which would land
# in the burst below. A long first-probe delay keeps the workers quiet for this test's length (ARP
# frames that still come are accounted for by sumcastd's ARP counters).
for ((i = 0; i < N; i++)); do tb_exec "w$i" sysctl -qw "net.ipv4.neigh.$TB_WORKER_IF.delay_first_probe_time=300"; done
# A deeper net_af_packet rx ring (8192 frames instead of 512): on this shared 2-core machine the
# appliance's polling lcore is descheduled for tens of ms at a time, and the kernel drops (uncounted
# by the engine: it never sees them) what does not fit in the ring meanwhile.
sed -i "s/iface=$TB_APP_DATA_IF\"/iface=$TB_APP_DATA_IF,blocksz=4096,framesz=2048,framecnt=8192\"/" "$IT_WORK/agg.conf"
grep -q framecnt=8192 "$IT_WORK/agg.conf" || fail "could not set the af_packet ring size in agg.conf"
it_start_appliance
grep -q "kernel ring drops read from its [1-9][0-9]* packet socket" "$IT_WORK/sumcastd.log" ||
  fail "sumcastd did not find its af_packet PMD's sockets (no kernel ring drops would be counted)"

# The attacker: one more namespace on the switch (named with the test bed's prefix: tb_down removes it).
ip netns add "$(tb_ns x)"
ip link add e0 netns "$(tb_ns x)" type veth peer name px netns "$(tb_ns sw)"
tb_exec x ip link set lo up
tb_exec x sysctl -qw net.ipv6.conf.e0.disable_ipv6=1  # no IPv6 chatter: it would count as not_ipv4
tb_exec x ip addr add "$TB_SUBNET.99/24" dev e0
tb_exec x ip link set e0 up
tb_exec sw ip link set px master br0
tb_exec sw ip link set px up
app_mac=$(tb_exec app cat "/sys/class/net/$TB_APP_DATA_IF/address")

mem() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$IT_APP_PID/status"; }  # kB

# run_job TAG: 4 ranks, fp32, --check, JSON; sets BW (rank 0's busbw_gbps) after checking results.
run_job() {
  local tag=$1
  # Two rows: the first (4x the bytes) covers the flood's start, the second is measured under it.
  it_ranks "$tag" "flood-$tag" $N --dtype fp32 --counts "$((4 * COUNT)),$COUNT" --iters "$ITERS" --warmup 5 --check --json \
    --op-timeout-ms 20000
}
check_job() {
  local tag=$1
  for ((i = 0; i < N; i++)); do
    [ "${IT_RC[$i]}" = 0 ] || fail "$tag: rank $i exited ${IT_RC[$i]}: $(tail -n 1 "$IT_WORK/$tag.r$i.log")"
  done
  line=$(grep '^{' "$IT_WORK/$tag.r0.log" | tail -n 1) || fail "$tag: rank 0 printed no JSON"
  [ "$(jq -r .wrong <<<"$line")" = 0 ] || fail "$tag: wrong elements: $line"
  BW=$(jq -r .busbw_gbps <<<"$line")
}

keyfile=$IT_WORK/key
# The generator starts first (importing scapy takes seconds here) and waits for the live job's key.
ip netns exec "$(tb_ns x)" "$PY" "$here/flood.py" flood e0 "$app_mac" "$TB_APP_IP" "$TB_SUBNET.99" "${TB_WORKER_IP[0]}" \
  "$keyfile" "$FLOOD_COUNT" "$FLOOD_SECS" "$FLOOD_PPS" >"$IT_WORK/flood.out" 2>"$IT_WORK/flood.log" &
flood_pid=$!
IT_EXTRA_PIDS+=("$flood_pid")
tb_wait_line "$IT_WORK/flood.log" "^ready" 60 "$flood_pid" || fail "the generator did not get ready"
# The attacker stands for another host; paced to FLOOD_PPS it takes a few percent of a CPU from
# the job on this shared 2-core machine (at a lower priority it would hardly run while the job does).

run_job base
it_wait 60 || fail "the flood-free job did not finish within 60 s"
check_job base
base_bw=$BW
note "flood-free: busbw $base_bw GB/s"
rss0=$(mem VmRSS) hwm0=$(mem VmHWM)
declare -A before
for c in "${CLASSES[@]}" bad_icrc; do before[$c]=$(it_stat "drop_$c"); done
# ring_drops: frames the kernel dropped on sumcastd's packet sockets (rx ring full), as sumcastd
# itself counts them (the port's kernel_ring_drops).
ring_drops() { it_stats_json | jq -r '.port.kernel_ring_drops // error("sumcastd reports no kernel_ring_drops")'; }
ring0=$(ring_drops)


# An on-path observer (the switch's port of the appliance) learns the live job's id and Q_Key.
ip netns exec "$(tb_ns sw)" "$PY" "$here/flood.py" sniff pd 30 >"$keyfile.tmp" 2>"$IT_WORK/sniff.log" &
sniff_pid=$!
IT_EXTRA_PIDS+=("$sniff_pid")
tb_wait_line "$IT_WORK/sniff.log" "^listening" 30 "$sniff_pid" || fail "the observer did not start"
run_job flood
wait "$sniff_pid" || fail "no contribution seen on the switch"
mv "$keyfile.tmp" "$keyfile"
note "live job (id Q_Key QPN): $(cat "$keyfile")"
it_wait 60 || fail "the job under the flood did not finish within 60 s"
kill -TERM "$flood_pid" 2>/dev/null || true
wait "$flood_pid" || fail "the generator failed: $(cat "$IT_WORK/flood.log")"
check_job flood
flood_bw=$BW
sent=$(cat "$IT_WORK/flood.out")
note "flood: $sent"
note "under the flood: busbw $flood_bw GB/s (flood-free $base_bw)"
[ "$(jq -r .total <<<"$sent")" -gt 0 ] || fail "the generator sent nothing"

# The flood covered the measured row: it ran for at least as long as that row took (it is stopped
# only after the job ends, so it started before the row did).
row_s=$(grep '^{' "$IT_WORK/flood.r0.log" | tail -n 1 | jq -r ".time_us * $ITERS / 1e6")
flood_s=$(jq -r .seconds <<<"$sent")
note "flooded for $flood_s s; the measured row took $row_s s"
awk -v f="$flood_s" -v r="$row_s" 'BEGIN { exit !(f >= r) }' ||
  fail "the flood ($flood_s s) did not cover the measured row ($row_s s)"

# Every flood frame is counted: under its reason by the engine, or as a kernel ring drop before
# sumcastd read it. The counters settle once the port is drained.
uncounted() {
  local c total=0
  for c in "${CLASSES[@]}"; do
    total=$((total + $(jq -r ".$c" <<<"$sent") - ($(it_stat "drop_$c") - before[$c])))
  done
  echo "$total"
}
accounted() { [ "$(uncounted)" -le $(($(ring_drops) - ring0)) ]; }
it_until 10 accounted || true
for c in "${CLASSES[@]}"; do
  d=$(($(it_stat "drop_$c") - before[$c]))
  s=$(jq -r ".$c" <<<"$sent")
  note "$c: sent $s, dropped as $c: $d"
  bound=$s
  # The flood stops only after the job ended: from then on, its frames for the live job (wrong
  # Q_Key, forged source) address a job that no longer exists.
  [ "$c" != unknown_job ] || bound=$(jq -r '.unknown_job + .bad_qkey + .foreign_source' <<<"$sent")
  [ "$d" -le "$bound" ] || fail "$c: $d drops counted, only $bound such frames sent"
  [ "$d" -gt 0 ] || fail "$c: none of the $s frames sent was counted as $c"
done
missing=$(uncounted) ring=$(($(ring_drops) - ring0))
note "flood frames not counted by the engine: $missing; kernel ring drops on sumcastd's sockets: $ring"
[ "$missing" -le "$ring" ] || fail "$missing flood frames are neither counted under their reason nor as ring drops ($ring)"
icrc=$(($(it_stat drop_bad_icrc) - before[bad_icrc]))
[ "$icrc" = 0 ] || fail "$icrc frames dropped as bad_icrc: the generator's ICRC is wrong"

# Ring overflow, accounted for from sumcastd's own counters alone: with sumcastd stopped (SIGSTOP:
# its lcore cannot poll), a burst of BURST frames, more than its rx ring holds (framecnt 8192),
# then SIGCONT. Every frame is either received by the port (ipackets) or dropped by the kernel on
# its socket (kernel_ring_drops), and every frame the port received reached the engine (rx_packets,
# here all not_ipv4).
BURST=${FLOOD_BURST:-12000}
port_stat() { it_stats_json | jq -r ".port.$1"; }
arp_seen() { it_stats_json | jq -r '.total | (.arp_replies // 0) + (.arp_learned // 0) + (.drop_arp_ignored // 0)'; }
ip0=$(port_stat ipackets) rd0=$(ring_drops) rx0=$(it_stat rx_packets) ni0=$(it_stat drop_not_ipv4) arp0=$(arp_seen)
kill -STOP "$IT_APP_PID"
burst=$(ip netns exec "$(tb_ns x)" "$PY" "$here/flood.py" burst e0 "$app_mac" "$BURST") || {
  kill -CONT "$IT_APP_PID"
  fail "the burst failed"
}
kill -CONT "$IT_APP_PID"
bsent=$(jq -r .sent <<<"$burst")
note "burst while sumcastd was stopped: $burst"
arrived() { [ $(($(port_stat ipackets) - ip0 + $(ring_drops) - rd0)) -ge "$bsent" ]; }
it_until 10 arrived || true
got=$(($(port_stat ipackets) - ip0)) dropped=$(($(ring_drops) - rd0))
engine=$(($(it_stat rx_packets) - rx0)) not_ipv4=$(($(it_stat drop_not_ipv4) - ni0)) arp=$(($(arp_seen) - arp0))
note "burst of $bsent: port received $got, kernel ring drops $dropped, engine rx_packets $engine (not_ipv4 $not_ipv4, ARP $arp)"
[ "$dropped" -ge $((bsent - 8192)) ] || fail "only $dropped kernel ring drops counted for a burst of $bsent into a ring of 8192"
[ $((got + dropped)) = $((bsent + arp)) ] ||
  fail "port received $got + kernel ring drops $dropped != $bsent frames sent + $arp ARP frames"
[ "$engine" = "$got" ] || fail "the engine counted $engine frames, the port received $got"
[ $((not_ipv4 + arp)) = "$got" ] || fail "$not_ipv4 counted as not_ipv4 and $arp as ARP, the port received $got"

rss1=$(mem VmRSS) hwm1=$(mem VmHWM)
note "sumcastd VmRSS ${rss0} -> ${rss1} kB, VmHWM ${hwm0} -> ${hwm1} kB"
[ $((rss1 - rss0)) -le 8192 ] || fail "sumcastd's VmRSS grew from $rss0 to $rss1 kB under the flood"
[ $((hwm1 - hwm0)) -le 8192 ] || fail "sumcastd's VmHWM grew from $hwm0 to $hwm1 kB under the flood"
ratio=$(awk -v a="$flood_bw" -v b="$base_bw" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
note "throughput ratio (flood / flood-free): $ratio"
awk -v r="$ratio" -v m="$MIN_RATIO" 'BEGIN { exit !(r >= m) }' ||
  fail "throughput under the flood is ${ratio}x the flood-free figure, below $MIN_RATIO"
echo "PASS: flood of $(jq -r .total <<<"$sent") frames at $(jq -r .pps <<<"$sent") pps: results exact," \
  "throughput ${ratio}x, memory flat, every frame counted under its reason (or as a kernel ring drop: $ring);" \
  "burst of $bsent into the stopped appliance: $got received + $dropped kernel ring drops, from its own counters"
