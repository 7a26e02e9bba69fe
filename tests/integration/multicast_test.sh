#!/usr/bin/env bash
# Results by multicast through the real appliance (dataplane.multicast = true, workers with
# --multicast), on a switch that snoops IGMP with a querier (MODE snoop: the bridge forwards each
# group only to the ports whose workers joined it) or floods (MODE flood: snooping off). In one
# test bed of 8 workers:
#   1. Two multicast jobs and one unicast job at once, on w0..w3 (all exact): the appliance lists
#      them running together with distinct groups and the unicast one without; the unicast job's
#      ranks get no group result; while they run each of those worker interfaces holds exactly
#      its jobs' two groups (ip maddr); nftables counters on the switch ports show the group
#      frames reaching w0..w3, and w4..w7 (never members) only when the switch floods.
#   2. n = 4, 8 (snoop: 8), without and with 1% loss on every switch port: an fp32 job and a bf16 job at
#      once (two groups; their ranks share the worker namespaces), every result checked; every
#      rank was granted multicast and received results on the group; no rank dropped a result as
#      another job's (unknown_job, bad_rank, dtype/op mismatch); and the appliance sent exactly
#      one frame per completed chunk, to the group (results_sent = group_frames = slots
#      completed), and nothing else but the unicast answers to retransmissions, loss and
#      duplicate notices (tx_packets = group_frames + retransmits_answered + loss_notices_sent +
#      duplicate_notices_sent + ARP replies + ARP requests).
#   3. Multicast results dropped (nftables) on the switch port of one worker only: that worker
#      receives no group result and still completes, exact, by unicast answers.
#   4. A failed job (a rank killed): the survivor fails, and no worker interface keeps a group;
#      after every phase above, neither (ip maddr).
#   5. The IGMP frames that reached the appliance's port were counted as not_udp, none as
#      bad_ip_header.
#
# usage: multicast_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR snoop|flood
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
shift 4
MODE=${1:-}
case $MODE in snoop | flood) ;; *) fail "MODE must be snoop or flood, got '$MODE'" ;; esac
GROUP_PREFIX=239.255.77.

IT_CONF_EXTRA="multicast = true; multicast_group = \"${GROUP_PREFIX}0\";" it_begin 8
if [ "$MODE" = snoop ]; then
  # The bridge floods every group until its own querier counts as present, one query response
  # interval after the querier is enabled (10 s by default; 1 s here: set before the querier, which
  # takes the interval in force then). snooping_effective below waits for it.
  tb_exec sw ip link set br0 type bridge mcast_snooping 1 mcast_query_response_interval 100
  tb_exec sw ip link set br0 type bridge mcast_querier 1
else
  tb_exec sw ip link set br0 type bridge mcast_snooping 0
fi
note "switch: $(tb_exec sw ip -d link show br0 | grep -o 'mcast_snooping [01]\|mcast_querier [01]' | tr '\n' ' ')"
it_start_appliance

stats() { it_stats_json >"$IT_WORK/stats.json" && jq -c '.total' "$IT_WORK/stats.json"; }
tot() { jq -r ".$2 // 0" <<<"$1"; }

# groups_on W: the 239.255.77.x groups joined on worker W's interface.
groups_on() { tb_exec "w$1" ip maddr show dev "$TB_WORKER_IF" | awk '$1 == "inet" { print $2 }' | grep -F "$GROUP_PREFIX" || true; }
no_groups_left() {
  local i g
  for ((i = 0; i < 8; i++)); do
    g=$(groups_on "$i")
    [ -z "$g" ] || fail "after $1: worker $i still holds group(s) $(echo $g)"
  done
}

# check_ranks TAG WORLD MC: every rank's counters: granted multicast (MC=1) with results on the group,
# or not (MC=0) with none; never a result of another job.
check_ranks() {
  local tag=$1 world=$2 mc=$3 i d v
  for ((i = 0; i < world; i++)); do
    [ "$(it_counter "$tag" "$i" multicast)" = "$mc" ] || fail "$tag: rank $i multicast=$(it_counter "$tag" "$i" multicast), want $mc"
    v=$(it_counter "$tag" "$i" rx_group_results)
    if [ "$mc" = 1 ]; then [ "$v" -gt 0 ] || fail "$tag: rank $i received no result on the group"; fi
    if [ "$mc" = 0 ]; then [ "$v" = 0 ] || fail "$tag: rank $i (unicast job) received $v group results"; fi
    for d in unknown_job bad_rank dtype_mismatch op_mismatch unknown_source bad_qkey; do
      v=$(it_counter "$tag" "$i" "drop_$d")
      [ "$v" = 0 ] || fail "$tag: rank $i dropped $v results as $d: another job's results reached it"
    done
  done
}

