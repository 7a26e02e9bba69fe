-- Helpers shared by the Sumcast stress profiles for dpdk-pktgen (docs/stress-testing.md).
-- Loaded with dofile() by replay.lua and multiport.lua; plain Lua 5.3/5.4 plus pktgen's `pktgen` table.
--
-- Settings come from the environment, so that one profile serves every run:
--   SUMCAST_INFO     the --info file sumcast-pcapgen wrote (frames=, slot_rounds=, ranks=, ...); or
--   SUMCAST_FRAMES   frames in the pcap (per port for multiport.lua), SUMCAST_SLOT_ROUNDS and
--                    SUMCAST_RANKS
--   SUMCAST_RATE     percent of line rate pktgen sends at (default 10)
--   SUMCAST_TIMEOUT  seconds to wait for the send to finish (default 120)
--   SUMCAST_METRICS  the appliance's Prometheus URL (http://IP:PORT/metrics), read with curl; or
--   SUMCAST_CTL      a command that prints the appliance's counters: `sumcastctl stats` (its table
--                    or --json), e.g. "sumcastctl stats" when pktgen runs on the appliance's host,
--                    or "ssh appliance sumcastctl stats"
--   SUMCAST_SETTLE   seconds to wait for the appliance's counters to stop moving after the send
--                    (default 5)
--   SUMCAST_QUIT     1: pktgen.quit() at the end (headless runs)
-- The appliance's counters are read before and after the send: the summary is of their difference.
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
    settle = M.env_number("SUMCAST_SETTLE", 5),
    frames = M.env_number("SUMCAST_FRAMES", nil),
    slot_rounds = M.env_number("SUMCAST_SLOT_ROUNDS", nil),
    ranks = M.env_number("SUMCAST_RANKS", nil),
    quit = os.getenv("SUMCAST_QUIT") == "1",
  }
  local info = os.getenv("SUMCAST_INFO")
  if info ~= nil and info ~= "" then
    local i = M.read_info(info)
    s.frames = s.frames or i.frames
    s.slot_rounds = s.slot_rounds or i.slot_rounds
    s.ranks = s.ranks or i.ranks
    s.info = i
  end
  if s.frames == nil then error("set SUMCAST_INFO (sumcast-pcapgen --info FILE) or SUMCAST_FRAMES") end
  if s.rate <= 0 or s.rate > 100 then error("SUMCAST_RATE must be in (0, 100] percent of line rate") end
  return s
end

-- Wall-clock seconds (sub-second where `date` gives nanoseconds; Lua's os.time has whole seconds).
function M.now()
  local h = io.popen("date +%s.%N 2>/dev/null")
  local t = h ~= nil and tonumber(h:read("l") or "") or nil
  if h ~= nil then h:close() end
  return t or os.time()
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
-- which the appliance drops as stale_round by design). Returns the measured seconds from start
-- to the last poll that saw every frame sent (polled every 100 ms).
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
  local t0 = M.now()
  pktgen.start(list)
  local done = false
  while not done do
    pktgen.delay(100)
    done = true
    for i, p in ipairs(ports) do
      if M.sent(p) < counts[i] then done = false end
    end
    if not done and M.now() - t0 > timeout then
      print(string.format("sumcast: timed out after %d s", timeout))
      break
    end
  end
  local seconds = M.now() - t0
  pktgen.stop(list)
  return seconds
end

-- The appliance's counters, summed over cores: engine counters by name (rx_packets, ...),
-- drop_<reason>, and the port's own as port_<name>. From SUMCAST_METRICS (the Prometheus text) or
-- SUMCAST_CTL (`sumcastctl stats`, table or --json). Returns the table and the raw text, or nil
-- and a message.
local function parse_metrics(text)
  local c = {}
  for name, labels, v in text:gmatch("\n?(sumcast_[%w_]+)(%b{}) (%d+)") do
    local key
    if name == "sumcast_drops_total" then
      key = "drop_" .. (labels:match('reason="([^"]*)"') or "?")
    elseif name:match("^sumcast_port_xstat_total") then
      key = nil
    elseif name:match("^sumcast_port_") then
      key = "port_" .. name:match("^sumcast_port_(.*)_total$")
    elseif name:match("_total$") and labels:match('core="') then
      key = name:match("^sumcast_(.*)_total$")
    end
    if key ~= nil then c[key] = (c[key] or 0) + tonumber(v) end
  end
  return c
end

local function json_object(text, name)
  local body = text:match('"' .. name .. '"%s*:%s*(%b{})')
  local c = {}
  if body ~= nil then
    for k, v in body:gmatch('"([%w_]+)"%s*:%s*(%d+)') do c[k] = tonumber(v) end
  end
  return c
end

local function parse_ctl(text)
  local c = {}
  if text:match('^%s*{') then  -- sumcastctl stats --json
    for k, v in pairs(json_object(text, "total")) do c[k] = v end
    for k, v in pairs(json_object(text, "port")) do
      if not k:match("^xstat_") then c["port_" .. k] = v end
    end
    return c
  end
  -- The table: "name  core0 ... total" rows, then "drops by reason:" and the port's section.
  local section = "core"
  for line in text:gmatch("[^\n]+") do
    if line:match("^drops by reason:") then
      section = "drop"
    elseif line:match("^port ") then
      section = "port"
    elseif line:match("^%S") then
      section = "core"
      local name, total = line:match("^([%w_]+)%s.-(%d+)%s*$")
      if name ~= nil then c[name] = tonumber(total) end
    else
      local name, total = line:match("^%s+([%w_]+)%s.-(%d+)%s*$")
      if name ~= nil and section == "drop" then c["drop_" .. name] = tonumber(total) end
      if name ~= nil and section == "port" then c["port_" .. name] = tonumber(total) end
    end
  end
  return c
