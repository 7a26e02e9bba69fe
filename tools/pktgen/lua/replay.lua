-- dpdk-pktgen profile: replay one Sumcast stress pcap once, at a set rate, then print what the
-- appliance saw of it. See docs/stress-testing.md for the pktgen command line, e.g.
--   SUMCAST_INFO=stress.info SUMCAST_RATE=25 SUMCAST_METRICS=http://10.0.0.1:9790/metrics \
--     pktgen -l 0-2 -a 0000:3b:00.0 -- -P -m "[1:2].0" -s 0:stress.pcap -f tools/pktgen/lua/replay.lua
-- SUMCAST_PORT: the pktgen port (default 0). Other settings: sumcast.lua.
local dir = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
local sumcast = dofile(dir .. "sumcast.lua")

local s = sumcast.settings()
local port = sumcast.env_number("SUMCAST_PORT", 0)
print(string.format("sumcast: replaying %d frames on port %d at %g%% of line rate", s.frames, port, s.rate))
sumcast.run(s, {port}, s.frames)
