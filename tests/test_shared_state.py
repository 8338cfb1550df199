"""A fleet's shared state through Envoy (docs/src/features/shared-state.md):
gateways that share the state service (llm-state, tests/state_service.py)
over one real Redis, the OpenAI SDK as the client. A conversation started
on one proxy continues on another and survives a proxy's restart; one key
never reaches another's responses; the service's clock (moved ahead, never
slept) expires them; Redis's memory bound evicts them; Redis killed
mid-run: requests go on, a continuation falls back to the proxy's own
store, and it is counted and logged once."""

import json
import os
import signal
import time

import openai
import pytest

import gateway
from conftest import ALL_GROUPS_KEY, configure_test_gateway
from state_service import Fleet

GROUP = "mock-anthropic"
OTHER_KEY = "gw-test-key-fleet-other"


def fleet_config(config):
    configure_test_gateway(config)
    config["auth"]["keys"].append({"name": "fleet-other", "sha256": gateway.key_hash(OTHER_KEY), "groups": ["*"]})
    # Generous: a loaded test machine must not turn a slow answer into a fallback.
    gateway.with_shared_state(config, timeout_ms=5000)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("fleet"), fleet_config)
    f.a, f.b = f.start("a"), f.start("b")
    yield f
    f.stop()


def client(gw, key=ALL_GROUPS_KEY, **headers):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=key, max_retries=0, timeout=60,
                         default_headers={"x-model-group": GROUP, **headers})


def vendor_texts(gw, test_id):
    """Every text the vendor got in the last request of `test_id`."""
    found = []

    def walk(value):
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            found.append(value)

    body = gw.mock_requests(test_id)[-1]["body"]
    walk(json.loads(body) if isinstance(body, str) else body)
    return found


def test_a_conversation_started_on_one_proxy_continues_on_another(fleet, test_id):
    a, b = client(fleet.a), client(fleet.b, **{"x-test-id": test_id})
    with a.responses.stream(model="any", input="first question") as s:
        first = s.get_final_response()
    assert first.id.startswith("resp_gw")
    second = b.responses.create(model="any", input="second question", previous_response_id=first.id)
    assert second.previous_response_id == first.id
    texts = vendor_texts(fleet.b, test_id)
    assert texts.index("first question") < texts.index(first.output_text) < texts.index("second question")
    # The continuation's entry is the fleet's too: a third turn on A.
    third = a.responses.create(model="any", input="third", previous_response_id=second.id)
    assert third.previous_response_id == second.id
    # B reads A's response back, lists its input, deletes it: gone on A too,
    # and the conversation through it ends there (OpenAI's 400 names it).
    assert b.responses.retrieve(first.id).output_text == first.output_text
    items = b.responses.input_items.list(first.id)
    assert [i.content[0].text for i in items.data] == ["first question"]
    b.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        a.responses.retrieve(first.id)
    with pytest.raises(openai.BadRequestError) as e:
        a.responses.create(model="any", input="fourth", previous_response_id=third.id)
    assert first.id in e.value.body["message"]


def test_a_proxys_restart_keeps_the_conversation(fleet):
    made = client(fleet.a).responses.create(model="any", input="before the restart")
    fleet.a = fleet.start("a")
    again = client(fleet.a).responses.create(model="any", input="after it", previous_response_id=made.id)
    assert again.previous_response_id == made.id
    assert client(fleet.a).responses.retrieve(made.id).output_text == made.output_text


def test_another_key_never_reaches_them(fleet):
    made = client(fleet.a).responses.create(model="any", input="mine")
    other = client(fleet.b, key=OTHER_KEY)
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(made.id)
    with pytest.raises(openai.BadRequestError) as e:
        other.responses.create(model="any", input="theirs?", previous_response_id=made.id)
    assert e.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.NotFoundError):
        other.responses.delete(made.id)
    assert client(fleet.b).responses.retrieve(made.id).id == made.id


def test_they_expire_on_the_services_clock(fleet):
    made = client(fleet.a).responses.create(model="any", input="short-lived")
    try:
        # The gateway's default time to live, response_store.ttl_seconds.
        fleet.state.move_clock(86400)
        for gw in (fleet.a, fleet.b):
            with pytest.raises(openai.BadRequestError) as e:
                client(gw).responses.create(model="any", input="and?", previous_response_id=made.id)
            assert e.value.body["param"] == "previous_response_id"
    finally:
        fleet.state.move_clock(0)


def test_redis_killed_mid_run_requests_go_on_and_fall_back_to_each_proxys_store(fleet):
    def unavailable(gw):
        return sum(int(gw.stat(f"wasmcustom.llm_gateway.shared_state;op={op};outcome=unavailable") or 0)
                   for op in ("get", "put"))

    before = unavailable(fleet.a)
    os.kill(fleet.state.redis.pid, signal.SIGKILL)
    fleet.state.redis.wait()
    a = client(fleet.a)
    made = a.responses.create(model="any", input="while Redis is down")
    assert made.id.startswith("resp_gw")
    again = a.responses.create(model="any", input="still down", previous_response_id=made.id)
    assert again.previous_response_id == made.id
    # Only A has it.
    with pytest.raises(openai.BadRequestError):
        client(fleet.b).responses.create(model="any", input="here?", previous_response_id=made.id)
    after = unavailable(fleet.a)
    warned = (fleet.a.workdir / "envoy.log").read_text().count("the state service did not answer")
    # Once an interval per worker's VM (two workers), not once a request.
    assert 1 <= warned <= 2 < after - before, (warned, after - before)
    # Redis back: what A stored meanwhile is still A's (the fleet never had it).
    fleet.state.start_redis()
    deadline = time.monotonic() + 20
    while fleet.state.raw("GET", "/healthz")[0] != 200:
        assert time.monotonic() < deadline, "the service did not find Redis again"
        time.sleep(0.05)
    assert a.responses.retrieve(made.id).id == made.id
    later = a.responses.create(model="any", input="Redis is back", previous_response_id=again.id)
    assert client(fleet.b).responses.retrieve(later.id).id == later.id


def test_redis_memory_bound_evicts_them(tmp_path):
    f = Fleet(tmp_path, fleet_config, maxmemory=3 << 20)
    try:
        c = client(f.start("only"))
        page = "word " * 4000
        made = [c.responses.create(model="any", input=f"{n} {page}").id for n in range(120)]
        assert f.state.entries() < len(made)

        def found(response_id):
            try:
                return c.responses.retrieve(response_id).id == response_id
            except openai.NotFoundError:
                return False

        # Evicted from the fleet's store: gone, whatever the proxy kept.
        # Redis's least-recently-used is approximate (it samples keys, and
        # its clock counts seconds: these were all written within a few),
        # so some of the oldest went, not necessarily the very first.
        oldest = [found(i) for i in made[:20]]
        assert not all(oldest), oldest
        assert found(made[-1])
    finally:
        f.stop()
