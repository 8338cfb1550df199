"""The gateway's response store (docs/src/features/responses-store.md), through the
official Python SDK: on the groups whose vendors keep no responses, a
translated response is stored under a gateway id (`resp_gw…`), continued
with `previous_response_id` or `item_reference` (the vendor gets the whole
conversation), retrieved, listed, cancelled (OpenAI's 400) and deleted;
other keys never see it; `store: false` keeps nothing; a small store
evicts its oldest responses; a reasoning tool loop by reference (what the
Vercel AI SDK sends with `store: true`) gives the vendor its signed
thinking back."""

import json

import openai
import pytest

import gateway
from conftest import ALL_GROUPS_KEY, configure_test_gateway, own_gateway

TRANSLATED = ["mock-anthropic", "mock-gemini", "mock-bedrock", "mock-dashscope", "mock-azure"]
# A second key on every group: isolation is by key, not by group.
OTHER_KEY = "gw-test-key-store-other"


def client(gw, group, key=ALL_GROUPS_KEY, **headers):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=key, max_retries=0, timeout=60,
                         default_headers={"x-model-group": group, **headers})


def with_other_key(config):
    configure_test_gateway(config)
    config["auth"]["keys"].append({"name": "store-other", "sha256": gateway.key_hash(OTHER_KEY), "groups": ["*"]})


@pytest.fixture(scope="module")
def store_gw(tmp_path_factory):
    with own_gateway(tmp_path_factory.mktemp("envoy-store"), edit=with_other_key) as gw:
        yield gw


def vendor_texts(request):
    """Every text the vendor got, in order, whatever its dialect's shape."""
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

    body = request["body"]
    walk(json.loads(body) if isinstance(body, str) else body)
    return found


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("group", TRANSLATED)
def test_a_conversation_continues_and_reads_back(store_gw, group, stream, test_id):
    c = client(store_gw, group, **{"x-test-id": test_id})
    if stream:
        with c.responses.stream(model="any", input="first question", instructions="be brief") as s:
            first = s.get_final_response()
    else:
        first = c.responses.create(model="any", input="first question", instructions="be brief")
    assert first.id.startswith("resp_gw") and first.store is True
    second = c.responses.create(model="any", input="second question", previous_response_id=first.id)
    assert second.previous_response_id == first.id and second.id != first.id
    sent = store_gw.mock_requests(test_id)
    texts = vendor_texts(sent[-1])
    # The whole conversation, in order; the first request's instructions are not carried over.
    assert "first question" in texts and "second question" in texts, texts
    assert texts.index("first question") < texts.index("second question")
    assert first.output_text in texts
    assert "be brief" not in json.dumps(sent[-1]["body"])
    assert "previous_response_id" not in json.dumps(sent[-1]["body"])

    got = c.responses.retrieve(first.id)
    assert got.id == first.id and got.output_text == first.output_text
    items = c.responses.input_items.list(second.id)
    assert [(i.type, i.role, i.content[0].text) for i in items.data] == [("message", "user", "second question")]
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.cancel(first.id)
    assert "synchronous" in e.value.body["message"]
    deleted = c.responses.delete(first.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError) as e:
        c.responses.retrieve(first.id)
    assert e.value.body["message"] == f"Response with id '{first.id}' not found."
    # A conversation whose start is gone cannot be continued.
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.create(model="any", input="third", previous_response_id=second.id)
    assert e.value.body["param"] == "previous_response_id"
    # No vendor was asked for any call.
    assert len(store_gw.mock_requests(test_id)) == 2


@pytest.mark.parametrize("group", ["mock-anthropic", "mock-gemini"])
def test_an_item_reference_is_the_stored_item(store_gw, group, test_id):
    c = client(store_gw, group, **{"x-test-id": test_id})
    first = c.responses.create(model="any", input="first question")
    message = next(item for item in first.output if item.type == "message")
    c.responses.create(model="any", input=[
        {"role": "user", "content": "first question"},
        {"type": "item_reference", "id": message.id},
        {"role": "user", "content": "second question"}])
    texts = vendor_texts(store_gw.mock_requests(test_id)[-1])
    assert texts.index("first question") < texts.index(first.output_text) < texts.index("second question")
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.create(model="any", input=[{"type": "item_reference", "id": "msg_9_" + first.id[5:]}])
    assert "not found" in e.value.body["message"]


def test_input_items_page_as_openai(store_gw):
    c = client(store_gw, "mock-anthropic")
    made = c.responses.create(model="any", input=[
        {"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"}])
    newest = c.responses.input_items.list(made.id, limit=2)
    assert [i.content[0].text for i in newest.data] == ["three", "two"] and newest.has_more
    rest = c.responses.input_items.list(made.id, limit=2, after=newest.last_id)
    assert [i.content[0].text for i in rest.data] == ["one"] and not rest.has_more
    oldest = c.responses.input_items.list(made.id, order="asc")
    assert [i.content[0].text for i in oldest.data] == ["one", "two", "three"]
    assert oldest.data[1].content[0].type == "output_text"
    # The SDK's auto-pagination walks every page.
    assert [i.content[0].text for i in c.responses.input_items.list(made.id, limit=1)] == ["three", "two", "one"]