# check_one_frame_per_chunk BEFORE AFTER ROUNDS WHAT: the appliance's counters between two snapshots.
check_one_frame_per_chunk() {
  local b=$1 a=$2 rounds=$3 what=$4 k
  declare -A d
  for k in slots_completed results_sent group_frames tx_packets retransmits_answered loss_notices_sent \
    duplicate_notices_sent arp_replies arp_requests aborts_sent; do
    d[$k]=$(($(tot "$a" $k) - $(tot "$b" $k)))
  done
  [ "${d[slots_completed]}" = "$rounds" ] || fail "$what: appliance completed ${d[slots_completed]} chunks, want $rounds"
  [ "${d[results_sent]}" = "$rounds" ] || fail "$what: appliance sent ${d[results_sent]} results for $rounds chunks"
  [ "${d[group_frames]}" = "$rounds" ] || fail "$what: ${d[group_frames]} frames to the groups for $rounds chunks"
  [ "${d[aborts_sent]}" = 0 ] || fail "$what: appliance sent aborts"
  local notices=$((d[loss_notices_sent] + d[duplicate_notices_sent]))
  [ "${d[tx_packets]}" = $((rounds + d[retransmits_answered] + notices + d[arp_replies] + d[arp_requests])) ] ||
    fail "$what: appliance sent ${d[tx_packets]} frames: not $rounds to the groups + ${d[retransmits_answered]} unicast answers + ${d[loss_notices_sent]} loss and ${d[duplicate_notices_sent]} duplicate notices + ${d[arp_replies]} ARP replies + ${d[arp_requests]} ARP requests"
  note "$what: $rounds chunks, $rounds frames to the groups, ${d[retransmits_answered]} unicast answers"
}

# Snooping in effect: a probe to a group that only w7 joined leaves the switch toward p7 and
# not toward p5 (python3 sockets: a member in w7, the sender in w6).
PROBE=239.255.78.1
probe_member() {
  tb_exec w7 python3 -c "
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('$PROBE', 4792))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, struct.pack('4s4si', socket.inet_aton('$PROBE'), socket.inet_aton('${TB_WORKER_IP[7]}'), 0))
print('joined', flush=True)
sys.stdin.read()
" <> <(:) >"$IT_WORK/probe.log" 2>&1 &
  IT_EXTRA_PIDS+=($!)
  tb_wait_line "$IT_WORK/probe.log" joined 10 $! || fail "the snooping probe's member did not join"
  tb_exec sw nft -f - <<NFT
table bridge sumcast_probe {
  chain count { type filter hook forward priority -2; policy accept; oifname "p7" ip daddr $PROBE counter; oifname "p5" ip daddr $PROBE counter; }
}
NFT
}
snooping_effective() {
  local before after
  before=$(tb_exec sw nft list table bridge sumcast_probe | grep -o 'packets [0-9]*' | awk '{print $2}' | tr '\n' ' ')
  tb_exec w6 python3 -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton('${TB_WORKER_IP[6]}'))
s.sendto(b'probe', ('$PROBE', 4792))
"
  after=$(tb_exec sw nft list table bridge sumcast_probe | grep -o 'packets [0-9]*' | awk '{print $2}' | tr '\n' ' ')
  read -r b7 b5 <<<"$before"
  read -r a7 a5 <<<"$after"
  [ $((a7 - b7)) = 1 ] && [ "$a5" = "$b5" ]
}
if [ "$MODE" = snoop ]; then
  probe_member
  it_until 20 snooping_effective || fail "the snooping switch never stopped flooding a group (querier absent?)"
  tb_exec sw nft delete table bridge sumcast_probe
  note "snooping in effect: a group joined by w7 alone reaches p7 only"
fi

# rc_slice FROM COUNT: IT_RC of one job out of several waited for together.
rc_slice() { IT_RC=("${ALL_RC[@]:$1:$2}"); }

