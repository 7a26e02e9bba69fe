-- dpdk-pktgen profile: replay the files of one stress job split by slot (sumcast-pcapgen
-- --files N) on N ports at once, each file once, then print what the appliance saw of them.
-- Files split by slot keep each slot's order whatever the ports' relative speed.
--   SUMCAST_INFO=stress.info SUMCAST_PORTS=0,1 SUMCAST_RATE=50 SUMCAST_METRICS=http://10.0.0.1:9790/metrics \
--     pktgen -l 0-2 -a 0000:3b:00.0 -a 0000:3b:00.1 -- -P -m "[1:2].[0-1]" \
--       -s 0:stress-0.pcap -s 1:stress-1.pcap -f tools/pktgen/lua/multiport.lua
-- One tx lcore for all ports ("[1:2].[0-1]"): pktgen 23.03.0 to 24.05.0 pace every tx lcore by
-- one shared next-send time, so one lcore per port would split the rate between the ports
-- (docs/stress-testing.md).
-- SUMCAST_FRAMES (if given instead of SUMCAST_INFO) is per port; the info file has each file's count.
local dir = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
local sumcast = dofile(dir .. "sumcast.lua")

local s = sumcast.settings()
local ports = {}
for p in (os.getenv("SUMCAST_PORTS") or "0,1"):gmatch("%d+") do ports[#ports + 1] = tonumber(p) end
-- Frames per port: the info file's frames_<i> for the i-th port (file i), else SUMCAST_FRAMES.
local counts = {}
for i, _ in ipairs(ports) do
  counts[i] = (s.info ~= nil and s.info["frames_" .. (i - 1)]) or s.frames
end
print(string.format("sumcast: replaying %s frames on ports %s at %g%% of line rate", table.concat(counts, "/"),
  table.concat(ports, ","), s.rate))
sumcast.run(s, ports, counts)