def test_another_key_never_reads_continues_or_deletes(store_gw):
    mine = client(store_gw, "mock-anthropic")
    theirs = client(store_gw, "mock-anthropic", key=OTHER_KEY)
    made = mine.responses.create(model="any", input="first question")
    for call in (lambda: theirs.responses.retrieve(made.id), lambda: theirs.responses.delete(made.id),
                 lambda: theirs.responses.input_items.list(made.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    with pytest.raises(openai.BadRequestError) as e:
        theirs.responses.create(model="any", input="x", previous_response_id=made.id)
    assert e.value.body["param"] == "previous_response_id"
    assert mine.responses.retrieve(made.id).id == made.id


def test_store_false_keeps_nothing_and_a_vendors_id_is_the_vendors(store_gw):
    c = client(store_gw, "mock-gemini")
    made = c.responses.create(model="any", input="forget me", store=False)
    assert made.store is False and not made.id.startswith("resp_gw")
    # OpenAI keeps its own: a pass-through answer carries OpenAI's id, not the gateway's.
    native = client(store_gw, "mock-openai").responses.create(model="any", input="hi")
    assert not native.id.startswith("resp_gw")
    assert client(store_gw, "mock-openai").responses.retrieve(native.id).id == native.id
    # An unknown gateway id: OpenAI's 404, from any group or none.
    unknown = "resp_gw" + "0" * 32
    for group in ("mock-gemini", "mock-openai"):
        with pytest.raises(openai.NotFoundError) as e:
            client(store_gw, group).responses.retrieve(unknown)
        assert e.value.status_code == 404


def test_the_gauges_count_what_is_stored(store_gw):
    c = client(store_gw, "mock-dashscope")
    c.responses.create(model="any", input="count me")
    assert int(store_gw.stat("wasmcustom.llm_gateway.response_store_entries")) >= 1
    assert int(store_gw.stat("wasmcustom.llm_gateway.response_store_bytes")) > 0


def small_store(config):
    configure_test_gateway(config)
    config["response_store"] = {"max_entries": 3, "max_bytes": 1 << 20}


def test_a_small_store_evicts_its_oldest(tmp_path_factory):
    with own_gateway(tmp_path_factory.mktemp("envoy-small-store"), edit=small_store) as gw:
        c = client(gw, "mock-anthropic")
        made = [c.responses.create(model="any", input=f"number {n}") for n in range(5)]
        for old in made[:2]:
            with pytest.raises(openai.NotFoundError):
                c.responses.retrieve(old.id)
        for kept in made[2:]:
            assert c.responses.retrieve(kept.id).id == kept.id
        assert gw.stat("wasmcustom.llm_gateway.response_store_entries") == "3"


def test_a_conversation_moves_to_a_group_that_passes_through(store_gw, test_id):
    """A gateway id continued on OpenAI's group: OpenAI gets the whole
    conversation (never the gateway's id) and keeps its answer itself."""
    first = client(store_gw, "mock-anthropic").responses.create(model="any", input="first question")
    c = client(store_gw, "mock-openai", **{"x-test-id": test_id})
    second = c.responses.create(model="any", input="second question", previous_response_id=first.id)
    assert not second.id.startswith("resp_gw")
    [sent] = store_gw.mock_requests(test_id)
    assert "_gw" not in json.dumps(sent["body"]), "no id of the gateway's reaches OpenAI"
    texts = vendor_texts(sent)
    assert texts.index("first question") < texts.index(first.output_text) < texts.index("second question")


LOOKUP = {"type": "function", "name": "lookup", "description": "Look something up",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("group", ["mock-anthropic", "mock-gemini", "mock-dashscope"])
def test_a_reasoning_tool_loop_by_reference(store_gw, group, stream, test_id):
    """What the Vercel AI SDK sends with `store: true`: the earlier turn's
    reasoning and function call as `item_reference`s, the tool's output
    inline. The vendor gets its reasoning back (signed where it signs) with
    the call, and answers the result."""
    c = client(store_gw, group, **{"x-test-id": test_id, "x-mock-scenario": "tool"})
    args = dict(model="any", input="look it up", tools=[LOOKUP], reasoning={"effort": "low"})
    if stream:
        with c.responses.stream(**args) as s:
            first = s.get_final_response()
    else:
        first = c.responses.create(**args)
    kinds = [item.type for item in first.output]
    assert "function_call" in kinds, kinds
    call = next(item for item in first.output if item.type == "function_call")
    refs = [{"type": "item_reference", "id": item.id} for item in first.output]
    second = c.responses.create(model="any", tools=[LOOKUP], reasoning={"effort": "low"}, input=[
        {"role": "user", "content": "look it up"}, *refs,
        {"type": "function_call_output", "call_id": call.call_id, "output": "found it"}])
    assert "Tool result received: found it" in second.output_text
    sent = json.dumps(store_gw.mock_requests(test_id)[-1]["body"])
    assert "example" in sent and "lookup" in sent, "the call went back"
    for item in first.output:
        if item.type == "reasoning" and (item.encrypted_content or "").startswith("gw-signature:"):
            assert item.encrypted_content.removeprefix("gw-signature:") in sent, "the signed thinking went back"
