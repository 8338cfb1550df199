"""Metering through a real Envoy: Prometheus metrics with labels, the access
log line, cost, estimated usage, and a client that leaves mid-stream. Every
test runs twice: with both roles in one VM (records shared in memory) and in
separate VMs (records through filter state)."""

import copy
import http.client
import json
import time
import urllib.request

import pytest

import gateway
from conftest import NATIVE, Gateway, log_lines, log_for
from sse_client import stream

OK_MSG = [{"role": "user", "content": "hi there"}]
# The mock's usage for OK_MSG (mock/src/answer.rs: a token per word): the
# prompt's 2 words, and "Hello from the mock <vendor> provider. You said: hi there".
PROMPT_TOKENS, COMPLETION_TOKENS = 2, 10


def estimated_tokens(text):
    """src/estimate.rs's text estimate: 4 ASCII bytes a token (rounded up),
    one token per other character."""
    data = text.encode()
    return -(-sum(b < 0x80 for b in data) // 4) + sum(b >= 0xC0 for b in data)


# What the gateway delivers of that answer, by its estimate.
DELIVERED_OK = estimated_tokens("Hello from the mock openai provider. You said: hi there")
# USD per million tokens.
PRICES = {"mock-claude-sonnet": {"input": 3.0, "output": 15.0, "cached_input": 0.3},
          "prom-claude": {"input": 3.0, "output": 15.0}}
OPENAI_PRICES = {"*": {"input": 2.5, "output": 10.0}}
# Two gateway keys: their names label the metrics and the access log.
METER_KEY, OTHER_KEY = "gw-meter-key", "gw-meter-other-key"


def priced(config):
    config["providers"]["mock-anthropic"]["prices"] = PRICES
    config["providers"]["mock-openai"]["prices"] = OPENAI_PRICES
    # Only test_prometheus_metrics_with_labels asks for this model: its
    # series start at zero, whatever ran before.
    config["model_groups"]["prom"] = {"candidates": [
        {"cluster": "mock_anthropic", "provider": "mock-anthropic", "model": "prom-claude"}]}
    config["auth"] = {"enabled": True, "keys": [
        {"name": "metering", "sha256": gateway.key_hash(METER_KEY), "groups": ["*"]},
        {"name": "other-team", "sha256": gateway.key_hash(OTHER_KEY), "groups": ["*"]}]}


def priced_and_timed(config):
    priced(config)
    config["overhead_histograms"] = True


def route_log(bootstrap, separate_vms):
    """A second access log showing the route the upstream role leaves in
    filter state: `<x-request-id> <wasm.llm_route>`; with `separate_vms`, the
    upstream role gets a VM of its own."""
    hcm, _, upstream = gateway._wasm_filters(bootstrap)
    if separate_vms:
        # The Bedrock cluster's upstream filter is this same object.
        upstream["vm_config"] = dict(upstream["vm_config"], vm_id="llm_gateway_upstream")
    route_log = copy.deepcopy(hcm["access_log"][0])
    route_log["typed_config"]["path"] += ".route"
    route_log["typed_config"]["log_format"] = {"text_format_source": {
        "inline_string": "%REQ(x-request-id)% %FILTER_STATE(wasm.llm_route:PLAIN)%\n"}}
    hcm["access_log"].append(route_log)


def per_try_route(default_route):
    """The shipped single-vendor route with a 0.3 s per-try timeout, for `x-test-route: per-try`."""
    short = copy.deepcopy(default_route)
    short["route"]["retry_policy"]["per_try_timeout"] = "0.3s"
    short["match"]["headers"] = [{"name": "x-test-route", "string_match": {"exact": "per-try"}}]
    return [short]


@pytest.fixture(scope="module", params=["one-vm", "separate-vms"])
def mgw(tmp_path_factory, request):
    if NATIVE and request.param == "separate-vms":
        pytest.skip("wasm host only: the native host has no VMs; a request's two roles always share "
                    "the in-memory exchange (one process, one worker thread)")
    workdir = tmp_path_factory.mktemp("envoy-metering")
    mock, mock_port = gateway.start_mock()
    # One VM also records the filter's own time (overhead_histograms); separate VMs do not.
    timed = request.param == "one-vm"
    bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={},
                                        edit=priced_and_timed if timed else priced,
                                        access_log=workdir / "access.log", extra_routes=per_try_route,
                                        edit_bootstrap=lambda b: route_log(b, request.param == "separate-vms"))
    # Histograms reach /stats/prometheus at each flush.
    bootstrap["stats_flush_interval"] = "0.2s"
    envoy = None
    try:
        # Access-log files are flushed every 10 s by default.
        envoy = gateway.start_envoy(bootstrap, workdir, extra_args=["--file-flush-interval-msec", "50"])
        gw = Gateway(envoy.port, envoy.admin_port, mock_port, workdir, key=METER_KEY)
        gw.separate_vms = request.param == "separate-vms"
        gw.timed = timed
        yield gw
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)






