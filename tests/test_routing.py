"""Routing through a real Envoy: weights, stickiness, capabilities, rules,
and cross-vendor failover through Envoy's own retries (aggregate clusters,
retry priorities), each attempt translated for the vendor it reached."""

import json
from collections import Counter

import pytest
import yaml

import gateway
from conftest import Gateway
from sse_client import stream

OK_MSG = [{"role": "user", "content": "hi"}]
# Failure modes of the primary vendor (an Anthropic mock); the fallback is the OpenAI mock.
PRIMARY_FAILURES = {
    "503": "/scenario/error-503",
    "429": "/scenario/error-429",
    "timeout": "/scenario/slow=3000",
    "first-event-error": "/scenario/stream-error-first",
}


def routing_config(dead_port):
    def edit(config):
        providers = config["providers"]
        for name, base_path in PRIMARY_FAILURES.items():
            providers[f"down-{name}"] = {"dialect": "anthropic", "api_key": "sk-mock-anthropic",
                                         "base_path": base_path, "models": {"*": "mock-claude-sonnet"}}
        groups = config["model_groups"]
        for name in list(PRIMARY_FAILURES) + ["refused"]:
            groups[f"failover-{name}"] = {"cluster": f"agg_{name}"}
        groups["weighted"] = {"candidates": [
            {"cluster": "mock_openai", "provider": "mock-openai", "weight": 70},
            {"cluster": "mock_anthropic", "provider": "mock-anthropic", "weight": 30}]}
        groups["canary-before"] = {"candidates": [{"cluster": "mock_openai", "provider": "mock-openai"}]}
        groups["canary-after"] = {"candidates": [
            {"cluster": "mock_openai", "provider": "mock-openai", "weight": 95},
            {"cluster": "mock_anthropic", "provider": "mock-anthropic", "weight": 5}]}
        groups["capable"] = {"candidates": [
            {"cluster": "mock_anthropic", "provider": "mock-anthropic", "model": "small-claude",
             "capabilities": {"tools": False, "context_window": 500}},
            {"cluster": "mock_openai", "provider": "mock-openai", "model": "big-gpt",
             "capabilities": {"context_window": 5000, "vision": False}}]}
        # One capability each, beside a candidate without that limit.
        groups["json-or-not"] = {"candidates": [
            {"cluster": "mock_anthropic", "provider": "mock-anthropic", "weight": 99, "capabilities": {"json": False}},
            {"cluster": "mock_openai", "provider": "mock-openai", "weight": 1}]}
        groups["no-json"] = {"candidates": [
            {"cluster": "mock_anthropic", "provider": "mock-anthropic", "capabilities": {"json": False}}]}
        groups["short-output"] = {"candidates": [
            {"cluster": "mock_anthropic", "provider": "mock-anthropic", "capabilities": {"max_output_tokens": 100}}]}
        groups["short-or-long"] = {"candidates": [
            {"cluster": "mock_anthropic", "provider": "mock-anthropic", "weight": 99,
             "capabilities": {"max_output_tokens": 100}},
            {"cluster": "mock_openai", "provider": "mock-openai", "weight": 1}]}
        groups["window-300"] = {"candidates": [
            {"cluster": "mock_openai", "provider": "mock-openai", "capabilities": {"context_window": 300}}]}
        config["rules"] = [
            {"match": {"model": "claude-*"}, "group": "mock-anthropic"},
            {"match": {"headers": {"x-route-key": "beta"}}, "group": "weighted", "priority": 5},
            {"match": {"task_type": "summarize"}, "group": "mock-anthropic", "priority": 5},
        ]
        config["default_model_group"] = "mock-openai"
    return edit


def failover_clusters(mock_port, dead_port):
    clusters = [gateway.static_cluster("primary_refused", dead_port, "mock-anthropic")]
    for name in PRIMARY_FAILURES:
        clusters.append(gateway.static_cluster(f"primary_{name}", mock_port, f"down-{name}"))
    for name in list(PRIMARY_FAILURES) + ["refused"]:
        clusters.append({
            "name": f"agg_{name}", "connect_timeout": "1s", "lb_policy": "CLUSTER_PROVIDED",
            "cluster_type": {"name": "envoy.clusters.aggregate", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig",
                "clusters": [f"primary_{name}", "mock_openai"]}}})
    return clusters


