-- wrk script: `tools/call` over MCP Streamable HTTP, as a kept-alive client sends it.
-- Environment:
--   MCP_TOOL      tool name (default echo)
--   MCP_ARGS      arguments, a JSON object (default {"message":"ping"})
--   MCP_ERA       2025-11-25 (handshake era: needs MCP_SESSIONS) or 2026-07-28 (stateless)
--   MCP_SESSIONS  comma-separated Mcp-Session-Id values, used round robin (handshake era)
--   MCP_EXPECT    optional: text every answer's body must hold (e.g. "text":"ping"); an answer
--                 that is not HTTP 200 with it (a JSON-RPC error, an isError result) counts as bad
-- Prints one JSON line when done: rate, latency percentiles, and every kind of failure.
local tool = os.getenv("MCP_TOOL") or "echo"
local arguments = os.getenv("MCP_ARGS") or '{"message":"ping"}'
local era = os.getenv("MCP_ERA") or "2025-11-25"
local sessions = {}
for id in string.gmatch(os.getenv("MCP_SESSIONS") or "", "[^,]+") do
  table.insert(sessions, id)
end
local expect = os.getenv("MCP_EXPECT")
if expect == "" then expect = nil end
local counter = 0
local meta = ""
if era == "2026-07-28" then
  meta = ',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
         '"io.modelcontextprotocol/clientCapabilities":{}}'
end

local threads = {}
setup = function(thread)
  table.insert(threads, thread)
end

-- Globals, so that done() can read them from each thread.
bad = 0
first_bad = nil

request = function()
  counter = counter + 1
  local headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["MCP-Protocol-Version"] = era,
  }
  if era == "2026-07-28" then
    headers["Mcp-Method"] = "tools/call"
    headers["Mcp-Name"] = tool
  else
    headers["Mcp-Session-Id"] = sessions[(counter % #sessions) + 1]
  end
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"tools/call","params":{"name":"' ..
               tool .. '","arguments":' .. arguments .. meta .. '}}'
  return wrk.format("POST", wrk.path, headers, body)
end

if expect then
  response = function(status, _, body)
    if status ~= 200 or not string.find(body, expect, 1, true) or
       string.find(body, '"isError":true', 1, true) then
      bad = bad + 1
      if not first_bad then first_bad = status .. " " .. string.sub(body, 1, 300) end
    end
  end
end

done = function(summary, latency, requests)
  local errors = summary.errors
  local total_bad, sample = 0, nil
  for _, thread in ipairs(threads) do
    total_bad = total_bad + (thread:get("bad") or 0)
    sample = sample or thread:get("first_bad")
  end
  if sample then io.write("FIRST_BAD " .. sample:gsub("\n", " ") .. "\n") end
  io.write(string.format(
    '{"rate":%.1f,"p50_ms":%.3f,"p99_ms":%.3f,"requests":%d,"non2xx":%d,"socket_errors":%d,"bad":%d}\n',
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.requests, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout, total_bad))
end