def prometheus(gw):
    with urllib.request.urlopen(f"{gw.admin}/stats/prometheus", timeout=5) as r:
        text = r.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            # The native host's series carry its metrics namespace (`conftest.prometheus_names`).
            samples[name.removeprefix("envoy_dynamicmodulescustom_")] = float(value)
    return samples


def sample(samples, metric, **labels):
    """Sum of the samples of `metric` whose labels include `labels`."""
    total = 0.0
    for name, value in samples.items():
        base, _, rest = name.partition("{")
        if base != metric:
            continue
        have = dict(part.split("=", 1) for part in rest.rstrip("}").split(",") if "=" in part)
        if all(have.get(k) == f'"{v}"' for k, v in labels.items()):
            total += value
    return total


def test_access_log_line_for_a_plain_request(mgw):
    status, _, body = mgw.chat({"model": "m", "messages": OK_MSG, "request_id": "meter-plain"},
                               **{"x-model-group": "mock-anthropic"})
    assert status == 200
    line = log_for(mgw, "meter-plain")
    usage = body["usage"]
    assert line["group"] == "mock-anthropic" and line["provider"] == "mock-anthropic"
    assert line["model"] == "mock-claude-sonnet" and line["status"] == 200 and line["code"] is None
    assert line["attempts"] == 1 and line["route"] == ["mock-anthropic/mock-claude-sonnet:200"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert (line["prompt_tokens"], line["completion_tokens"]) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert (line["cached_tokens"], line["reasoning_tokens"]) == (0, 0)
    assert line["usage_estimated"] is False and line["client_disconnected"] is False
    assert line["key"] == "metering"
    assert line["cost_usd"] == pytest.approx((2 * 3.0 + 10 * 15.0) / 1e6)
    assert line["stream"] is False and line["ttft_ms"] is None


def test_access_log_duration_covers_the_vendors_time(mgw):
    """The mock holds this answer 300 ms (`slow=300`): the logged duration
    includes that, and is no longer than the client waited."""
    started = time.monotonic()
    status, _, _ = mgw.chat({"model": "m", "messages": OK_MSG, "request_id": "meter-slow"},
                            **{"x-model-group": "mock-anthropic", "x-mock-scenario": "slow=300"})
    waited_ms = (time.monotonic() - started) * 1000
    assert status == 200
    line = log_for(mgw, "meter-slow")
    assert isinstance(line["duration_ms"], int)
    assert 300 <= line["duration_ms"] <= waited_ms + 1, (line["duration_ms"], waited_ms)


def test_access_log_names_the_key(mgw):
    status, _, _ = mgw.chat({"model": "m", "messages": OK_MSG, "request_id": "meter-other-key"},
                            **{"x-model-group": "mock-openai", "authorization": f"Bearer {OTHER_KEY}"})
    assert status == 200
    assert log_for(mgw, "meter-other-key")["key"] == "other-team"
    # A refused key is logged without a name.
    status, _, _ = mgw.chat({"model": "m", "messages": OK_MSG},
                            **{"x-request-id": "meter-bad-key", "authorization": "Bearer not-a-key"})
    assert status == 401
    line = log_for(mgw, "meter-bad-key")
    assert line["code"] == "AUTH_FAILED" and line["key"] == "", line


# (group, cached, reasoning, completion tokens): OpenAI counts the reasoning
# tokens into completion_tokens, Gemini reports them beside (added in, as
# OpenAI's clients expect), Anthropic reports none (thinking is output).
@pytest.mark.parametrize("group,cached,reasoning,completion", [
    ("mock-anthropic", 2, 0, COMPLETION_TOKENS),
    ("mock-openai", 2, 3, COMPLETION_TOKENS + 3),
    ("mock-gemini", 2, 3, COMPLETION_TOKENS + 3),
])
def test_cached_and_reasoning_tokens_are_logged_and_priced(mgw, group, cached, reasoning, completion):
    """The mock's `cached-usage`: 2 of the prompt's tokens read from the
    cache and 3 reasoning tokens (mock/src/scenario.rs)."""
    rid = f"meter-cached-{group}"
    status, _, body = mgw.chat({"model": "m", "messages": OK_MSG, "request_id": rid},
                               **{"x-model-group": group, "x-mock-scenario": "cached-usage"})
    assert status == 200, body
    line = log_for(mgw, rid)
    assert (line["prompt_tokens"], line["cached_tokens"], line["reasoning_tokens"], line["completion_tokens"]) == \
        (PROMPT_TOKENS, cached, reasoning, completion), line
    usage = body["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (PROMPT_TOKENS, completion)
    assert usage["prompt_tokens_details"]["cached_tokens"] == cached
    if group == "mock-anthropic":
        # Both prompt tokens cached, at the cached price.
        assert line["cost_usd"] == pytest.approx((2 * 0.3 + completion * 15.0) / 1e6)
    elif group == "mock-openai":
        assert usage["completion_tokens_details"]["reasoning_tokens"] == reasoning
        # No cached price: cached tokens cost the input price.
        assert line["cost_usd"] == pytest.approx((2 * 2.5 + completion * 10.0) / 1e6)
    else:
        assert line["cost_usd"] is None, "no prices for Gemini"


def test_roles_hand_over_in_memory_or_through_filter_state(mgw):
    """One VM: the attempts' records never touch filter state. Separate VMs:
    they do, and the access log line above comes out the same."""
    status, _, _ = mgw.chat({"model": "m", "messages": OK_MSG, "request_id": "meter-handover"},
                            **{"x-model-group": "mock-failover"})
    assert status == 200
    line = log_for(mgw, "meter-handover")
    assert line["attempts"] == 2 and line["route"][1] == "mock-openai/mock-gpt-4o:200"
    deadline = time.time() + 5
    while time.time() < deadline:
        found = [ln for ln in (mgw.workdir / "access.log.route").read_text().splitlines()
                 if ln.startswith("meter-handover ")]
        if found:
            break
        time.sleep(0.05)
    # Envoy logs "-" for filter state that is not there.
    assert found == ["meter-handover " + (",".join(line["route"]) if mgw.separate_vms else "-")]


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_attempts_envoy_timed_out_are_logged_in_either_hand_over(mgw, streaming):
    """Every attempt the per-try timeout ended is in the access log (one VM:
    through memory; separate VMs: through filter state, written when Envoy
    destroys the attempt), as many as the response's x-llm-attempts."""
    request_id = f"meter-per-try-{streaming}"
    status, headers, _ = mgw.request(
        "POST", "/v1/chat/completions", {"model": "m", "messages": OK_MSG, "stream": streaming},
        {"x-model-group": "mock-openai", "x-test-route": "per-try", "x-mock-scenario": "slow=1500",
         "x-request-id": request_id})
    assert status == 504 and headers["x-llm-attempts"] == "3"
    line = log_for(mgw, request_id)
    assert (line["attempts"], line["route"]) == (3, ["mock-openai/mock-gpt-4o:reset"] * 3), line


def test_access_log_line_for_a_stream_and_a_failover(mgw):
    _, _, events = stream(mgw, {"model": "m", "messages": OK_MSG, "stream": True, "request_id": "meter-stream",
                                "stream_options": {"include_usage": True}}, {"x-model-group": "mock-failover"})
    usage = [e for _, e in events if isinstance(e, dict) and e.get("usage")][0]["usage"]
    line = log_for(mgw, "meter-stream")
    assert line["attempts"] == 2 and line["route"][0].endswith(":529") and line["provider"] == "mock-openai"
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert (line["prompt_tokens"], line["completion_tokens"]) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert line["stream"] is True and line["usage_estimated"] is False
    assert isinstance(line["ttft_ms"], int)
    # Estimated from the text sent (src/estimate.rs), which the vendor counted as 10.
    assert line["delivered_tokens"] == DELIVERED_OK
    assert line["cost_usd"] == pytest.approx((2 * 2.5 + 10 * 10.0) / 1e6)
    # Every attempt a vendor answered is billed: the 529 is not, the fallback is.
    [billed] = line["attempt_usage"]
    assert (billed["provider"], billed["status"], billed["usage_estimated"]) == ("mock-openai", 200, False)
    assert (billed["prompt_tokens"], billed["completion_tokens"]) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert billed["cost_usd"] == pytest.approx(line["cost_usd"])


def test_access_log_line_for_errors(mgw):
    mgw.chat({"model": "m", "messages": OK_MSG, "request_id": "meter-429"},
             **{"x-model-group": "mock-openai", "x-mock-scenario": "error-429"})
    line = log_for(mgw, "meter-429")
    assert line["status"] == 429 and line["code"] == "UPSTREAM_RATE_LIMIT" and line["attempts"] == 1
    # Rejected before the body is trusted: the id comes from the header.
    mgw.chat({"model": "m", "messages": []}, **{"x-request-id": "meter-400"})
    line = log_for(mgw, "meter-400")
    assert line["status"] == 400 and line["code"] == "INVALID_REQUEST" and line["attempts"] == 0


def test_client_leaving_mid_stream_is_reconciled(mgw):
    body = {"model": "m", "messages": [{"role": "user", "content": "tell me a long story " * 5}], "stream": True}
    # The whole answer, as a client that stays sees it.
    stream(mgw, dict(body, request_id="meter-full"), {"x-model-group": "mock-anthropic"})
    full = log_for(mgw, "meter-full")
    # The same answer paced slowly; this client reads three events and leaves.
    host = mgw.base.split("//", 1)[1]
    conn = http.client.HTTPConnection(host, timeout=10)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(dict(body, request_id="meter-cut")),
                 headers=mgw.default_headers({"x-model-group": "mock-anthropic", "x-mock-scenario": "slow=150"}))
    resp = conn.getresponse()
    assert resp.status == 200
    before = sample(prometheus(mgw), "llm_gateway_client_disconnects", provider="mock-anthropic")
    seen = b""
    while seen.count(b"\n\n") < 3:
        got = resp.read1(4096)
        assert got, f"the stream ended early: {seen!r}"
        seen += got
    conn.sock.close()
    conn.close()
    line = log_for(mgw, "meter-cut", timeout=10)
    assert line["client_disconnected"] is True
    assert sample(prometheus(mgw), "llm_gateway_client_disconnects", provider="mock-anthropic") == before + 1
    assert 0 < line["delivered_tokens"] < full["delivered_tokens"]
    # The vendor never reported usage for the cut stream: billed is estimated.
    assert line["usage_estimated"] is True
    assert line["delivered_tokens"] < full["completion_tokens"]


def wait_for_samples(gw, want, timeout=10.0):
    """Polls /stats/prometheus until every (metric, labels) -> value of `want`
    holds (histograms reach it only at a stats flush); returns the samples."""
    deadline = time.monotonic() + timeout
    while True:
        samples = prometheus(gw)
        missing = {k: sample(samples, k[0], **dict(k[1])) for k, v in want.items()
                   if sample(samples, k[0], **dict(k[1])) != v}
        if not missing:
            return samples
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout}s: {missing}, expected {want}")
        time.sleep(0.05)


