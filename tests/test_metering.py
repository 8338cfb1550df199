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
from conftest import Gateway
from sse_client import stream

OK_MSG = [{"role": "user", "content": "hi there"}]
# USD per million tokens.
PRICES = {"mock-claude-sonnet": {"input": 3.0, "output": 15.0, "cached_input": 0.3}}


def priced(config):
    config["providers"]["mock-anthropic"]["prices"] = PRICES
    config["providers"]["mock-openai"]["prices"] = {"*": {"input": 2.5, "output": 10.0}}


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


@pytest.fixture(scope="module", params=["one-vm", "separate-vms"])
def mgw(tmp_path_factory, request):
    workdir = tmp_path_factory.mktemp("envoy-metering")
    mock, mock_port = gateway.start_mock()
    port, admin_port = gateway.free_port(), gateway.free_port()
    # One VM also records the filter's own time (overhead_histograms); separate VMs do not.
    timed = request.param == "one-vm"
    bootstrap = gateway.build_bootstrap(port, admin_port, mock_port, env={},
                                        edit=priced_and_timed if timed else priced,
                                        access_log=workdir / "access.log",
                                        edit_bootstrap=lambda b: route_log(b, request.param == "separate-vms"))
    # Histograms reach /stats/prometheus at each flush.
    bootstrap["stats_flush_interval"] = "0.2s"
    envoy = None
    try:
        # Access-log files are flushed every 10 s by default.
        envoy = gateway.start_envoy(bootstrap, workdir, admin_port, extra_args=["--file-flush-interval-msec", "50"])
        gw = Gateway(port, admin_port, mock_port, workdir, key=None)
        gw.separate_vms = request.param == "separate-vms"
        gw.timed = timed
        yield gw
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


def log_lines(gw):
    lines = []
    for line in (gw.workdir / "access.log").read_text().splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def log_for(gw, request_id, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = [line for line in log_lines(gw) if line["request_id"] == request_id]
        if found:
            return found[-1]
        time.sleep(0.05)
    raise AssertionError(f"no access log line for {request_id}")


def prometheus(gw):
    with urllib.request.urlopen(f"{gw.admin}/stats/prometheus", timeout=5) as r:
        text = r.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
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
    assert line["prompt_tokens"] == usage["prompt_tokens"] and line["completion_tokens"] == usage["completion_tokens"]
    assert line["usage_estimated"] is False and line["client_disconnected"] is False
    want_cost = (usage["prompt_tokens"] * 3.0 + usage["completion_tokens"] * 15.0) / 1e6
    assert line["cost_usd"] == pytest.approx(want_cost)
    assert line["duration_ms"] >= 0 and line["stream"] is False


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


def test_access_log_line_for_a_stream_and_a_failover(mgw):
    _, _, events = stream(mgw, {"model": "m", "messages": OK_MSG, "stream": True, "request_id": "meter-stream",
                                "stream_options": {"include_usage": True}}, {"x-model-group": "mock-failover"})
    usage = [e for _, e in events if isinstance(e, dict) and e.get("usage")][0]["usage"]
    line = log_for(mgw, "meter-stream")
    assert line["attempts"] == 2 and line["route"][0].endswith(":529") and line["provider"] == "mock-openai"
    assert line["completion_tokens"] == usage["completion_tokens"] and line["stream"] is True
    assert line["ttft_ms"] is not None and line["delivered_tokens"] > 0
    assert line["cost_usd"] == pytest.approx((usage["prompt_tokens"] * 2.5 + usage["completion_tokens"] * 10.0) / 1e6)
    # Every attempt a vendor answered is billed: the 529 is not, the fallback is.
    [billed] = line["attempt_usage"]
    assert (billed["provider"], billed["status"], billed["usage_estimated"]) == ("mock-openai", 200, False)
    assert (billed["prompt_tokens"], billed["completion_tokens"]) == (usage["prompt_tokens"], usage["completion_tokens"])
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
                 headers={"content-type": "application/json", "x-model-group": "mock-anthropic",
                          "x-mock-scenario": "slow=150"})
    resp = conn.getresponse()
    seen = b""
    while seen.count(b"\n\n") < 3:
        seen += resp.read1(4096)
    conn.sock.close()
    conn.close()
    line = log_for(mgw, "meter-cut", timeout=10)
    assert line["client_disconnected"] is True
    assert 0 < line["delivered_tokens"] < full["delivered_tokens"]
    # The vendor never reported usage for the cut stream: billed is estimated.
    assert line["usage_estimated"] is True
    assert line["delivered_tokens"] < full["completion_tokens"]


def test_prometheus_metrics_with_labels(mgw):
    before = prometheus(mgw)
    for _ in range(3):
        mgw.chat({"model": "m", "messages": OK_MSG}, **{"x-model-group": "mock-anthropic"})
    stream(mgw, {"model": "m", "messages": OK_MSG, "stream": True}, {"x-model-group": "mock-anthropic"})
    mgw.chat({"model": "m", "messages": OK_MSG}, **{"x-model-group": "mock-azure", "x-mock-scenario": "filtered-answer"})
    # A vendor stream cut mid-event: no usage ever arrives, so it is estimated.
    with pytest.raises(http.client.IncompleteRead):
        stream(mgw, {"model": "m", "messages": OK_MSG, "stream": True},
               {"x-model-group": "mock-anthropic", "x-mock-scenario": "cut"})
    time.sleep(0.6)  # two stats flushes, for the histograms
    after = prometheus(mgw)

    def delta(metric, **labels):
        return sample(after, metric, **labels) - sample(before, metric, **labels)

    anthropic = {"provider": "mock-anthropic", "model": "mock-claude-sonnet", "group": "mock-anthropic"}
    assert delta("llm_gateway_requests", status="200", code="none", **anthropic) == 4
    # The cut stream had started as a 200; the vendor broke it.
    assert delta("llm_gateway_requests", status="200", code="UPSTREAM_ERROR", **anthropic) == 1
    assert delta("gen_ai_client_token_usage", token_type="output", **anthropic) > 0
    assert delta("gen_ai_client_token_usage", token_type="input", **anthropic) > 0
    assert delta("llm_gateway_cost_micro_usd", **anthropic) > 0
    assert delta("gen_ai_server_request_duration_ms_count", **anthropic) >= 4
    assert delta("gen_ai_server_time_to_first_token_ms_count", provider="mock-anthropic") >= 1
    assert delta("llm_gateway_content_filtered", provider="mock-azure") == 1
    assert delta("llm_gateway_usage_estimated", provider="mock-anthropic") == 1
    for phase in ("admit", "request", "chunk", "response", "log"):
        if mgw.timed:
            assert delta("llm_gateway_overhead_us_count", phase=phase) > 0, phase
        else:
            assert sample(after, "llm_gateway_overhead_us_count", phase=phase) == 0, phase