# 1. Two multicast jobs and one unicast job at once, before any other job: w4..w7 never joined a group.
# Group frames leaving the switch toward members (p0..p3) and toward the others (p4..p7).
tb_exec sw nft -f - <<NFT
table bridge sumcast_mccount {
  chain count {
    type filter hook forward priority -1; policy accept;
    oifname { "p0", "p1", "p2", "p3" } ip daddr ${GROUP_PREFIX}0/24 counter
    oifname { "p4", "p5", "p6", "p7" } ip daddr ${GROUP_PREFIX}0/24 counter
  }
}
NFT
# Pauses before each call (--gap-us) keep the three jobs registered together for seconds at little
# cost in CPU (30 back-to-back iterations took half a minute on 2 CPUs).
long=(--check --iters 4 --warmup 1 --gap-us 400000 --counts "257,65537,262144")
it_ranks MA mc-a 4 --multicast --dtype fp32 "${long[@]}"
it_ranks UC uc-c 4 --dtype int32 "${long[@]}"
# Ranks of mc-b in w0..w3 too, so that one interface holds two groups and a unicast job at once.
it_ranks MB mc-b 4 --multicast --dtype bf16 "${long[@]}"
three_running() {
  it_jobs_json >"$IT_WORK/jobs.json" 2>/dev/null || return 1
  jq -e '[to_entries[] | select(.key | startswith("job")) | .value | select(.running != 0 and .slots_completed > 0)
          | "\(.name)/\(.multicast)"] | sort == ["mc-a/1", "mc-b/1", "uc-c/0"]' "$IT_WORK/jobs.json" >/dev/null
}
it_until 30 three_running || { cat "$IT_WORK/jobs.json" 2>/dev/null; fail "the three jobs were never running at once"; }
groups=$(jq -r '[to_entries[] | select(.key | startswith("job")) | .value | select(.multicast == 1) | .multicast_group] | sort | join(" ")' "$IT_WORK/jobs.json")
read -r ga gb <<<"$groups"
[ -n "$ga" ] && [ -n "$gb" ] && [ "$ga" != "$gb" ] || fail "multicast jobs' groups '$groups' are not two distinct groups"
[ "$(jq -r '[to_entries[] | select(.key | startswith("job")) | .value | select(.name == "uc-c") | .multicast_group] | .[0]' "$IT_WORK/jobs.json")" = "" ] ||
  fail "the unicast job has a group"
# Every job carries its counters of what went to its ranks alone (docs/monitoring.md).
jq -e '[to_entries[] | select(.key | startswith("job")) | .value
        | [.unicast_answers, .loss_notices, .duplicate_notices] | map(type) == ["number", "number", "number"]] | all' \
  "$IT_WORK/jobs.json" >/dev/null || { cat "$IT_WORK/jobs.json"; fail "a job lacks unicast_answers, loss_notices or duplicate_notices"; }
note "running at once: $(jq -c '[to_entries[] | select(.key | startswith("job")) | .value | {name, multicast, multicast_group, group_frames, unicast_answers, loss_notices, duplicate_notices}]' "$IT_WORK/jobs.json")"
for i in 0 1 2 3; do
  have=$(groups_on "$i" | sort | tr '\n' ' ')
  [ "$have" = "$ga $gb " ] || fail "worker $i holds groups '$have' while its jobs run, want '$ga $gb '"
done
it_wait 90 || fail "the three jobs did not finish within 90 s"
ALL_RC=("${IT_RC[@]}")
rc_slice 0 4
it_expect_exact MA 4 3
rc_slice 4 4
it_expect_exact UC 4 3
rc_slice 8 4
it_expect_exact MB 4 3
check_ranks MA 4 1
check_ranks MB 4 1
check_ranks UC 4 0
no_groups_left "two multicast jobs and a unicast one"
counted=$(tb_exec sw nft list table bridge sumcast_mccount | grep -o 'packets [0-9]*' | awk '{print $2}' | tr '\n' ' ')
read -r to_members to_others <<<"$counted"
tb_exec sw nft delete table bridge sumcast_mccount
[ "${to_members:-0}" -gt 0 ] || fail "no group frame left the switch toward w0..w3"
if [ "$MODE" = snoop ]; then
  [ "${to_others:-0}" = 0 ] || fail "the snooping switch sent $to_others group frames to w4..w7, which never joined"
else
  [ "${to_others:-0}" -gt 0 ] || fail "the flooding switch sent no group frame to w4..w7"
fi
note "group frames out of the switch: $to_members toward the members, $to_others toward the others ($MODE)"
note "two multicast jobs ($ga, $gb) and a unicast job at once: exact"

