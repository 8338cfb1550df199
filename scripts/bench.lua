-- wrk script for scripts/bench.py. The requests come from files named in the
-- environment, so one script serves every scenario:
--   BENCH_REQUESTS  a file listing request file prefixes, one a line; each
--                   prefix has <prefix>.headers ("name: value" lines) and
--                   <prefix>.body. One prefix: that request, every time.
--                   Several: sent in turn (the soak's mix).
--   BENCH_OUT       where done() writes the results as one JSON object.
--   BENCH_UNIQUE    (optional) a mark in the one request's body, replaced in
--                   each request by BENCH_SEED-<its number>: every request
--                   differs (the response cache's misses).

local function read_file(path)
  local f = assert(io.open(path, "rb"))
  local data = f:read("*a")
  f:close()
  return data
end

local function read_request(prefix)
  local headers = {}
  for line in io.lines(prefix .. ".headers") do
    local name, value = line:match("^([^:]+):%s*(.*)$")
    if name then
      headers[name] = value
    end
  end
  return headers, read_file(prefix .. ".body")
end

local prefixes = {}
for line in io.lines(os.getenv("BENCH_REQUESTS")) do
  if line ~= "" then
    table.insert(prefixes, line)
  end
end

wrk.method = "POST"
-- BENCH_UNIQUE: every request's body its own, that mark in it replaced by
-- BENCH_SEED and the request's number (misses for the response cache).
local unique = os.getenv("BENCH_UNIQUE")
if unique then
  local headers, body
  local sent = 0
  local seed = os.getenv("BENCH_SEED") or ""
  function init(args)
    headers, body = read_request(prefixes[1])
  end
  function request()
    sent = sent + 1
    local text = body:gsub(unique, seed .. "-" .. sent, 1)
    return wrk.format("POST", wrk.path, headers, text)
  end
elseif #prefixes == 1 then
  -- Fixed request: wrk builds it once, no Lua per request.
  local headers, body = read_request(prefixes[1])
  for name, value in pairs(headers) do
    wrk.headers[name] = value
  end
  wrk.body = body
else
  local requests = {}
  local next_index = 1
  function init(args)
    for _, prefix in ipairs(prefixes) do
      local headers, body = read_request(prefix)
      table.insert(requests, wrk.format("POST", wrk.path, headers, body))
    end
  end
  function request()
    local r = requests[next_index]
    next_index = next_index % #requests + 1
    return r
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  local f = assert(io.open(os.getenv("BENCH_OUT"), "w"))
  f:write(string.format(
    '{"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean))
  f:close()
end