def per_try_timeout_route(route):
    """The shipped route with a 500 ms per-try timeout, for `x-test-route: per-try-timeout`;
    and the shipped failover route (429s retried on the next vendor) for this file's
    aggregates, as envoy/gateway.yaml asks its users to list theirs."""
    r = json.loads(json.dumps(route))
    r["match"]["headers"] = [{"name": "x-test-route", "string_match": {"exact": "per-try-timeout"}}]
    r["route"]["retry_policy"]["per_try_timeout"] = "0.5s"
    shipped = yaml.safe_load(gateway.TEMPLATE.read_text())
    hcm = shipped["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    failover = hcm["route_config"]["virtual_hosts"][0]["routes"][0]
    failover["match"]["headers"][0]["string_match"]["safe_regex"]["regex"] = "agg_.*"
    return [r, failover]


@pytest.fixture(scope="module")
def rgw(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("envoy-routing")
    mock, mock_port = gateway.start_mock()
    # Connections to it are refused for as long as the fixture holds it.
    held, dead_port = gateway.refusing_port()
    bootstrap = gateway.build_bootstrap(
        0, 0, mock_port, env={}, edit=routing_config(dead_port),
        extra_clusters=failover_clusters(mock_port, dead_port), extra_routes=per_try_timeout_route)
    envoy = None
    try:
        envoy = gateway.start_envoy(bootstrap, workdir)
        yield Gateway(envoy.port, envoy.admin_port, mock_port, workdir, key=None)
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)
        held.close()


def provider_of(gw, body=None, **headers):
    status, hdrs, resp = gw.chat(body or {"model": "m", "messages": OK_MSG}, **headers)
    assert status == 200, resp
    return hdrs["x-llm-provider"]


# --- weights and stickiness --------------------------------------------------------

def test_weights_split_traffic(rgw):
    # Requests without a user spread by request id (fixed here, so the run is
    # the same every time).
    counts = Counter(provider_of(rgw, **{"x-model-group": "weighted", "x-request-id": f"weights-{i}"})
                     for i in range(400))
    # 70/30 of 400: a binomial sd of about 9; allow 4 sd.
    assert 244 <= counts["mock-openai"] <= 316, counts
    assert counts["mock-openai"] + counts["mock-anthropic"] == 400, counts


def test_weights_split_users(rgw):
    counts = Counter(provider_of(rgw, **{"x-model-group": "weighted", "x-user-id": f"weights-user-{i}"})
                     for i in range(400))
    assert 244 <= counts["mock-openai"] <= 316, counts
    assert counts["mock-openai"] + counts["mock-anthropic"] == 400, counts


def test_shipped_ab_group_is_half_and_half_and_sticky(rgw):
    """envoy/gateway.yaml's `mock-ab`: 50/50 between the OpenAI and Anthropic
    mocks, each user always on the same one."""
    first = {f"ab-user-{i}": provider_of(rgw, **{"x-model-group": "mock-ab", "x-user-id": f"ab-user-{i}"})
             for i in range(200)}
    counts = Counter(first.values())
    # 50/50 of 200: a binomial sd of about 7; allow 4 sd.
    assert set(counts) == {"mock-openai", "mock-anthropic"} and 72 <= counts["mock-openai"] <= 128, counts
    again = {user: provider_of(rgw, **{"x-model-group": "mock-ab", "x-user-id": user}) for user in list(first)[:50]}
    assert again == {user: first[user] for user in again}


def test_same_user_same_candidate(rgw):
    for user in ("alice", "bob", "carol", "dave"):
        seen = {provider_of(rgw, **{"x-model-group": "weighted", "x-user-id": user}) for _ in range(8)}
        assert len(seen) == 1, (user, seen)
    body = {"model": "m", "messages": OK_MSG, "user": "erin"}
    assert len({provider_of(rgw, body, **{"x-model-group": "weighted"}) for _ in range(8)}) == 1


def test_five_percent_canary_moves_about_five_percent_of_users(rgw):
    moved = 0
    users = [f"user-{i}" for i in range(400)]
    for user in users:
        before = provider_of(rgw, **{"x-model-group": "canary-before", "x-user-id": user})
        after = provider_of(rgw, **{"x-model-group": "canary-after", "x-user-id": user})
        moved += before != after
    assert 5 <= moved <= 40, f"{moved} of {len(users)} users moved"


# --- capabilities ----------------------------------------------------------------------

def test_tools_skip_a_candidate_without_tools(rgw, test_id):
    body = {"model": "m", "messages": OK_MSG,
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
    for _ in range(10):
        assert provider_of(rgw, body, **{"x-model-group": "capable", "x-test-id": test_id}) == "mock-openai"
    assert {r["body"]["model"] for r in rgw.mock_requests(test_id)} == {"big-gpt"}, "the candidate's own model"


def test_long_prompt_skips_the_small_window(rgw):
    body = {"model": "m", "messages": [{"role": "user", "content": "word " * 1500}]}
    for _ in range(10):
        assert provider_of(rgw, body, **{"x-model-group": "capable"}) == "mock-openai"


def test_prompt_too_long_for_every_candidate(rgw, test_id):
    body = {"model": "m", "messages": [{"role": "user", "content": "word " * 6000}]}
    status, _, resp = rgw.chat(body, **{"x-model-group": "capable", "x-test-id": test_id})
    assert status == 400 and resp["error"]["code"] == "CONTEXT_LENGTH_EXCEEDED", resp
    assert rgw.mock_requests(test_id) == []


def test_missing_capability_is_named(rgw, test_id):
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}],
        "tools": [{"type": "function", "function": {"name": "f"}}]}
    status, _, resp = rgw.chat(body, **{"x-model-group": "capable", "x-test-id": test_id})
    assert status == 400 and resp["error"]["code"] == "INVALID_REQUEST", resp
    # small-claude takes no tools, big-gpt no images: the later reason (vision) is named.
    assert resp["error"]["param"] == "messages", resp
    assert rgw.mock_requests(test_id) == []


