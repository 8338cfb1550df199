#!/usr/bin/env python3
"""`make bench` and `make soak`: what the filter costs on top of plain Envoy.

bench: starts (by PID, loopback only) the mock provider in `--fast` mode,
plain Envoy with the same listener, route and clusters but no wasm filter
(the floor), Envoy with our filter (the gateway: the wasm host) and Envoy
with the same configuration on the native host (`libllm_gateway.so`, the
dynamic module), each `--concurrency 1`.
Both Envoys are pinned to one core, the mock and the load generators to the
other. For every model group in envoy/gateway.yaml it runs each scenario
against the floor and the gateway, twice, interleaved, and writes
BENCHMARKS.md.

The floor sends what the gateway would send upstream: before measuring, one
request per group and scenario goes through the gateway to a recording mock,
and the floor replays the vendor request the mock received (path, headers,
body). A new dialect in gateway.yaml is therefore benchmarked with no change
here.

micro: the micro benchmarks alone (benches/core.rs, natively and as wasm
in Node's V8), a section of their own in BENCHMARKS.md: no Envoy, no load.

soak: 100k mixed requests (streams, non-streams, cut streams) through one
gateway Envoy, sampling its RSS; appends the result to BENCHMARKS.md.

Load: wrk (throughput, latency percentiles); a small asyncio client for a
stream's time to first byte, which wrk does not report.
"""

import argparse
import asyncio
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gateway  # noqa: E402

ROOT = gateway.ROOT
REPORT = Path(os.environ.get("BENCH_REPORT", str(ROOT / "BENCHMARKS.md")))
LUA = ROOT / "scripts/bench.lua"
GATEWAY_CORE, LOAD_CORE = 0, 1
SECONDS = int(os.environ.get("BENCH_SECONDS", "3"))
# Another build of the filter to measure (e.g. other compiler settings).
WASM = Path(os.environ.get("BENCH_WASM", str(gateway.WASM)))
# benches/wasm-floor: the same two-role plugin shape and buffering, no work.
WASM_FLOOR = ROOT / "target/wasm32-wasip1/release/wasm_floor.wasm"
# The wasm floor does not depend on the dialect: measured for this group only.
WASM_FLOOR_GROUP = "mock-anthropic"
# The filter's own overhead histograms (llm_gateway.overhead_us;phase=...).
TIMING_PHASES = ("admit", "request", "response", "log", "chunk")
# Only these scenarios (comma-separated names, e.g. "c=1,stream c=16"); all when empty.
ONLY = [name for name in os.environ.get("BENCH_ONLY", "").split(",") if name]
# Only these model groups (comma-separated); all when empty.
ONLY_GROUPS = [name for name in os.environ.get("BENCH_GROUPS", "").split(",") if name]
WARMUP_SECONDS = 1
# More runs narrow a before/after comparison on a noisy machine.
RUNS = int(os.environ.get("BENCH_RUNS", "2"))
# Two runs differing by more than this are flagged as noisy.
NOISE = 0.15
STREAM_CHUNKS = 20  # the mock's --fast stream: 20 content chunks
TTFB_SECONDS = 1.5
SOAK_REQUESTS = 100_000
SOAK_SEGMENT_SECONDS = 2
SOAK_MAX_SEGMENTS = 120  # bounds the soak whatever the machine's speed
SOAK_CONNECTIONS = 16
SOAK_CUT_CONNECTIONS = 2
# Scenario name, connections, stream, request body bytes.
SCENARIOS = [
    ("c=1", 1, False, 1024),
    ("c=16", 16, False, 1024),
    ("c=64", 64, False, 1024),
    ("c=16 100KB", 16, False, 100 * 1024),
    ("stream c=16", 16, True, 1024),
]
# Scenarios of another client surface, for the groups named: the same
# measurement with the client's own request to the gateway (the floor
# replays the vendor request the gateway sends for it). Name, connections,
# stream, request body bytes, client.
CLIENT_SCENARIOS = [
    ("gemini c=16", 16, False, 1024, "gemini"),
    ("gemini stream c=16", 16, True, 1024, "gemini"),
    ("messages c=16", 16, False, 1024, "messages"),
    ("messages stream c=16", 16, True, 1024, "messages"),
    ("responses c=16", 16, False, 1024, "responses"),
    ("responses stream c=16", 16, True, 1024, "responses"),
    ("embeddings c=16", 16, False, 1024, "embeddings"),
]
# Each client API passed through to its own vendor and translated to the
# others: Gemini's, Anthropic's Messages, OpenAI's Responses.
CLIENT_GROUPS = {"gemini": ("mock-gemini", "mock-anthropic", "mock-openai"),
                 "messages": ("mock-anthropic", "mock-openai"),
                 "responses": ("mock-anthropic", "mock-openai"),
                 # OpenAI's embeddings passed through, and translated to Gemini's batchEmbedContents.
                 "embeddings": ("mock-openai", "mock-gemini")}
# The embeddings scenario's batch: this many texts, to the model every mock
# group that embeds maps (envoy/gateway.yaml).
EMBED_INPUTS = 16
EMBED_MODEL = "text-embedding-3-small"
# What a complete stream of each client API ends with.
STREAM_END = {None: b"data: [DONE]\n\n", "gemini": b"finishReason", "messages": b"message_stop",
              "responses": b"response.completed"}
# The key a client surface's request carries, as its SDK sends one (the
# bench gateway has auth off, as for the unified requests).
CLIENT_KEY = "gw-bench-key"
# Limits on vs off (same run): the gateway again with `limits.rate` rules
# that never refuse, for this group and these scenarios. Two rules, four
# limits (a request limit and a token limit per group, a request limit and a
# spend budget for everyone): 8 shared-data calls at admission, 4 at the end.
# A build to compare with in the same run (`make bench BASELINE_WASM=path`):
# the gateway again with that .wasm, every scenario, interleaved.
BASELINE_WASM = os.environ.get("BENCH_BASELINE_WASM")
LIMITS_GROUP = "mock-openai"
LIMITS_SCENARIOS = ("c=1", "c=16")
LIMITS_RULES = [{"group": "*", "requests_per_minute": 10**12, "tokens_per_hour": 10**15},
                {"requests_per_second": 10**12, "usd_per_day": 10**9}]


# The baseline build reads the configuration of its day: what came later
# (model discovery, context fitting) is left out of its copy. A baseline
# from before the response cache, discovery, diagnostics and fitting
# (7f7e4cf) measures their cost when off.
def for_baseline(config):
    config.pop("discovery", None)
    for name in [n for n, g in config["model_groups"].items() if "fitting" in g]:
        del config["model_groups"][name]


# Diagnostics recording on vs off (same run): the gateway again, on both
# hosts, with the diagnostics view on (every request recorded in the ring
# when it ends: one shared-data write, an attempt's timing), for this group
# and these scenarios.
DIAGNOSTICS_GROUP = "mock-openai"
DIAGNOSTICS_SCENARIOS = ("c=1", "c=16")


def with_diagnostics(config):
    config["diagnostics"] = {"loopback_open": True}


def unmetered(config):
    config["request_metrics"] = False


# The scenario the native host's targets are judged on: it is measured once
# more there with `request_metrics` off (what Envoy's labelled metrics cost).
UNMETERED_SCENARIO = "c=64"


def with_limits(config):
    config["limits"]["rate"] = LIMITS_RULES
    config["providers"][LIMITS_GROUP]["prices"] = {"*": {"input": 2.5, "output": 10}}


# The response cache (off in the other gateways, as build_bootstrap leaves
# it; on for the mock groups in envoy/gateway.yaml), for this group and these
# scenarios, in the same runs: a hit (the same request every time: the first
# stores it) against plain Envoy and the gateway without a cache, and a miss
# (every request's prompt different, bench.lua's BENCH_UNIQUE) with the cache
# on against the same requests with it off.
CACHE_GROUP = "mock-openai"
CACHE_SCENARIOS = ("c=1", "c=16")
# Where bench.lua writes a request's own number when each is to differ.
UNIQUE_MARK = "@N@"


# Model discovery (on in envoy/gateway.yaml, as every row above has it) off
# instead, in the same runs, for the limits' group and scenarios: what
# discovery costs a request that does not name a discovered model.
def without_discovery(config):
    config.pop("discovery", None)


# Context fitting (no policy in the other gateways' groups), in the same
# runs, on both hosts, for this group's scenarios: an agent's long history
# (FITTING_TURNS turns of a tool call and its result, about 100 KB) sent to
# three groups: without a policy, with a policy it fits whole (the estimate
# alone), and with a policy and a window that trims it.
FITTING_GROUP = "mock-openai"
FITTING_SCENARIOS = ("c=16",)
FITTING_TURNS = 50
# A window is a model's (per provider), so the trimmed group's is another model.
FITTING_GROUPS = {"bench-fit-off": ("gpt-4o", 128000, None),
                  "bench-fit-whole": ("gpt-4o", 128000, {"strategies": ["route", "trim", "reject"]}),
                  "bench-fit-trim": ("gpt-4o-mini", 8192, {"strategies": ["route", "trim", "reject"]})}


def with_fitting(config):
    for name, (model, window, policy) in FITTING_GROUPS.items():
        group = {"candidates": [{"cluster": "mock_openai", "provider": "mock-openai", "model": model,
                                 "capabilities": {"context_window": window}}]}
        if policy:
            group["fitting"] = policy
        config["model_groups"][name] = group


# The fitting rows' prefixes and the names their Envoys are measured under.
FITTING_NAMES = tuple((f"{host}{who}", f"{envoy}-{group}")
                      for host, envoy in (("g", "gateway-fitting"), ("n", "gateway-native-fitting"))
                      for group, who in zip(FITTING_GROUPS, ("fo", "fw", "ft")))


def fitted(url, headers, body):
    """The answer's `x-llm-context` (None without one); a non-200 fails."""
    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers.get("x-llm-context")


def long_history_body(group):
    """An agent's history of FITTING_TURNS tool-call turns (a unified chat
    request to `group`, about 100 KB): what a coding agent resends."""
    tool = {"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                             "parameters": {"type": "object",
                                                            "properties": {"path": {"type": "string"}},
                                                            "required": ["path"]}}}
    messages = [{"role": "system", "content": "You are a coding agent. Read files before you change them."}]
    source = "fn step() { let value = compute(input); store(value); }\n" * 30
    for i in range(FITTING_TURNS):
        call = f"call_{i}"
        messages += [
            {"role": "user", "content": f"Step {i}: look at src/file_{i}.rs and tell me what it does."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call, "type": "function",
                 "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/file_{i}.rs"})}}]},
            {"role": "tool", "tool_call_id": call, "content": source},
            {"role": "assistant", "content": f"File {i} computes a value and stores it."}]
    messages.append({"role": "user", "content": "Now summarise what all the files do."})
    return json.dumps({"model": group, "max_tokens": 256, "messages": messages, "tools": [tool]}).encode()


# Headers the floor must not replay: hop-by-hop, or Envoy's and ours.
NOT_REPLAYED = re.compile(r"^(host|content-length|connection|transfer-encoding|x-forwarded-.*|x-envoy-.*"
                          r"|x-request-id|x-test-id|x-llm-.*|x-model-group)$")
SECTION = {"bench": "<!-- section: bench -->", "micro": "<!-- section: micro -->",
           "profile": "<!-- section: profile -->", "memory": "<!-- section: memory -->",
           "soak": "<!-- section: soak -->"}


# ---------------------------------------------------------------- processes

def pin(pid, core):
    """Pins every thread of `pid`; threads created later inherit it."""
    subprocess.run(["taskset", "-a", "-p", "-c", str(core), str(pid)], check=True, stdout=subprocess.DEVNULL)


