"""Rate limits, token limits and spend budgets (`limits.rate`), through a
real Envoy with `--concurrency 4` (four workers, one counter store: proxy-wasm
shared data); and hot reload through the shipped ECDS example. The global
path (envoy/ratelimit.yaml and the rate limit service) is
tests/test_global_limits.py."""

import asyncio
import json
import math
import re
import threading
import time

import httpx
import openai
import pytest
from pydantic_ai import Agent
from pydantic_ai import exceptions as pai
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import gateway
from conftest import Gateway, log_for
from sse_client import stream
from test_hot_reload import STATS, hot  # noqa: F401  (hot: the shipped ECDS gateway fixture)

HI = [{"role": "user", "content": "hi"}]
# What the mock's OpenAI dialect bills for HI (asserted below): 1 + 9 tokens.
HI_TOKENS = 10
# USD per million tokens: HI costs 1 * 0.001 + 9 * 0.002 = 0.019 USD.
PRICES = {"*": {"input": 1000, "output": 2000}}
HI_USD = 0.019

# One gateway key per test, so their counters never meet.
KEYS = {name: f"gw-limit-test-{name}" for name in
        ("rps", "tokens", "usd", "shape", "sdk", "estimate", "stream", "free",
         "abandon", "flight", "week")}
# A request that names no output limit reserves this many output tokens
# (`limits.reserve_output_tokens`): HI reserves its prompt estimate (5) + 9.
RESERVE_OUTPUT = 9
HI_RESERVED = 5 + RESERVE_OUTPUT
RULES = [
    {"key": "rps", "group": "mock-openai", "requests_per_second": 5},
    {"key": "tokens", "tokens_per_hour": 200},
    {"key": "usd", "usd_per_day": 0.07},
    {"key": "shape", "requests_per_minute": 2, "tokens_per_hour": 100000},
    {"key": "sdk", "requests_per_second": 1},
    {"key": "estimate", "tokens_per_minute": 60, "tokens": "input"},
    {"key": "stream", "requests_per_hour": 1000, "tokens_per_day": 100000},
    {"key": "abandon", "tokens_per_day": 100000},
    {"key": "flight", "max_in_flight": 2},
    {"key": "week", "usd_per": {"amount": 0.05, "period": "7d"}, "alert_at": 0.5},
]


def configure(config):
    config["auth"] = {"enabled": True, "keys": [
        {"name": name, "sha256": gateway.key_hash(key), "groups": ["*"]} for name, key in KEYS.items()]}
    config["providers"]["mock-openai"]["prices"] = PRICES
    config["limits"]["rate"] = RULES
    config["limits"]["refuse_on_estimate"] = True
    config["limits"]["reserve_output_tokens"] = RESERVE_OUTPUT


def limited_gateway(workdir, edit, concurrency):
    """A mock and an Envoy with `edit`'s configuration and `concurrency` workers."""
    mock, mock_port = gateway.start_mock()
    envoy = None
    try:
        bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={}, edit=edit)
        # Access-log files are flushed every 10 s by default.
        envoy = gateway.start_envoy(bootstrap, workdir, log_level="info", concurrency=concurrency,
                                    extra_args=["--file-flush-interval-msec", "50"])
        yield Gateway(envoy.port, envoy.admin_port, mock_port, workdir, key=None)
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    yield from limited_gateway(tmp_path_factory.mktemp("limits"), configure, concurrency=4)


def chat(gw, key, messages=HI, **extra):
    """A request on a connection of its own (so requests spread over the workers)."""
    return gw.chat({"model": "m", "messages": messages, **extra},
                   authorization=f"Bearer {KEYS[key]}", **{"x-model-group": "mock-openai", "connection": "close"})


def fresh_window(seconds, need):
    """Waits for the next window of `seconds` when fewer than `need` seconds
    are left in this one, so a test's requests all fall in one window."""
    left = seconds - time.time() % seconds
    if left < need:
        time.sleep(left + 0.01)


