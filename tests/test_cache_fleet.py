"""The response cache fleet-wide (docs/src/features/cache.md, "Where entries
live"): gateways that share the state service (llm-state,
tests/state_service.py) over one real Redis, with the cache on. An answer
stored through one proxy is a hit on another, in the asker's own API, and
after that proxy's restart; one key never gets another's entry; entries
expire on the service's clock (moved ahead, never slept); Redis killed
mid-run: requests go on uncached, counted."""

import os
import signal
import time

import anthropic
import openai
import pytest

import gateway
from conftest import ALL_GROUPS_KEY, configure_test_gateway
from state_service import Fleet

GROUP = "mock-openai"
OTHER_KEY = "gw-test-key-cache-fleet-other"
TTL = 600
MAX_TOKENS = 64


def fleet_config(config):
    configure_test_gateway(config)
    config["auth"]["keys"].append({"name": "cache-fleet-other", "sha256": gateway.key_hash(OTHER_KEY),
                                   "groups": ["*"]})
    for group in ("mock-openai", "mock-anthropic"):
        config["model_groups"][group]["cache"] = {"ttl_seconds": TTL}
    # Generous: a loaded test machine must not turn a slow answer into a miss.
    gateway.with_shared_state(config, timeout_ms=5000)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("cache-fleet"), fleet_config)
    f.a, f.b = f.start("a"), f.start("b")
    yield f
    f.stop()


def chat(gw, test_id, prompt, key=ALL_GROUPS_KEY, stream=False):
    """A Chat Completions request through the openai SDK: (headers, text)."""
    c = openai.OpenAI(base_url=gw.base + "/v1", api_key=key, max_retries=0, timeout=60,
                      default_headers={"x-model-group": GROUP, "x-test-id": test_id})
    ask = dict(model="any", max_tokens=MAX_TOKENS, messages=[{"role": "user", "content": prompt}])
    if stream:
        raw = c.chat.completions.with_raw_response.create(stream=True, **ask)
        text = "".join(ch.choices[0].delta.content or "" for ch in raw.parse() if ch.choices)
        return raw.headers, text
    raw = c.chat.completions.with_raw_response.create(**ask)
    return raw.headers, raw.parse().choices[0].message.content


def vendor_calls(gw, test_id):
    return len(gw.mock_requests(test_id))


def state_calls(gw, op, outcome):
    return int(gw.stat(f"wasmcustom.llm_gateway.shared_state;op={op};outcome={outcome}") or 0)


def test_an_answer_stored_through_one_proxy_is_a_hit_on_another(fleet, test_id):
    prompt = f"{test_id}: once for the fleet"
    headers, first = chat(fleet.a, test_id, prompt)
    assert headers["x-llm-cache"] == "miss"
    # B never saw it: the fleet's store has it, and B answers it as a stream.
    headers, again = chat(fleet.b, test_id, prompt, stream=True)
    assert headers["x-llm-cache"] == "hit", dict(headers)
    assert int(headers["age"]) >= 0
    assert again == first and test_id in again
    # Asked through the Messages API of another group: another group's entry.
    claude = anthropic.Anthropic(api_key=ALL_GROUPS_KEY, base_url=fleet.b.base, max_retries=0,
                                 default_headers={"x-model-group": "mock-anthropic", "x-test-id": test_id})
    other = claude.messages.with_raw_response.create(model="any", max_tokens=MAX_TOKENS,
                                                     messages=[{"role": "user", "content": prompt}])
    assert other.headers["x-llm-cache"] == "miss"
    assert vendor_calls(fleet.a, test_id) == 2
    assert state_calls(fleet.b, "get", "found") >= 1


def test_a_proxys_restart_keeps_the_entries(fleet, test_id):
    prompt = f"{test_id}: before the restart"
    headers, first = chat(fleet.a, test_id, prompt)
    assert headers["x-llm-cache"] == "miss"
    fleet.a = fleet.start("a")
    headers, again = chat(fleet.a, test_id, prompt)
    assert headers["x-llm-cache"] == "hit"
    assert again == first
    assert vendor_calls(fleet.a, test_id) == 1


def test_another_key_never_gets_them(fleet, test_id):
    prompt = f"{test_id}: mine"
    assert chat(fleet.a, test_id, prompt)[0]["x-llm-cache"] == "miss"
    assert chat(fleet.b, test_id, prompt, key=OTHER_KEY)[0]["x-llm-cache"] == "miss"
    assert chat(fleet.b, test_id, prompt)[0]["x-llm-cache"] == "hit"
    assert vendor_calls(fleet.a, test_id) == 2


def test_entries_expire_on_the_services_clock(fleet, test_id):
    prompt = f"{test_id}: short-lived"
    assert chat(fleet.a, test_id, prompt)[0]["x-llm-cache"] == "miss"
    try:
        fleet.state.move_clock(TTL + 1)
        # B has no copy of its own: the fleet's store says it is gone.
        assert chat(fleet.b, test_id, prompt)[0]["x-llm-cache"] == "miss"
    finally:
        fleet.state.move_clock(0)
    assert vendor_calls(fleet.a, test_id) == 2


def test_redis_killed_mid_run_requests_go_on_uncached(fleet, test_id):
    prompt = f"{test_id}: stored before"
    assert chat(fleet.a, test_id, prompt)[0]["x-llm-cache"] == "miss"
    before = state_calls(fleet.b, "get", "unavailable")
    os.kill(fleet.state.redis.pid, signal.SIGKILL)
    fleet.state.redis.wait()
    try:
        # B cannot reach the entry: a miss, answered by the vendor.
        headers, text = chat(fleet.b, test_id, prompt)
        assert headers["x-llm-cache"] == "miss" and test_id in text
        # A new prompt: stored in B's own store, a hit on B.
        fresh = f"{test_id}: while Redis is down"
        assert chat(fleet.b, test_id, fresh)[0]["x-llm-cache"] == "miss"
        assert chat(fleet.b, test_id, fresh)[0]["x-llm-cache"] == "hit"
        assert state_calls(fleet.b, "get", "unavailable") > before
    finally:
        fleet.state.start_redis()
        deadline = time.monotonic() + 20
        while fleet.state.raw("GET", "/healthz")[0] != 200:
            assert time.monotonic() < deadline, "the service did not find Redis again"
            time.sleep(0.05)
    assert vendor_calls(fleet.a, test_id) == 3
