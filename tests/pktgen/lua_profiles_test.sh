#!/usr/bin/env bash
# The dpdk-pktgen Lua profiles (tools/pktgen/lua) run under plain Lua against a stand-in for
# pktgen's `pktgen` table (pktgen_mock.lua): they must read the counts from sumcast-pcapgen's
# --info file, set the rate and each port's count, enable pcap mode, start, stop once every port
# sent its file, and summarise the appliance's counters (read before and after the run) from
# SUMCAST_CTL (sumcastctl's table or --json) or SUMCAST_METRICS (Prometheus text): frames sent and
# the measured rate, frames the appliance's port received and dropped, frames its engines counted,
# slot rounds completed, and for a stream that lost one contribution the lost round and the
# rounds of its slot dropped as stale_round after it. SUMCAST_QUIT=1 ends with pktgen.quit().
# (dpdk-pktgen itself is not packaged for Debian; pcap_replay_test.sh runs the same profile with a
# real sender against a real sumcastd.) Exit 77 (skipped) without lua5.4.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
lua=$(command -v lua5.4 || command -v lua5.3 || true)
[ -n "$lua" ] || { echo "skipped: needs lua5.4 (Debian package lua5.4)"; exit 77; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
profiles="${SUMCAST_SOURCE_DIR:-$here/../..}/tools/pktgen/lua"
work=$(mktemp -d /tmp/sumcast-lua.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { "$lua" -e "dofile('$here/pktgen_mock.lua')" "$@"; }

# The appliance's stand-in: counters before the run (an appliance that already ran something),
# and after it (PKTGEN_MOCK_ON_START marks the start): a stream of 4 ranks x 8 slots x 4 rounds
# (128 frames, 32 slot rounds) whose contribution of rank 2 to slot 3, round 1 the appliance's rx
# ring dropped: round 1 of slot 3 never completes, rounds 2 and 3 of slot 3 (8 frames) are
# dropped as stale_round, the other 29 complete.
#            rx_packets contributions slots_completed stale_round ipackets kernel_ring_drops
before=(1000 990 247 10 1005 4)
after=(1127 1109 276 18 1132 5)
# counters TABLE|JSON|PROM: what sumcastctl stats (table or --json) or GET /metrics prints now.
cat >"$work/counters" <<SH
#!/usr/bin/env bash
if [ -e "$work/started" ]; then v=(${after[*]}); else v=(${before[*]}); fi
case \$1 in
table) cat <<T
sumcastd pid 42, 2 core(s)
counter                             core0          core1          total
rx_packets                 0 0 \${v[0]}
tx_packets                 0 0 0
contributions              0 0 \${v[1]}
slots_completed            0 0 \${v[2]}
drops by reason:
  stale_round              0 0 \${v[3]}
  not_ipv4                 0 0 7
port (its own counters):
  ipackets                 \${v[4]}
  imissed                  0
  kernel_ring_drops        \${v[5]}
T
;;
json) cat <<T
{
  "cores": 2,
  "total": {"rx_packets": \${v[0]}, "contributions": \${v[1]}, "slots_completed": \${v[2]}, "drop_stale_round": \${v[3]}},
  "port": {"ipackets": \${v[4]}, "imissed": 0, "kernel_ring_drops": \${v[5]}, "xstat_rx_good_packets": 1},
  "per_core": [{"core": 0, "rx_packets": 1, "slots_completed": 1}, {"core": 1, "rx_packets": 2, "slots_completed": 2}]
}
T
;;
prom) cat <<T
# HELP sumcast_rx_packets_total Frames received by the engine core.
# TYPE sumcast_rx_packets_total counter
sumcast_rx_packets_total{core="0"} \$((v[0] - 100))
sumcast_rx_packets_total{core="1"} 100
sumcast_contributions_total{core="0"} \${v[1]}
sumcast_contributions_total{core="1"} 0
sumcast_slots_completed_total{core="0"} \$((v[2] - 3))
sumcast_slots_completed_total{core="1"} 3
sumcast_job_slots_completed_total{job_id="7",job_name="x"} 999
sumcast_drops_total{core="0",reason="stale_round"} \${v[3]}
sumcast_drops_total{core="1",reason="not_ipv4"} 5
sumcast_port_ipackets_total{device="net_af_packet0"} \${v[4]}
sumcast_port_kernel_ring_drops_total{device="net_af_packet0"} \${v[5]}
sumcast_port_xstat_total{device="net_af_packet0",name="rx_good_packets"} 1
sumcast_control_jobs_started_total 3
T
;;
esac
SH
chmod +x "$work/counters"

# --- replay.lua, a complete stream, counters from SUMCAST_CTL (sumcastctl's table).
printf 'job_id=3\nframes=2048\nslot_rounds=512\nranks=4\nfiles=2\nframes_0=1024\nframes_1=1024\n' >"$work/one.info"
SUMCAST_INFO="$work/one.info" SUMCAST_RATE=25 SUMCAST_CTL="$work/counters table" SUMCAST_SETTLE=0 \
  run "$profiles/replay.lua" | tee "$work/replay.out"
