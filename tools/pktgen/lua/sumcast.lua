-- Helpers shared by the Sumcast stress profiles for dpdk-pktgen (docs/stress-testing.md).
-- Loaded with dofile() by replay.lua and multiport.lua; plain Lua 5.3/5.4 plus pktgen's `pktgen` table.
--
-- Settings come from the environment, so that one profile serves every run:
--   SUMCAST_INFO     the --info file sumcast-pcapgen wrote (frames=, slot_rounds=, ...); or
--   SUMCAST_FRAMES   frames in the pcap (per port for multiport.lua) and SUMCAST_SLOT_ROUNDS
--   SUMCAST_RATE     percent of line rate pktgen sends at (default 10)
--   SUMCAST_TIMEOUT  seconds to wait for the send to finish (default 120)
--   SUMCAST_METRICS  the appliance's Prometheus URL (http://IP:PORT/metrics), read with curl; or
--   SUMCAST_CTL      a command that prints the appliance's counters (e.g. "sumcastctl stats"
--                    when pktgen runs on the appliance's host, or "ssh appliance sumcastctl stats")
local M = {}

function M.env_number(name, default)
  local v = os.getenv(name)
  if v == nil or v == "" then return default end
  local n = tonumber(v)
  if n == nil then error(name .. "=" .. v .. " is not a number") end
  return n
end

-- key=value lines of sumcast-pcapgen --info.
function M.read_info(path)
  local info = {}
  local f = io.open(path, "r")
  if f == nil then error("cannot read SUMCAST_INFO " .. path) end
  for line in f:lines() do
    local k, v = line:match("^([%w_]+)=(.*)$")
    if k ~= nil then info[k] = tonumber(v) or v end
  end
  f:close()
  return info
end

function M.settings()
  local s = {
    rate = M.env_number("SUMCAST_RATE", 10),
    timeout = M.env_number("SUMCAST_TIMEOUT", 120),
    frames = M.env_number("SUMCAST_FRAMES", nil),
    slot_rounds = M.env_number("SUMCAST_SLOT_ROUNDS", nil),
  }
  local info = os.getenv("SUMCAST_INFO")
  if info ~= nil and info ~= "" then
    local i = M.read_info(info)
    s.frames = s.frames or i.frames
    s.slot_rounds = s.slot_rounds or i.slot_rounds
    s.info = i
  end
  if s.frames == nil then error("set SUMCAST_INFO (sumcast-pcapgen --info FILE) or SUMCAST_FRAMES") end
  if s.rate <= 0 or s.rate > 100 then error("SUMCAST_RATE must be in (0, 100] percent of line rate") end
  return s
end

-- Packets pktgen has sent on `port` (a number), from its port statistics.
function M.sent(port)
  local stats = pktgen.portStats(tostring(port), "port")
  local p = stats[port] or stats[tostring(port)]
  if p == nil then return 0 end
  return p.opackets or 0
end

-- Sends each port's pcap exactly once: counts[i] packets on ports[i] (a number for all), at `rate`
-- percent. A stream replays only once per registration (a second pass repeats finished rounds,
-- which the appliance drops as stale_round by design). Returns the seconds it took.
function M.replay(ports, counts, rate, timeout)
  if type(counts) ~= "table" then
    local n = counts
    counts = {}
    for i, _ in ipairs(ports) do counts[i] = n end
  end
  local list = table.concat(ports, ",")
  pktgen.stop(list)
  pktgen.clear(list)
  pktgen.set(list, "rate", rate)
  for i, p in ipairs(ports) do pktgen.set(tostring(p), "count", counts[i]) end
  pktgen.pcap(list, "on")
  local t0 = os.time()
  pktgen.start(list)
  local done = false
  while not done do
    pktgen.delay(100)
    done = true
    for i, p in ipairs(ports) do
      if M.sent(p) < counts[i] then done = false end
    end
    if os.time() - t0 > timeout then
      print(string.format("sumcast: timed out after %d s", timeout))
      break
    end
  end
  pktgen.stop(list)
  return os.time() - t0
end

-- Prints the appliance's counters (Prometheus scrape or SUMCAST_CTL) and, when the number of
-- slot rounds is known, whether every one completed.
function M.print_appliance(slot_rounds)
  local metrics = os.getenv("SUMCAST_METRICS")
  local ctl = os.getenv("SUMCAST_CTL")
  local cmd
  if metrics ~= nil and metrics ~= "" then
    cmd = "curl -s --max-time 5 '" .. metrics .. "' | grep -E '^sumcast_(slots_completed|contributions|rx_packets|drops)_total'"
  elseif ctl ~= nil and ctl ~= "" then
    cmd = ctl
  else
    print("sumcast: set SUMCAST_METRICS or SUMCAST_CTL to print the appliance's counters")
    return
  end
  print("sumcast: appliance counters (" .. cmd .. "):")
  local h = io.popen(cmd)
  local out = h:read("a")
  h:close()
  io.write(out)
  if slot_rounds ~= nil and metrics ~= nil and metrics ~= "" then
    local completed = 0
    for v in out:gmatch("sumcast_slots_completed_total{[^}]*} (%d+)") do completed = completed + tonumber(v) end
    print(string.format("sumcast: slots completed %d of %d in the stream%s", completed, slot_rounds,
      completed >= slot_rounds and "" or " (INCOMPLETE: loss, or another job's slots)"))
  end
end

return M
