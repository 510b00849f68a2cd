-- wrk script: a blocking A2A SendMessage (JSON-RPC, A2A-Version 1.0), as a kept-alive client sends
-- it: one per request, each with a fresh messageId, so each starts a new task. Every answer must be
-- HTTP 200 with a completed task (a JSON-RPC error is HTTP 200 too, so the body is checked).
-- Environment:
--   A2A_TEXT  the text sent (default "hello"; the request counter is appended)
--   A2A_RUN   a name for this run, part of every messageId so that runs against one store never
--             repeat one (default: the time in seconds)
-- Prints, when done, `FIRST_BAD <status> <body>` for the first bad answer if there was one, then one
-- JSON line with the same fields as mcp_call.lua's: rate, latency percentiles, every kind of failure.
local text = os.getenv("A2A_TEXT") or "hello"
local run = os.getenv("A2A_RUN") or tostring(os.time())
local threads = {}
setup = function(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

-- Globals, so that done() can read them from each thread.
counter, bad = 0, 0
first_bad = nil
local headers = { ["Content-Type"] = "application/json", ["A2A-Version"] = "1.0" }

request = function()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"SendMessage","params":{"message":' ..
    '{"messageId":"wrk-' .. run .. '-' .. tostring(tid) .. '-' .. counter ..
    '","role":"ROLE_USER","parts":[{"text":"' .. text .. ' ' .. counter .. '"}]}}}'
  return wrk.format("POST", wrk.path, headers, body)
end

response = function(status, _, body)
  if status ~= 200 or not string.find(body, '"TASK_STATE_COMPLETED"', 1, true) then
    bad = bad + 1
    if not first_bad then first_bad = status .. " " .. string.sub(body, 1, 300) end
  end
end

done = function(summary, latency, _)
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
