"""Integration fixtures: a real Envoy 1.40 with the built .wasm, and the mock
provider, both binding port 0 (the ports they got are read back) and stopped
by PID. At the end of the run, every response any test saw and the logs of
every Envoy any test started are scanned for vendor keys and filter panics
(`secrets_scan`, whatever order the tests ran in)."""

import contextlib
import json
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import gateway  # noqa: E402


# The host the filter runs on in this run (LLM_GATEWAY_HOST): "wasm" or "native".
HOST = gateway.gateway_host()
NATIVE = HOST == "native"
# Tests of what only the wasm host has (its VM, its runtime stats) skip on the native leg, saying why.
wasm_only = pytest.mark.skipif(NATIVE, reason="wasm host only")


def prometheus_names(base):
    """A filter metric's Prometheus names (`llm_gateway.requests`): the wasm
    host's (`wasmcustom.` is a custom stat namespace, stripped) and the native
    host's (its metrics namespace, `dynamicmodulescustom`, under `envoy_`)."""
    name = base.replace(".", "_")
    return (name, f"envoy_dynamicmodulescustom_{name}")


# Gateway keys of the test gateway (auth is on, as in production).
ALL_GROUPS_KEY = "gw-test-key-all-groups"
OPENAI_ONLY_KEY = "gw-test-key-openai-only"
# The test gateway's diagnostics view (on, so every test's requests are recorded): its admin key.
DIAGNOSTICS_ADMIN_KEY = "gw-test-diagnostics-admin"


def _aws_secrets(node):
    """The inline AWS secret keys anywhere in the bootstrap (SigV4 signing filters)."""
    if isinstance(node, dict):
        found = [node["secret_access_key"]] if "secret_access_key" in node else []
        return found + [s for v in node.values() for s in _aws_secrets(v)]
    if isinstance(node, list):
        return [s for v in node for s in _aws_secrets(v)]
    return []


def _vendor_keys():
    """Every inline vendor key in envoy/gateway.yaml (the filter config's
    `api_key`s, the Bedrock signer's AWS secret): no client may ever see them."""
    bootstrap = gateway.build_bootstrap(1, 2, 3, env={})
    config = json.loads(gateway._wasm_filters(bootstrap)[1]["configuration"]["value"])
    keys = [p["api_key"] for p in config["providers"].values() if "api_key" in p]
    return tuple(keys + _aws_secrets(bootstrap))


VENDOR_KEYS = _vendor_keys()


# Above Envoy's buffer limit (8 MiB), so both 413 paths can be tested.
MAX_BODY_BYTES = 64 << 20


def configure_test_gateway(config):
    """Auth on (as in production), a body limit above Envoy's buffer limit,
    and the diagnostics view on (every request of the suite is recorded)."""
    config["limits"]["max_body_bytes"] = MAX_BODY_BYTES
    config["auth"] = {"enabled": True, "keys": [
        {"name": "tester", "sha256": gateway.key_hash(ALL_GROUPS_KEY), "groups": ["*"]},
        {"name": "openai-only", "sha256": gateway.key_hash(OPENAI_ONLY_KEY), "groups": ["mock-openai"]},
    ]}
    config["diagnostics"] = {"admin_keys": [{"name": "test-admin", "sha256": gateway.key_hash(DIAGNOSTICS_ADMIN_KEY)}]}


# Every response any test saw through any Gateway, for the secrets scan.
SEEN = []


def leaks(seen, logs, keys=VENDOR_KEYS):
    """What the secrets scan finds: (where, key) for each vendor key in a
    response (headers, body) of `seen` or in a log text of `logs` (name -> text)."""
    found = []
    for i, (headers, body) in enumerate(seen):
        for key in keys:
            if key in headers or key.encode() in body:
                found.append((f"response {i}: {headers[:200]} {body[:200]!r}", key))
    for name, text in logs.items():
        # Envoy at debug level echoes its own configuration (inline keys
        # included: what the operator wrote, not what a request leaked).
        text = "\n".join(line for line in text.splitlines() if "][debug][config] " not in line)
        text = without_list_call_dumps(text)
        found.extend((name, key) for key in keys if key in text)
    return found


