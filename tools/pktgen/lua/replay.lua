-- dpdk-pktgen profile: replay one Sumcast stress pcap once, at a set rate, then print the
-- appliance's counters. See docs/stress-testing.md for the pktgen command line, e.g.
--   SUMCAST_INFO=stress.info SUMCAST_RATE=25 SUMCAST_METRICS=http://10.0.0.1:9790/metrics \
--     pktgen -l 0-2 -a 0000:3b:00.0 -- -P -m "[1:2].0" -s 0:stress.pcap -f tools/pktgen/lua/replay.lua
-- SUMCAST_PORT: the pktgen port (default 0).
local dir = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
local sumcast = dofile(dir .. "sumcast.lua")

local s = sumcast.settings()
local port = sumcast.env_number("SUMCAST_PORT", 0)
print(string.format("sumcast: replaying %d frames on port %d at %g%% of line rate", s.frames, port, s.rate))
local seconds = sumcast.replay({port}, s.frames, s.rate, s.timeout)
local sent = sumcast.sent(port)
print(string.format("sumcast: sent %d of %d frames in about %d s", sent, s.frames, seconds))
sumcast.print_appliance(s.slot_rounds)
