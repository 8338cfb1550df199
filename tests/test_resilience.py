"""Resilience as shipped: active health checks, outlier ejection, per-try
timeouts, which statuses are retried (a 429 only after its wait) and a
degradation ladder, through a real Envoy built from envoy/gateway.yaml. The test Envoy shortens only the intervals (outlier
interval 0.5 s, ejection 3 s, health checks 0.2 s on this file's clusters) and
turns on the enforcement that envoy/gateway.yaml leaves at detection only
(its mock clusters fail on purpose in the other tests), with the values it
ships for real vendors. Every wait is on a stat or a condition, bounded."""

import copy
import json
import time
import urllib.request

import pytest
import yaml

import gateway
import ladder_config
from conftest import Gateway, complete_lines, prometheus_names
from sse_client import content_of, stream

OK_MSG = [{"role": "user", "content": "hi"}]
ENFORCING = ("enforcing_consecutive_5xx", "enforcing_consecutive_gateway_failure", "enforcing_failure_percentage")
# This file's clusters: name -> (provider, base_path or None).
PROVIDERS = {
    # Always answers 503: ejected after consecutive gateway failures.
    "res-flaky": ("anthropic", "/scenario/error-503"),
    # Would answer fine, but its health check fails.
    "res-hc-down": ("anthropic", None),
    # A healthy primary for the 4xx tests.
    "res-plain": ("anthropic", None),
    # Always 503, alone (no aggregate), configured to fail fast once ejected.
    "res-failfast": ("openai", "/scenario/error-503"),
    # Rate limited, asking to come back in 2 s (within the failover route's 10 s)...
    "res-wait-2": ("anthropic", "/scenario/error-429,retry-after=2"),
    # ... and in 30 s (beyond it).
    "res-wait-30": ("anthropic", "/scenario/error-429,retry-after=30"),
    # The ladder's failing rungs: overloaded right after the stream opened
    # (Anthropic's message_start, with its usage, then an overloaded error).
    "res-ladder-down": ("anthropic", "/scenario/stream-error-after-start"),
    # Its last rung, which answers.
    "res-ladder-up": ("openai", None),
    # Answers only after the per-try timeout (`res_agg_slow`'s route).
    "res-slow": ("anthropic", "/scenario/slow=1500"),
    # Nothing listens on its port (REFUSING): every connection refused.
    "res-refused": ("anthropic", None),
    # Always 503, behind an aggregate whose circuit breaker allows no retry.
    "res-overflow": ("anthropic", "/scenario/error-503"),
}
# Bound and never listening while this module runs (conftest's `dead` cluster does the same).
REFUSING, REFUSING_PORT = gateway.refusing_port()
# The degradation ladder: two rungs on one failing vendor cluster, each with
# its own model, then another vendor.
LADDER = {
    "lad-pro": {"candidates": [{"cluster": "res_ladder_down", "provider": "res-ladder-down", "model": "claude-pro"}],
                "fallback": ["lad-fast", "lad-base"]},
    "lad-fast": {"candidates": [{"cluster": "res_ladder_down", "provider": "res-ladder-down", "model": "claude-fast"}]},
    "lad-base": {"candidates": [{"cluster": "res_ladder_up", "provider": "res-ladder-up", "model": "gpt-base"}]},
}
LADDER_PRICES = {"res-ladder-down": {"claude-pro": {"input": 15, "output": 75}, "claude-fast": {"input": 1, "output": 5}},
                 "res-ladder-up": {"gpt-base": {"input": 0.5, "output": 1.5}}}
PER_TRY = "0.3s"


def shipped():
    return yaml.safe_load(gateway.TEMPLATE.read_text())


def shipped_routes(bootstrap):
    hcm = bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    return hcm["route_config"]["virtual_hosts"][0]["routes"]


def edit_config(config):
    for name, (dialect, base_path) in PROVIDERS.items():
        p = {"dialect": dialect, "api_key": f"sk-mock-{dialect}",
             "models": {"*": "mock-claude-sonnet" if dialect == "anthropic" else "mock-gpt-4o"}}
        if base_path:
            p["base_path"] = base_path
        config["providers"][name] = p
    for provider, prices in LADDER_PRICES.items():
        config["providers"][provider]["prices"] = prices
    config["model_groups"].update(LADDER)
    config["model_groups"].update({
        "res-wait-2": {"cluster": "res_agg_wait_2"},
        "res-wait-30": {"cluster": "res_agg_wait_30"},
        "res-eject": {"cluster": "res_agg_flaky"},
        "res-hc": {"cluster": "res_agg_hc_down"},
        "res-plain": {"cluster": "res_agg_plain"},
        "res-failfast": {"cluster": "res_failfast"},
        "res-slow": {"cluster": "res_agg_slow"},
        "res-refused": {"cluster": "res_agg_refused"},
        "res-dead": {"cluster": "res_refused"},
        "res-overflow": {"cluster": "res_agg_overflow"},
    })


