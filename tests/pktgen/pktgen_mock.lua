-- A stand-in for dpdk-pktgen's `pktgen` Lua table (lua_profiles_test.sh): records every call,
-- and "sends" 700 packets per 100 ms delay on started ports up to their count, as pktgen would.
pktgen = {}
local count, sent, started = {}, {}, {}
local function log(...) print("mock: " .. table.concat({...}, " ")) end
local function each(list, f) for p in tostring(list):gmatch("%d+") do f(tonumber(p)) end end
function pktgen.stop(list) log("stop", list); each(list, function(p) started[p] = false end) end
function pktgen.clear(list) log("clear", list); each(list, function(p) sent[p] = 0 end) end
function pktgen.start(list) log("start", list); each(list, function(p) started[p] = true end) end
function pktgen.pcap(list, onoff) log("pcap", list, onoff) end
function pktgen.set(list, what, value)
  log("set", list, what, tostring(value))
  if what == "count" then each(list, function(p) count[p] = value end) end
end
function pktgen.delay(ms)
  for p, on in pairs(started) do
    if on then sent[p] = math.min((sent[p] or 0) + 7 * ms, count[p] or 0) end
  end
end
function pktgen.portStats(list, kind)
  local t = {}
  each(list, function(p) t[p] = {opackets = sent[p] or 0, ipackets = 0} end)
  return t
end