# The paths of the vendors' model lists (model discovery's calls).
LIST_PATH = re.compile(r"^(/v1|/v1beta|/v1beta1|/openai|/openai/v1|/compatible-mode/v1)"
                       r"(/publishers/[^/]+)?/(models|deployments)(/[^/?]+)?(\?.*)?$"
                       r"|^/(foundation-models|inference-profiles)(\?.*)?$")


def without_list_call_dumps(text):
    """`text` without the header dumps Envoy's router writes at debug level
    for model discovery's list calls: HTTP callouts (`x-envoy-internal`)
    that carry the provider's credentials, as documented
    (docs/src/features/model-discovery.md, "Credentials and Envoy's debug
    log"). Every other dump stays scanned: a vendor request gets its
    credentials from the attempt role, after the router's dump."""
    out, block = [], None
    for line in text.splitlines():
        if block is not None:
            if line.strip():
                block.append(line)
                continue
            path = next((l.split("', '", 1)[1].rstrip("'") for l in block if l.startswith("':path', '")), "")
            internal = "'x-envoy-internal', 'true'" in block
            if not (internal and LIST_PATH.match(path)):
                out.extend(block)
            block = None
        if line.endswith("router decoding headers:"):
            block = []
        out.append(line)
    if block:
        out.extend(block)
    return "\n".join(out)


def filter_panics(logs):
    """Lines of wasm panics and traps in Envoy logs (name -> text), but for the
    deliberate ones of benches/wasm-floor (test_envoy_hardening's FAIL_RELOAD
    test): its panic, and the trap it causes in a log that has that panic."""
    found = []
    for name, text in logs.items():
        floor = "panicked at benches/wasm-floor/" in text
        for line in text.splitlines():
            if "panicked" in line and "panicked at benches/wasm-floor/" not in line:
                found.append((name, line))
            elif "RuntimeError" in line and not floor:
                found.append((name, line))
    return found


def envoy_logs():
    """envoy.log and access.log (and any other *.log) of every Envoy started so far."""
    logs = {}
    for workdir in gateway.STARTED_WORKDIRS:
        for path in sorted(Path(workdir).glob("*.log*")):
            logs[str(path)] = path.read_text(errors="replace")
    return logs


def complete_lines(path):
    """The lines of a log Envoy is writing, without a last one it has not
    finished (Envoy flushes the access log in pieces)."""
    text = path.read_text()
    return text[: text.rfind("\n") + 1].splitlines()


def anthropic_message(client, stream, **ask):
    """A Messages answer from the `anthropic` SDK, created, or streamed (then
    with the stream's events; none for a created one)."""
    if not stream:
        return client.messages.create(**ask), []
    with client.messages.stream(**ask) as s:
        events = list(s)
        return s.get_final_message(), events


def event_types(events):
    return [e.type for e in events]


def delta_types(events):
    return [e.delta.type for e in events if e.type == "content_block_delta"]


def log_lines(gw):
    """Every complete line of a gateway's access log (`own_gateway`'s), as JSON."""
    return [json.loads(line) for line in complete_lines(gw.workdir / "access.log") if line.startswith("{")]