def test_json_output_skips_a_candidate_without_json(rgw, test_id):
    body = {"model": "m", "messages": OK_MSG, "response_format": {"type": "json_object"}}
    # 99 of 100 would go to the candidate without JSON; JSON requests never do.
    users = [f"json-user-{i}" for i in range(10)]
    assert {provider_of(rgw, body, **{"x-model-group": "json-or-not", "x-user-id": u}) for u in users} == \
        {"mock-openai"}
    plain = {"model": "m", "messages": OK_MSG, "response_format": {"type": "text"}}
    assert Counter(provider_of(rgw, plain, **{"x-model-group": "json-or-not", "x-user-id": u})
                   for u in users)["mock-anthropic"] >= 8
    status, _, resp = rgw.chat(body, **{"x-model-group": "no-json", "x-test-id": test_id})
    assert status == 400 and resp["error"]["code"] == "INVALID_REQUEST", resp
    assert resp["error"]["param"] == "response_format"
    assert resp["error"]["message"] == "no model in group 'no-json' supports JSON output"
    assert rgw.mock_requests(test_id) == []


def test_max_output_tokens(rgw, test_id):
    def ask(group, max_tokens, **headers):
        return rgw.chat({"model": "m", "messages": OK_MSG, "max_tokens": max_tokens},
                        **{"x-model-group": group, **headers})

    status, headers, _ = ask("short-output", 100)
    assert status == 200 and headers["x-llm-provider"] == "mock-anthropic"
    status, _, resp = ask("short-output", 101, **{"x-test-id": test_id})
    assert status == 400 and resp["error"]["code"] == "INVALID_REQUEST", resp
    assert resp["error"]["param"] == "max_tokens"
    assert rgw.mock_requests(test_id) == []
    # max_completion_tokens counts the same.
    status, _, resp = rgw.chat({"model": "m", "messages": OK_MSG, "max_completion_tokens": 101},
                               **{"x-model-group": "short-output"})
    assert status == 400 and resp["error"]["param"] == "max_tokens", resp
    users = [f"out-user-{i}" for i in range(10)]
    assert Counter(ask("short-or-long", 100, **{"x-user-id": u})[1]["x-llm-provider"]
                   for u in users)["mock-anthropic"] >= 8
    assert {ask("short-or-long", 101, **{"x-user-id": u})[1]["x-llm-provider"] for u in users} == {"mock-openai"}


