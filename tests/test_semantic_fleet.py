"""The semantic cache fleet-wide (docs/src/features/cache.md, "Semantic
cache"): two gateways sharing the state service (llm-state,
tests/state_service.py) over one real Redis, with a semantic cache on. A
paraphrase of a prompt stored through proxy A is a `semantic-hit` on proxy
B, whose own index never saw it (the fleet's index, searched by the state
service, names the entry; B fetches it), and still after B's restart;
another gateway key gets a miss; Redis killed: a miss, the request
answered. The mock's embeddings are bags of words: a paraphrase scores
about 0.8, an unrelated prompt about 0.1."""

import hashlib
import os
import signal
import time

import openai
import pytest

import gateway
from conftest import ALL_GROUPS_KEY, configure_test_gateway
from state_service import Fleet

OTHER_KEY = "gw-test-key-semantic-fleet-other"
SEMANTIC, EMBED = "semantic", "semantic-embed"
THRESHOLD = 0.7


def fleet_config(config):
    configure_test_gateway(config)
    config["auth"]["keys"].append({"name": "semantic-fleet-other", "sha256": gateway.key_hash(OTHER_KEY),
                                   "groups": ["*"]})
    semantic = {"embedding_group": EMBED, "embedding_model": "text-embedding-3-small", "threshold": THRESHOLD}
    config["model_groups"].update({
        EMBED: {"candidates": [{"cluster": "mock_openai", "provider": "mock-openai"}]},
        SEMANTIC: {"cluster": "mock_openai", "cache": {"ttl_seconds": 600, "semantic": semantic}},
    })
    # Generous: a loaded test machine must not turn a slow answer into a miss.
    gateway.with_shared_state(config, timeout_ms=5000)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("semantic-fleet"), fleet_config)
    f.a, f.b = f.start("a"), f.start("b")
    yield f
    f.stop()


def tag(test_id):
    return "t" + hashlib.sha256(test_id.encode()).hexdigest()[:12]


def ask(gw, test_id, text, key=ALL_GROUPS_KEY):
    """(headers, answer text) of a Chat Completions request."""
    c = openai.OpenAI(base_url=gw.base + "/v1", api_key=key, max_retries=0, timeout=60,
                      default_headers={"x-model-group": SEMANTIC, "x-test-id": test_id})
    raw = c.chat.completions.with_raw_response.create(
        model="any", max_tokens=64, messages=[{"role": "user", "content": text}])
    return raw.headers, raw.parse().choices[0].message.content


def generations(gw, test_id):
    return sum(r["path"].endswith("/chat/completions") for r in gw.mock_requests(test_id))


def state_calls(gw, op, outcome):
    return int(gw.stat(f"wasmcustom.llm_gateway.shared_state;op={op};outcome={outcome}") or 0)


def test_a_paraphrase_stored_through_a_is_a_semantic_hit_on_b_and_after_its_restart(fleet, test_id):
    t = tag(test_id)
    headers, first = ask(fleet.a, test_id, f"{t} What is the capital city of France?")
    assert headers["x-llm-cache"] == "miss"
    assert state_calls(fleet.a, "put_vector", "done") >= 1
    # B never saw it: its own index is empty, the fleet's names the entry.
    paraphrase = f"{t}: tell me what the capital of France is"
    headers, again = ask(fleet.b, test_id, paraphrase)
    assert headers["x-llm-cache"] == "semantic-hit", dict(headers)
    assert again == first and headers["x-llm-attempts"] == "0"
    assert state_calls(fleet.b, "search", "found") >= 1
    # Another gateway key, the same paraphrase: a miss, its own answer.
    headers, _ = ask(fleet.b, test_id, paraphrase, key=OTHER_KEY)
    assert headers["x-llm-cache"] == "miss"
    # An unrelated prompt of the same key: a miss.
    headers, _ = ask(fleet.b, test_id, f"{t} Write a haiku about autumn leaves")
    assert headers["x-llm-cache"] == "miss"
    assert generations(fleet.a, test_id) == 3
    # B restarted (its index and store empty again): still a hit.
    fleet.b = fleet.start("b")
    headers, again = ask(fleet.b, test_id, f"{t} tell me the capital city of France")
    assert headers["x-llm-cache"] == "semantic-hit", dict(headers)
    assert again == first
    assert generations(fleet.a, test_id) == 3


def test_redis_killed_a_paraphrase_is_a_miss_and_answered(fleet, test_id):
    t = tag(test_id)
    assert ask(fleet.a, test_id, f"{t} How many legs does a spider have?")[0]["x-llm-cache"] == "miss"
    before = state_calls(fleet.b, "search", "unavailable")
    os.kill(fleet.state.redis.pid, signal.SIGKILL)
    fleet.state.redis.wait()
    try:
        headers, text = ask(fleet.b, test_id, f"{t} how many legs has a spider")
        assert headers["x-llm-cache"] == "miss" and text
        assert state_calls(fleet.b, "search", "unavailable") > before
    finally:
        fleet.state.start_redis()
        deadline = time.monotonic() + 20
        while fleet.state.raw("GET", "/healthz")[0] != 200:
            assert time.monotonic() < deadline, "the service did not find Redis again"
            time.sleep(0.05)
    assert generations(fleet.a, test_id) == 2