end

function M.read_appliance()
  local metrics = os.getenv("SUMCAST_METRICS")
  local ctl = os.getenv("SUMCAST_CTL")
  local cmd, parse
  if metrics ~= nil and metrics ~= "" then
    cmd, parse = "curl -sS --max-time 5 '" .. metrics .. "'", parse_metrics
  elseif ctl ~= nil and ctl ~= "" then
    cmd, parse = ctl, parse_ctl
  else
    return nil, "set SUMCAST_METRICS or SUMCAST_CTL to read the appliance's counters"
  end
  local h = io.popen(cmd)
  local out = h:read("a")
  local ok = h:close()
  if not ok or out == "" then return nil, "no counters from: " .. cmd end
  return parse(out), out, cmd
end

-- Reads the counters until frames stop arriving at the engines (two equal rx_packets, 200 ms
-- apart), at most `settle` seconds.
function M.settled(settle)
  local c, raw, cmd = M.read_appliance()
  if c == nil then return nil, raw end
  local t0 = M.now()
  while M.now() - t0 < settle do
    pktgen.delay(200)
    local n, nraw, ncmd = M.read_appliance()
    if n == nil then return nil, nraw end
    local same = (n.rx_packets or 0) == (c.rx_packets or 0) and (n.port_ipackets or 0) == (c.port_ipackets or 0)
    c, raw, cmd = n, nraw, ncmd
    if same then break end
  end
  return c, raw, cmd
end

-- The summary of one run: frames sent, received by the appliance's port, counted by its engines,
-- slot rounds completed, and the rounds lost: an open-loop replay never resends, so a lost
-- contribution leaves its round open for good, and every later round of that slot is then dropped
-- whole as stale_round (the appliance keeps two rounds of a slot; it cannot open a third).
-- `before` and `after` are read_appliance() tables; `sent` frames in `seconds`.
function M.summary(s, sent, seconds, before, after)
  local function d(k) return (after[k] or 0) - (before[k] or 0) end
  local lines = {}
  local function add(...) lines[#lines + 1] = "sumcast: " .. string.format(...) end
  add("frames sent %d in %.2f s (measured): %.0f frames/s", sent, seconds, seconds > 0 and sent / seconds or 0)
  if after.port_ipackets ~= nil then
    local lost = d("port_imissed") + d("port_kernel_ring_drops") + d("port_rx_nombuf") + d("port_ierrors")
    add("appliance port: received %d, dropped %d (imissed %d, kernel_ring_drops %d, rx_nombuf %d, ierrors %d)",
      d("port_ipackets"), lost, d("port_imissed"), d("port_kernel_ring_drops"), d("port_rx_nombuf"),
      d("port_ierrors"))
    add("not seen by the appliance's port (lost on the way, or other traffic if negative): %d",
      sent - d("port_ipackets") - lost)
  else
    add("appliance port: no port counters in this appliance's output")
  end
  add("appliance engines: counted %d frames (rx_packets), %d contributions, %d dropped as stale_round",
    d("rx_packets"), d("contributions"), d("drop_stale_round"))
  local report = {completed = d("slots_completed"), stale_frames = d("drop_stale_round")}
  if s.slot_rounds ~= nil then
    local missing = s.slot_rounds - report.completed
    add("slots completed %d of %d in the stream%s", report.completed, s.slot_rounds,
      missing <= 0 and "" or " (INCOMPLETE)")
    if missing > 0 then
      if s.ranks ~= nil and s.ranks > 0 then
        report.stale_rounds = report.stale_frames // s.ranks
        report.lost_rounds = missing - report.stale_rounds
        add("rounds lost: %d (a contribution of each never reached the engines); rounds dropped because an" ..
          " earlier round of their slot was lost: %d (%d stale_round frames)", report.lost_rounds, report.stale_rounds,
          report.stale_frames)
      else
        add("rounds incomplete: %d, stale_round frames %d (set SUMCAST_RANKS to split them)", missing,
          report.stale_frames)
      end
      add("(counters are the appliance's differences over the run: another job's traffic counts too)")
    end
  end
  for _, l in ipairs(lines) do print(l) end
  return report
end

-- A whole run: counters before, the replay, counters after (settled), the summary, the raw
-- counters, and pktgen.quit() with SUMCAST_QUIT=1.
function M.run(s, ports, counts)
  local before, err = M.read_appliance()
  if before == nil then print("sumcast: " .. err) end
  local seconds = M.replay(ports, counts, s.rate, s.timeout)
  local sent = 0
  for _, p in ipairs(ports) do
    local n = M.sent(p)
    print(string.format("sumcast: port %d sent %d frames", p, n))
    sent = sent + n
  end
  if before ~= nil then
    local after, raw, cmd = M.settled(s.settle)
    if after == nil then
      print("sumcast: " .. raw)
    else
      print("sumcast: appliance counters after the run (" .. cmd .. "):")
      io.write(raw)
      M.summary(s, sent, seconds, before, after)
    end
  else
    print(string.format("sumcast: frames sent %d in %.2f s (measured): %.0f frames/s", sent, seconds,
      seconds > 0 and sent / seconds or 0))
  end
  if s.quit then
    print("sumcast: quitting pktgen (SUMCAST_QUIT=1)")
    pktgen.quit()
  end
end

return M
