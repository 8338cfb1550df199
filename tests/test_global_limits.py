"""The global path through the real engine: envoy/ratelimit.yaml's Envoys
(the built .wasm) ask the project's rate limit service (llm-ratelimit:
limitador over Redis, tests/ratelimit_service.py starts both). One budget
held by several Envoys and services sharing one Redis, exactly; the spend
outlives restarts of Envoy, of the service and of Redis; Redis down fails
open (envoy/ratelimit.yaml's failure_mode_deny: false); an embeddings batch
split into self-calls counts once (one request, its parts' tokens), and a
batch the limits refuse calls no vendor."""

import json
import math
import re
import threading
import time

import pytest
import yaml

import gateway
import ratelimit_service
from conftest import Gateway, log_for
from test_limits import reset_seconds

RATELIMIT_YAML = gateway.ROOT / "envoy/ratelimit.yaml"
HI = [{"role": "user", "content": "hi"}]
# What the mock's OpenAI dialect bills for HI: 1 + 9 tokens.
HI_TOKENS = 10
KEY = "example-team"
REQUESTS = (("llm_key", KEY), ("llm_group", "mock-openai"))
TOKENS = (("llm_budget", "tokens"), ("llm_key", KEY))
MICRO_USD = (("llm_budget", "micro_usd"), ("llm_key", KEY))
# DashScope's text-embedding-v4 embeds 10 texts a call: named by the
# `dashscope` group's candidate, left to the cluster's endpoint by `any-dashscope`'s.
DASHSCOPE = {"dialect": "dashscope", "api_key": "sk-mock-dashscope", "models": {"*": "text-embedding-v4"}}
DASHSCOPE_GROUPS = {"dashscope": {"candidates": [{"cluster": "mock_dashscope", "provider": "mock-dashscope"}]},
                    "any-dashscope": {"cluster": "mock_dashscope"}}


def limits(requests=1000, tokens=10**6, micro_usd=10**9):
    return [
        ratelimit_service.limit("requests", requests, 3600, ["descriptors[0].llm_group != ''"],
                                ["descriptors[0].llm_key", "descriptors[0].llm_group"]),
        ratelimit_service.limit("tokens", tokens, 3600, ["descriptors[0].llm_budget == 'tokens'"],
                                ["descriptors[0].llm_key"]),
        ratelimit_service.limit("usd", micro_usd, 86400, ["descriptors[0].llm_budget == 'micro_usd'"],
                                ["descriptors[0].llm_key"]),
    ]


def start_envoy(workdir, mock_port, service_port, limits_rate=None):
    bootstrap = yaml.safe_load(RATELIMIT_YAML.read_text())
    bootstrap["admin"]["address"]["socket_address"]["port_value"] = 0
    bootstrap["static_resources"]["listeners"][0]["address"]["socket_address"]["port_value"] = 0
    bootstrap["static_resources"]["clusters"].append(
        gateway.static_cluster("mock_dashscope", mock_port, "mock-dashscope"))
    ports = {"mock_openai": mock_port, "mock_dashscope": mock_port, "ratelimit": service_port}
    for cluster in bootstrap["static_resources"]["clusters"]:
        for ep in cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]:
            # llm_self's endpoint is the internal listener.
            if "socket_address" in ep["endpoint"]["address"]:
                ep["endpoint"]["address"]["socket_address"]["port_value"] = ports[cluster["name"]]
    _, edge, upstream = gateway._wasm_filters(bootstrap)
    for role in (edge, upstream):
        role["vm_config"] = dict(role["vm_config"], code={"local": {"filename": str(gateway.WASM)}})
        config = json.loads(role["configuration"]["value"])
        config["providers"]["mock-dashscope"] = DASHSCOPE
        config["model_groups"].update(DASHSCOPE_GROUPS)
        if limits_rate:
            config["limits"]["rate"] = limits_rate
        role["configuration"] = dict(role["configuration"], value=json.dumps(config))
    envoy = gateway.start_envoy(bootstrap, workdir, log_level="info", concurrency=2,
                                extra_args=["--file-flush-interval-msec", "50"])
    return envoy, Gateway(envoy.port, envoy.admin_port, mock_port, workdir, key="example-gateway-key")