def reset_seconds(value):
    """An OpenAI reset header (`1.5s`, `6m0s`, `250ms`) in seconds."""
    total = 0.0
    for number, unit in re.findall(r"([\d.]+)(ms|h|m|s)", value):
        total += float(number) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[unit]
    return total


def used_in(message):
    return re.search(r"Used (\d+(?:\.\d+)?)", message).group(1)


def test_request_limit_holds_across_four_workers_over_several_windows(limited):
    """5 requests a second for key rps, four clients as fast as they can for
    several seconds: in every window between the first and the last, exactly
    5 requests were admitted, with remaining counts 4..0 each once (one
    counter for all workers, no lost or doubled update)."""
    results, lock = [], threading.Lock()
    stop_at = time.time() + 3.5

    def client():
        while time.time() < stop_at:
            sent = time.time()
            status, headers, body = chat(limited, "rps")
            with lock:
                results.append((sent, time.time(), status, headers, body))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    windows = {}
    for sent, received, status, headers, body in results:
        assert status in (200, 429), body
        assert headers["x-ratelimit-limit-requests"] == "5"
        reset = reset_seconds(headers["x-ratelimit-reset-requests"])
        assert 0 < reset <= 1
        if status == 429:
            assert body["error"]["code"] == "RATE_LIMITED"
            assert headers["x-ratelimit-remaining-requests"] == "0"
            continue
        # The window ends at a whole second within [sent, received] + reset.
        ends = {math.floor(received + reset + 0.002)} & {math.ceil(sent + reset - 0.002)}
        assert len(ends) == 1, (sent, received, reset)
        windows.setdefault(ends.pop(), []).append(int(headers["x-ratelimit-remaining-requests"]))
    assert len(windows) >= 3, windows
    for end in sorted(windows)[1:-1]:
        assert sorted(windows[end]) == [0, 1, 2, 3, 4], (end, windows)
    for remaining in windows.values():
        assert len(remaining) == len(set(remaining)) and len(remaining) <= 5, windows
    # The requests really were spread over several workers.
    stats = limited.stats("listener.127.0.0.1_")
    workers = [k for k, v in stats.items() if ".worker_" in k and k.endswith("downstream_cx_total") and int(v) > 0]
    assert len(workers) >= 2, stats


def test_token_limit_charges_actual_usage_exactly_under_concurrency(limited):
    """200 tokens an hour for key tokens, refuse_on_estimate on: four
    concurrent clients until each is refused. Each request reserves 14
    tokens at admission and is settled to its usage (10) when it ends: the
    budget is never overspent, and every admitted request's usage was
    charged, none lost: the refusal says Used = 10 x admitted."""
    fresh_window(3600, 30)
    admitted, lock = [], threading.Lock()

    def client():
        while True:
            status, _, body = chat(limited, "tokens")
            if status != 200:
                assert status == 429 and body["error"]["type"] == "tokens", body
                return
            assert body["usage"]["total_tokens"] == HI_TOKENS
            with lock:
                admitted.append(1)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    n = len(admitted)
    # Sequentially 19 (a reservation of 14 fits until 190 used); fewer when
    # the others' reservations were in flight at a client's last try.
    assert 15 <= n <= 19, n
    status, headers, body = chat(limited, "tokens")
    assert status == 429 and body["error"]["code"] == "RATE_LIMITED"
    assert used_in(body["error"]["message"]) == str(HI_TOKENS * n), body
    assert f"Requested {HI_RESERVED}." in body["error"]["message"]
    assert headers["x-ratelimit-limit-tokens"] == "200"
    assert headers["x-ratelimit-remaining-tokens"] == str(200 - HI_TOKENS * n)
    assert 0 < reset_seconds(headers["x-ratelimit-reset-tokens"]) <= 3600
    assert "x-ratelimit-limit-requests" not in headers