grep -q "^mock: set 0 rate 25$" "$work/replay.out" || fail "replay.lua: rate not set"
grep -q "^mock: set 0 count 2048$" "$work/replay.out" || fail "replay.lua: count is not the info file's frames"
grep -q "^mock: pcap 0 on$" "$work/replay.out" || fail "replay.lua: pcap mode not enabled"
[ "$(grep -n '^mock: start' "$work/replay.out" | cut -d: -f1)" -lt "$(grep -n '^mock: stop' "$work/replay.out" | tail -1 | cut -d: -f1)" ] ||
  fail "replay.lua: no stop after start"
grep -q "^sumcast: port 0 sent 2048 frames" "$work/replay.out" || fail "replay.lua: did not wait for every frame"
grep -q "^sumcast: frames sent 2048 in [0-9.]* s (measured): [0-9]* frames/s$" "$work/replay.out" ||
  fail "replay.lua: no measured send rate"
grep -q "^sumcast: slots completed [0-9]* of 512 in the stream" "$work/replay.out" ||
  fail "replay.lua: no 'slots completed' line with SUMCAST_CTL"
grep -q "^sumcast: appliance counters after the run" "$work/replay.out" || fail "replay.lua: appliance counters not printed"
grep -q "mock: quit" "$work/replay.out" && fail "replay.lua quit pktgen without SUMCAST_QUIT=1"

# --- a stream that lost one contribution, in each of the three formats; SUMCAST_QUIT=1.
printf 'job_id=4\nframes=128\nslot_rounds=32\nranks=4\nfiles=1\nframes_0=128\n' >"$work/lost.info"
for fmt in table json prom; do
  rm -f "$work/started"
  src=(SUMCAST_CTL="$work/counters $fmt")
  [ "$fmt" != prom ] || { "$work/counters" prom >"$work/metrics"; src=(SUMCAST_METRICS="file://$work/metrics"); }
  hook="touch $work/started"
  [ "$fmt" != prom ] || hook="touch $work/started && $work/counters prom >$work/metrics"
  env "${src[@]}" SUMCAST_INFO="$work/lost.info" SUMCAST_QUIT=1 SUMCAST_SETTLE=0 PKTGEN_MOCK_ON_START="$hook" \
    "$lua" -e "dofile('$here/pktgen_mock.lua')" "$profiles/replay.lua" >"$work/lost.$fmt" 2>&1 ||
    { cat "$work/lost.$fmt"; fail "$fmt: replay.lua failed"; }
  out="$work/lost.$fmt"
  want() { grep -qF "$1" "$out" || { cat "$out"; fail "$fmt: no '$1'"; }; }
  want "sumcast: frames sent 128 in "
  want "sumcast: appliance port: received 127, dropped 1 (imissed 0, kernel_ring_drops 1, rx_nombuf 0, ierrors 0)"
  want "sumcast: not seen by the appliance's port (lost on the way, or other traffic if negative): 0"
  want "sumcast: appliance engines: counted 127 frames (rx_packets), 119 contributions, 8 dropped as stale_round"
  want "sumcast: slots completed 29 of 32 in the stream (INCOMPLETE)"
  want "sumcast: rounds lost: 1 (a contribution of each never reached the engines); rounds dropped because an earlier round of their slot was lost: 2 (8 stale_round frames)"
  [ "$(tail -n 1 "$out")" = "mock: quit" ] || { cat "$out"; fail "$fmt: SUMCAST_QUIT=1 did not end with pktgen.quit()"; }
done

# --- multiport.lua: each port its file's count.
printf 'frames=3000\nslot_rounds=750\nranks=4\nfiles=2\nframes_0=1600\nframes_1=1400\n' >"$work/two.info"
SUMCAST_INFO="$work/two.info" SUMCAST_PORTS=0,1 SUMCAST_CTL="$work/counters json" SUMCAST_SETTLE=0 \
  run "$profiles/multiport.lua" | tee "$work/multi.out"
grep -q "^mock: set 0 count 1600$" "$work/multi.out" || fail "multiport.lua: port 0 count is not frames_0"
grep -q "^mock: set 1 count 1400$" "$work/multi.out" || fail "multiport.lua: port 1 count is not frames_1"
grep -q "^sumcast: port 0 sent 1600 frames" "$work/multi.out" || fail "multiport.lua: port 0 not done"
grep -q "^sumcast: port 1 sent 1400 frames" "$work/multi.out" || fail "multiport.lua: port 1 not done"
grep -q "^sumcast: frames sent 3000 in " "$work/multi.out" || fail "multiport.lua: frames sent not summed over ports"

# No counts at all is an error that says what to set.
if SUMCAST_CTL=true run "$profiles/replay.lua" >"$work/err.out" 2>&1; then
  fail "replay.lua ran without SUMCAST_INFO or SUMCAST_FRAMES"
fi
grep -q "SUMCAST_INFO" "$work/err.out" || fail "the error does not name SUMCAST_INFO"
echo "PASS: replay.lua and multiport.lua drive pktgen as documented; the summary separates frames sent," \
  "received by the port and counted by the engines, and names the lost round and the stale rounds after it"