def test_context_window_counts_the_requested_output(rgw, test_id):
    """The window holds the prompt estimate plus max_tokens: a short prompt
    fits a 300-token window, with 320 output tokens asked for it does not."""
    body = {"model": "m", "messages": OK_MSG}
    assert provider_of(rgw, dict(body, max_tokens=250), **{"x-model-group": "window-300"}) == "mock-openai"
    status, _, resp = rgw.chat(dict(body, max_tokens=320), **{"x-model-group": "window-300", "x-test-id": test_id})
    assert status == 400 and resp["error"]["code"] == "CONTEXT_LENGTH_EXCEEDED", resp
    assert rgw.mock_requests(test_id) == []


def test_provider_pin_is_off_by_default(rgw):
    providers = {provider_of(rgw, **{"x-model-group": "weighted", "x-user-id": "pinned-user",
                                     "x-llm-provider": p}) for p in ("mock-openai", "mock-anthropic")}
    assert len(providers) == 1, "the header does not choose the vendor"


# --- rules --------------------------------------------------------------------------

@pytest.mark.parametrize("model,headers,task_type,provider", [
    ("claude-3-opus", {}, None, "mock-anthropic"),                 # glob
    ("gpt-4o", {}, "summarize", "mock-anthropic"),                  # task type
    ("gpt-4o", {}, None, "mock-openai"),                            # default
    ("mock-anthropic", {}, None, "mock-anthropic"),                 # a group's own name
])
def test_rules(rgw, model, headers, task_type, provider):
    body = {"model": model, "messages": OK_MSG}
    if task_type:
        body["metadata"] = {"task_type": task_type}
    assert provider_of(rgw, body, **headers) == provider


def test_header_rule_with_priority(rgw):
    # The header rule (priority 5) beats the glob (priority 0) for a claude-* model.
    seen = Counter(provider_of(rgw, {"model": "claude-3", "messages": OK_MSG},
                               **{"x-route-key": "beta", "x-request-id": f"beta-{i}"})
                   for i in range(40))
    assert set(seen) == {"mock-openai", "mock-anthropic"}, "routed to the weighted group, not the glob's"


# --- failover ------------------------------------------------------------------------

# A first-event error only exists in streams.
@pytest.mark.parametrize("failure,streaming", [
    (failure, streaming) for failure in ["503", "429", "refused", "timeout", "first-event-error"]
    for streaming in [False, True] if streaming or failure != "first-event-error"],
    ids=lambda v: {False: "json", True: "stream"}.get(v, v) if isinstance(v, bool) else v)
def test_failover_to_another_vendor(rgw, test_id, failure, streaming):
    headers = {"x-model-group": f"failover-{failure}", "x-test-id": test_id}
    if failure == "timeout":
        headers["x-test-route"] = "per-try-timeout"
    body = {"model": "claude-x", "messages": OK_MSG, "stream": streaming}
    if streaming:
        status, resp_headers, events = stream(rgw, body, headers)
        assert status == 200
        text = "".join(e["choices"][0]["delta"].get("content") or ""
                       for _, e in events if isinstance(e, dict) and e.get("choices"))
        assert events[-1][1] == "[DONE]"
    else:
        status, resp_headers, resp = rgw.chat(body, **headers)
        assert status == 200, resp
        text = resp["choices"][0]["message"]["content"]
    assert text == "Hello from the mock openai provider. You said: hi"
    assert resp_headers["x-llm-provider"] == "mock-openai"
    assert int(resp_headers["x-llm-attempts"]) >= 2
    attempts = rgw.mock_requests(test_id)
    fallback = attempts[-1]
    assert fallback["path"] == "/v1/chat/completions"
    assert fallback["headers"]["authorization"] == "Bearer sk-mock-openai"
    assert "x-api-key" not in fallback["headers"], "the primary vendor's auth header is gone"
    assert fallback["body"]["model"] == "mock-gpt-4o", "the fallback vendor's own model mapping"
    assert fallback["body"]["messages"] == OK_MSG
    if failure != "refused":
        primary = attempts[0]
        assert primary["path"].endswith("/v1/messages")
        assert primary["headers"]["x-api-key"] == "sk-mock-anthropic"
        assert primary["body"]["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
