"""The fleet view: the shipped Grafana dashboard (dashboards/llm-gateway.json)
over a real Prometheus (Debian's) scraping two gateways, one on each host
(the wasm filter and the native module: each names its metrics its own
way), both as `make run` starts them (the diagnostics view open from this
host), with one cached group and one group naming a model its vendor no
longer lists (model discovery flags it). Under traffic (cached requests
among it), every panel's every query returns data from Prometheus, but the
row of the feature the gateway does not have yet (context fitting), whose
metrics no gateway reports: those must be absent, so the day one does, its
panels must fill."""

import contextlib
import json
import math
import os
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import gateway
from conftest import ALL_GROUPS_KEY, NATIVE, configure_test_gateway

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "dashboards/llm-gateway.json"
# Each host's name for a metric of the filter.
METRIC = re.compile(r'__name__=~"\(envoy_dynamicmodulescustom_\)\?([a-z_]+)"')

pytestmark = pytest.mark.skipif(NATIVE, reason="runs both hosts at once, in the wasm leg")


def configure(config):
    configure_test_gateway(config)
    for provider in ("mock-openai", "mock-anthropic"):
        config["providers"][provider]["prices"] = {"*": {"input": 3, "output": 15}}
    config["limits"]["rate"] = [{"key": "*", "tokens_per_hour": 10_000_000, "requests_per_minute": 100_000}]
    config["model_groups"]["fleet-cached"] = {"candidates": [{"cluster": "mock_openai", "provider": "mock-openai"}],
                                              "cache": {}}
    config["model_groups"]["fleet-retired"] = {"candidates": [
        {"cluster": "mock_openai", "provider": "mock-openai", "model": "gpt-retired-by-its-vendor"}]}


@contextlib.contextmanager
def host(name):
    """Envoys started inside run on host `name` (wasm or native)."""
    before = os.environ.get("LLM_GATEWAY_HOST")
    os.environ["LLM_GATEWAY_HOST"] = name
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("LLM_GATEWAY_HOST", None)
        else:
            os.environ["LLM_GATEWAY_HOST"] = before


def listening_ports(pid):
    """The TCP ports process `pid` listens on, from /proc (so Prometheus can
    bind port 0, as Envoy and the mock do)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("fleet")
    mock, mock_port = gateway.start_mock()
    envoys, prometheus = [], None
    try:
        for name in ("wasm", "native"):
            with host(name):
                bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={}, edit=configure, diagnostics=True,
                                                    access_log=workdir / f"{name}-access.log")
                envoys.append((name, gateway.start_envoy(bootstrap, workdir / name)))
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "scrape_configs": [{"job_name": "llm-gateway", "metrics_path": "/stats/prometheus",
                                      "static_configs": [{"targets": [f"127.0.0.1:{e.admin_port}"],
                                                          "labels": {"host": name}} for name, e in envoys]}]}
        (workdir / "prometheus.yml").write_text(json.dumps(config))
        log = open(workdir / "prometheus.log", "w")
        prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             "--web.listen-address=127.0.0.1:0", "--log.level=warn"], stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        ports = set()
        while not ports and time.monotonic() < deadline and prometheus.poll() is None:
            ports = listening_ports(prometheus.pid)
            time.sleep(0.1)
        assert ports, "prometheus did not listen: " + (workdir / "prometheus.log").read_text()[-2000:]
        url = f"http://127.0.0.1:{ports.pop()}"
        gateway.wait_http(f"{url}/-/ready", timeout=30, proc=prometheus)
        yield {"prometheus": url, "gateways": [(name, f"http://127.0.0.1:{e.port}", e.admin_port) for name, e in envoys]}
    finally:
        if prometheus:
            prometheus.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                prometheus.wait(timeout=10)
            if prometheus.poll() is None:
                prometheus.kill()
        for _, envoy in envoys:
            gateway.stop(envoy)
        gateway.stop(mock)


def call(base, path, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method="POST" if data else "GET", headers={
        "content-type": "application/json", "authorization": f"Bearer {ALL_GROUPS_KEY}", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


MSG = [{"role": "user", "content": "hello fleet"}]


def traffic(base):
    """One round of what every panel shows: answers, a failover, a stream,
    errors, a filtered answer, a client that leaves, the diagnostics view,
    a cached group's repeated request (a miss, then hits)."""
    call(base, "/v1/chat/completions", {"model": "mock-openai", "messages": MSG})
    for _ in range(2):
        call(base, "/v1/chat/completions", {"model": "fleet-cached", "messages": MSG})
    call(base, "/v1/chat/completions", {"model": "any", "messages": MSG}, {"x-model-group": "mock-failover"})
    call(base, "/v1/chat/completions", {"model": "mock-anthropic", "messages": MSG, "stream": True})
    call(base, "/v1/chat/completions", {"model": "mock-openai", "messages": MSG}, {"x-mock-scenario": "error-500"})
    call(base, "/v1/chat/completions", {"model": "mock-openai", "messages": MSG}, {"x-mock-scenario": "filtered-answer"})
    leave_mid_stream(base)
    call(base, "/llm-gateway/api/requests?limit=1", headers={"authorization": ""})