# 2. Exact at n = 4, 8 (snoop: 8), fp32 and bf16 jobs at once, without and with loss.
counts="1,257,16385,65537"
rows=4
job=0
# The snooping switch at n = 8 only: what it adds over the flooding one is the bridge's forwarding,
# and the engine and worker sides are the same (the flood run covers n = 4). n = 2 multicast jobs
# run in phases 3 and 4 (exact, by unicast answers; and failed).
sizes="4 8"
[ "$MODE" = flood ] || sizes=8
for loss in 0 1; do
  if [ "$loss" != 0 ]; then tb_loss "$loss"; fi
  for n in $sizes; do
    before=$(stats)
    job=$((job + 1))
    it_ranks "f$n-l$loss" "mc-f$job" "$n" --multicast --check --iters 2 --warmup 1 --dtype fp32 --counts "$counts"
    it_ranks "b$n-l$loss" "mc-b$job" "$n" --multicast --check --iters 2 --warmup 1 --dtype bf16 --counts "$counts"
    it_wait 60 || fail "n=$n loss=$loss%: no result within 60 s"
    ALL_RC=("${IT_RC[@]}")
    rc_slice 0 "$n"
    it_expect_exact "f$n-l$loss" "$n" "$rows"
    rc_slice "$n" "$n"
    it_expect_exact "b$n-l$loss" "$n" "$rows"
    check_ranks "f$n-l$loss" "$n" 1
    check_ranks "b$n-l$loss" "$n" 1
    rounds=$(($(it_counter "f$n-l$loss" 0 chunks) + $(it_counter "b$n-l$loss" 0 chunks)))
    it_until 10 bash -c "[ \"\$('$SUMCASTCTL' --prefix '$TB_PREFIX' stats --json | jq -r .total.jobs_active)\" = 0 ]" ||
      fail "n=$n: jobs still active"
    check_one_frame_per_chunk "$before" "$(stats)" "$rounds" "n=$n loss=$loss% fp32+bf16"
    no_groups_left "n=$n loss=$loss%"
  done
  if [ "$loss" != 0 ]; then tb_exec sw nft delete table bridge sumcast_loss; fi
done

# 3. One worker's multicast results dropped at its switch port: it completes by unicast answers.
before=$(stats)
tb_exec sw nft -f - <<NFT
table bridge sumcast_mcdrop {
  chain deaf { type filter hook forward priority 0; policy accept; oifname "p1" ip daddr ${GROUP_PREFIX}0/24 counter drop; }
}
NFT
it_ranks DR mc-drop 2 --multicast --check --iters 2 --warmup 1 --dtype fp32 --counts "1,16385,65537"
it_wait 60 || fail "the job with one deaf worker did not finish within 60 s"
it_expect_exact DR 2 3
dropped=$(tb_exec sw nft list table bridge sumcast_mcdrop | grep -o 'packets [0-9]*' | awk '{print $2}')
tb_exec sw nft delete table bridge sumcast_mcdrop
[ "${dropped:-0}" -gt 0 ] || fail "nftables dropped no group frame toward w1"
[ "$(it_counter DR 1 rx_group_results)" = 0 ] || fail "w1 received $(it_counter DR 1 rx_group_results) group results through the drop"
[ "$(it_counter DR 0 rx_group_results)" -gt 0 ] || fail "w0 received no group result"
r1=$(it_counter DR 1 results)
[ "$r1" -ge "$(it_counter DR 1 chunks)" ] || fail "w1 accepted $r1 results for $(it_counter DR 1 chunks) chunks"
after=$(stats)
answers=$(($(tot "$after" retransmits_answered) - $(tot "$before" retransmits_answered)))
[ "$answers" -ge "$(it_counter DR 1 chunks)" ] || fail "appliance answered $answers retransmissions, w1 needed $(it_counter DR 1 chunks)"
no_groups_left "the job with one deaf worker"
note "w1 deaf to the group ($dropped frames dropped): exact by $answers unicast answers"

# 4. A failed job leaves no membership either.
it_ranks KF mc-fail 2 --multicast --iters 1000 --warmup 0 --dtype fp32 --counts "262144"
joined() { [ -n "$(groups_on 1)" ] && [ -n "$(groups_on 0)" ]; }
it_until 30 joined || fail "the ranks of mc-fail never joined their group"
kill -KILL "${IT_PIDS[0]}"
it_wait 30 || fail "the surviving rank did not fail within 30 s"
[ "${IT_RC[1]}" != 0 ] || fail "rank 1 of the failed job exited 0"
no_groups_left "a failed job"
note "failed job: rank 1 exited ${IT_RC[1]}, no group left"
# 5. IGMP (the members' reports, and in snoop mode the querier's queries: IPv4 with the Router Alert
# option) reached the appliance's port all along: counted as not_udp, none as a bad IPv4 header.
igmp=$(it_stat drop_not_udp) bad_ip=$(it_stat drop_bad_ip_header)
[ "$bad_ip" = 0 ] || fail "appliance counted $bad_ip frames as bad_ip_header"
[ "$igmp" -gt 0 ] || fail "appliance saw no IGMP frame (not_udp 0)"
note "IGMP at the appliance: $igmp frames counted as not_udp, 0 as bad_ip_header"
echo "PASS: multicast results ($MODE): n = $sizes x fp32, bf16 x 0%, 1% loss exact with one frame per chunk; two multicast + one unicast job at once; a deaf worker by unicast answers; no membership left"