def test_a_budget_in_usd(limited):
    """0.07 USD a day for key usd at 0.019 a request, each reserving 0.023
    (its prompt estimate and output limit at the mock's prices) with
    refuse_on_estimate: 3 are admitted, the 4th (0.057 spent, 0.023 more
    would overspend) is refused as OpenAI refuses a spent quota."""
    fresh_window(86400, 30)
    statuses = [chat(limited, "usd")[0] for _ in range(3)]
    assert statuses == [200] * 3
    status, headers, body = chat(limited, "usd")
    assert status == 429
    error = body["error"]
    assert (error["code"], error["type"], error["provider"]) == ("RATE_LIMITED", "insufficient_quota", None)
    assert error["message"].startswith(
        f"Rate limit reached for USD per day (this key): Limit 0.07, Used {3 * HI_USD:.2f}, Requested 0.02. "
        "Please try again in "), error["message"]
    assert 1 <= int(headers["retry-after"]) <= 86400
    # pydantic-ai tells a spent quota from a rate limit by that type, as OpenAI's.
    client = openai.AsyncOpenAI(base_url=limited.base + "/v1", api_key=KEYS["usd"], max_retries=0,
                                default_headers={"x-model-group": "mock-openai"})
    agent = Agent(OpenAIChatModel("m", provider=OpenAIProvider(openai_client=client)))
    with pytest.raises(pai.ModelQuotaExceededError) as quota:
        asyncio.run(agent.run("hi"))
    assert not isinstance(quota.value, pai.ModelRateLimitError)
    assert (quota.value.status_code, quota.value.provider_error_type) == (429, "insufficient_quota")


def test_429_shape_headers_metrics_and_access_log(limited):
    fresh_window(60, 10)
    first = chat(limited, "shape")
    second = chat(limited, "shape")
    assert [first[0], second[0]] == [200, 200]
    assert [r[1]["x-ratelimit-remaining-requests"] for r in (first, second)] == ["1", "0"]
    # Tokens are reserved at admission (what remains counts the request's
    # reservation) and settled to the usage when the response ends.
    assert [r[1]["x-ratelimit-remaining-tokens"] for r in (first, second)] == [
        str(100000 - HI_RESERVED), str(100000 - HI_TOKENS - HI_RESERVED)]
    status, headers, body = chat(limited, "shape")
    assert status == 429
    assert headers["content-type"] == "application/json"
    assert body == {"error": {
        "message": body["error"]["message"], "type": "requests", "code": "RATE_LIMITED",
        "param": None, "provider": None, "request_id": headers["x-request-id"]}}
    assert re.fullmatch(r"Rate limit reached for requests per minute \(this key\): Limit 2, Used 2, "
                        r"Requested 1\. Please try again in [\dms.]+\.", body["error"]["message"])
    assert "shape" not in body["error"]["message"]
    reset = reset_seconds(headers["x-ratelimit-reset-requests"])
    assert int(headers["retry-after"]) == math.ceil(reset)
    assert int(headers["retry-after-ms"]) == round(reset * 1000)
    assert {k: headers[k] for k in headers if k.startswith("x-ratelimit-") and "reset" not in k} == {
        "x-ratelimit-limit-requests": "2", "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-limit-tokens": "100000", "x-ratelimit-remaining-tokens": str(100000 - 2 * HI_TOKENS)}
    # No vendor was called for it.
    assert "x-llm-provider" not in headers
    base = "wasmcustom.llm_gateway.rate_limit;key=shape;group=mock-openai;scope=key"
    assert limited.stat(f"{base};limit=requests_per_minute;decision=admitted") == "2"
    assert limited.stat(f"{base};limit=requests_per_minute;decision=limited") == "1"
    assert limited.stat(f"{base};limit=tokens_per_hour;decision=admitted") == "2"
    remaining = "wasmcustom.llm_gateway.rate_limit_remaining;key=shape;group=none;scope=key"
    assert limited.stat(f"{remaining};limit=requests_per_minute") == "0"
    assert limited.stat(f"{remaining};limit=tokens_per_hour") == str(100000 - 2 * HI_TOKENS)
    line = log_for(limited, headers["x-request-id"])
    assert (line["status"], line["code"], line["rate_limit"], line["key"], line["group"]) == (
        429, "RATE_LIMITED", "key.requests_per_minute", "shape", "mock-openai")
    assert "rate_limit" not in log_for(limited, first[1]["x-request-id"])