class Fleet:
    """The engine, the mock, and the Envoys started on it (stopped at the end)."""

    def __init__(self, tmp_path, engine):
        self.tmp_path, self.engine = tmp_path, engine
        self.mock, self.mock_port = gateway.start_mock()
        self.envoys = []

    def envoy(self, service, limits_rate=None):
        envoy, gw = start_envoy(self.tmp_path / f"envoy{len(self.envoys)}", self.mock_port, service.port,
                                limits_rate)
        self.envoys.append(envoy)
        return envoy, gw

    def stop(self):
        for envoy in self.envoys:
            gateway.stop(envoy)
        gateway.stop(self.mock)
        self.engine.stop()


@pytest.fixture
def fleet(tmp_path, request):
    engine = ratelimit_service.Engine(limits(**getattr(request, "param", {})))
    engine.start_redis()
    fleet = Fleet(tmp_path, engine)
    try:
        yield fleet
    finally:
        fleet.stop()


def wait_for(condition, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.parametrize("fleet", [{"requests": 7}], indirect=True)
def test_two_envoys_hold_one_request_limit_exactly_under_concurrency(fleet):
    service = fleet.engine.start_service()
    gws = [fleet.envoy(service)[1], fleet.envoy(service)[1]]
    statuses = []
    lock = threading.Lock()

    def ask(gw):
        status, _, _ = gw.chat({"model": "m", "messages": HI}, connection="close")
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=ask, args=(gws[i % 2],)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200] * 7 + [429] * 9
    # A refused request added nothing: the count is what was admitted.
    assert fleet.engine.used(REQUESTS, 7) == 7


@pytest.mark.parametrize("fleet", [{"tokens": 25}], indirect=True)
def test_a_token_budget_shared_by_two_services_survives_restarts(fleet):
    engine = fleet.engine
    services = [engine.start_service(), engine.start_service()]
    pair = [fleet.envoy(services[0]), fleet.envoy(services[1])]
    for n in (1, 2, 3):
        status, headers, body = pair[n % 2][1].chat({"model": "m", "messages": HI})
        assert status == 200, body
        # Charged when the stream is done (after the answer), with its tokens.
        wait_for(lambda: engine.used(TOKENS, 25) == min(25, n * HI_TOKENS) and
                 engine.check(TOKENS)[0] == (ratelimit_service.OVER_LIMIT if n == 3 else ratelimit_service.OK),
                 f"tokens after {n}: {engine.check(TOKENS)}")
        assert engine.used(REQUESTS, 1000) == n
    # The cost was charged the same way (millionths of a USD, the access log's cost).
    micro_usd = math.floor(log_for(pair[1][1], headers["x-request-id"])["cost_usd"] * 1e6 + 0.5)
    assert micro_usd > 0 and engine.used(MICRO_USD, 10**9) == 3 * micro_usd
    # 30 of 25 tokens spent: both Envoys refuse, before any vendor.
    for _, gw in pair:
        status, headers, body = gw.chat({"model": "m", "messages": HI, "request_id": "global-refused"})
        assert status == 429, body
        assert (body["error"]["code"], body["error"]["provider"]) == ("RATE_LIMITED", None)
        assert "x-llm-provider" not in headers
        assert 1 <= int(headers["retry-after"]) <= 3600
        # The filter's x-ratelimit-* headers and the service's name for the limit that fired.
        assert "25;w=3600" in headers["x-ratelimit-limit"], headers
        assert headers["x-llm-ratelimit-name"] == "tokens"
    assert engine.used(REQUESTS, 1000) == 3
    # An Envoy restart, a service restart and a Redis restart keep the spend.
    for envoy in fleet.envoys:
        gateway.stop(envoy)
    for proc in services:
        gateway.stop(proc)
    engine.stop_redis()
    engine.start_redis()
    _, gw = fleet.envoy(engine.start_service())
    status, _, body = gw.chat({"model": "m", "messages": HI})
    assert status == 429, body
    assert engine.check(TOKENS)[0] == ratelimit_service.OVER_LIMIT
    assert engine.used(REQUESTS, 1000) == 3