def cpu_seconds(pid):
    """utime + stime of the whole process (all threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def reset_peak_rss(pid):
    """Makes VmHWM start again from the current RSS (Linux >= 4.0)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def model_groups():
    """The model groups of envoy/gateway.yaml (no real vendors) that reach one
    vendor directly: name -> cluster. Weighted and failover groups are left
    out: their cost is that of the groups they are made of; so are groups
    that fit requests to a small window (mock-small): the fitting rows
    measure fitting on a history made for it."""
    bootstrap = gateway.build_bootstrap(1, 2, 3, env={})
    plain = {c["name"] for c in bootstrap["static_resources"]["clusters"] if "load_assignment" in c}
    _, edge, _ = gateway._wasm_filters(bootstrap)
    groups = {}
    for name, group in json.loads(edge["configuration"]["value"])["model_groups"].items():
        clusters = [group["cluster"]] if "cluster" in group else [c["cluster"] for c in group["candidates"]]
        if len(clusters) == 1 and clusters[0] in plain and "fitting" not in group:
            groups[name] = clusters[0]
    return groups


def free_ports(n):
    return [gateway.free_port() for _ in range(n)]


def _match_every_path(hcm):
    # Vendor paths are not all under /v1/ (Gemini's /v1beta/, Bedrock's /model/).
    # (Header matchers stay: the failover route is for failover clusters only.)
    for route in hcm["route_config"]["virtual_hosts"][0]["routes"]:
        route["match"]["prefix"] = "/"