def test_prometheus_metrics_with_labels(mgw):
    before = prometheus(mgw)
    for _ in range(3):
        mgw.chat({"model": "m", "messages": OK_MSG}, **{"x-model-group": "prom"})
    # Paced 50 ms an event: time per output token has a floor.
    stream(mgw, {"model": "m", "messages": OK_MSG, "stream": True},
           {"x-model-group": "prom", "x-mock-scenario": "slow=50"})
    mgw.chat({"model": "m", "messages": OK_MSG}, **{"x-model-group": "mock-azure", "x-mock-scenario": "filtered-answer"})
    # A vendor stream cut mid-event: no usage ever arrives, so it is estimated.
    with pytest.raises(http.client.IncompleteRead):
        stream(mgw, {"model": "m", "messages": OK_MSG, "stream": True, "request_id": "meter-prom-cut"},
               {"x-model-group": "prom", "x-mock-scenario": "cut"})
    # One failover (mock-anthropic-down answers 529, then mock-openai), by the other key.
    status, _, _ = mgw.chat({"model": "m", "messages": OK_MSG},
                            **{"x-model-group": "mock-failover", "authorization": f"Bearer {OTHER_KEY}"})
    assert status == 200
    cut = log_for(mgw, "meter-prom-cut")
    assert cut["usage_estimated"] is True and cut["code"] == "UPSTREAM_ERROR"

    anthropic = {"provider": "mock-anthropic", "model": "prom-claude", "group": "prom"}
    hist = {"provider": "mock-anthropic", "model": "prom-claude"}

    def key(metric, **labels):
        return metric, tuple(sorted(labels.items()))

    # Histogram counts, waited for (they reach /stats/prometheus at a flush,
    # every 0.2 s here): 5 requests reached the vendor, 2 streams had a first
    # token, 1 stream ended with the vendor's usage (the cut one has none).
    counts = {
        key("gen_ai_server_request_duration_ms_count", **anthropic): 5,
        key("gen_ai_server_time_to_first_token_ms_count", **hist): 2,
        key("gen_ai_server_time_per_output_token_us_count", **hist): 1,
    }
    assert all(sample(before, k[0], **dict(k[1])) == 0 for k in counts)
    after = wait_for_samples(mgw, counts)

    def delta(metric, **labels):
        return sample(after, metric, **labels) - sample(before, metric, **labels)

    assert delta("llm_gateway_requests", status="200", code="none", key="metering", **anthropic) == 4
    # The cut stream had started as a 200; the vendor broke it.
    assert delta("llm_gateway_requests", status="200", code="UPSTREAM_ERROR", key="metering", **anthropic) == 1
    # Exact usage: 4 answers the mock counted, and the cut stream's estimate.
    assert delta("gen_ai_client_token_usage", token_type="input", key="metering", **anthropic) == \
        4 * PROMPT_TOKENS + cut["prompt_tokens"]
    assert delta("gen_ai_client_token_usage", token_type="output", key="metering", **anthropic) == \
        4 * COMPLETION_TOKENS + cut["completion_tokens"]
    assert delta("gen_ai_client_token_usage", token_type="cached", **anthropic) == 0
    assert delta("gen_ai_client_token_usage", token_type="reasoning", **anthropic) == 0
    # Micro-USD, rounded per request: (2 x $3 + 10 x $15) per million tokens = 156.
    assert delta("llm_gateway_cost_micro_usd", key="metering", **anthropic) == \
        4 * 156 + round(cut["cost_usd"] * 1e6)
    # Paced 50 ms an event, 10 tokens: at least 9 pauses over 9 token gaps.
    tpot = delta("gen_ai_server_time_per_output_token_us_sum", **hist)
    assert tpot >= 45_000, tpot
    assert delta("llm_gateway_content_filtered", provider="mock-azure") == 1
    assert delta("llm_gateway_usage_estimated", provider="mock-anthropic") == 1
    # The failover: one attempt beyond the first, labelled by group; the
    # request under the other key's name, at the vendor that answered.
    assert delta("llm_gateway_failovers", group="mock-failover") == 1
    assert delta("llm_gateway_failovers", group="prom") == 0
    openai = {"provider": "mock-openai", "model": "mock-gpt-4o", "group": "mock-failover"}
    assert delta("llm_gateway_requests", status="200", code="none", key="other-team", **openai) == 1
    assert delta("llm_gateway_requests", key="metering", **openai) == 0
    assert delta("gen_ai_client_token_usage", token_type="output", key="other-team", **openai) == COMPLETION_TOKENS
    assert delta("llm_gateway_cost_micro_usd", key="other-team", **openai) == 2 * 2.5 + 10 * 10
    assert delta("llm_gateway_client_disconnects", provider="mock-anthropic") == 0
    for phase in ("admit", "request", "chunk", "response", "log"):
        if mgw.timed:
            assert delta("llm_gateway_overhead_us_count", phase=phase) > 0, phase
        else:
            assert sample(after, "llm_gateway_overhead_us_count", phase=phase) == 0, phase


