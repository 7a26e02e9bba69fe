#!/usr/bin/env bash
# The dpdk-pktgen Lua profiles (tools/pktgen/lua) run under plain Lua against a stand-in for
# pktgen's `pktgen` table (pktgen_mock.lua): they must read the counts from sumcast-pcapgen's
# --info file, set the rate and each port's count, enable pcap mode, start, stop once every port
# sent its file, and print the appliance's counters through SUMCAST_CTL. (dpdk-pktgen itself is
# not packaged for Debian.) Exit 77 (skipped) without lua5.4.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
lua=$(command -v lua5.4 || command -v lua5.3 || true)
[ -n "$lua" ] || { echo "skipped: needs lua5.4 (Debian package lua5.4)"; exit 77; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
profiles="${SUMCAST_SOURCE_DIR:-$here/../..}/tools/pktgen/lua"
work=$(mktemp -d /tmp/sumcast-lua.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

printf 'job_id=3\nframes=2048\nslot_rounds=512\nfiles=2\nframes_0=1024\nframes_1=1024\n' >"$work/one.info"
SUMCAST_INFO="$work/one.info" SUMCAST_RATE=25 SUMCAST_CTL="echo appliance-counters-here" \
  "$lua" -e "dofile('$here/pktgen_mock.lua')" "$profiles/replay.lua" | tee "$work/replay.out"
grep -q "^mock: set 0 rate 25$" "$work/replay.out" || fail "replay.lua: rate not set"
grep -q "^mock: set 0 count 2048$" "$work/replay.out" || fail "replay.lua: count is not the info file's frames"
grep -q "^mock: pcap 0 on$" "$work/replay.out" || fail "replay.lua: pcap mode not enabled"
[ "$(grep -n '^mock: start' "$work/replay.out" | cut -d: -f1)" -lt "$(grep -n '^mock: stop' "$work/replay.out" | tail -1 | cut -d: -f1)" ] ||
  fail "replay.lua: no stop after start"
grep -q "^sumcast: sent 2048 of 2048 frames" "$work/replay.out" || fail "replay.lua: did not wait for every frame"
grep -q "^appliance-counters-here$" "$work/replay.out" || fail "replay.lua: appliance counters not printed"

printf 'frames=3000\nslot_rounds=750\nfiles=2\nframes_0=1600\nframes_1=1400\n' >"$work/two.info"
SUMCAST_INFO="$work/two.info" SUMCAST_PORTS=0,1 SUMCAST_CTL="echo counters" \
  "$lua" -e "dofile('$here/pktgen_mock.lua')" "$profiles/multiport.lua" | tee "$work/multi.out"
grep -q "^mock: set 0 count 1600$" "$work/multi.out" || fail "multiport.lua: port 0 count is not frames_0"
grep -q "^mock: set 1 count 1400$" "$work/multi.out" || fail "multiport.lua: port 1 count is not frames_1"
grep -q "^sumcast: port 0 sent 1600 frames" "$work/multi.out" || fail "multiport.lua: port 0 not done"
grep -q "^sumcast: port 1 sent 1400 frames" "$work/multi.out" || fail "multiport.lua: port 1 not done"

# No counts at all is an error that says what to set.
if SUMCAST_CTL=true "$lua" -e "dofile('$here/pktgen_mock.lua')" "$profiles/replay.lua" >"$work/err.out" 2>&1; then
  fail "replay.lua ran without SUMCAST_INFO or SUMCAST_FRAMES"
fi
grep -q "SUMCAST_INFO" "$work/err.out" || fail "the error does not name SUMCAST_INFO"
echo "PASS: replay.lua and multiport.lua drive pktgen as documented"