def extra_routes(default_route):
    """The shipped failover route for this file's aggregates (as gateway.yaml
    asks users to list theirs), and the shipped single-vendor route with a
    short per-try timeout for `x-test-route: per-try`."""
    failover = shipped_routes(shipped())[0]
    failover["match"]["headers"][0]["string_match"]["safe_regex"]["regex"] = "res_agg_.*"
    short = copy.deepcopy(default_route)
    assert short["route"]["retry_policy"]["per_try_timeout"] == "30s", "the shipped value"
    short["route"]["retry_policy"]["per_try_timeout"] = PER_TRY
    short["match"]["headers"] = [{"name": "x-test-route", "string_match": {"exact": "per-try"}}]
    # The failover route with the short per-try timeout, for the slow vendor's aggregate.
    slow = copy.deepcopy(failover)
    slow["match"]["headers"][0]["string_match"]["safe_regex"]["regex"] = "res_agg_slow"
    slow["route"]["retry_policy"]["per_try_timeout"] = PER_TRY
    return [short, slow, failover]


def edit_bootstrap(bootstrap):
    clusters = bootstrap["static_resources"]["clusters"]
    [template] = [c for c in clusters if c["name"] == "mock_anthropic"]
    ours = []
    for provider in PROVIDERS:
        c = copy.deepcopy(template)  # the shipped health check, outlier detection, breakers
        name = provider.replace("-", "_")
        c["name"] = c["load_assignment"]["cluster_name"] = name
        c["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["metadata"]["filter_metadata"]["llm"]["provider"] = provider
        od = c["outlier_detection"]
        # The shipped thresholds; shorter intervals; enforcement as for real vendors.
        od.update(interval="0.5s", base_ejection_time="3s", **{k: 100 for k in ENFORCING})
        hc = c["health_checks"][0]
        hc.update(interval="0.2s", no_traffic_interval="0.2s", interval_jitter="0s")
        ours.append(c)
    by_name = {c["name"]: c for c in ours}
    by_name["res_hc_down"]["health_checks"][0]["http_health_check"]["path"] = "/scenario/error-503/_mock/health"
    by_name["res_failfast"]["common_lb_config"] = {"healthy_panic_threshold": {"value": 0}}
    # Refused connections, not a host found unhealthy or ejected for them.
    refused = by_name["res_refused"]
    del refused["health_checks"], refused["outlier_detection"]
    refused["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"][
        "port_value"] = REFUSING_PORT
    [aggregate] = [c for c in clusters if c["name"] == "mock_failover"]
    for primary in ("res_flaky", "res_hc_down", "res_plain", "res_wait_2", "res_wait_30", "res_slow",
                    "res_refused", "res_overflow"):
        agg = copy.deepcopy(aggregate)
        agg["name"] = f"res_agg_{primary[4:]}"
        agg["cluster_type"]["typed_config"]["clusters"] = [primary, "mock_openai"]
        ours.append(agg)
    # Retries count on the route's cluster, the aggregate: none allowed.
    [overflow] = [c for c in ours if c["name"] == "res_agg_overflow"]
    overflow["circuit_breakers"] = {"thresholds": [{"max_retries": 0}]}
    clusters.extend(ours)
    # The ladder's aggregate, rung clusters and route, as scripts/ladder_config.py
    # writes them (from the shipped failover route).
    routes, ladder_clusters = ladder_config.ladder_resources(bootstrap, shipped_routes(shipped())[0])
    shipped_routes(bootstrap)[:0] = routes
    clusters.extend(ladder_clusters)


@pytest.fixture(scope="module")
def res(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("envoy-resilience")
    mock, mock_port = gateway.start_mock()
    port, admin_port = gateway.free_port(), gateway.free_port()
    bootstrap = gateway.build_bootstrap(port, admin_port, mock_port, env={}, edit=edit_config,
                                        extra_routes=extra_routes, edit_bootstrap=edit_bootstrap)
    envoy = None
    try:
        envoy = gateway.start_envoy(bootstrap, workdir, admin_port)
        yield Gateway(port, admin_port, mock_port, workdir, key=None)
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)
        REFUSING.close()


def stat(gw, name):
    return int(gw.stats(f"^{name.replace('.', '[.]')}$").get(name, "0"))


def wait_for(what, condition, timeout=15.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


def chat(gw, group, test_id=None, **headers):
    headers = {"x-model-group": group, **headers}
    if test_id:
        headers["x-test-id"] = test_id
    return gw.chat({"model": "m", "messages": OK_MSG}, **headers)


# --- the shipped files -------------------------------------------------------------

CONFIGS = ["gateway.yaml", "tracing.yaml", "compose/envoy.yaml", "failover.yaml", "sidecar.yaml",
           "hot-reload/gateway.yaml", "examples/ladder/envoy.yaml"]


@pytest.mark.parametrize("name", CONFIGS)
def test_every_vendor_cluster_and_route_is_guarded(name):
    bootstrap = yaml.safe_load((gateway.ROOT / "envoy" / name).read_text())
    vendors = [c for c in bootstrap["static_resources"]["clusters"]
               if any(ep.get("metadata", {}).get("filter_metadata", {}).get("llm")
                      for g in c.get("load_assignment", {}).get("endpoints", []) for ep in g["lb_endpoints"])]
    assert vendors
    for c in vendors:
        assert c.get("health_checks"), c["name"]
        od = c["outlier_detection"]
        assert od["consecutive_5xx"] and od["consecutive_gateway_failure"], c["name"]
        assert od["failure_percentage_threshold"] and od["failure_percentage_request_volume"], c["name"]
        # One endpoint per vendor cluster: below 100% nothing could ever be ejected.
        assert od["max_ejection_percent"] == 100 and od["failure_percentage_minimum_hosts"] == 1, c["name"]
        assert od["successful_active_health_check_uneject_host"] is False, c["name"]
        assert c["circuit_breakers"]["thresholds"][0]["retry_budget"], c["name"]
        enforced = {od[k] for k in ENFORCING}
        # Detection only where the clusters are the mock's (see gateway.yaml); enforced for real vendors.
        assert enforced == ({0} if c["name"].startswith("mock_") else {100}), c["name"]
    for route in shipped_routes(bootstrap):
        policy = route["route"]["retry_policy"]
        assert policy.get("per_try_timeout"), route["match"]
        # No 4xx is retried by its status: a 429 only by its short retry-after (below).
        assert not policy.get("retriable_status_codes") and "retriable-status-codes" not in policy["retry_on"]
        assert "4xx" not in policy["retry_on"] and "retriable-4xx" not in policy["retry_on"]
        # A retried answer by its headers: only a short retry-after (on 429 and 503 alone), waited.
        for header in policy.get("retriable_headers", []):
            assert header == {"name": "retry-after", "string_match": {"safe_regex": {"regex": "[0-9]|10"}}}
            assert policy["rate_limited_retry_back_off"] == {
                "reset_headers": [{"name": "retry-after", "format": "SECONDS"}], "max_interval": "10s"}


# --- outlier detection ----------------------------------------------------------------

def test_failing_vendor_is_ejected_skipped_and_returns(res, test_id):
    prefix = "cluster.res_flaky."
    before = stat(res, prefix + "outlier_detection.ejections_enforced_total")
    # Each request: the primary's 503, then the fallback. The shipped
    # consecutive_gateway_failure (3) ejects the primary after three.
    for _ in range(10):
        status, headers, body = chat(res, "res-eject")
        assert status == 200 and headers["x-llm-provider"] == "mock-openai", body
        if stat(res, prefix + "outlier_detection.ejections_active"):
            break
    assert stat(res, prefix + "outlier_detection.ejections_enforced_total") == before + 1
    assert stat(res, prefix + "outlier_detection.ejections_enforced_consecutive_gateway_failure") == 1

    # While ejected, the aggregate's other vendor serves and the ejected one
    # is not touched, not even for a first attempt; passing health checks
    # (its front door, /_mock/health, answers) do not end the ejection.
    sent = stat(res, prefix + "upstream_rq_total")
    checks = stat(res, prefix + "health_check.success")
    for _ in range(5):
        status, headers, body = chat(res, "res-eject", test_id)
        assert status == 200 and headers["x-llm-provider"] == "mock-openai", body
        assert headers["x-llm-attempts"] == "1"
    wait_for("two more passing health checks", lambda: stat(res, prefix + "health_check.success") >= checks + 2)
    # Still the same ejection: none ended, none began.
    assert stat(res, prefix + "outlier_detection.ejections_active") == 1
    assert stat(res, prefix + "outlier_detection.ejections_enforced_total") == before + 1
    assert stat(res, prefix + "upstream_rq_total") == sent
    assert [r["path"] for r in res.mock_requests(test_id)] == ["/v1/chat/completions"] * 5

    # After base_ejection_time it gets traffic again (and, still failing, fails over).
    wait_for("the ejection to end", lambda: stat(res, prefix + "outlier_detection.ejections_active") == 0)
    status, headers, body = chat(res, "res-eject", test_id + "-back")
    assert status == 200 and headers["x-llm-attempts"] == "2", body
    assert [r["path"] for r in res.mock_requests(test_id + "-back")] == [
        "/scenario/error-503/v1/messages", "/v1/chat/completions"]


def test_no_healthy_upstream_after_ejection_says_why(res, test_id):
    """The fail-fast variant (healthy_panic_threshold 0, see gateway.yaml):
    once the only endpoint is ejected, Envoy answers itself, and says why."""
    prefix = "cluster.res_failfast.outlier_detection."
    for _ in range(5):
        status, _, body = chat(res, "res-failfast")
        assert status == 503, body
        if stat(res, prefix + "ejections_active"):
            break
    assert stat(res, prefix + "ejections_enforced_total") == 1
    status, headers, body = chat(res, "res-failfast", test_id)
    assert status == 503, body
    err = body["error"]
    assert err["code"] == "UPSTREAM_BUSY" and err["type"] == "server_error", err
    assert err["message"].startswith(
        "The server is overloaded or not ready yet: no provider endpoint is healthy"), err
    assert res.mock_requests(test_id) == [], "no vendor was asked"


# --- active health checks -------------------------------------------------------------

def test_health_check_failing_vendor_gets_no_traffic(res, test_id):
    prefix = "cluster.res_hc_down."
    wait_for("a failed health check", lambda: stat(res, prefix + "health_check.failure") >= 1)
    assert stat(res, prefix + "membership_healthy") == 0
    assert stat(res, prefix + "health_check.success") == 0
    for _ in range(5):
        status, headers, body = chat(res, "res-hc", test_id)
        assert status == 200 and headers["x-llm-provider"] == "mock-openai", body
        assert headers["x-llm-attempts"] == "1"
    assert [r["path"] for r in res.mock_requests(test_id)] == ["/v1/chat/completions"] * 5
    assert stat(res, prefix + "upstream_rq_total") == 0
    assert stat(res, prefix + "upstream_cx_total") == 0


def test_shipped_health_check_passes_and_is_not_recorded(res):
    wait_for("mock_openai's health check", lambda: stat(res, "cluster.mock_openai.health_check.success") >= 1)
    assert stat(res, "cluster.mock_openai.membership_healthy") == 1
    assert stat(res, "cluster.mock_openai.health_check.failure") == 0
    with urllib.request.urlopen(f"{res.mock}/_mock/requests", timeout=5) as r:
        assert not [e for e in json.loads(r.read()) if "_mock" in e["path"]], "health checks are not in the log"


# --- what is retried ------------------------------------------------------------------

ERRORS_4XX = {400: "INVALID_REQUEST", 401: "AUTH_FAILED", 403: "PERMISSION_DENIED",
              404: "MODEL_NOT_FOUND", 413: "PAYLOAD_TOO_LARGE"}


@pytest.mark.parametrize("group,cluster", [("mock-openai", "mock_openai"), ("res-plain", "res_agg_plain")],
                         ids=["single-vendor", "failover"])
@pytest.mark.parametrize("code", sorted(ERRORS_4XX))
def test_4xx_is_never_retried(res, test_id, group, cluster, code):
    retries = stat(res, f"cluster.{cluster}.upstream_rq_retry")
    status, headers, body = chat(res, group, test_id, **{"x-mock-scenario": f"error-{code}"})
    assert (status, body["error"]["code"]) == (code, ERRORS_4XX[code]), body
    assert headers["x-llm-attempts"] == "1"
    assert len(res.mock_requests(test_id)) == 1, "exactly one request reached the vendor"
    assert stat(res, f"cluster.{cluster}.upstream_rq_retry") == retries


# --- per-try timeout ------------------------------------------------------------------

@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_per_try_timeout_says_why(res, test_id, streaming):
    request_id = f"per-try-{test_id}"
    headers = {"x-model-group": "mock-openai", "x-test-id": test_id, "x-test-route": "per-try",
               "x-mock-scenario": "slow=1500", "x-request-id": request_id}
    body = {"model": "m", "messages": OK_MSG, "stream": streaming}
    status, resp_headers, resp = res.request("POST", "/v1/chat/completions", body, headers)
    assert status == 504, resp
    err = json.loads(resp)["error"]
    assert err["code"] == "UPSTREAM_TIMEOUT", err
    assert err["message"].startswith("the provider did not start answering within the per-try timeout"), err
    # The shipped retries (num_retries 2): every attempt reached the mock and timed out.
    assert len(res.mock_requests(test_id)) == 3
    # Envoy's reply counts them, and the access log has each, reset by Envoy
    # (a stream's held 200 included).
    assert resp_headers["x-llm-attempts"] == "3"
    line = access_log_line(res, request_id)
    assert (line["attempts"], line["route"]) == (3, ["mock-openai/mock-gpt-4o:reset"] * 3), line
    assert (line["status"], line["code"]) == (504, "UPSTREAM_TIMEOUT"), line
    # A vendor that never answered bills nothing; a stream whose headers came
    # (the last attempt) is billed as the vendor may: its prompt, estimated.
    billed = [(a["status"], a["completion_tokens"], a["usage_estimated"]) for a in line["attempt_usage"]]
    assert billed == ([(200, 0, True)] if streaming else []), line


def test_per_try_timeout_does_not_cut_a_stream_that_started(res, test_id):
    """The first content comes within the per-try timeout, the whole stream
    takes longer: it is delivered whole, in one attempt."""
    headers = {"x-model-group": "mock-openai", "x-test-id": test_id, "x-test-route": "per-try",
               "x-mock-scenario": "slow=100"}
    status, resp_headers, events = stream(res, {"model": "m", "messages": OK_MSG, "stream": True}, headers)
    assert status == 200
    assert events[-1][1] == "[DONE]"
    assert content_of(events) == "Hello from the mock openai provider. You said: hi"
    # Ten words 100 ms apart: longer than the 300 ms per-try timeout.
    assert len([e for _, e in events if isinstance(e, dict) and e.get("choices")
                and e["choices"][0]["delta"].get("content")]) * 0.1 > float(PER_TRY[:-1])
    assert resp_headers["x-llm-attempts"] == "1" and len(res.mock_requests(test_id)) == 1


def counter(gw, metric, **labels):
    """The sum of a Prometheus counter's samples whose labels include `labels`."""
    with urllib.request.urlopen(f"{gw.admin}/stats/prometheus", timeout=5) as r:
        text = r.read().decode()
    total = 0
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        base, _, rest = name.partition("{")
        have = dict(p.split("=", 1) for p in rest.rstrip("}").split(",") if "=" in p)
        if base in prometheus_names(metric.replace("_", ".", 1)) and all(have.get(k) == f'"{v}"' for k, v in labels.items()):
            total += int(float(value))
    return total


def answered(gw, group, request_id, streaming):
    """A chat request's status, headers and access-log line."""
    headers = {"x-model-group": group, "x-request-id": request_id}
    body = {"model": "m", "messages": OK_MSG, "stream": streaming}
    if streaming:
        status, resp_headers, events = stream(gw, body, headers)
        assert events[-1][1] == "[DONE]", events
    else:
        status, resp_headers, _ = gw.request("POST", "/v1/chat/completions", body, headers)
    return status, resp_headers, access_log_line(gw, request_id)


ATTEMPT_METRICS = {"res-slow": ("res-slow", "mock-claude-sonnet"), "res-refused": ("res-refused", "mock-claude-sonnet")}


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("group", ["res-slow", "res-refused"], ids=["per-try-timeout", "connect-refused"])
def test_an_attempt_envoy_gave_up_on_is_logged_and_counted(res, test_id, group, streaming):
    """The primary times out (per-try timeout; a stream's headers came and
    were held) or refuses the connection; the fallback answers. Both attempts
    are in the access log with their outcome and in `llm_gateway_attempts`;
    `llm_gateway_requests` counts the request once, under the vendor that answered."""
    provider, model = ATTEMPT_METRICS[group]
    before = {
        "reset": counter(res, "llm_gateway_attempts", group=group, provider=provider, status="reset"),
        "answer": counter(res, "llm_gateway_attempts", group=group, provider="mock-openai", status="200"),
        "requests": counter(res, "llm_gateway_requests", group=group),
        "answered": counter(res, "llm_gateway_requests", group=group, provider="mock-openai", status="200"),
    }
    status, headers, line = answered(res, group, f"gave-up-{test_id}", streaming)
    assert status == 200 and headers["x-llm-attempts"] == "2" and headers["x-llm-provider"] == "mock-openai"
    assert line["attempts"] == 2, line
    assert line["route"] == [f"{provider}/{model}:reset", "mock-openai/mock-gpt-4o:200"], line
    assert [a["provider"] for a in line["attempt_usage"]] == ["mock-openai"], "the reset attempt bills nothing"
    after = {
        "reset": counter(res, "llm_gateway_attempts", group=group, provider=provider, status="reset"),
        "answer": counter(res, "llm_gateway_attempts", group=group, provider="mock-openai", status="200"),
        "requests": counter(res, "llm_gateway_requests", group=group),
        "answered": counter(res, "llm_gateway_requests", group=group, provider="mock-openai", status="200"),
    }
    assert {k: after[k] - before[k] for k in before} == {"reset": 1, "answer": 1, "requests": 1, "answered": 1}


def test_a_refused_connection_on_every_attempt_is_503_with_its_attempts(res, test_id):
    """A single vendor that refuses every connection: Envoy's own 503 after
    the shipped retries, rewritten by the edge role, says how many attempts
    were made, and the access log lists them."""
    request_id = f"refused-{test_id}"
    status, headers, body = chat(res, "res-dead", test_id, **{"x-request-id": request_id})
    assert (status, body["error"]["code"]) == (503, "UPSTREAM_BUSY"), body
    assert "connect" in body["error"]["message"], body
    assert headers["x-llm-attempts"] == "3"
    line = access_log_line(res, request_id)
    assert (line["attempts"], line["route"]) == (3, ["res-refused/mock-claude-sonnet:reset"] * 3), line


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_a_retry_the_circuit_breaker_refused_is_named_as_such(res, test_id, streaming):
    """The primary's 503 would be retried on the next vendor, but the
    aggregate's circuit breaker allows no retry (max_retries 0): the client
    gets that 503, and its message names Envoy's overflow, not only the
    vendor's words."""
    overflows = stat(res, "cluster.res_agg_overflow.upstream_rq_retry_overflow")
    body = {"model": "m", "messages": OK_MSG, "stream": streaming}
    headers = {"x-model-group": "res-overflow", "x-test-id": test_id}
    status, resp_headers, resp = res.request("POST", "/v1/chat/completions", body, headers)
    err = json.loads(resp)["error"]
    assert (status, err["code"], err["provider"]) == (503, "UPSTREAM_BUSY", "res-overflow"), err
    assert err["message"].startswith("the provider failed, and the gateway's circuit breaker allows no more "
                                     "retries right now (max_retries)"), err
    assert "upstream_rq_retry_overflow" in err["message"], err
    assert resp_headers["x-llm-attempts"] == "1" and len(res.mock_requests(test_id)) == 1
    assert stat(res, "cluster.res_agg_overflow.upstream_rq_retry_overflow") == overflows + 1


def test_the_edge_roles_own_answers_say_no_attempt_was_made(res):
    status, headers, body = chat(res, "no-such-group")
    assert status == 404 and body["error"]["code"] == "MODEL_NOT_FOUND", body
    assert headers["x-llm-attempts"] == "0"


def test_examples_guard_their_vendor_clusters():
    """The Istio EnvoyFilter's clusters and the Envoy Gateway patches carry the
    same health checks and enforced outlier detection (test_examples.py
    validates them with Envoy)."""
    examples = gateway.ROOT / "envoy/examples"
    envoy_filter = yaml.safe_load((examples / "istio/envoyfilter.yaml").read_text())
    clusters = [p["patch"]["value"] for p in envoy_filter["spec"]["configPatches"] if p["applyTo"] == "CLUSTER"]
    patches = [p for d in yaml.safe_load_all((examples / "envoy-gateway/envoypatchpolicy.yaml").read_text())
               if d and d["kind"] == "EnvoyPatchPolicy" for p in d["spec"]["jsonPatches"]]
    for name in ("httproute/llm/llm/rule/0", "httproute/llm/llm/rule/1"):
        ops = {p["operation"]["path"]: p["operation"]["value"] for p in patches if p["name"] == name}
        clusters.append({"name": name, "health_checks": ops["/health_checks"],
                         "outlier_detection": ops["/outlier_detection"]})
    assert len(clusters) == 4
    # Istio's retries (single-vendor clusters) never retry a 429 at once.
    [vs] = [d for d in yaml.safe_load_all((examples / "istio/routing.yaml").read_text())
            if d and d["kind"] == "VirtualService"]
    assert vs["spec"]["http"][0]["retries"]["retryOn"] == "5xx,reset,connect-failure"
    for c in clusters:
        [check] = c["health_checks"]
        assert check["http_health_check"]["path"] == "/v1/models", c["name"]
        assert "%ENVIRONMENT(" in json.dumps(check["http_health_check"]["request_headers_to_add"]), c["name"]
        od = c["outlier_detection"]
        assert {od[k] for k in ENFORCING} == {100} and od["max_ejection_percent"] == 100, c["name"]
        assert od["failure_percentage_minimum_hosts"] == 1, c["name"]


def test_make_runs_real_vendor_clusters_are_guarded_too():
    # `make run` adds api.openai.com / api.anthropic.com when their keys are set.
    bootstrap = gateway.build_bootstrap(1, 2, 3, env={"OPENAI_API_KEY": "x", "ANTHROPIC_API_KEY": "y"})
    vendors = {c["name"]: c for c in bootstrap["static_resources"]["clusters"] if c["name"] in ("openai", "anthropic")}
    assert set(vendors) == {"openai", "anthropic"}
    for name, cluster in vendors.items():
        [check] = cluster["health_checks"]
        assert check["http_health_check"]["path"] == "/v1/models"
        assert check["http_health_check"]["host"] == f"api.{name}.com"
        assert cluster["outlier_detection"]["enforcing_consecutive_gateway_failure"] == 100
        assert cluster["circuit_breakers"]["thresholds"]


# --- a 429 is retried only after its wait -------------------------------------------

def test_a_429_is_retried_on_the_next_vendor_only_after_its_wait(res, test_id):
    """The shipped failover route: the primary's 429 says retry-after: 2;
    the next vendor is asked no sooner than 2 s later."""
    backoffs = stat(res, "cluster.res_agg_wait_2.upstream_rq_retry_backoff_ratelimited")
    status, headers, body = chat(res, "res-wait-2", test_id)
    assert status == 200 and headers["x-llm-provider"] == "mock-openai", body
    assert headers["x-llm-attempts"] == "2"
    limited, fallback = res.mock_requests(test_id)
    assert limited["path"] == "/scenario/error-429,retry-after=2/v1/messages"
    assert fallback["path"] == "/v1/chat/completions"
    # The deliberate delay: a lower bound (Envoy waits 2 to 3 s, jittered).
    assert fallback["received_at"] - limited["received_at"] >= 2.0
    assert stat(res, "cluster.res_agg_wait_2.upstream_rq_retry_backoff_ratelimited") == backoffs + 1


def test_a_429_that_asks_for_longer_than_the_route_waits_is_answered(res, test_id):
    retries = stat(res, "cluster.res_agg_wait_30.upstream_rq_retry")
    status, headers, body = chat(res, "res-wait-30", test_id)
    assert (status, body["error"]["code"]) == (429, "UPSTREAM_RATE_LIMIT"), body
    assert headers["retry-after"] == "30" and headers["x-llm-attempts"] == "1"
    assert [r["path"] for r in res.mock_requests(test_id)] == ["/scenario/error-429,retry-after=30/v1/messages"]
    assert stat(res, "cluster.res_agg_wait_30.upstream_rq_retry") == retries


@pytest.mark.parametrize("code", [400, 500])
def test_a_wait_on_another_status_is_dropped_and_retries_nothing_more(res, test_id, code):
    """A vendor that states a short wait on a 400 (or 500): the retry-after
    never reaches the router or the client, so the failover route's
    retriable_headers cannot retry the 400, and the 500 (a 5xx, retried) is
    not held back by it."""
    scenario = f"error-{code},retry-after=1"
    status, headers, body = chat(res, "res-plain", test_id, **{"x-mock-scenario": scenario})
    sent = res.mock_requests(test_id)
    assert "retry-after" not in headers, headers
    if code == 400:
        assert (status, body["error"]["code"], headers["x-llm-attempts"]) == (400, "INVALID_REQUEST", "1")
        assert len(sent) == 1
    else:
        # Both vendors of the aggregate answered 500 (the scenario header reaches both).
        assert (status, body["error"]["code"], headers["x-llm-attempts"]) == (502, "UPSTREAM_ERROR", "2")
        assert len(sent) == 2
        assert stat(res, "cluster.res_agg_plain.upstream_rq_retry_backoff_ratelimited") == 0


# --- the degradation ladder -------------------------------------------------------

def access_log_line(gw, request_id, timeout=10.0):
    def found():
        return [json.loads(line) for line in complete_lines(gw.workdir / "access.log")
                if line.startswith("{") and json.loads(line)["request_id"] == request_id]
    wait_for(f"the access log line of {request_id}", found, timeout)
    return found()[-1]


def test_a_ladder_degrades_rung_by_rung_each_attempt_for_its_rung(res, test_id):
    request_id = f"ladder-{test_id}"
    body = {"model": "m", "messages": OK_MSG, "stream": True, "stream_options": {"include_usage": True}}
    status, headers, events = stream(res, body, {"x-model-group": "lad-pro", "x-test-id": test_id,
                                                 "x-request-id": request_id})
    assert status == 200 and events[-1][1] == "[DONE]"
    assert content_of(events) == "Hello from the mock openai provider. You said: hi"
    assert (headers["x-llm-provider"], headers["x-llm-model"], headers["x-llm-attempts"]) == \
        ("res-ladder-up", "gpt-base", "3")
    # Each attempt went to its rung's vendor, translated for its rung's model.
    sent = res.mock_requests(test_id)
    assert [(r["path"], r["body"]["model"]) for r in sent] == [
        ("/scenario/stream-error-after-start/v1/messages", "claude-pro"),
        ("/scenario/stream-error-after-start/v1/messages", "claude-fast"),
        ("/v1/chat/completions", "gpt-base")]
    assert sent[0]["headers"]["x-api-key"] == sent[1]["headers"]["x-api-key"] == "sk-mock-anthropic"
    assert sent[2]["headers"]["authorization"] == "Bearer sk-mock-openai"
    line = access_log_line(res, request_id)
    # The route shows each vendor's own status (the rungs opened their streams with 200).
    assert line["attempts"] == 3
    assert line["route"] == ["res-ladder-down/claude-pro:200", "res-ladder-down/claude-fast:200",
                             "res-ladder-up/gpt-base:200"], line
    # Every attempt is billed at its own model's prices: the failed rungs for
    # what their message_start reported (1 prompt token, 1 output token).
    [usage] = [e["usage"] for _, e in events if isinstance(e, dict) and e.get("usage")]
    prices = {m: p for per_model in LADDER_PRICES.values() for m, p in per_model.items()}
    expected = [("res-ladder-down", "claude-pro", 503, 1, 1), ("res-ladder-down", "claude-fast", 503, 1, 1),
                ("res-ladder-up", "gpt-base", 200, usage["prompt_tokens"], usage["completion_tokens"])]
    assert [(a["provider"], a["model"], a["status"], a["prompt_tokens"], a["completion_tokens"])
            for a in line["attempt_usage"]] == expected, line
    for attempt, (_, model, _, prompt, completion) in zip(line["attempt_usage"], expected):
        assert attempt["usage_estimated"] is False
        cost = (prompt * prices[model]["input"] + completion * prices[model]["output"]) / 1e6
        assert attempt["cost_usd"] == pytest.approx(cost), attempt
    # The request's totals are the attempts' sums.
    assert line["prompt_tokens"] == sum(e[3] for e in expected)
    assert line["completion_tokens"] == sum(e[4] for e in expected)
    assert line["cost_usd"] == pytest.approx(sum(a["cost_usd"] for a in line["attempt_usage"]))
    assert (line["provider"], line["model"]) == ("res-ladder-up", "gpt-base")


def test_a_ladder_that_answers_on_its_top_rung_makes_one_attempt(res, test_id):
    """A JSON request: the failing rungs only fail streams (the error comes after
    the stream opened), so the top rung answers, with its own model."""
    status, headers, body = chat(res, "lad-pro", test_id)
    assert status == 200, body
    assert (headers["x-llm-provider"], body["model"], headers["x-llm-attempts"]) == \
        ("res-ladder-down", "claude-pro", "1")
    [sent] = res.mock_requests(test_id)
    assert sent["body"]["model"] == "claude-pro"


def test_a_rung_group_is_also_a_group_of_its_own(res, test_id):
    """lad-base alone routes to its own cluster (not a ladder), with its model."""
    status, headers, body = chat(res, "lad-base", test_id)
    assert status == 200 and body["model"] == "gpt-base" and headers["x-llm-attempts"] == "1", body
    assert res.mock_requests(test_id)[0]["body"]["model"] == "gpt-base"