@pytest.mark.parametrize("group", ["mock-anthropic", "mock-gemini", "mock-openai"])
def test_a_stream_cut_by_a_vendor_error_bills_at_least_what_it_delivered(mgw, group):
    """A vendor error after some content: the vendor's partial usage (0 or 1
    output tokens so far, as Anthropic's message_start says) is less than
    what the client got; the bill takes the larger."""
    request_id = f"meter-cut-{group}-{mgw.workdir.name}"
    body = {"model": "m", "messages": [{"role": "user", "content": "tell me a long story " * 5}],
            "stream": True, "request_id": request_id}
    stream(mgw, body, {"x-model-group": group, "x-mock-scenario": "stream-error"})
    line = log_for(mgw, request_id)
    assert line["code"] is not None and line["delivered_tokens"] > 1, line
    assert line["completion_tokens"] >= line["delivered_tokens"], line


@pytest.fixture(scope="module")
def unmetered_gw(tmp_path_factory):
    """The test gateway with `"request_metrics": false`."""
    from conftest import configure_test_gateway, own_gateway

    def edit(config):
        configure_test_gateway(config)
        config["request_metrics"] = False
    with own_gateway(tmp_path_factory.mktemp("envoy-unmetered"), edit=edit) as gw:
        yield gw


def test_request_metrics_off_leaves_the_series_out_and_the_access_log_whole(unmetered_gw):
    """A mesh that meters from the access log switches the per-request series
    off: none of them reaches Envoy's stats, and the log line still has
    every fact (tokens, route, time to first token)."""
    status, _, _ = unmetered_gw.chat({"model": "m", "messages": OK_MSG, "request_id": "unmetered-plain"},
                                     **{"x-model-group": "mock-anthropic"})
    assert status == 200
    stream(unmetered_gw, {"model": "m", "messages": OK_MSG, "stream": True, "request_id": "unmetered-stream"},
           {"x-model-group": "mock-anthropic"})
    plain, streamed = log_for(unmetered_gw, "unmetered-plain"), log_for(unmetered_gw, "unmetered-stream")
    assert (plain["prompt_tokens"], plain["completion_tokens"]) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert plain["route"] == ["mock-anthropic/mock-claude-sonnet:200"]
    assert streamed["completion_tokens"] > 0 and streamed["ttft_ms"] is not None
    # Histograms reach the stats at a flush (5 s by default): wait past one.
    time.sleep(5.5)
    series = [name for name in prometheus(unmetered_gw)
              if name.startswith(("llm_gateway_requests", "llm_gateway_attempts", "gen_ai_",
                                  "llm_gateway_cost", "llm_gateway_failovers", "llm_gateway_usage_estimated"))]
    assert series == [], series