def test_a_vendor_429_stays_distinguishable_from_ours(limited):
    status, headers, body = limited.chat(
        {"model": "m", "messages": HI},
        authorization=f"Bearer {KEYS['free']}", **{"x-model-group": "mock-openai", "x-mock-scenario": "error-429"})
    assert status == 429
    assert (body["error"]["code"], body["error"]["provider"]) == ("UPSTREAM_RATE_LIMIT", "mock-openai")
    assert headers["x-llm-provider"] == "mock-openai"
    # The SDK raises RateLimitError for both; the code tells them apart.
    client = openai.OpenAI(base_url=limited.base + "/v1", api_key=KEYS["free"], max_retries=0,
                           default_headers={"x-model-group": "mock-openai", "x-mock-scenario": "error-429"})
    with pytest.raises(openai.RateLimitError) as vendor:
        client.chat.completions.create(model="m", messages=HI)
    assert vendor.value.code == "UPSTREAM_RATE_LIMIT"
    client = openai.OpenAI(base_url=limited.base + "/v1", api_key=KEYS["estimate"], max_retries=0,
                           default_headers={"x-model-group": "mock-openai"})
    with pytest.raises(openai.RateLimitError) as gateway_side:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * 400}])
    assert gateway_side.value.code == "RATE_LIMITED"


def test_the_openai_sdk_waits_our_retry_after_and_retries(limited):
    """1 request a second for key sdk: the SDK's second call is refused, waits
    retry-after-ms (the rest of the window), and its retry is admitted."""
    for _ in range(3):
        fresh_window(1, 0.7)
        seen = []
        client = openai.OpenAI(
            base_url=limited.base + "/v1", api_key=KEYS["sdk"], max_retries=2,
            default_headers={"x-model-group": "mock-openai"},
            http_client=httpx.Client(event_hooks={
                "request": [lambda r: seen.append(("request", time.monotonic(), None))],
                "response": [lambda r: seen.append(("response", time.monotonic(), r))]}))
        client.chat.completions.create(model="m", messages=HI)
        reply = client.chat.completions.create(model="m", messages=HI)
        statuses = [r.status_code for kind, _, r in seen if kind == "response"]
        if statuses == [200, 200]:
            continue  # the second call fell into the next window: try again
        assert statuses == [200, 429, 200], statuses
        assert reply.choices[0].message.content
        refused = next(i for i, (kind, _, r) in enumerate(seen) if kind == "response" and r.status_code == 429)
        wait_ms = int(seen[refused][2].headers["retry-after-ms"])
        assert 0 < wait_ms <= 1000
        retried_at = seen[refused + 1][1]
        assert retried_at - seen[refused][1] >= wait_ms / 1000 - 0.005
        return
    pytest.fail("three tries and no refusal: the window never held two calls")


def test_refused_by_its_own_estimate_at_admission(limited):
    """60 input tokens a minute for key estimate, refuse_on_estimate on: a
    prompt estimated at about 100 tokens is refused before any vendor is
    called; a short one passes."""
    long_prompt = [{"role": "user", "content": "x" * 400}]
    status, headers, body = chat(limited, "estimate", messages=long_prompt)
    assert status == 429, body
    assert body["error"]["type"] == "tokens"
    assert re.search(r"input tokens per minute \(this key\): Limit 60, Used \d+, Requested 10\d\.", body["error"]["message"])
    assert chat(limited, "estimate")[0] == 200