def leave_mid_stream(base):
    """A stream whose client reads its first bytes and leaves."""
    import http.client
    parsed = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    conn.request("POST", "/v1/chat/completions",
                 json.dumps({"model": "mock-anthropic", "messages": MSG, "stream": True}),
                 {"content-type": "application/json", "authorization": f"Bearer {ALL_GROUPS_KEY}",
                  "x-mock-scenario": "slow=200"})
    response = conn.getresponse()
    response.read(1)
    conn.sock.close()
    conn.close()


def query(url, expr):
    with urllib.request.urlopen(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=10) as r:
        return json.loads(r.read())["data"]["result"]


def instantiate(expr):
    """A panel's query as Grafana sends it with every variable at All."""
    for name in ("group", "provider", "key"):
        expr = expr.replace(f"${name}", ".*")
    return expr.replace("$__rate_interval", "1m")


def exposed(admin_ports):
    """Every metric name the gateways expose."""
    names = set()
    for port in admin_ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats/prometheus", timeout=5) as r:
            names.update(line.split("{")[0].split(" ")[0] for line in r.read().decode().splitlines()
                         if line and not line.startswith("#"))
    return names


def test_make_run_serves_the_view_on_both_hosts(fleet):
    for name, base, _ in fleet["gateways"]:
        # From this host, without a key (loopback_open, as `make run` has it).
        status, body = call(base, "/llm-gateway/api/view", headers={"authorization": ""})
        assert status == 200, (name, body[:300])
        assert [s["name"] for s in json.loads(body)["sections"]][:2] == ["health", "requests"]
        status, _ = call(base, "/llm-gateway/", headers={"authorization": ""})
        assert status == 200
    line = gateway.diagnostics_line(10000, gateway.diagnostics_config({}))
    assert "http://127.0.0.1:10000/llm-gateway/" in line and "no admin key" in line
    assert gateway.diagnostics_config({"GATEWAY_ADMIN_KEYS": "k1"})["admin_keys"][0]["sha256"] == gateway.key_hash("k1")


def test_every_panel_of_the_dashboard_returns_data(fleet):
    dashboard = json.loads(DASHBOARD.read_text())
    targets = [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(targets) >= 20
    for title, expr in targets:
        # Every query names each metric as both hosts do.
        assert METRIC.search(expr), f"{title}: {expr}"
    stop = threading.Event()

    def drive():
        while not stop.is_set():
            for _, base, _ in fleet["gateways"]:
                traffic(base)
            stop.wait(0.5)
    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        names = exposed([admin for _, _, admin in fleet["gateways"]])
        pending, waiting = [], {}
        for title, expr in targets:
            metrics = set(METRIC.findall(expr))
            present = {m for m in metrics if any(n in names for n in (m, f"envoy_dynamicmodulescustom_{m}"))}
            base = {m.removesuffix("_bucket") for m in metrics}
            if not present and base & {"llm_gateway_context_fitting"}:
                pending.append(title)
                assert query(fleet["prometheus"], instantiate(expr)) == [], title
                continue
            waiting[(title, expr)] = instantiate(expr)
        deadline = time.monotonic() + 120
        while waiting and time.monotonic() < deadline:
            for key, expr in list(waiting.items()):
                values = [float(r["value"][1]) for r in query(fleet["prometheus"], expr)]
                if any(math.isfinite(v) for v in values):
                    del waiting[key]
            time.sleep(1)
        assert not waiting, f"panels without data: {sorted(t for t, _ in waiting)}"
        assert sorted(pending) == ["Context fitting actions per second by group"]
        # The fleet's panel sees both gateways, one per host.
        by_instance = query(fleet["prometheus"], instantiate(
            next(t["expr"] for p in dashboard["panels"] if p["title"] == "Requests per second by gateway"
                 for t in p["targets"])))
        assert len(by_instance) == 2
    finally:
        stop.set()
        driver.join(timeout=60)