def wasm_floor_bootstrap(listen_port, admin_port, mock_port, mode=None):
    """The gateway bootstrap with benches/wasm-floor in place of our module
    (both roles), taking the vendor request like the floor. `mode` is the
    plugin configuration of both roles (`replay`: the host-call floor)."""
    bootstrap = gateway.build_bootstrap(listen_port, admin_port, mock_port, wasm=WASM_FLOOR, env={})
    hcm, edge, upstream = gateway._wasm_filters(bootstrap)
    _match_every_path(hcm)
    if mode:
        for plugin in (edge, upstream):
            plugin["configuration"] = {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": mode}
    return bootstrap


def floor_bootstrap(listen_port, admin_port, mock_port):
    """The gateway bootstrap without the wasm filters: same listener, route
    (`cluster_header: x-llm-cluster`, set by the client) and clusters."""
    bootstrap = gateway.build_bootstrap(listen_port, admin_port, mock_port, env={})
    hcm, _, _ = gateway._wasm_filters(bootstrap)
    hcm["http_filters"] = [f for f in hcm["http_filters"] if f["name"] == "envoy.filters.http.router"]
    router = hcm["http_filters"][0]["typed_config"]
    router.pop("upstream_http_filters", None)
    _match_every_path(hcm)
    # Clusters with filters of their own (Bedrock: our upstream role, then
    # SigV4 signing) keep everything but ours.
    for cluster in bootstrap["static_resources"]["clusters"]:
        options = cluster.get("typed_extension_protocol_options", {}).get(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions", {})
        if "http_filters" in options:
            options["http_filters"] = [f for f in options["http_filters"] if f["name"] != "llm_upstream"]
    # And every other listener's (the internal listener's gateway): a floor
    # that loads our module nowhere, else its RSS is V8's and the module's.
    without_gateway_filters(bootstrap)
    return bootstrap


def without_gateway_filters(node):
    """Drops our wasm filters from every filter list in `node`, in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("http_filters", "upstream_http_filters") and isinstance(value, list):
                value[:] = [f for f in value if not gateway.is_gateway_wasm(f.get("typed_config"))]
            without_gateway_filters(value)
    elif isinstance(node, list):
        for value in node:
            without_gateway_filters(value)


class Stack:
    """Processes started here, stopped by PID in reverse order."""

    def __init__(self):
        self.procs = []

    def add(self, proc):
        self.procs.append(proc)
        return proc

    def stop(self):
        for proc in reversed(self.procs):
            gateway.stop(proc)
        self.procs.clear()


class Envoy:
    def __init__(self, stack, name, bootstrap, port, admin_port, workdir, env=None):
        self.name = name
        self.port = port
        self.admin = f"http://127.0.0.1:{admin_port}"
        self.proc = stack.add(gateway.start_envoy(bootstrap, workdir / name, admin_port, log_level="warn", env=env))
        pin(self.proc.pid, GATEWAY_CORE)

    @property
    def pid(self):
        return self.proc.pid

    def stats(self, pattern):
        url = f"{self.admin}/stats?format=json&filter={pattern}"
        with urllib.request.urlopen(url, timeout=5) as r:
            return {s["name"]: s.get("value") for s in json.loads(r.read()).get("stats", []) if "name" in s}


class Named:
    """An Envoy measured under another name (the same process, other requests)."""

    def __init__(self, envoy, name):
        self.envoy, self.name = envoy, name

    def __getattr__(self, attr):
        return getattr(self.envoy, attr)


def start_mock(stack, fast):
    proc, port = gateway.start_mock(args=["--fast"] if fast else [])
    stack.add(proc)
    pin(proc.pid, LOAD_CORE)
    return port


# ---------------------------------------------------------------- requests

def unified_body(size, stream, mark=""):
    """A unified chat request of about `size` bytes (its prompt opening with
    `mark`, where bench.lua writes each request's number)."""
    body = {"model": "bench", "max_tokens": 256, "stream": stream,
            "messages": [{"role": "system", "content": "You are a benchmark."},
                         {"role": "user", "content": mark}]}
    if stream:
        body["stream_options"] = {"include_usage": True}
    filler = "lorem ipsum dolor sit amet "
    empty = len(json.dumps(body))
    text = (filler * (size // len(filler) + 1))[: max(0, size - empty)]
    body["messages"][1]["content"] = mark + text
    return json.dumps(body).encode()


def client_request(client, group, size, stream):
    """(path, headers, body) of a client surface's request of about `size`
    bytes to `group`, as its SDK sends it: Gemini's generateContent (SSE
    with `alt=sse`, the model in the path, the key in `x-goog-api-key`),
    Anthropic's Messages (`x-api-key`), OpenAI's Responses (a bearer key),
    OpenAI's embeddings (a batch of EMBED_INPUTS texts, as LangChain and
    LlamaIndex send one; the group in `x-model-group`)."""
    filler = "lorem ipsum dolor sit amet "
    if client == "embeddings":
        each = max(1, size // EMBED_INPUTS - 6)
        inputs = [(f"{i} " + filler * (each // len(filler) + 1))[:each] for i in range(EMBED_INPUTS)]
        headers = {"content-type": "application/json", "authorization": f"Bearer {CLIENT_KEY}",
                   "x-model-group": group}
        return "/v1/embeddings", headers, json.dumps({"model": EMBED_MODEL, "input": inputs}).encode()

    def fill(body, put):
        put(body, "")
        empty = len(json.dumps(body))
        put(body, (filler * (size // len(filler) + 1))[: max(0, size - empty)])
        return json.dumps(body).encode()

    if client == "gemini":
        body = {"contents": [{"role": "user", "parts": [{"text": ""}]}],
                "systemInstruction": {"parts": [{"text": "You are a benchmark."}]},
                "generationConfig": {"maxOutputTokens": 256}}
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        headers = {"content-type": "application/json", "x-goog-api-key": CLIENT_KEY}
        return (f"/v1beta/models/{group}:{method}", headers,
                fill(body, lambda b, t: b["contents"][0]["parts"][0].__setitem__("text", t)))
    if client == "messages":
        body = {"model": group, "max_tokens": 256, "system": "You are a benchmark.",
                "messages": [{"role": "user", "content": ""}], "stream": stream}
        headers = {"content-type": "application/json", "x-api-key": CLIENT_KEY,
                   "anthropic-version": "2023-06-01"}
        return "/v1/messages", headers, fill(body, lambda b, t: b["messages"][0].__setitem__("content", t))
    assert client == "responses", client
    body = {"model": group, "max_output_tokens": 256, "instructions": "You are a benchmark.", "store": False,
            "input": [{"role": "user", "content": ""}], "stream": stream}
    headers = {"content-type": "application/json", "authorization": f"Bearer {CLIENT_KEY}"}
    return "/v1/responses", headers, fill(body, lambda b, t: b["input"][0].__setitem__("content", t))


def scenarios(group, only=True):
    """The scenarios of `group` (those of BENCH_ONLY unless `only` is false):
    (name, connections, stream, size, client or None)."""
    out = [(*s, None) for s in SCENARIOS]
    out += [s for s in CLIENT_SCENARIOS if group in CLIENT_GROUPS[s[4]]]
    return [s for s in out if not only or not ONLY or s[0] in ONLY]


class Request:
    """One request as files for bench.lua, plus the URL to send it to."""

    def __init__(self, directory, name, url, headers, body, unique=False):
        self.url = url
        self.unique = unique
        self.prefix = directory / name
        self.prefix.with_suffix(".headers").write_text("".join(f"{k}: {v}\n" for k, v in headers.items()))
        self.prefix.with_suffix(".body").write_bytes(body)
        self.headers, self.body = headers, body

    def raw(self, host):
        """The HTTP/1.1 request bytes (for the TTFB client)."""
        path = self.url.split("/", 3)[3]
        head = f"POST /{path} HTTP/1.1\r\nhost: {host}\r\ncontent-length: {len(self.body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        return head.encode() + b"\r\n" + self.body


def post(url, headers, body):
    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.read()


def answers(url, headers, body):
    """Whether `url` answers the request with a 200."""
    try:
        return post(url, headers, body)[0] == 200
    except urllib.error.HTTPError:
        return False


def capture_vendor_requests(workdir, groups):
    """For each (group, stream, size): the vendor request the gateway sends.
    Uses its own recording mock and gateway, stopped before measuring."""
    stack = Stack()
    try:
        mock_port = start_mock(stack, fast=False)
        port, admin = free_ports(2)
        Envoy(stack, "capture", gateway.build_bootstrap(port, admin, mock_port, env={}), port, admin, workdir)
        captured = {}
        for group in groups:
            for stream, size, client in {(s, b, c) for _, _, s, b, c in scenarios(group, only=False)}:
                test_id = f"{group}-{int(stream)}-{size}-{client}"
                if client:
                    path, headers, body = client_request(client, group, size, stream)
                else:
                    path, headers, body = "/v1/chat/completions", {"content-type": "application/json",
                                                                   "x-model-group": group}, unified_body(size, stream)
                status, _ = post(f"http://127.0.0.1:{port}{path}", dict(headers, **{"x-test-id": test_id}), body)
                if status != 200:
                    raise RuntimeError(f"capture {test_id}: HTTP {status}")
                with urllib.request.urlopen(f"http://127.0.0.1:{mock_port}/_mock/requests?test_id={test_id}") as r:
                    seen = json.loads(r.read())
                seen = seen[-1]
                body = seen["body"]
                body = body.encode() if isinstance(body, str) else json.dumps(body, separators=(",", ":")).encode()
                headers = {k: v for k, v in seen["headers"].items() if not NOT_REPLAYED.match(k)}
                path = seen["path"] + (f"?{seen['query']}" if seen.get("query") else "")
                captured[(group, stream, size, client)] = (path, headers, body)
        return captured
    finally:
        stack.stop()


# ---------------------------------------------------------------- load

def start_wrk(requests, connections, seconds, workdir, name="wrk"):
    """Starts wrk on the load core; `finish_wrk` waits for it and reads its JSON summary."""
    listing = workdir / f"{name}.requests"
    listing.write_text("".join(f"{r.prefix}\n" for r in requests))
    out = workdir / f"{name}.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ, BENCH_REQUESTS=str(listing), BENCH_OUT=str(out))
    if any(r.unique for r in requests):
        # Each request's prompt its own: the mark replaced by a run-unique number.
        env.update(BENCH_UNIQUE=UNIQUE_MARK, BENCH_SEED=f"{time.time_ns()}")
    cmd = ["taskset", "-c", str(LOAD_CORE), "wrk", "-t1", f"-c{connections}", f"-d{seconds}s",
           "--timeout", "10s", "-s", str(LUA), requests[0].url]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL), out, seconds


def finish_wrk(started):
    proc, out, seconds = started
    try:
        if proc.wait(timeout=seconds + 30) != 0:
            raise RuntimeError(f"wrk exited with {proc.returncode}")
    finally:
        gateway.stop(proc)
    return json.loads(out.read_text())


def wrk(requests, connections, seconds, workdir):
    """Runs wrk on the load core; returns its JSON summary."""
    return finish_wrk(start_wrk(requests, connections, seconds, workdir))


def measure(envoy, request, connections, seconds, workdir):
    reset_peak_rss(envoy.pid)
    cpu = cpu_seconds(envoy.pid)
    result = wrk([request], connections, seconds, workdir)
    result["cpu_s"] = cpu_seconds(envoy.pid) - cpu
    result["hwm_kb"] = status_kb(envoy.pid, "VmHWM")
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
    result["failed"] = sum(result["errors"].values())
    return result


async def _ttfb_connection(port, raw, deadline, ttfbs, totals):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            writer.write(raw)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"stream answered {head[:40]!r}")
            first = None
            if b"transfer-encoding: chunked" in head.lower():
                while True:
                    size = int((await reader.readline()).split(b";")[0], 16)
                    if size == 0:
                        await reader.readline()
                        break
                    await reader.readexactly(size + 2)
                    first = first or time.perf_counter()
            else:
                length = int(re.search(rb"content-length: *(\d+)", head.lower()).group(1))
                await reader.readexactly(length)
                first = time.perf_counter()
            end = time.perf_counter()
            ttfbs.append(first - start)
            totals.append(end - start)
    finally:
        writer.close()


def ttfb(port, request, connections, seconds):
    """Per-stream time to first body byte and total time: (p50, p99) each, seconds."""
    raw = request.raw(f"127.0.0.1:{port}")
    ttfbs, totals = [], []

    async def run():
        deadline = time.perf_counter() + seconds
        await asyncio.gather(*(_ttfb_connection(port, raw, deadline, ttfbs, totals) for _ in range(connections)))

    asyncio.run(run())
    return {"ttfb": percentiles(ttfbs), "total": percentiles(totals), "n": len(ttfbs)}


def percentiles(values):
    values = sorted(values)
    if not values:
        return (0.0, 0.0)
    return (values[len(values) // 2], values[min(len(values) - 1, int(len(values) * 0.99))])


# ---------------------------------------------------------------- report

def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    envoy_version = subprocess.run([gateway.envoy_binary(), "--version"], capture_output=True, text=True).stdout
    envoy_version = re.search(r"version: \S+", envoy_version)
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True)
    wrk_version = (wrk_version.stdout + wrk_version.stderr).splitlines()[0] if wrk_version else "?"
    return [f"nproc: {os.cpu_count()}; CPU: {cpu}; kernel: {platform.release()}",
            f"Envoy: {envoy_version.group(0) if envoy_version else '?'}; load generator: {wrk_version.strip()}",
            f"load average at start: {open('/proc/loadavg').read().split()[:3]}"]


def cpu_per_request(run):
    return run["cpu_s"] / run["requests"] if run["requests"] else 0.0


def mean(values):
    return sum(values) / len(values)


def spread(values):
    """Relative difference between the runs."""
    lo, hi = min(values), max(values)
    return (hi - lo) / hi if hi else 0.0


def anchor_name(heading):
    """A subsection's anchor: its heading up to the first ':' or ' (', as a slug."""
    title = re.split(r":| \(", heading.lstrip("#").strip(), maxsplit=1)[0]
    return re.sub(r"[^a-z0-9]+", "-", title.lower().replace("`", "")).strip("-")


def with_anchors(name, text):
    """The section with mdBook anchors (`{{#include BENCHMARKS.md:<anchor>}}`
    in docs/src/ quotes a table without copying its numbers): the whole
    section (`bench`, `soak`), each `###` subsection by its heading, and the
    built artifacts' sizes (`artifacts`)."""
    out, open_anchor = [f"<!-- ANCHOR: {name} -->"], None
    for line in text.rstrip("\n").split("\n"):
        if line.startswith("### "):
            if open_anchor:
                out.append(f"<!-- ANCHOR_END: {open_anchor} -->")
            open_anchor = f"{name}-{anchor_name(line)}"
            out.append(f"<!-- ANCHOR: {open_anchor} -->")
        if line.startswith("- filter: "):
            out += [f"<!-- ANCHOR: {name}-artifacts -->", line, f"<!-- ANCHOR_END: {name}-artifacts -->"]
            continue
        out.append(line)
    if open_anchor:
        out.append(f"<!-- ANCHOR_END: {open_anchor} -->")
    out.append(f"<!-- ANCHOR_END: {name} -->")
    return "\n".join(out) + "\n"


def replace_section(name, text):
    """BENCHMARKS.md holds one section per command; each run replaces its own."""
    old = REPORT.read_text() if REPORT.exists() else ""
    sections = {}
    current = None
    for line in old.splitlines(keepends=True):
        for key, marker in SECTION.items():
            if line.strip() == marker:
                current = key
        if current:
            sections[current] = sections.get(current, "") + line
    sections[name] = SECTION[name] + "\n" + with_anchors(name, text)
    header = "# Benchmarks\n\nGenerated by `make bench` and `make soak` (scripts/bench.py); do not edit by hand.\n\n"
    REPORT.write_text(header + "\n".join(sections[k].rstrip("\n") + "\n" for k in SECTION if k in sections))


def histogram_quantiles(envoy, name_filter, label):
    """The filter's histograms whose name contains `name_filter`, read from
    Envoy's admin after a stats flush: {value of `label`: (p50, p99)}."""
    with urllib.request.urlopen(f"{envoy.admin}/stats?format=json&filter={name_filter}", timeout=5) as r:
        stats = json.loads(r.read())["stats"]
    histograms = next((s["histograms"] for s in stats if "histograms" in s), {})
    quantiles = histograms.get("supported_quantiles", [])
    if 50 not in quantiles or 99 not in quantiles:
        return {}
    found = {}
    for h in histograms.get("computed_quantiles", []):
        key = h["name"].rsplit(f"{label}=", 1)[-1]
        values = [v.get("cumulative") for v in h["values"]]
        if values[quantiles.index(50)] is not None:
            found[key] = (values[quantiles.index(50)], values[quantiles.index(99)])
    return found


def in_envoy_timing(workdir):
    """The upstream role's own time per phase inside Envoy (V8), from the
    filter's overhead histograms (turned on here): {group: {phase: (p50, p99) in µs}}."""
    timings = {}
    for group in sorted(g for g in model_groups() if not ONLY_GROUPS or g in ONLY_GROUPS):
        stack = Stack()
        try:
            mock_port = start_mock(stack, fast=True)
            port, admin = free_ports(2)
            bootstrap = gateway.build_bootstrap(port, admin, mock_port, wasm=WASM, env={},
                                                edit=lambda config: config.update(overhead_histograms=True))
            bootstrap["stats_flush_interval"] = "1s"  # histograms are read after a flush
            envoy = Envoy(stack, f"timing-{group}", bootstrap, port, admin, workdir)
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            headers = {"content-type": "application/json", "x-model-group": group}
            for stream in (False, True):
                req = Request(workdir, f"timing-{group}-{int(stream)}", url, headers, unified_body(1024, stream))
                wrk([req], 16, 2, workdir)
            time.sleep(2)
            timings[group] = histogram_quantiles(envoy, "overhead_us", "phase")
        finally:
            stack.stop()
    return timings


def host_call_costs(workdir, captured, cluster):
    """What each host call the gateway makes costs inside Envoy, warm: the
    wasm floor's `probe` mode, under load. {call: ns per call (p50)}."""
    stack = Stack()
    try:
        mock_port = start_mock(stack, fast=True)
        port, admin = free_ports(2)
        bootstrap = wasm_floor_bootstrap(port, admin, mock_port, mode="probe")
        bootstrap["stats_flush_interval"] = "1s"
        envoy = Envoy(stack, "probe", bootstrap, port, admin, workdir)
        path, headers, body = captured
        req = Request(workdir, "probe", f"http://127.0.0.1:{port}{path}", dict(headers, **{"x-llm-cluster": cluster}), body)
        wrk([req], 16, 2, workdir)
        time.sleep(2)
        first = histogram_quantiles(envoy, "first_host_call_ns", "call")
        warm = histogram_quantiles(envoy, "wasm_floor.host_call_ns", "call")
        return {call: (first.get(call, (None,))[0], p50) for call, (p50, _) in warm.items()}
    finally:
        stack.stop()


def micro_benchmarks():
    """The micro benchmarks (benches/core.rs) natively and compiled to wasm in
    Node's V8, as one markdown table."""
    def run(extra, env=None):
        cmd = ["taskset", "-c", str(GATEWAY_CORE), "cargo", "bench", "-q", "-p", "llm-gateway-core", "--bench", "core", *extra]
        result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900,
                                env=dict(os.environ, **(env or {})))
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n```\n{result.stderr[-2000:]}\n```\n")
        rows = {}
        for line in result.stdout.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 3 and cells[1].replace(".", "", 1).isdigit():
                rows[cells[0]] = (float(cells[1]), cells[2])
        return rows
    def best_of_two(extra, env=None):
        # Other work on the machine only ever adds time: keep each row's faster run.
        first, second = run(extra, env), run(extra, env)
        return {name: min(t, second.get(name, t)) for name, t in first.items()}
    try:
        # glibc gives freed memory back to the kernel and takes it again on
        # every 100 KB iteration (page faults, ~3x the work on some rows);
        # the wasm allocator never does. Keep the native heap like the VM's.
        native = best_of_two([], {"MALLOC_TRIM_THRESHOLD_": "1073741824",
                                  "MALLOC_MMAP_THRESHOLD_": "1073741824",
                                  "MALLOC_TOP_PAD_": "16777216"})
        # Envoy's V8 runs hot code optimised (TurboFan); --no-liftoff compiles
        # it so from the start, as the short benchmark loops would not tier up.
        v8 = best_of_two(["--target", "wasm32-wasip1"], {
            "CARGO_TARGET_WASM32_WASIP1_RUNNER": "node --no-liftoff --no-warnings scripts/wasi-run.mjs"})
    except RuntimeError as e:
        return str(e)
    out = ["| benchmark | native median µs | V8 (wasm in Node) median µs | V8 / native | note (native) |",
           "|---|---|---|---|---|"]
    for name, (t, note) in native.items():
        in_v8 = v8.get(name, (None, ""))[0]
        ratio = f"{in_v8 / t:.1f}×" if in_v8 and t else "-"
        out.append(f"| {name} | {t:.2f} | {in_v8:.2f} | {ratio} | {note} |" if in_v8 is not None
                   else f"| {name} | {t:.2f} | - | - | {note} |")
    return "\n".join(out) + "\n"


def bench(args):
    started = time.time()
    # Every Envoy here says which host it runs; none follows LLM_GATEWAY_HOST.
    os.environ.pop("LLM_GATEWAY_HOST", None)
    if not gateway.NATIVE.exists():
        sys.exit(f"{gateway.NATIVE} is missing: run `make build`")
    os.sched_setaffinity(0, {LOAD_CORE})
    cluster_of = model_groups()
    groups = sorted(g for g in cluster_of if not ONLY_GROUPS or g in ONLY_GROUPS)
    lines = machine() + [f"filter: {WASM.relative_to(ROOT) if WASM.is_relative_to(ROOT) else WASM} "
                          f"({WASM.stat().st_size // 1024} KB); native: {gateway.NATIVE.relative_to(ROOT)} "
                          f"({gateway.NATIVE.stat().st_size // 1024} KB)"]
    workdir = Path(tempfile.mkdtemp(prefix="llm-bench-"))
    print(f"groups: {', '.join(groups)}; work dir {workdir}", flush=True)
    captured = capture_vendor_requests(workdir, groups)
    stack = Stack()
    rows = []
    stream_rows = []
    try:
        mock_port = start_mock(stack, fast=True)
        gw_port, gw_admin, floor_port, floor_admin = free_ports(4)
        floor = Envoy(stack, "floor", floor_bootstrap(floor_port, floor_admin, mock_port), floor_port, floor_admin, workdir)
        wf_port, wf_admin = free_ports(2)
        wasm_floor = Envoy(stack, "wasm-floor", wasm_floor_bootstrap(wf_port, wf_admin, mock_port), wf_port, wf_admin,
                           workdir)
        hf_port, hf_admin = free_ports(2)
        host_floor = Envoy(stack, "host-call-floor", wasm_floor_bootstrap(hf_port, hf_admin, mock_port, mode="replay"),
                           hf_port, hf_admin, workdir)
        gw = Envoy(stack, "gateway", gateway.build_bootstrap(gw_port, gw_admin, mock_port, wasm=WASM, env={}),
                   gw_port, gw_admin, workdir)
        # The same configuration on the native host (the dynamic module).
        nt_port, nt_admin = free_ports(2)
        native = Envoy(stack, "gateway-native", gateway.to_native(gateway.build_bootstrap(
            nt_port, nt_admin, mock_port, env={})), nt_port, nt_admin, workdir, env=gateway.native_env())
        # The native host again without the per-request stats series.
        nu_port, nu_admin = free_ports(2)
        native_unmetered = Envoy(stack, "gateway-native-unmetered", gateway.to_native(gateway.build_bootstrap(
            nu_port, nu_admin, mock_port, env={}, edit=unmetered)), nu_port, nu_admin, workdir, env=gateway.native_env())
        baseline = None
        if BASELINE_WASM:
            bl_port, bl_admin = free_ports(2)
            baseline = Envoy(stack, "gateway-baseline", gateway.build_bootstrap(
                bl_port, bl_admin, mock_port, wasm=Path(BASELINE_WASM), env={}, edit=for_baseline),
                bl_port, bl_admin, workdir)
        # Diagnostics recording on, on both hosts.
        gd_port, gd_admin, nd_port, nd_admin = free_ports(4)
        gw_diag = Envoy(stack, "gateway-diagnostics", gateway.build_bootstrap(
            gd_port, gd_admin, mock_port, wasm=WASM, env={}, edit=with_diagnostics), gd_port, gd_admin, workdir)
        native_diag = Envoy(stack, "gateway-native-diagnostics", gateway.to_native(gateway.build_bootstrap(
            nd_port, nd_admin, mock_port, env={}, edit=with_diagnostics)), nd_port, nd_admin, workdir,
            env=gateway.native_env())
        gl_port, gl_admin = free_ports(2)
        gw_limits = Envoy(stack, "gateway-limits", gateway.build_bootstrap(
            gl_port, gl_admin, mock_port, wasm=WASM, env={}, edit=with_limits), gl_port, gl_admin, workdir)
        gx_port, gx_admin = free_ports(2)
        gw_plain = Envoy(stack, "gateway-no-discovery", gateway.build_bootstrap(
            gx_port, gx_admin, mock_port, wasm=WASM, env={}, edit=without_discovery), gx_port, gx_admin, workdir)
        gc_port, gc_admin = free_ports(2)
        gw_cache = Envoy(stack, "gateway-cache", gateway.build_bootstrap(
            gc_port, gc_admin, mock_port, wasm=WASM, env={}, cache=True), gc_port, gc_admin, workdir)
        gw_cache_miss, gw_unique = Named(gw_cache, "gateway-cache-miss"), Named(gw, "gateway-unique")
        # Context fitting's three groups, on both hosts (one Envoy a host, a name a group).
        gf_port, gf_admin, nf_port, nf_admin = free_ports(4)
        gw_fit = Envoy(stack, "gateway-fitting", gateway.build_bootstrap(
            gf_port, gf_admin, mock_port, wasm=WASM, env={}, edit=with_fitting), gf_port, gf_admin, workdir)
        native_fit = Envoy(stack, "gateway-native-fitting", gateway.to_native(gateway.build_bootstrap(
            nf_port, nf_admin, mock_port, env={}, edit=with_fitting)), nf_port, nf_admin, workdir,
            env=gateway.native_env())
        fitting = [(who, Named(envoy, f"{envoy.name}-{group}"), port, group)
                   for envoy, port, host in ((gw_fit, gf_port, "g"), (native_fit, nf_port, "n"))
                   for group, who in zip(FITTING_GROUPS, (f"{host}fo", f"{host}fw", f"{host}ft"))]
        for who, envoy, port, fit_group in fitting:
            # Each group does what its row says: nothing, a whole fit, a trim.
            context = fitted(f"http://127.0.0.1:{port}/v1/chat/completions",
                             {"content-type": "application/json", "x-model-group": fit_group},
                             long_history_body(fit_group))
            expected = {"fo": context is None, "fw": context is not None and "trimmed" not in context,
                        "ft": context is not None and "trimmed=" in context}[who[1:]]
            if not expected:
                raise RuntimeError(f"{envoy.name}: x-llm-context {context!r} is not what {fit_group} does")
        # The baseline build with the same limits: limits' cost before and after, in one run.
        bl_limits = None
        if BASELINE_WASM:
            bll_port, bll_admin = free_ports(2)
            bl_limits = Envoy(stack, "gateway-baseline-limits", gateway.build_bootstrap(
                bll_port, bll_admin, mock_port, wasm=Path(BASELINE_WASM), env={},
                edit=lambda config: (for_baseline(config), with_limits(config))),
                bll_port, bll_admin, workdir)
        for group in groups:
            for name, connections, stream, size, client in scenarios(group):
                path, vendor_headers, vendor_body = captured[(group, stream, size, client)]
                floor_req = Request(workdir, f"floor-{group}-{int(stream)}-{size}-{client}",
                                    f"http://127.0.0.1:{floor_port}{path}",
                                    dict(vendor_headers, **{"x-llm-cluster": cluster_of[group]}), vendor_body)
                if client:
                    gw_path, gw_headers, gw_body = client_request(client, group, size, stream)
                    gw_req = Request(workdir, f"gw-{group}-{int(stream)}-{size}-{client}",
                                     f"http://127.0.0.1:{gw_port}{gw_path}", gw_headers, gw_body)
                    nt_req = Request(workdir, f"nt-{group}-{int(stream)}-{size}-{client}",
                                     f"http://127.0.0.1:{nt_port}{gw_path}", gw_headers, gw_body)
                    limits_here = False
                    # A baseline from before this client's surface existed does not answer: left out.
                    baseline_here = baseline is not None and answers(
                        f"http://127.0.0.1:{bl_port}{gw_path}", gw_headers, gw_body)
                else:
                    gw_req = Request(workdir, f"gw-{group}-{int(stream)}-{size}", f"http://127.0.0.1:{gw_port}/v1/chat/completions",
                                     {"content-type": "application/json", "x-model-group": group}, unified_body(size, stream))
                    nt_req = Request(workdir, f"nt-{group}-{int(stream)}-{size}",
                                     f"http://127.0.0.1:{nt_port}/v1/chat/completions", gw_req.headers, gw_req.body)
                    baseline_here = baseline is not None
                    limits_here = group == LIMITS_GROUP and name in LIMITS_SCENARIOS
                measured = [(floor, floor_req), (gw, gw_req), (native, nt_req)]
                if group == WASM_FLOOR_GROUP and not client:
                    wf_req = Request(workdir, f"wf-{group}-{int(stream)}-{size}", f"http://127.0.0.1:{wf_port}{path}",
                                     floor_req.headers, vendor_body)
                    hf_req = Request(workdir, f"hf-{group}-{int(stream)}-{size}", f"http://127.0.0.1:{hf_port}{path}",
                                     floor_req.headers, vendor_body)
                    measured[1:1] = [(wasm_floor, wf_req), (host_floor, hf_req)]
                if baseline_here:
                    bl_req = Request(workdir, f"bl-{group}-{int(stream)}-{size}-{client}",
                                     f"http://127.0.0.1:{bl_port}{gw_path if client else '/v1/chat/completions'}",
                                     gw_req.headers, gw_req.body)
                    # Right after this build, so each round's pair shares the machine's state.
                    measured.insert(measured.index((gw, gw_req)) + 1, (baseline, bl_req))
                if not client and name == UNMETERED_SCENARIO:
                    measured.append((native_unmetered, Request(
                        workdir, f"nu-{group}-{int(stream)}-{size}", f"http://127.0.0.1:{nu_port}/v1/chat/completions",
                        gw_req.headers, gw_req.body)))
                if not client and group == DIAGNOSTICS_GROUP and name in DIAGNOSTICS_SCENARIOS:
                    for envoy, port, who in ((gw_diag, gd_port, "gd"), (native_diag, nd_port, "nd")):
                        measured.append((envoy, Request(
                            workdir, f"{who}-{group}-{int(stream)}-{size}", f"http://127.0.0.1:{port}/v1/chat/completions",
                            gw_req.headers, gw_req.body)))
                if not client and group == CACHE_GROUP and name in CACHE_SCENARIOS:
                    url = f"http://127.0.0.1:{{}}/v1/chat/completions"
                    unique_body = unified_body(size, stream, mark=UNIQUE_MARK)
                    measured += [
                        (gw_cache, Request(workdir, f"gc-{group}-{int(stream)}-{size}", url.format(gc_port),
                                           gw_req.headers, gw_req.body)),
                        (gw_cache_miss, Request(workdir, f"gm-{group}-{int(stream)}-{size}", url.format(gc_port),
                                                gw_req.headers, unique_body, unique=True)),
                        (gw_unique, Request(workdir, f"gu-{group}-{int(stream)}-{size}", url.format(gw_port),
                                            gw_req.headers, unique_body, unique=True))]
                if not client and group == FITTING_GROUP and name in FITTING_SCENARIOS:
                    for who, envoy, port, fit_group in fitting:
                        measured.append((envoy, Request(
                            workdir, f"{who}-{group}-{int(stream)}-{size}", f"http://127.0.0.1:{port}/v1/chat/completions",
                            {"content-type": "application/json", "x-model-group": fit_group},
                            long_history_body(fit_group))))
                if limits_here:
                    gl_req = Request(workdir, f"gl-{group}-{int(stream)}-{size}",
                                     f"http://127.0.0.1:{gl_port}/v1/chat/completions", gw_req.headers, gw_req.body)
                    measured.append((gw_limits, gl_req))
                    measured.append((gw_plain, Request(
                        workdir, f"gx-{group}-{int(stream)}-{size}", f"http://127.0.0.1:{gx_port}/v1/chat/completions",
                        gw_req.headers, gw_req.body)))
                    if bl_limits:
                        bll_req = Request(workdir, f"bll-{group}-{int(stream)}-{size}",
                                          f"http://127.0.0.1:{bll_port}/v1/chat/completions", gw_req.headers,
                                          gw_req.body)
                        measured.append((bl_limits, bll_req))
                for envoy, req in measured:
                    status, answer = post(req.url, req.headers, req.body)
                    done = not stream or STREAM_END[client] in answer
                    if status != 200 or (stream and envoy in (gw, native, baseline) and not done):
                        raise RuntimeError(f"{envoy.name} {group} {name}: HTTP {status} {answer[:200]!r}")
                    wrk([req], connections, WARMUP_SECONDS, workdir)
                runs = {envoy.name: [] for envoy, _ in measured}
                for round_ in range(RUNS):
                    # Every other round in reverse order: a drift in the machine's speed
                    # during a round weighs on both ends alike.
                    for envoy, req in (measured if round_ % 2 == 0 else measured[::-1]):
                        runs[envoy.name].append(measure(envoy, req, connections, SECONDS, workdir))
                row = summarise(group, name, stream, runs)
                if stream:
                    probes = {"floor": [], "gateway": []}
                    for _ in range(RUNS):
                        probes["floor"].append(ttfb(floor_port, floor_req, connections, TTFB_SECONDS))
                        probes["gateway"].append(ttfb(gw_port, gw_req, connections, TTFB_SECONDS))
                    stream_rows.append(stream_summary(group, row, probes))
                rows.append(row)
                print(f"{group:16} {name:12} floor {row['floor_rps']:8.0f}/s  gateway {row['gw_rps']:8.0f}/s "
                      f"({row['ratio']:.2f})  native {row['nt_rps']:8.0f}/s ({row['nt_rps'] / row['floor_rps']:.2f})  "
                      f"+p50 {row['added_p50_ms']:.3f} ms  cpu/req {row['gw_cpu_us']:.1f} native {row['nt_cpu_us']:.1f} "
                      f"vs {row['floor_cpu_us']:.1f} us{'  NOISY' if row['noisy'] else ''}", flush=True)
    finally:
        stack.stop()
    lines.append(f"load average at end: {open('/proc/loadavg').read().split()[:3]}")
    micro = micro_benchmarks() if not args.skip_micro else "(skipped)\n"
    timings = in_envoy_timing(workdir)
    probe_group = WASM_FLOOR_GROUP if WASM_FLOOR_GROUP in groups else groups[0]
    host_calls = host_call_costs(workdir, captured[(probe_group, False, 1024, None)], cluster_of[probe_group])
    replace_section("bench", render_bench(lines, rows, stream_rows, micro, timings, host_calls,
                                          time.time() - started))
    shutil.rmtree(workdir, ignore_errors=True)
    # Each host's memory, started alone (`make bench-memory` runs it by itself).
    memory(args)
    print(f"wrote {REPORT}")


def summarise(group, name, stream, runs):
    f, g = runs["floor"], runs["gateway"]
    row = {"group": group, "scenario": name, "stream": stream}
    for who, name in (("nt", "gateway-native"), ("nu", "gateway-native-unmetered"), ("wf", "wasm-floor"), ("hf", "host-call-floor"), ("gl", "gateway-limits"),
                      ("gx", "gateway-no-discovery"),
                      ("bl", "gateway-baseline"), ("bll", "gateway-baseline-limits"), ("gd", "gateway-diagnostics"),
                      ("nd", "gateway-native-diagnostics"), ("gc", "gateway-cache"),
                      ("gm", "gateway-cache-miss"), ("gu", "gateway-unique"), *FITTING_NAMES):
        w = runs.get(name)
        if w:
            row[f"{who}_rps"] = mean([r["rps"] for r in w])
            row[f"{who}_p50_ms"] = mean([r["p50_us"] for r in w]) / 1000
            row[f"{who}_cpu_us"] = 1e6 * sum(r["cpu_s"] for r in w) / max(1, sum(r["requests"] for r in w))
            row[f"{who}_failed"] = sum(r["failed"] for r in w)
            row[f"{who}_p99_ms"] = mean([r["p99_us"] for r in w]) / 1000
            row[f"{who}_hwm_mb"] = max(r["hwm_kb"] for r in w) / 1024
    row["floor_rps"] = mean([r["rps"] for r in f])
    row["gw_rps"] = mean([r["rps"] for r in g])
    row["ratio"] = row["gw_rps"] / row["floor_rps"] if row["floor_rps"] else 0.0
    for who, rs in (("floor", f), ("gw", g)):
        row[f"{who}_p50_ms"] = mean([r["p50_us"] for r in rs]) / 1000
        row[f"{who}_p99_ms"] = mean([r["p99_us"] for r in rs]) / 1000
        row[f"{who}_cpu_us"] = 1e6 * sum(r["cpu_s"] for r in rs) / max(1, sum(r["requests"] for r in rs))
        row[f"{who}_hwm_mb"] = max(r["hwm_kb"] for r in rs) / 1024
        row[f"{who}_failed"] = sum(r["failed"] for r in rs)
    row["added_p50_ms"] = row["gw_p50_ms"] - row["floor_p50_ms"]
    if runs.get("gateway-baseline"):
        # Each round's pair on its own: how far one round's ratio strays is the noise.
        per_round = sorted(cpu_per_request(a) / cpu_per_request(b)
                           for a, b in zip(g, runs["gateway-baseline"]) if cpu_per_request(b))
        if per_round:
            row["bl_rounds"] = (per_round[len(per_round) // 2] if len(per_round) % 2
                                else mean(per_round[len(per_round) // 2 - 1:len(per_round) // 2 + 1]),
                                per_round[0], per_round[-1])
    row["spread"] = max(spread([r["rps"] for r in f]), spread([r["rps"] for r in g]))
    row["noisy"] = row["spread"] > NOISE
    return row


def stream_summary(group, row, probes):
    out = {"group": group, "row": row}
    for who in ("floor", "gateway"):
        out[who] = {k: tuple(mean([p[k][i] for p in probes[who]]) * 1000 for i in (0, 1)) for k in ("ttfb", "total")}
    return out


def render_bench(lines, rows, stream_rows, micro, timings, host_calls, elapsed):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"## `make bench`, {now}\n"]
    out += [f"- {line}" for line in lines]
    out.append(f"- duration: {elapsed:.0f} s\n")
    out.append(f"""### Method
- Loopback only. Envoy 1.40 `--concurrency 1`, both Envoys pinned to CPU {GATEWAY_CORE}; the mock provider
  (`--fast`: fixed ~1 KB answer, streams of {STREAM_CHUNKS} content chunks in one write) and wrk (`-t1`) pinned to CPU {LOAD_CORE}.
- **floor**: plain Envoy, same listener, route, retry policy and clusters, no wasm filter; the client sends the
  vendor request the gateway would send (captured once through the gateway) with `x-llm-cluster` set itself.
  **gateway**: Envoy with `llm_edge` + `llm_upstream` (the wasm host), the client sends the unified request; in
  the `gemini` rows Gemini's own (`/v1beta/models/{{group}}:generateContent`, `:streamGenerateContent?alt=sse`):
  passed through to mock-gemini, translated to the others.
  **native**: the same bootstrap and filter configuration on the native host (`libllm_gateway.so`, an Envoy
  dynamic module: `scripts/gateway.py`'s `to_native`), the same request.
  **wasm floor** and **host-call floor** ({WASM_FLOOR_GROUP} only): the floor's request through Envoy with
  `benches/wasm-floor` loaded as both roles: the gateway's plugin shape and body buffering, no work of its own;
  the host-call floor also makes the gateway's host calls (see "Where the gateway's cost goes").
- Each scenario: {WARMUP_SECONDS} s warm-up each, then {RUNS} runs of {SECONDS:g} s, all Envoys interleaved
  (every other round in reverse order; a baseline build right after this one);
  the tables show the mean of the runs. **noisy** = the runs' req/s differ by more than {NOISE:.0%}.
- CPU per request: utime+stime of the Envoy process (all threads, /proc/PID/stat) over the runs / requests.
  Peak RSS: VmHWM, reset before each run (`clear_refs` 5).
- Stream time to first byte: a small asyncio client (also on CPU {LOAD_CORE}, {TTFB_SECONDS:g} s per run, same connections):
  time from sending the request to the first body chunk, and to the stream's end. The fast mock writes a
  whole stream at once, so both are close: the difference to the floor is the gateway's time to first byte.
- The machine has 2 cores shared with other engineers building and testing: absolute numbers move between runs;
  compare the ratios within one run.
""")
    out.append("### Non-stream and stream throughput\n")
    out.append("| group | scenario | floor req/s | gateway req/s | ratio | floor p50 ms | gateway p50 ms | +p50 ms "
               "| floor p99 ms | gateway p99 ms | floor CPU µs/req | gateway CPU µs/req | CPU ratio | peak RSS MB floor / gateway | failed | noisy |")
    out.append("|" + "---|" * 16)
    for r in rows:
        out.append(f"| {r['group']} | {r['scenario']} | {r['floor_rps']:.0f} | {r['gw_rps']:.0f} | {r['ratio']:.2f} "
                   f"| {r['floor_p50_ms']:.3f} | {r['gw_p50_ms']:.3f} | {r['added_p50_ms']:+.3f} "
                   f"| {r['floor_p99_ms']:.3f} | {r['gw_p99_ms']:.3f} | {r['floor_cpu_us']:.1f} | {r['gw_cpu_us']:.1f} "
                   f"| {r['gw_cpu_us'] / r['floor_cpu_us'] if r['floor_cpu_us'] else 0:.2f} "
                   f"| {r['floor_hwm_mb']:.1f} / {r['gw_hwm_mb']:.1f} | {r['floor_failed']} / {r['gw_failed']} "
                   f"| {'yes ({:.0%})'.format(r['spread']) if r['noisy'] else 'no'} |")
    out.append("\n### Hosts: plain Envoy, the wasm host, the native host\n")
    out.append("The same runs as above: **wasm** is the gateway column, **native** the same configuration as a dynamic "
               "module. Ratios are to plain Envoy (the floor).\n")
    out.append("| group | scenario | floor req/s | wasm req/s | native req/s | wasm / floor | native / floor "
               "| floor CPU µs/req | wasm CPU µs/req | native CPU µs/req | wasm CPU ratio | native CPU ratio "
               "| p50 ms floor / wasm / native | p99 ms floor / wasm / native | peak RSS MB wasm / native | failed native |")
    out.append("|" + "---|" * 16)
    for r in rows:
        if "nt_rps" not in r:
            continue
        fc = r["floor_cpu_us"] or 1
        out.append(f"| {r['group']} | {r['scenario']} | {r['floor_rps']:.0f} | {r['gw_rps']:.0f} | {r['nt_rps']:.0f} "
                   f"| {r['ratio']:.2f} | {r['nt_rps'] / r['floor_rps'] if r['floor_rps'] else 0:.2f} "
                   f"| {r['floor_cpu_us']:.1f} | {r['gw_cpu_us']:.1f} | {r['nt_cpu_us']:.1f} "
                   f"| {r['gw_cpu_us'] / fc:.2f} | {r['nt_cpu_us'] / fc:.2f} "
                   f"| {r['floor_p50_ms']:.3f} / {r['gw_p50_ms']:.3f} / {r['nt_p50_ms']:.3f} "
                   f"| {r['floor_p99_ms']:.3f} / {r['gw_p99_ms']:.3f} / {r['nt_p99_ms']:.3f} "
                   f"| {r['gw_hwm_mb']:.1f} / {r['nt_hwm_mb']:.1f} | {r['nt_failed']} |")
    unmetered_rows = [r for r in rows if "nu_rps" in r]
    if unmetered_rows:
        out.append("\nThe native host once more with `\"request_metrics\": false` (the same runs, interleaved): what "
                   "Envoy's labelled metrics cost it (Envoy interns every label value on every call).\n")
        out.append("| group | scenario | floor req/s | native req/s | unmetered req/s | native / floor | unmetered / floor "
                   "| floor CPU µs/req | native CPU µs/req | unmetered CPU µs/req | native CPU ratio | unmetered CPU ratio |")
        out.append("|" + "---|" * 12)
        for r in unmetered_rows:
            fc, fr = r["floor_cpu_us"] or 1, r["floor_rps"] or 1
            out.append(f"| {r['group']} | {r['scenario']} | {r['floor_rps']:.0f} | {r['nt_rps']:.0f} | {r['nu_rps']:.0f} "
                       f"| {r['nt_rps'] / fr:.2f} | {r['nu_rps'] / fr:.2f} | {r['floor_cpu_us']:.1f} "
                       f"| {r['nt_cpu_us']:.1f} | {r['nu_cpu_us']:.1f} | {r['nt_cpu_us'] / fc:.2f} | {r['nu_cpu_us'] / fc:.2f} |")
    out.append("\n### Before and after: this build vs a baseline build, same run\n")
    compared = [r for r in rows if "bl_rps" in r]
    if not compared:
        out.append("(not measured: `make bench BASELINE_WASM=path/to/old/llm_gateway.wasm`)")
    else:
        out.append(f"The gateway again in the same runs with the baseline build `{BASELINE_WASM}` "
                   f"({Path(BASELINE_WASM).stat().st_size // 1024} KB), same configuration less what it does not know (`for_baseline`: no discovery, no fitting groups). CPU ratio < 1: this build is cheaper.\n")
        out.append("| group | scenario | baseline req/s | this build req/s | baseline p50 ms | this build p50 ms "
                   "| baseline CPU µs/req | this build CPU µs/req | CPU ratio this / baseline "
                   "| each round's ratio: median (min-max) | failed |")
        out.append("|" + "---|" * 11)
        for r in compared:
            out.append(f"| {r['group']} | {r['scenario']} | {r['bl_rps']:.0f} | {r['gw_rps']:.0f} "
                       f"| {r['bl_p50_ms']:.3f} | {r['gw_p50_ms']:.3f} | {r['bl_cpu_us']:.1f} | {r['gw_cpu_us']:.1f} "
                       f"| {r['gw_cpu_us'] / r['bl_cpu_us'] if r['bl_cpu_us'] else 0:.2f} "
                       f"| {'{:.2f} ({:.2f}-{:.2f})'.format(*r['bl_rounds']) if 'bl_rounds' in r else '-'} "
                       f"| {r['bl_failed']} |")
    out.append("\n### Limits on vs off\n")
    limited = [r for r in rows if "gl_rps" in r]
    if not limited:
        out.append("(not measured)")
    else:
        out.append(f"The gateway again, in the same runs, with `limits.rate` rules that never refuse "
                   f"(`{json.dumps(LIMITS_RULES)}`, prices on {LIMITS_GROUP}): 4 limits, 8 shared-data calls at "
                   f"admission (the token and spend reservations: a read and a write each) and 4 when the response ends, 4 decision counters, up to 6 gauges and 6 response "
                   f"headers per request.\n")
        out.append("| group | scenario | gateway req/s | with limits req/s | ratio | gateway p50 ms | with limits p50 ms "
                   "| gateway CPU µs/req | with limits CPU µs/req | added CPU µs/req | failed |")
        out.append("|" + "---|" * 11)
        for r in limited:
            out.append(f"| {r['group']} | {r['scenario']} | {r['gw_rps']:.0f} | {r['gl_rps']:.0f} "
                       f"| {r['gl_rps'] / r['gw_rps'] if r['gw_rps'] else 0:.2f} | {r['gw_p50_ms']:.3f} | {r['gl_p50_ms']:.3f} "
                       f"| {r['gw_cpu_us']:.1f} | {r['gl_cpu_us']:.1f} | {r['gl_cpu_us'] - r['gw_cpu_us']:+.1f} "
                       f"| {r['gl_failed']} |")
        before = [r for r in limited if "bll_rps" in r]
        if before:
            out.append(f"\nBefore and after, in the same runs: the baseline build `{BASELINE_WASM}` with and "
                       f"without the same limits.\n")
            out.append("| group | scenario | baseline CPU µs/req | baseline with limits | added before "
                       "| this build CPU µs/req | this build with limits | added after | failed |")
            out.append("|" + "---|" * 9)
            for r in before:
                out.append(f"| {r['group']} | {r['scenario']} | {r['bl_cpu_us']:.1f} | {r['bll_cpu_us']:.1f} "
                           f"| {r['bll_cpu_us'] - r['bl_cpu_us']:+.1f} | {r['gw_cpu_us']:.1f} | {r['gl_cpu_us']:.1f} "
                           f"| {r['gl_cpu_us'] - r['gw_cpu_us']:+.1f} | {r['bll_failed']} |")
    out.append("\n### Diagnostics recording on vs off\n")
    recorded = [r for r in rows if "gd_rps" in r]
    if not recorded:
        out.append("(not measured)")
    else:
        out.append("The gateway again, in the same runs, with the diagnostics view on (`\"diagnostics\": "
                   "{\"loopback_open\": true}`): each request recorded in the ring when it ends (a shared-data "
                   "write of its trace; an eighth of them also claim the next ring slots, a read and a CAS write) "
                   "and its attempt timed. Off is the gateway of the other tables.\n")
        out.append("| group | scenario | wasm CPU µs/req off | on | added | native CPU µs/req off | on | added "
                   "| wasm req/s off / on | native req/s off / on | failed |")
        out.append("|" + "---|" * 11)
        for r in recorded:
            out.append(f"| {r['group']} | {r['scenario']} | {r['gw_cpu_us']:.1f} | {r['gd_cpu_us']:.1f} "
                       f"| {r['gd_cpu_us'] - r['gw_cpu_us']:+.1f} | {r['nt_cpu_us']:.1f} | {r['nd_cpu_us']:.1f} "
                       f"| {r['nd_cpu_us'] - r['nt_cpu_us']:+.1f} | {r['gw_rps']:.0f} / {r['gd_rps']:.0f} "
                       f"| {r['nt_rps']:.0f} / {r['nd_rps']:.0f} | {r['gd_failed'] + r['nd_failed']} |")
    out.append("\n### Model discovery on vs off\n")
    plain = [r for r in rows if "gx_rps" in r]
    if not plain:
        out.append("(not measured)")
    else:
        out.append("The gateway (envoy/gateway.yaml: model discovery on, its lists read every hour, `route` on) "
                   "and the same configuration without `discovery`, in the same runs; the requests name a group "
                   "(no discovered route is taken).\n")
        out.append("| group | scenario | without discovery req/s | with discovery req/s | ratio "
                   "| without CPU µs/req | with CPU µs/req | added CPU µs/req | failed |")
        out.append("|" + "---|" * 9)
        for r in plain:
            out.append(f"| {r['group']} | {r['scenario']} | {r['gx_rps']:.0f} | {r['gw_rps']:.0f} "
                       f"| {r['gw_rps'] / r['gx_rps'] if r['gx_rps'] else 0:.2f} | {r['gx_cpu_us']:.1f} "
                       f"| {r['gw_cpu_us']:.1f} | {r['gw_cpu_us'] - r['gx_cpu_us']:+.1f} | {r['gx_failed']} |")
    out.append("\n### Response cache: hit, miss, off\n")
    cached = [r for r in rows if "gc_rps" in r]
    if not cached:
        out.append("(not measured)")
    else:
        out.append(f"The gateway with the response cache on (`cache: {{}}`, in-process) and without it, in the same "
                   f"runs. Hit: the same request every time (all but the first answered from the cache), against "
                   f"plain Envoy proxying it to the mock and the gateway without a cache. Miss: every request's "
                   f"prompt its own (bench.lua numbers them), so each is looked up, sent and stored, against the "
                   f"same requests with the cache off.\n")
        out.append("| group | scenario | plain Envoy req/s | hit req/s | no cache req/s | hit p50 ms (plain Envoy) "
                   "| hit CPU µs/req | miss req/s | off req/s (same requests) | miss CPU µs/req | off CPU µs/req "
                   "| added by a miss | failed |")
        out.append("|" + "---|" * 13)
        for r in cached:
            out.append(f"| {r['group']} | {r['scenario']} | {r['floor_rps']:.0f} | {r['gc_rps']:.0f} "
                       f"| {r['gw_rps']:.0f} | {r['gc_p50_ms']:.3f} ({r['floor_p50_ms']:.3f}) | {r['gc_cpu_us']:.1f} "
                       f"| {r['gm_rps']:.0f} | {r['gu_rps']:.0f} | {r['gm_cpu_us']:.1f} | {r['gu_cpu_us']:.1f} "
                       f"| {r['gm_cpu_us'] - r['gu_cpu_us']:+.1f} | {r['gc_failed'] + r['gm_failed'] + r['gu_failed']} |")
    out.append("\n### Context fitting on a long history\n")
    fits = [r for r in rows if "gfo_rps" in r]
    if not fits:
        out.append("(not measured)")
    else:
        out.append(f"An agent's history of {FITTING_TURNS} tool-call turns (a read_file call and its result, "
                   f"{len(long_history_body('x')) // 1024} KB, {2 + 4 * FITTING_TURNS} messages) to three groups on the OpenAI "
                   f"mock, in the same runs: "
                   f"no `fitting` policy (the cost when off), a policy with a window the request fits (the "
                   f"estimate alone), and a policy with an 8192-token window (estimated, trimmed to the window, "
                   f"encoded from the trimmed request; the vendor gets and answers less).\n")
        out.append("| host | scenario | off req/s | fits req/s | trims req/s | off CPU µs/req | fits | added "
                   "| trims | added | failed |")
        out.append("|" + "---|" * 11)
        for r in fits:
            for host, label in (("g", "wasm"), ("n", "native")):
                off, whole, trim = (r[f"{host}{w}_cpu_us"] for w in ("fo", "fw", "ft"))
                out.append(f"| {label} | {r['scenario']} | {r[f'{host}fo_rps']:.0f} | {r[f'{host}fw_rps']:.0f} "
                           f"| {r[f'{host}ft_rps']:.0f} | {off:.1f} | {whole:.1f} | {whole - off:+.1f} | {trim:.1f} "
                           f"| {trim - off:+.1f} | {sum(r[f'{host}{w}_failed'] for w in ('fo', 'fw', 'ft'))} |")
    out.append("\n### Streams (c=16, 20 chunks)\n")
    out.append("| group | floor streams/s | gateway streams/s | floor TTFB p50/p99 ms | gateway TTFB p50/p99 ms "
               "| floor total p50/p99 ms | gateway total p50/p99 ms | gateway CPU µs/stream (floor) | gateway CPU µs/chunk (added) |")
    out.append("|" + "---|" * 9)
    for s in stream_rows:
        r = s["row"]
        added = (r["gw_cpu_us"] - r["floor_cpu_us"]) / STREAM_CHUNKS
        # Another client's stream (e.g. `gemini stream c=16`) is named.
        label = s["group"] if r["scenario"] == "stream c=16" else f"{s['group']} ({r['scenario']})"
        out.append(f"| {label} | {r['floor_rps']:.0f} | {r['gw_rps']:.0f} "
                   f"| {s['floor']['ttfb'][0]:.2f} / {s['floor']['ttfb'][1]:.2f} | {s['gateway']['ttfb'][0]:.2f} / {s['gateway']['ttfb'][1]:.2f} "
                   f"| {s['floor']['total'][0]:.2f} / {s['floor']['total'][1]:.2f} | {s['gateway']['total'][0]:.2f} / {s['gateway']['total'][1]:.2f} "
                   f"| {r['gw_cpu_us']:.1f} ({r['floor_cpu_us']:.1f}) | {r['gw_cpu_us'] / STREAM_CHUNKS:.2f} ({added:+.2f}) |")
    out.append(f"\n### Where the gateway's cost goes ({WASM_FLOOR_GROUP})\n")
    out.append("Two more Envoys take the floor's request, with benches/wasm-floor loaded as both roles. "
               "**wasm floor**: two proxy-wasm contexts per request, the request body buffered by both, read by both "
               "and written back by the upstream one; nothing else: what the wasm runtime costs by itself. "
               "**host-call floor** (`replay`): the host calls the gateway makes for this request, in the same "
               "callbacks (headers, bodies, the handoff, the endpoint's provider, metrics, the access-log line), "
               "with none of its work (the calls its sessions record natively: benches/wasm-floor/src/replay.calls): "
               "the least any filter making those calls costs. The gateway's cost above "
               "the host-call floor is its own code.\n")
    out.append("| scenario | req/s floor / wasm floor / host-call floor / gateway | ratio to the floor: wasm floor / "
               "host-call floor / gateway | +p50 ms: wasm floor / host-call floor / gateway "
               "| CPU µs/req: floor / wasm floor / host-call floor / gateway | gateway CPU µs/req above the "
               "host-call floor | failed |")
    out.append("|" + "---|" * 6)
    for r in rows:
        if "wf_rps" not in r or "hf_rps" not in r:
            continue
        ratio = (lambda rps: f"{rps / r['floor_rps']:.2f}" if r["floor_rps"] else "-")
        out.append(f"| {r['scenario']} | {r['floor_rps']:.0f} / {r['wf_rps']:.0f} / {r['hf_rps']:.0f} / {r['gw_rps']:.0f} "
                   f"| {ratio(r['wf_rps'])} / {ratio(r['hf_rps'])} / {ratio(r['gw_rps'])} "
                   f"| {r['wf_p50_ms'] - r['floor_p50_ms']:+.3f} / {r['hf_p50_ms'] - r['floor_p50_ms']:+.3f} "
                   f"/ {r['added_p50_ms']:+.3f} "
                   f"| {r['floor_cpu_us']:.1f} / {r['wf_cpu_us']:.1f} / {r['hf_cpu_us']:.1f} / {r['gw_cpu_us']:.1f} "
                   f"| {r['gw_cpu_us'] - r['hf_cpu_us']:+.1f} "
                   f"| {r['floor_failed']} / {r['wf_failed']} / {r['hf_failed']} / {r['gw_failed']} |")
    out.append("\n### Targets\n")
    out += targets(rows)
    out.append("\n### Micro benchmarks (pure core; `cargo bench --bench core`, natively and as wasm in Node's V8; the faster of two runs)\n")
    out.append(micro)
    out.append("\n### The same work inside Envoy (V8)\n")
    if not timings:
        out.append("(not measured)")
    else:
        out.append("The filter's own time per phase, host calls included, from its histograms "
                   "`llm_gateway_overhead_us{phase}` (`overhead_histograms` on; 2 s non-stream + 2 s stream at c=16, 1 KB requests). "
                   "Edge role: admit = read, parse, validate and route a request (native: \"unified parse, 1 KB\"), "
                   "log = the request's metrics and access-log line. Upstream role: request = encode for the vendor and "
                   "rewrite the request (native: \"parse + encode request, 1 KB\" less the parse), response = "
                   "translate a whole non-stream answer (native: \"decode response\"), chunk = one stream "
                   "chunk (a body callback). What the phases leave out: the callbacks' other host calls (headers, "
                   "the handoff, the endpoint's provider) and entering the VM.\n")
        out.append("| group | " + " | ".join(f"{p} p50 / p99 µs" for p in TIMING_PHASES) + " |")
        out.append("|---|" + "---|" * len(TIMING_PHASES))
        for group, found in timings.items():
            cells = [f"{found[p][0]:.1f} / {found[p][1]:.1f}" if p in found else "-" for p in TIMING_PHASES]
            out.append(f"| {group} | " + " | ".join(cells) + " |")
        out.append("")
        floors = next((r for r in rows if "hf_cpu_us" in r and r["scenario"] == "c=16"), None)
        if floors:
            out.append(f"- {floors['group']}, non-stream c=16: of the {floors['gw_cpu_us'] - floors['floor_cpu_us']:.0f} µs "
                       f"of Envoy CPU the filter adds per request, {floors['wf_cpu_us'] - floors['floor_cpu_us']:.0f} µs "
                       f"is the wasm runtime (wasm floor), {floors['hf_cpu_us'] - floors['wf_cpu_us']:.0f} µs the host "
                       f"calls (host-call floor) and {floors['gw_cpu_us'] - floors['hf_cpu_us']:.0f} µs the gateway's own code.")
        for group, found in timings.items():
            row = next((r for r in rows if r["group"] == group and r["scenario"] == "c=16"), None)
            if row and all(p in found for p in ("admit", "request", "response", "log")):
                added = row["gw_cpu_us"] - row["floor_cpu_us"]
                own = sum(found[p][0] for p in ("admit", "request", "response", "log"))
                out.append(f"- {group}, non-stream c=16: the filter adds {added:.0f} µs of Envoy CPU per request; "
                           f"its four timed phases (own code and the host calls made in them) take "
                           f"{own:.0f} µs (sum of p50s).")
    out.append("\n### What a host call costs inside Envoy\n")
    if not host_calls:
        out.append("(not measured)")
    else:
        out.append("The wasm floor's `probe` mode times each host call the gateway makes under load (c=16): once "
                   "per request, as a request makes it (first; the clock read around it, ~0.3 µs, included), then "
                   "10 in a row (warm: the mean per call). p50s, read from Envoy histograms, whose buckets "
                   "(…, 250, 500, 1000, 2500, 5000, 10000 ns) make them coarse. A call that returns data (a header, "
                   "a property, a body) also calls back into the VM to allocate the result.\n")
        out.append("| host call | first call, ns (p50) | warm, ns per call (p50) |")
        out.append("|---|---|---|")
        for call, (first, warm) in sorted(host_calls.items(), key=lambda kv: kv[1][1]):
            first = f"{first:.0f}" if first is not None else "-"
            out.append(f"| `{call}` | {first} | {warm:.0f} |")
    return "\n".join(out) + "\n"


def targets(rows):
    def find(group, scenario):
        return next((r for r in rows if r["group"] == group and r["scenario"] == scenario), None)

    out = []
    r = find("mock-anthropic", "c=64")
    if r:
        alone = (f" (the wasm floor alone: {r['wf_rps'] / r['floor_rps']:.0%}; the gateway's host calls alone: "
                 f"{r['hf_rps'] / r['floor_rps']:.0%})" if r.get("hf_rps") and r["floor_rps"] else "")
        out.append(f"- OpenAI→Anthropic non-stream c=64 keeps ≥ 50% of the floor's req/s: {r['ratio']:.0%}{alone} "
                   f"→ {'met' if r['ratio'] >= 0.5 else 'NOT met'}")
    for r in rows:
        if r["scenario"] == "c=1":
            alone = (f" (the wasm floor alone: {r['wf_p50_ms'] - r['floor_p50_ms']:+.3f} ms; the host calls "
                     f"alone: {r['hf_p50_ms'] - r['floor_p50_ms']:+.3f} ms)" if "hf_p50_ms" in r else "")
            out.append(f"- {r['group']}: at most +0.05 ms p50 at c=1: {r['added_p50_ms']:+.3f} ms{alone} "
                       f"→ {'met' if r['added_p50_ms'] <= 0.05 else 'NOT met'}")
    for r in rows:
        if r["stream"]:
            ratio = r["gw_cpu_us"] / r["floor_cpu_us"] if r["floor_cpu_us"] else 0
            alone = (f" (the wasm floor alone: {r['wf_cpu_us'] / r['floor_cpu_us']:.2f}×; the host calls alone: "
                     f"{r['hf_cpu_us'] / r['floor_cpu_us']:.2f}×)" if "hf_cpu_us" in r and r["floor_cpu_us"] else "")
            out.append(f"- {r['group']} ({r['scenario']}): a 20-chunk stream costs at most 2× the floor's CPU: {ratio:.2f}×{alone} "
                       f"({r['gw_cpu_us'] / STREAM_CHUNKS:.1f} µs per chunk in all) → {'met' if ratio <= 2 else 'NOT met'}")
    # The hosts' (#50): translated (mock-anthropic) and passed through (mock-openai), c=16 and c=64.
    low, high = AGENTGATEWAY_CPU_RATIO
    for group, kind in (("mock-anthropic", "translated"), ("mock-openai", "OpenAI to OpenAI")):
        for scenario in ("c=16", "c=64"):
            r = find(group, scenario)
            if r and r.get("nt_rps") and r["floor_rps"] and r["floor_cpu_us"]:
                share, cost = r["nt_rps"] / r["floor_rps"], r["nt_cpu_us"] / r["floor_cpu_us"]
                unmetered = (f" (with `request_metrics` off: {r['nu_rps'] / r['floor_rps']:.0%}, "
                             f"{r['nu_cpu_us'] / r['floor_cpu_us']:.2f}×)" if r.get("nu_rps") else "")
                against = ("below its best" if cost < low else "within its range" if cost <= high else "above it")
                out.append(f"- native host, {kind} ({group}) {scenario}: ≥ 60% of the floor's req/s and ≤ 1.6× its "
                           f"CPU per request: {share:.0%}, {cost:.2f}×{unmetered} → "
                           f"{'met' if share >= 0.6 and cost <= 1.6 else 'NOT met'}; against agentgateway's "
                           f"{low}-{high}× (see below): {against}")
            if r and scenario == "c=16" and r["floor_rps"]:
                share = r["gw_rps"] / r["floor_rps"]
                out.append(f"- wasm host, {kind} ({group}) c=16: ≥ 45% of the floor's req/s: {share:.0%} → "
                           f"{'met' if share >= 0.45 else 'NOT met'}")
    for r in rows:
        if r["stream"] and r.get("nt_cpu_us") and r["floor_cpu_us"]:
            ratio = r["nt_cpu_us"] / r["floor_cpu_us"]
            out.append(f"- native host, {r['group']} ({r['scenario']}): a stream costs at most 2× the floor's CPU: "
                       f"{ratio:.2f}× → {'met' if ratio <= 2 else 'NOT met'}")
    out.append(f"- agentgateway is not in this run: Solo's agentgateway has no package on the registries this machine "
               f"reaches (crates.io, npm, Debian; PyPI's `agentgateway` is another project) and its sources are on "
               f"GitHub, so it cannot be built within the "
               f"bench. Its figures are from an earlier side-by-side run on this machine kind ({AGENTGATEWAY_RUN}): "
               f"{AGENTGATEWAY_RPS_SHARE[0]:.0%}-{AGENTGATEWAY_RPS_SHARE[1]:.0%} of plain Envoy's req/s at "
               f"{low}-{high}× its CPU per request; compare ratios, not absolute numbers across runs.")
    out.append("- RSS grows < 5 MB over the soak: see `make soak` below.")
    return out


# agentgateway 1.4.1 (a standalone Rust proxy, one core) beside plain Envoy in
# one run, as issue #50 reports it: its share of plain Envoy's req/s and its
# CPU per request against plain Envoy's. Not measured here (see the targets).
AGENTGATEWAY_RUN = "agentgateway 1.4.1, issue #50"
AGENTGATEWAY_RPS_SHARE = (0.45, 0.63)
AGENTGATEWAY_CPU_RATIO = (1.6, 2.2)


# ---------------------------------------------------------------- memory

# Workers (`--concurrency`) the memory table starts each Envoy with.
MEMORY_WORKERS = (1, 2, 4)
# Connections per worker while warming: Envoy spreads connections over its
# workers, so each worker's VM (wasm) or filter state (native) is made.
MEMORY_CONNECTIONS_PER_WORKER = 8
MEMORY_WARM_SECONDS = 2
# tcmalloc's background release (bootstrap `memory_allocator_manager`):
# Envoy gives freed memory back to the system every interval.
MEMORY_RELEASE = {"bytes_to_release": 64 << 20, "memory_release_interval": "1s"}


# The wasm floor again with this many bytes more (a custom section, which V8
# keeps but compiles nothing of): what a byte of .wasm costs in RSS.
MEMORY_PAD_BYTES = 3_500_000
PADDED = "wasm floor + 3.5 MB custom section"


def padded_wasm_floor(workdir):
    """benches/wasm-floor with MEMORY_PAD_BYTES of zeros in a custom section."""
    def leb(n):
        out = bytearray()
        while True:
            byte, n = n & 0x7F, n >> 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                return bytes(out)
    name = b"pad"
    payload = leb(len(name)) + name + bytes(MEMORY_PAD_BYTES)
    path = workdir / "wasm_floor_padded.wasm"
    path.write_bytes(WASM_FLOOR.read_bytes() + b"\x00" + leb(len(payload)) + payload)
    return path


def memory_variants(mock_port, workdir):
    """(name, bootstrap, env, needs the gateway's request) of each Envoy the
    memory table compares: plain Envoy, V8 with a plugin that does nothing
    (and with it padded), the wasm host and the native host, all on the same
    bootstrap."""
    padded = json.loads(json.dumps(wasm_floor_bootstrap(0, 0, mock_port)).replace(
        json.dumps(str(WASM_FLOOR))[1:-1], json.dumps(str(padded_wasm_floor(workdir)))[1:-1]))
    return [
        ("plain Envoy", floor_bootstrap(0, 0, mock_port), None, False),
        ("wasm floor (V8, a plugin doing nothing)", wasm_floor_bootstrap(0, 0, mock_port), None, False),
        (PADDED, padded, None, False),
        ("wasm host", gateway.build_bootstrap(0, 0, mock_port, wasm=WASM, env={}), None, True),
        ("native host", gateway.to_native(gateway.build_bootstrap(0, 0, mock_port, env={})), gateway.native_env(),
         True),
    ]


def memory_sample(name, bootstrap, env, workers, release, request, workdir):
    """Starts one Envoy, warms every worker, and reads its memory: RSS when
    ready, after the warm-up, and its peak (VmHWM, start-up included)."""
    if release:
        bootstrap = dict(bootstrap, memory_allocator_manager=MEMORY_RELEASE)
    started = time.perf_counter()
    proc = gateway.start_envoy(bootstrap, workdir / f"memory-{len(list(workdir.iterdir()))}", log_level="warn",
                               concurrency=workers, env=env)
    try:
        ready_s = time.perf_counter() - started
        pin(proc.pid, GATEWAY_CORE)
        time.sleep(1.5)
        idle = status_kb(proc.pid, "VmRSS")
        url = f"http://127.0.0.1:{proc.port}/v1/chat/completions"
        warm = Request(workdir, f"memory-{proc.port}", url, request.headers, request.body)
        result = wrk([warm], MEMORY_CONNECTIONS_PER_WORKER * workers, MEMORY_WARM_SECONDS, workdir)
        time.sleep(1.5)
        failed = sum(result["errors"].values())
        if failed:
            raise RuntimeError(f"memory: {name}: {failed} of {result['requests']} requests failed")
        return {"name": name, "workers": workers, "release": release, "ready_s": ready_s,
                "idle_mb": idle / 1024, "warm_mb": status_kb(proc.pid, "VmRSS") / 1024,
                "peak_mb": status_kb(proc.pid, "VmHWM") / 1024, "requests": result["requests"], "failed": failed}
    finally:
        gateway.stop(proc)


def memory_table(workdir):
    """`make bench-memory`, and part of `make bench`: what each host holds."""
    stack = Stack()
    samples = []
    try:
        group = "mock-openai"
        _, vendor_headers, vendor_body = capture_vendor_requests(workdir, [group])[(group, False, 1024, None)]
        mock_port = start_mock(stack, fast=True)
        requests = {True: Request(workdir, "memory-gateway", "", {"content-type": "application/json",
                                                                   "x-model-group": group},
                                  unified_body(1024, False)),
                    False: Request(workdir, "memory-floor", "", dict(vendor_headers, **{
                        "x-llm-cluster": model_groups()[group]}), vendor_body)}
        for release in (False, True):
            for name, bootstrap, env, gateway_request in memory_variants(mock_port, workdir):
                for workers in MEMORY_WORKERS:
                    sample = memory_sample(name, bootstrap, env, workers, release, requests[gateway_request],
                                           workdir)
                    print(f"memory: {name}, {workers} worker(s), release {release}: "
                          f"{sample['warm_mb']:.1f} MB", flush=True)
                    samples.append(sample)
    finally:
        stack.stop()
    return render_memory(samples)


def render_memory(samples):
    by = {(s["name"], s["workers"], s["release"]): s for s in samples}
    names = list(dict.fromkeys(s["name"] for s in samples))
    plain = {(w, r): by[("plain Envoy", w, r)] for (_, w, r) in by if ("plain Envoy", w, r) in by}
    out = ["### Memory and start-up: each host against plain Envoy",
           "",
           f"Each Envoy started alone on the same bootstrap (`--concurrency` 1, 2 and 4), then warmed for "
           f"{MEMORY_WARM_SECONDS} s with {MEMORY_CONNECTIONS_PER_WORKER} connections per worker (a 1 KB Chat "
           "request to mock-openai; plain Envoy and the wasm floor take the vendor request), so every worker "
           "holds what it needs. **RSS** after the warm-up and 1.5 s idle; **peak**: VmHWM since start "
           "(start-up included); **ready**: from the process's start to its admin answering. "
           "**release**: the bootstrap's `memory_allocator_manager` "
           f"(`{json.dumps(MEMORY_RELEASE)}`): tcmalloc gives freed memory back every second.",
           "",
           "| Envoy | release | workers | ready s | RSS idle MB | RSS warm MB | peak MB | over plain Envoy MB "
           "(warm) | per added worker MB | requests | failed |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for release in (False, True):
        for name in names:
            one = by.get((name, 1, release))
            for workers in MEMORY_WORKERS:
                s = by.get((name, workers, release))
                if not s:
                    continue
                base = plain.get((workers, release))
                over = f"{s['warm_mb'] - base['warm_mb']:+.1f}" if base and name != "plain Envoy" else ""
                per = (f"{(s['warm_mb'] - one['warm_mb']) / (workers - 1):+.1f}" if one and workers > 1 else "")
                out.append(f"| {name} | {'on' if release else 'off'} | {workers} | {s['ready_s']:.1f} "
                           f"| {s['idle_mb']:.1f} | {s['warm_mb']:.1f} | {s['peak_mb']:.1f} | {over} | {per} "
                           f"| {s['requests']} | {s['failed']} |")
    out.append("")
    for release in (False, True):
        host, base = by.get(("wasm host", 1, release)), plain.get((1, release))
        if host and base:
            over = host["peak_mb"] - base["peak_mb"]
            out.append(f"- Target: the wasm host's peak RSS at most plain Envoy's + 45 MB at one worker "
                       f"(release {'on' if release else 'off'}): {over:+.1f} MB → {'met' if over <= 45 else 'NOT met'}")
    floor, padded = by.get(("wasm floor (V8, a plugin doing nothing)", 1, False)), by.get((PADDED, 1, False))
    if floor and padded:
        per_mb = (padded["warm_mb"] - floor["warm_mb"]) / (MEMORY_PAD_BYTES / (1 << 20))
        out += [f"- **What a byte of .wasm costs**: {MEMORY_PAD_BYTES / (1 << 20):.1f} MB more in a custom section "
                f"(nothing to compile) adds {padded['warm_mb'] - floor['warm_mb']:.1f} MB of RSS at one worker, "
                f"{per_mb:.1f} MB per MB: Envoy and V8 hold the module's bytes several times over. The gateway's "
                f".wasm is {WASM.stat().st_size / (1 << 20):.1f} MB ({wasm_code_bytes(WASM) / (1 << 20):.1f} MB "
                "of it code)."]
    return "\n".join(out) + "\n"


def wasm_code_bytes(path):
    """The size of a .wasm's code section (section id 10)."""
    data, i = path.read_bytes(), 8

    def leb(i):
        value = shift = 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value, i
    while i < len(data):
        section = data[i]
        size, i = leb(i + 1)
        if section == 10:
            return size
        i += size
    return 0


def memory(args):
    """The memory table, as its own section (`make bench-memory`, and the
    end of `make bench`)."""
    os.environ.pop("LLM_GATEWAY_HOST", None)
    os.sched_setaffinity(0, {LOAD_CORE})
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    workdir = Path(tempfile.mkdtemp(prefix="llm-memory-"))
    try:
        table = memory_table(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    replace_section("memory", f"## `make bench` / `make bench-memory`, {now}\n\n"
                    f"- load average at end: {open('/proc/loadavg').read().split()[:3]}\n\n" + table)


# ---------------------------------------------------------------- soak

def soak(args):
    started = time.time()
    os.sched_setaffinity(0, {LOAD_CORE})
    groups = sorted(model_groups())
    workdir = Path(tempfile.mkdtemp(prefix="llm-soak-"))
    stack = Stack()
    samples = []
    total = errors = 0
    try:
        mock_port = start_mock(stack, fast=True)
        port, admin = free_ports(2)
        gw = Envoy(stack, "gateway", gateway.build_bootstrap(port, admin, mock_port, wasm=WASM, env={}),
                   port, admin, workdir)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        mix, cuts = [], []
        for group in groups:
            base = {"content-type": "application/json", "x-model-group": group}
            mix.append(Request(workdir, f"{group}-plain", url, base, unified_body(1024, False)))
            mix.append(Request(workdir, f"{group}-stream", url, base, unified_body(1024, True)))
            cuts.append(Request(workdir, f"{group}-cut", url, dict(base, **{"x-mock-scenario": "cut"}),
                                unified_body(1024, True)))

        def segment(seconds):
            """The mix and, on their own connections, the cut streams: each holds its
            connection ~1 s (Envoy's delayed_close_timeout, plain Envoy alike)."""
            cut = start_wrk(cuts, SOAK_CUT_CONNECTIONS, seconds, workdir, "cut")
            main = finish_wrk(start_wrk(mix, SOAK_CONNECTIONS, seconds, workdir, "mix"))
            return main, finish_wrk(cut)

        def sample(label):
            wasm = {k: v for k, v in gw.stats("wasm").items() if isinstance(v, int)}
            samples.append({"label": label, "requests": total, "cut": cut_total,
                            "rss_kb": status_kb(gw.pid, "VmRSS"), "wasm": wasm})

        cut_total = 0
        sample("idle, before")
        main, cut = segment(1)
        total += main["requests"] + cut["requests"] + cut["errors"]["read"]
        sample("after warm-up")
        warm_total = total
        count = 0
        while total - warm_total < SOAK_REQUESTS and count < SOAK_MAX_SEGMENTS:
            main, cut = segment(SOAK_SEGMENT_SECONDS)
            # A cut stream ends in a read error, not a completed request.
            cut_total += cut["requests"] + cut["errors"]["read"]
            total += main["requests"] + cut["requests"] + cut["errors"]["read"]
            errors += main["errors"]["status"] + main["errors"]["read"] + cut["errors"]["status"]
            count += 1
            sample(f"during ({count})")
            print(f"soak: {total - warm_total} requests, RSS {samples[-1]['rss_kb'] / 1024:.1f} MB", flush=True)
        time.sleep(2)
        sample("idle, after")
    finally:
        stack.stop()
    replace_section("soak", render_soak(samples, total - warm_total, cut_total, errors, time.time() - started))
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"appended the soak to {REPORT}")


def micro(args):
    """`make bench-micro`: the micro benchmarks alone, as their own section."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    table = micro_benchmarks()
    replace_section("micro", f"## `make bench-micro`, {now}\n\n"
                    "### Micro benchmarks alone (pure core; `cargo bench --bench core`, natively and as wasm "
                    "in Node's V8; the faster of two runs)\n\n"
                    "The same table `make bench` writes, run without Envoy or load (the core pinned to one CPU).\n\n"
                    + table)


def render_soak(samples, requests, cut, failed, elapsed):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    warm = next(s for s in samples if s["label"] == "after warm-up")
    end = samples[-1]
    growth = (end["rss_kb"] - warm["rss_kb"]) / 1024
    # Envoy's own wasm stats (not the filter's metrics, which are wasmcustom.*).
    wasm_keys = sorted({k for s in samples for k in s["wasm"] if not k.startswith("wasmcustom.")})
    out = [f"## `make soak`, {now}\n",
           f"- {requests} requests after a 1 s warm-up through one gateway Envoy (`--concurrency 1`), every group in "
           f"gateway.yaml: non-stream and stream requests in turn (wrk c={SOAK_CONNECTIONS}) and, on "
           f"{SOAK_CUT_CONNECTIONS} more connections, {cut} streams the mock cuts mid-event (`x-mock-scenario: cut`). "
           f"Non-2xx answers or errors outside the cut streams: {failed}.",
           "- A cut stream holds its connection ~1 s: after the upstream reset Envoy closes the client connection "
           "with its delayed_close_timeout (default 1 s), plain Envoy alike; hence few cut streams per second.",
           f"- duration {elapsed:.0f} s; load average at end {open('/proc/loadavg').read().split()[:3]}",
           f"- Envoy reports no wasm VM memory gauge (wasm stats: {', '.join(wasm_keys) or 'none'}), so the VM's "
           "linear memory is seen only as part of RSS.",
           f"- **RSS from after warm-up to the end: {growth:+.1f} MB → {'flat (target < 5 MB met)' if growth < 5 else 'NOT flat'}**\n",
           "| when | requests | RSS MB |", "|---|---|---|"]
    shown = samples if len(samples) <= 14 else samples[:3] + samples[3:-1:max(1, (len(samples) - 4) // 10)] + samples[-1:]
    for s in shown:
        out.append(f"| {s['label']} | {s['requests']} | {s['rss_kb'] / 1024:.1f} |")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--skip-micro", action="store_true", help="leave out the native micro benchmarks")
    sub.add_parser("micro")
    sub.add_parser("memory")
    sub.add_parser("soak")
    args = parser.parse_args()
    # The micro benchmarks need no load generator.
    for tool in ("taskset",) if args.cmd == "micro" else ("wrk", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: `make bench` installs wrk (apt-get install wrk)")
    if os.cpu_count() < 2:
        sys.exit("the benchmark pins the gateway and the load to two different cores: needs 2 CPUs")
    {"bench": bench, "micro": micro, "memory": memory, "soak": soak}[args.cmd](args)


if __name__ == "__main__":
    main()