def test_streams_carry_the_headers_and_are_charged_when_they_end(limited):
    fresh_window(86400, 30)
    before = chat(limited, "stream")[1]
    status, headers, events = stream(limited, {"model": "m", "messages": HI, "stream": True},
                                     {"authorization": f"Bearer {KEYS['stream']}", "x-model-group": "mock-openai"})
    assert status == 200 and events[-1][1] == "[DONE]"
    assert int(headers["x-ratelimit-remaining-requests"]) == int(before["x-ratelimit-remaining-requests"]) - 1
    assert headers["x-ratelimit-remaining-tokens"] == str(100000 - HI_TOKENS - HI_RESERVED)
    after = chat(limited, "stream")[1]
    # The stream's usage (charged at its end, as the mock reports it) came off too.
    assert int(after["x-ratelimit-remaining-tokens"]) < 100000 - HI_TOKENS


def remaining_gauge(gw, key, limit):
    name = f"wasmcustom.llm_gateway.rate_limit_remaining;key={key};group=none;scope=key;limit={limit}"
    return gw.stat(name)


def wait_for_value(read, expected, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if read() == expected:
            return
        time.sleep(0.02)
    pytest.fail(f"{what}: {read()!r}, not {expected!r}")


def test_a_client_that_gives_up_early_is_still_charged(limited):
    """A non-stream request whose client leaves before the vendor answered:
    the vendor read the prompt, so the prompt estimate is charged (not
    nothing), the attempt is in the access log, and its reservation is
    released."""
    import http.client
    request_id = f"abandon-{time.time_ns()}"
    body = json.dumps({"model": "m", "messages": HI})
    conn = http.client.HTTPConnection("127.0.0.1", int(limited.base.rsplit(":", 1)[1]), timeout=0.5)
    conn.request("POST", "/v1/chat/completions", body, {
        "content-type": "application/json", "authorization": f"Bearer {KEYS['abandon']}",
        "x-model-group": "mock-openai", "x-mock-scenario": "slow=5000", "x-request-id": request_id})
    with pytest.raises(TimeoutError):
        conn.getresponse()
    conn.close()
    line = log_for(limited, request_id)
    assert (line["client_disconnected"], line["usage_estimated"], line["prompt_tokens"]) == (True, True, 5), line
    # Envoy ends the edge role's stream before the attempt's: the attempt
    # billed is the candidate's (this group's names no provider: the cluster's
    # endpoints do), at the dearest price for the model.
    assert [(a["status"], a["prompt_tokens"], a["usage_estimated"], a["cost_usd"])
            for a in line["attempt_usage"]] == [(0, 5, True, pytest.approx(5 * 1000 / 1e6))]
    wait_for_value(lambda: remaining_gauge(limited, "abandon", "tokens_per_day"), str(100000 - 5),
                   "the abandoned request's prompt was charged and its reservation released")


def test_requests_in_flight_are_limited_and_released_when_the_client_leaves(limited):
    """Key flight may have 2 requests in flight: two slow streams hold both
    places, a third request is refused (429 naming the limit) until one
    client leaves, and its place is released."""
    import http.client

    def open_stream():
        conn = http.client.HTTPConnection("127.0.0.1", int(limited.base.rsplit(":", 1)[1]), timeout=10)
        conn.request("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": HI, "stream": True}), {
            "content-type": "application/json", "authorization": f"Bearer {KEYS['flight']}",
            "x-model-group": "mock-openai", "x-mock-scenario": "slow=2000"})
        response = conn.getresponse()
        assert response.status == 200
        return conn

    held = [open_stream(), open_stream()]
    status, headers, body = chat(limited, "flight")
    assert status == 429, body
    assert (body["error"]["code"], body["error"]["type"]) == ("RATE_LIMITED", "requests")
    assert body["error"]["message"] == (
        "Rate limit reached for requests in flight (this key): Limit 2, Used 2, Requested 1. "
        "Please try again in 1s.")
    assert headers["retry-after"] == "1"
    assert log_for(limited, headers["x-request-id"])["rate_limit"] == "key.max_in_flight"
    held.pop().close()
    deadline = time.monotonic() + 10
    while (status := chat(limited, "flight")[0]) != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert status == 200
    for conn in held:
        conn.close()