def log_for(gw, request_id, timeout=10.0):
    """The access-log line of a request (a bounded poll: Envoy flushes the
    log in its own time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [line for line in log_lines(gw) if line.get("request_id") == request_id]
        if found:
            return found[-1]
        time.sleep(0.05)
    raise AssertionError(f"no access log line for {request_id}")


class Gateway:
    def __init__(self, port, admin_port, mock_port, workdir, key=ALL_GROUPS_KEY):
        self.base = f"http://127.0.0.1:{port}"
        self.admin = f"http://127.0.0.1:{admin_port}"
        self.mock = f"http://127.0.0.1:{mock_port}"
        self.workdir = workdir
        self.key = key
        # Shared by every Gateway: the scan covers them all.
        self.seen = SEEN

    def default_headers(self, headers=None):
        """Our key unless the test says otherwise; a value of None drops the header."""
        hdrs = {"content-type": "application/json"}
        if self.key:
            hdrs["authorization"] = f"Bearer {self.key}"
        hdrs.update(headers or {})
        return {k: v for k, v in hdrs.items() if v is not None}

    def record(self, headers, body):
        self.seen.append((json.dumps(headers), body if isinstance(body, bytes) else str(body).encode()))

    def request(self, method, path, body=None, headers=None, raw=None):
        """Returns (status, headers, body bytes)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers=self.default_headers(headers))
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                result = r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as e:
            result = e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
        self.record(result[1], result[2])
        return result

    def stats(self, prefix=""):
        with urllib.request.urlopen(f"{self.admin}/stats?filter={prefix}", timeout=5) as r:
            return dict(line.split(": ", 1) for line in r.read().decode().splitlines() if ": " in line)

    def stat(self, name):
        """One of the filter's metrics by its wasm-style name
        (`wasmcustom.<base>;<label>=<value>;...`), as a string, or None: read
        from the Prometheus output, where both hosts give the same labels (the
        wasm host's through the `stats_tags`, the native host's as real tags;
        names: `prometheus_names`), so a test reads it the same way with either."""
        base, *pairs = name.removeprefix("wasmcustom.").split(";")
        want = dict(p.split("=", 1) for p in pairs)
        metrics = prometheus_names(base)
        with urllib.request.urlopen(f"{self.admin}/stats/prometheus", timeout=5) as r:
            text = r.read().decode()
        for line in text.splitlines():
            sample, _, value = line.rpartition(" ")
            found, _, rest = sample.partition("{")
            if found not in metrics:
                continue
            have = dict((k, v.strip('"')) for k, v in
                        (p.split("=", 1) for p in rest.rstrip("}").split(",") if "=" in p))
            if have == want:
                return str(int(float(value)))
        return None

    def chat(self, body, **headers):
        status, hdrs, data = self.request("POST", "/v1/chat/completions", body, headers)
        return status, hdrs, json.loads(data) if data else None

    def mock_requests(self, test_id):
        with urllib.request.urlopen(f"{self.mock}/_mock/requests?test_id={test_id}", timeout=5) as r:
            return json.loads(r.read())


DEAD_PORT_PROVIDER = "mock-anthropic"


@contextlib.contextmanager
def own_gateway(workdir, edit=None, extra_clusters=None):
    """A gateway of a test module's own: the mock and an Envoy serving the
    test configuration (as `edit` leaves it; `configure_test_gateway` by
    default; `extra_clusters(mock_port)` more clusters), its access log in
    `workdir`, flushed every 50 ms (Envoy's default is 10 s) so metering
    can be read back at once."""
    mock, mock_port = gateway.start_mock()
    envoy = None
    try:
        bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={}, edit=edit or configure_test_gateway,
                                            access_log=workdir / "access.log",
                                            extra_clusters=extra_clusters(mock_port) if extra_clusters else None)
        envoy = gateway.start_envoy(bootstrap, workdir, extra_args=["--file-flush-interval-msec", "50"])
        yield Gateway(envoy.port, envoy.admin_port, mock_port, workdir)
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