@pytest.mark.parametrize("fleet", [{"requests": 2}], indirect=True)
def test_redis_down_fails_open_and_counting_resumes_when_it_is_back(fleet):
    service = fleet.engine.start_service()
    _, gw = fleet.envoy(service)
    assert gw.chat({"model": "m", "messages": HI})[0] == 200
    fleet.engine.stop_redis()
    # failure_mode_deny: false: the service's UNAVAILABLE lets the request through.
    for _ in range(3):
        status, _, body = gw.chat({"model": "m", "messages": HI})
        assert status == 200, body
    errors = {k: v for k, v in gw.stats("ratelimit.error").items() if k.endswith("ratelimit.error")}
    assert sum(int(v) for v in errors.values()) >= 3, errors
    fleet.engine.start_redis()
    # The service reconnects by itself; what Redis kept is counted on.
    wait_for(lambda: gw.chat({"model": "m", "messages": HI})[0] == 429, "refusals once Redis is back", timeout=30)
    assert fleet.engine.used(REQUESTS, 2) == 2


@pytest.mark.parametrize("fleet", [{"tokens": 15}], indirect=True)
def test_the_global_429_is_the_surfaces_own_and_names_the_limit(fleet):
    _, gw = fleet.envoy(fleet.engine.start_service())
    for _ in range(2):  # 10 then 20 of 15 tokens: each admitted while the budget was not spent
        assert gw.chat({"model": "m", "messages": HI})[0] == 200
    wait_for(lambda: fleet.engine.check(TOKENS)[0] == ratelimit_service.OVER_LIMIT, "the budget spent")
    # Chat Completions: OpenAI's envelope, type tokens, the limit named, OpenAI's headers.
    status, headers, body = gw.chat({"model": "m", "messages": HI, "request_id": "global-chat"})
    assert status == 429
    assert body == {"error": {
        "message": body["error"]["message"], "type": "tokens", "code": "RATE_LIMITED",
        "param": None, "provider": None, "request_id": "global-chat"}}
    assert re.fullmatch(r'Rate limit reached for tokens per hour \(the gateway\'s global limit "tokens"\): '
                        r'Limit 15\. Please try again in [\dhms.]+\.', body["error"]["message"]), body
    assert (headers["x-ratelimit-limit-tokens"], headers["x-ratelimit-remaining-tokens"]) == ("15", "0")
    assert 0 < reset_seconds(headers["x-ratelimit-reset-tokens"]) <= 3600
    assert int(headers["retry-after"]) == math.ceil(reset_seconds(headers["x-ratelimit-reset-tokens"]))
    assert "x-ratelimit-limit-requests" not in headers
    assert "x-llm-provider" not in headers
    line = log_for(gw, "global-chat")
    assert (line["status"], line["code"], line["rate_limit"], line["key"]) == (
        429, "RATE_LIMITED", "global.tokens", KEY)
    # Messages: Anthropic's envelope.
    status, headers, raw = gw.request("POST", "/v1/messages", {
        "model": "m", "max_tokens": 16, "messages": HI}, {"anthropic-version": "2023-06-01"})
    assert status == 429, raw
    answer = json.loads(raw)
    assert answer["type"] == "error" and answer["error"]["type"] == "rate_limit_error", answer
    assert 'global limit "tokens"' in answer["error"]["message"]
    assert headers["x-ratelimit-remaining-tokens"] == "0"
    limited = f"wasmcustom.llm_gateway.rate_limit;key={KEY};group=mock-openai;scope=global;limit=tokens;decision=limited"
    assert gw.stat(limited) == "2"


@pytest.mark.parametrize("fleet", [{"tokens": 15}], indirect=True)
def test_a_global_refusal_is_not_counted_by_the_local_limits(fleet):
    _, gw = fleet.envoy(fleet.engine.start_service(), [{"key": KEY, "requests_per_hour": 100}])
    for _ in range(2):
        assert gw.chat({"model": "m", "messages": HI})[0] == 200
    wait_for(lambda: fleet.engine.check(TOKENS)[0] == ratelimit_service.OVER_LIMIT, "the budget spent")
    # Each refusal was admitted locally (the 3rd request in) and taken back.
    for _ in range(4):
        status, headers, body = gw.chat({"model": "m", "messages": HI})
        assert status == 429 and body["error"]["type"] == "tokens", body
        assert headers["x-ratelimit-remaining-requests"] == "97"


