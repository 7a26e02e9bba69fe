-- A stand-in for dpdk-pktgen's `pktgen` Lua table (lua_profiles_test.sh, pcap_replay_test.sh):
-- records every call, and "sends" 700 packets per 100 ms delay on started ports up to their
-- count, as pktgen would. Calls after quit() fail.
-- With PKTGEN_MOCK_SENDER_<port> (a shell command) a real sender does port <port>'s sending:
-- start() runs it in the background, portStats() reads the frames it sent so far from the file
-- PKTGEN_MOCK_PROGRESS_<port> (a number), and delay() really waits.
-- PKTGEN_MOCK_ON_START: a shell command start() runs first (e.g. to change what the appliance's
-- stand-in reports).
pktgen = {}
local count, sent, started = {}, {}, {}
local quitted = false
local function log(...)
  if quitted then error("pktgen called after quit()") end
  print("mock: " .. table.concat({...}, " "))
end
local function each(list, f) for p in tostring(list):gmatch("%d+") do f(tonumber(p)) end end
local function sender(p) local c = os.getenv("PKTGEN_MOCK_SENDER_" .. p); return c ~= nil and c ~= "" and c or nil end
function pktgen.stop(list) log("stop", list); each(list, function(p) started[p] = false end) end
function pktgen.clear(list) log("clear", list); each(list, function(p) sent[p] = 0 end) end
function pktgen.start(list)
  log("start", list)
  local hook = os.getenv("PKTGEN_MOCK_ON_START")
  if hook ~= nil and hook ~= "" then assert(os.execute(hook), "PKTGEN_MOCK_ON_START failed") end
  each(list, function(p)
    started[p] = true
    if sender(p) then assert(os.execute(sender(p) .. " &"), "PKTGEN_MOCK_SENDER_" .. p .. " failed") end
  end)
end
function pktgen.pcap(list, onoff) log("pcap", list, onoff) end
function pktgen.quit() log("quit"); quitted = true end
function pktgen.set(list, what, value)
  log("set", list, what, tostring(value))
  if what == "count" then each(list, function(p) count[p] = value end) end
end
function pktgen.delay(ms)
  if quitted then error("pktgen called after quit()") end
  local real = false
  for p, on in pairs(started) do
    if sender(p) then
      real = true
    elseif on then
      sent[p] = math.min((sent[p] or 0) + 7 * ms, count[p] or 0)
    end
  end
  if real then os.execute(string.format("sleep %.3f", ms / 1000)) end
end
function pktgen.portStats(list, kind)
  if quitted then error("pktgen called after quit()") end
  local t = {}
  each(list, function(p)
    local n = sent[p] or 0
    if sender(p) then
      local f = io.open(os.getenv("PKTGEN_MOCK_PROGRESS_" .. p) or "", "r")
      n = f ~= nil and (tonumber(f:read("l") or "") or 0) or 0
      if f ~= nil then f:close() end
    end
    t[p] = {opackets = n, ipackets = 0}
  end)
  return t
end