def test_a_budget_over_any_period_with_an_alert_and_spend_headers(limited):
    """0.05 USD a week (epoch-aligned 7-day windows), alert at half: each
    request reserves 0.023 and costs 0.019. The spend headers show what is
    left; the second request takes the budget past half (an alert in the
    metric and its access-log line); the third would overspend."""
    first = chat(limited, "week")
    assert first[0] == 200
    assert (first[1]["x-ratelimit-limit-usd"], first[1]["x-ratelimit-remaining-usd"]) == ("0.05", "0.027")
    assert 0 < reset_seconds(first[1]["x-ratelimit-reset-usd"]) <= 7 * 86400
    assert "budget_alerts" not in log_for(limited, first[1]["x-request-id"])
    second = chat(limited, "week")
    assert second[0] == 200 and second[1]["x-ratelimit-remaining-usd"] == "0.008"
    assert log_for(limited, second[1]["x-request-id"])["budget_alerts"] == ["key.usd_per"]
    assert limited.stat("wasmcustom.llm_gateway.budget_alert;key=week;group=mock-openai;scope=key;limit=usd_per") == "1"
    status, headers, body = chat(limited, "week")
    assert status == 429, body
    assert body["error"]["message"].startswith(
        "Rate limit reached for USD per 7d (this key): Limit 0.05, Used 0.04, Requested 0.02."), body
    assert headers["x-ratelimit-remaining-usd"] == str(round(0.05 - 2 * HI_USD, 6))


# Budgets under a burst of requests in flight, as configured by default
# (no refuse_on_estimate, the default output reservation): one Envoy.

BURST_KEYS = {name: f"gw-burst-test-{name}" for name in ("tokens", "usd", "default")}
BURST_RULES = [
    {"key": "tokens", "tokens_per_hour": 200},
    {"key": "usd", "usd_per_day": 0.05},
    {"key": "default", "tokens_per_hour": 200},
]


@pytest.fixture(scope="module")
def burst(tmp_path_factory):
    def edit(config):
        config["auth"] = {"enabled": True, "keys": [
            {"name": name, "sha256": gateway.key_hash(key), "groups": ["*"]} for name, key in BURST_KEYS.items()]}
        config["providers"]["mock-openai"]["prices"] = PRICES
        config["limits"]["rate"] = BURST_RULES

    yield from limited_gateway(tmp_path_factory.mktemp("burst"), edit, concurrency=2)


def fire(gw, key, n, **extra):
    """n slow requests at once, each on its own connection: the statuses."""
    results, lock = [], threading.Lock()

    def one():
        status, _, _ = gw.chat({"model": "m", "messages": HI, **extra},
                               authorization=f"Bearer {BURST_KEYS[key]}",
                               **{"x-model-group": "mock-openai", "connection": "close",
                                  "x-mock-scenario": "slow=500"})
        with lock:
            results.append(status)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def charged(gw, key, admitted, limit_field, total):
    """What key's budget counter holds once every admitted request has
    ended (its access-log line is written when it is settled): from the
    remaining gauge, or, when nothing remains, the refusal's Used."""
    from conftest import log_lines
    wait_for_value(lambda: sum(1 for line in log_lines(gw) if line.get("key") == key and line["status"] == 200),
                   admitted, f"access-log lines of {key}'s admitted requests")
    remaining = remaining_gauge(gw, key, limit_field)
    if remaining not in (None, "0"):
        return total - int(remaining) / (1e6 if limit_field.startswith("usd") else 1)
    status, _, body = gw.chat({"model": "m", "messages": HI}, authorization=f"Bearer {BURST_KEYS[key]}",
                              **{"x-model-group": "mock-openai"})
    assert status == 429, body
    return float(used_in(body["error"]["message"]))