def embed(gw, group, texts, test_id):
    status, headers, body = gw.request("POST", "/v1/embeddings", {"model": "text-embedding-3-small", "input": texts},
                                       {"x-model-group": group, "x-test-id": test_id})
    return status, headers, json.loads(body)


@pytest.mark.parametrize("group", ["dashscope", "any-dashscope"])
def test_a_split_batch_counts_once_and_is_charged_its_parts_tokens(fleet, group):
    """25 texts to DashScope (10 a call): three self-calls through the rate
    limit filter, counted as one request; the tokens charged are the sum of
    the parts' (the access log's prompt_tokens). `any-dashscope` first sends
    the batch whole to one self-call, which its vendor's limit splits."""
    _, gw = fleet.envoy(fleet.engine.start_service())
    requests = (("llm_key", KEY), ("llm_group", group))
    texts = [f"text {i} of a batch" for i in range(25)]
    status, headers, body = embed(gw, group, texts, f"batch-{group}")
    assert status == 200, body
    assert len(body["data"]) == 25 and headers["x-llm-parts"] == "3"
    line = log_for(gw, headers["x-request-id"])
    assert line["prompt_tokens"] > 25
    wait_for(lambda: fleet.engine.used(TOKENS, 10**6) == line["prompt_tokens"],
             f"the parts' tokens charged: {fleet.engine.check(TOKENS)} for {line['prompt_tokens']}")
    assert fleet.engine.used(requests, 1000) == 1, "one request for the whole batch"
    assert len(gw.mock_requests(f"batch-{group}")) == 3
    # A batch within the vendor's limit is one request, one vendor call (as
    # any request where the candidate names its vendor; else as one self-call
    # on a worker that has not yet learned the vendor's limit).
    status, headers, body = embed(gw, group, texts[:5], f"small-{group}")
    assert status == 200 and len(body["data"]) == 5, body
    if group == "dashscope":
        assert "x-llm-parts" not in headers
    assert len(gw.mock_requests(f"small-{group}")) == 1
    assert fleet.engine.used(requests, 1000) == 2


@pytest.mark.parametrize("fleet", [{"tokens": 30}], indirect=True)
def test_a_batch_the_global_limits_refuse_calls_no_vendor(fleet, test_id):
    """The token budget spent, a batch is refused as one request: its first
    part is Envoy's 429, answered in OpenAI's envelope naming the limit, and
    no part reaches DashScope."""
    _, gw = fleet.envoy(fleet.engine.start_service())
    texts = [f"text {i} of a batch" for i in range(25)]
    assert embed(gw, "dashscope", texts, "spend")[0] == 200
    wait_for(lambda: fleet.engine.check(TOKENS)[0] == ratelimit_service.OVER_LIMIT, "the budget spent")
    status, headers, body = embed(gw, "dashscope", texts, test_id)
    assert status == 429, body
    assert (body["error"]["code"], body["error"]["type"]) == ("RATE_LIMITED", "tokens"), body
    assert 'global limit "tokens"' in body["error"]["message"]
    assert headers["x-llm-ratelimit-name"] == "tokens" and int(headers["retry-after"]) >= 1
    assert headers["x-ratelimit-remaining-tokens"] == "0"
    assert gw.mock_requests(test_id) == [], "no part reached the vendor"
    line = log_for(gw, headers["x-request-id"])
    assert (line["status"], line["code"], line["rate_limit"], line["key"]) == (
        429, "RATE_LIMITED", "global.tokens", KEY)
    limited = f"wasmcustom.llm_gateway.rate_limit;key={KEY};group=dashscope;scope=global;limit=tokens;decision=limited"
    assert gw.stat(limited) == "1"
    # The batch that was refused counted nothing.
    assert fleet.engine.used((("llm_key", KEY), ("llm_group", "dashscope")), 1000) == 1