def serve_example_from_build(listener, failing="anthropic"):
    """A shipped example's filter, as the tests run it: this build's .wasm,
    the vendors' hosts dropped (the mock answers), and provider `failing`
    always answering 529 (so a failover or ladder has to move on)."""
    import json
    hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
    edge = hcm["http_filters"][0]["typed_config"]["config"]
    upstream = hcm["http_filters"][-1]["typed_config"]["upstream_http_filters"][0]["typed_config"]["config"]
    config = json.loads(edge["configuration"]["value"])
    for provider in config["providers"].values():
        provider.pop("host")
    config["providers"][failing]["base_path"] = "/scenario/error-529"
    for role in (edge, upstream):
        role["vm_config"] = dict(role["vm_config"], code={"local": {"filename": str(gateway.WASM)}})
        role["configuration"] = {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": json.dumps(config)}


def dns_cluster(name, host, port, provider):
    cluster = gateway.static_cluster(name, port, provider)
    cluster.update(type="STRICT_DNS", dns_lookup_family="V4_ONLY")
    endpoint = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    endpoint["address"]["socket_address"]["address"] = host
    return cluster


def short_timeout_route(route):
    """The shipped route with a 300 ms timeout, for requests with `x-test-route: short-timeout`."""
    short = json.loads(json.dumps(route))
    short["match"]["headers"] = [{"name": "x-test-route", "string_match": {"exact": "short-timeout"}}]
    short["route"]["timeout"] = "0.3s"
    return [short]


@pytest.fixture(scope="session", autouse=True)
def secrets_scan():
    """After every test and fixture (this is set up first, so torn down
    last, once every Envoy is stopped and its logs are complete): no vendor
    key in any response any test saw nor in any Envoy's logs, and no panic
    of our filter in them. A finding fails the run (an error at teardown)."""
    yield
    logs = envoy_logs()
    if not logs and not SEEN:
        return  # no integration test ran
    assert len(VENDOR_KEYS) >= 6
    assert gateway.MOCK_AWS_CREDENTIALS.split(":")[1] in VENDOR_KEYS, "the Bedrock signer's secret is scanned"
    found = leaks(SEEN, logs)
    assert not found, f"vendor keys leaked: {found[:5]}"
    panics = filter_panics({k: v for k, v in logs.items() if k.endswith("envoy.log")})
    assert not panics, f"the filter panicked: {panics[:5]}"


@pytest.fixture(scope="session")
def gw(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("envoy")
    mock, mock_port = gateway.start_mock(log=open(workdir / "mock.log", "w"))
    # Bound and never listening, held for the whole session: connections are
    # refused, and no other process (no Envoy of another test) can take it.
    held, dead_port = gateway.refusing_port()
    bootstrap = gateway.build_bootstrap(
        0, 0, mock_port, env={},
        # A cluster where nothing listens: connection refused.
        extra_groups={"dead": {"cluster": "dead"}, "hosted": {"cluster": "dns_mock"},
                      "forwarding": {"cluster": "forwarding"}, "reasoning": {"cluster": "reasoning"},
                      "mock-azure-v1": {"cluster": "mock_azure_v1"}},
        # A provider with its own Host, behind a DNS cluster (as real vendors are).
        extra_providers={"hosted": {"dialect": "openai", "host": "api.example.test", "api_key": "sk-mock-openai"},
                         # One that lets a client's account selector through.
                         "forwarding": {"dialect": "openai", "api_key": "sk-mock-openai",
                                        "forward_headers": ["openai-organization"]},
                         # OpenAI's reasoning models take other parameters (request policy).
                         "reasoning": {"dialect": "openai", "api_key": "sk-mock-openai", "models": {"*": "o3"}},
                         # Azure OpenAI's v1 API (no api-version, the deployment as `model`).
                         "mock-azure-v1": {"dialect": "azure", "api_key": "mock-azure-key", "api_version": "v1",
                                           "models": {"text-embedding-3-small": "mock-embedding-deployment",
                                                      "*": "mock-gpt4o-deployment"}}},
        extra_clusters=[gateway.static_cluster("dead", dead_port, DEAD_PORT_PROVIDER),
                        dns_cluster("dns_mock", "localhost", mock_port, "hosted"),
                        gateway.static_cluster("forwarding", mock_port, "forwarding"),
                        gateway.static_cluster("reasoning", mock_port, "reasoning"),
                        gateway.static_cluster("mock_azure_v1", mock_port, "mock-azure-v1")],
        extra_routes=short_timeout_route,
        edit=configure_test_gateway,
    )
    envoy = None
    try:
        envoy = gateway.start_envoy(bootstrap, workdir, log_level="info")
        session = Gateway(envoy.port, envoy.admin_port, mock_port, workdir)
        yield session
        # The wasm VMs never died during the run (FAIL_RELOAD rebuilds a dead
        # VM: a panic kills it, and every request on it fails meanwhile);
        # `vm_reload` itself never moves.
        stats = session.stats("wasm")
        assert stats.get("wasm.llm_edge.vm_reload_success", "0") == "0", stats
        assert stats.get("wasm.llm_upstream.vm_reload_success", "0") == "0", stats
        assert "llm gateway" in (workdir / "envoy.log").read_text(errors="replace"), \
            "the filter's own log lines are in the scanned log"
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)
        held.close()


@pytest.fixture
def test_id(request):
    """A unique id, sent as `x-test-id`, to find this test's requests at the mock."""
    return request.node.name.replace("[", "-").replace("]", "")