@pytest.mark.parametrize("max_tokens", [9, None])
def test_fifty_in_flight_overspend_a_token_budget_by_at_most_one_request(burst, max_tokens):
    """50 requests at once against 200 tokens an hour (the issue's
    measurement, which charged 500): each reserves its prompt estimate and
    output limit (9, or 4096 by default) while anything is left, so at most
    one request goes over; the charged total is at most 200 + 10."""
    fresh_window(3600, 30)
    key = "tokens" if max_tokens else "default"
    extra = {"max_tokens": max_tokens} if max_tokens else {}
    statuses = fire(burst, key, 50, **extra)
    admitted = statuses.count(200)
    assert statuses.count(429) == 50 - admitted
    used = charged(burst, key, admitted, "tokens_per_hour", 200)
    assert used == admitted * HI_TOKENS
    assert used <= 200 + HI_TOKENS
    # While 15 reservations of 14 are in flight, nothing is left (more only
    # if some ended before the others arrived).
    assert admitted >= (15 if max_tokens else 1)


def test_fifty_in_flight_overspend_a_usd_budget_by_at_most_one_request(burst):
    """50 at once against 0.05 USD a day at 0.019 a request (reserving
    0.023): 3 admitted, 0.057 spent, the overshoot under one request."""
    fresh_window(86400, 30)
    statuses = fire(burst, "usd", 50, max_tokens=9)
    admitted = statuses.count(200)
    assert admitted >= 3
    used = charged(burst, "usd", admitted, "usd_per_day", 0.05)
    assert used == pytest.approx(round(admitted * HI_USD, 2))
    assert used <= 0.05 + HI_USD


# Hot reload (the shipped ECDS example, one worker).

RELOAD_RULE = {"key": "example-team", "requests_per_hour": 3}



def publish(hot, version, config):
    hot.publish("upstream", version, config)
    hot.publish("edge", version, config)
    for role in STATS:
        hot.wait_stat(role, "version_text", f'"{version}"')


def test_hot_reload_keeps_counters_and_an_invalid_limit_is_rejected(hot):
    fresh_window(3600, 60)
    config = hot.config()
    config["limits"] = {"rate": [RELOAD_RULE]}
    publish(hot, "2", config)
    remaining = [hot.gw.chat({"model": "m", "messages": HI})[1]["x-ratelimit-remaining-requests"] for _ in range(2)]
    assert remaining == ["2", "1"]
    # A reload that keeps the limit (and adds another) keeps its counter.
    config["limits"]["rate"] = [{"group": "mock-anthropic", "requests_per_hour": 5}, RELOAD_RULE]
    publish(hot, "3", config)
    status, headers, _ = hot.gw.chat({"model": "m", "messages": HI})
    assert (status, headers["x-ratelimit-remaining-requests"]) == (200, "0")
    assert hot.gw.chat({"model": "m", "messages": HI})[0] == 429
    # An invalid limit is rejected, naming the field; the old limits stay.
    broken = json.loads(json.dumps(config))
    broken["limits"]["rate"][1]["requests_per_hour"] = 0
    hot.publish("upstream", "4", broken)
    hot.publish("edge", "4", broken)
    for role in STATS:
        hot.wait_stat(role, "config_fail", "1")
    log = (hot.dir.parent / "envoy/envoy.log").read_text()
    assert "limits.rate[1].requests_per_hour: must be at least 1" in log
    status, _, body = hot.gw.chat({"model": "m", "messages": HI})
    assert status == 429 and body["error"]["code"] == "RATE_LIMITED"
