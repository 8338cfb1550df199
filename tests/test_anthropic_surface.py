"""The Anthropic Messages API as a client surface (issue 17): the official
`anthropic` Python SDK, unchanged but for its base URL, against every mock
group through a real Envoy: answers, streams, tools, thinking, errors (each
status as the SDK's own exception class), token counting and the model
list. To an Anthropic vendor the client's request passes through with only
`model` replaced (the mock records what it got), and the mock refuses what
Anthropic refuses.
"""

import json
import time

import anthropic
import httpx2
import pytest

from conftest import ALL_GROUPS_KEY, OPENAI_ONLY_KEY, own_gateway, log_for, anthropic_message, delta_types

GROUPS = ["mock-anthropic", "mock-openai", "mock-gemini", "mock-bedrock", "mock-dashscope", "mock-azure"]
# The vendor model that answers each group.
MODEL = {
    "mock-openai": "mock-gpt-4o",
    "mock-anthropic": "mock-claude-sonnet",
    "mock-gemini": "mock-gemini-flash",
    "mock-azure": "gpt-4o-2024-08-06",  # the deployment's model, as Azure names it
    "mock-bedrock": "anthropic.claude-3-haiku-20240307-v1:0",
    "mock-dashscope": "qwen-plus",
}
LOOKUP = {"name": "lookup", "description": "Look something up",
          "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}


@pytest.fixture(scope="module")
def agw(tmp_path_factory):
    """A gateway of its own, with an access log flushed often (metering is checked in it)."""
    with own_gateway(tmp_path_factory.mktemp("envoy-anthropic")) as gw:
        yield gw


def client(agw, group=None, key=ALL_GROUPS_KEY, test_id=None, **headers):
    """The SDK pointed at the gateway; the group by header (`model` is free then)."""
    hdrs = dict(headers)
    if group:
        hdrs["x-model-group"] = group
    if test_id:
        hdrs["x-test-id"] = test_id
    http = httpx2.Client(event_hooks={"response": [lambda r: _seen(agw, r)]})
    return anthropic.Anthropic(api_key=key, base_url=agw.base, default_headers=hdrs,
                               max_retries=0, http_client=http)


def _seen(agw, response):
    """Every response body goes to the secrets scan."""
    response.read()
    agw.record(dict(response.headers), response.content)


def user(text):
    return [{"role": "user", "content": text}]




# ------------------------------------------------------------ every group

@pytest.mark.parametrize("group", GROUPS)
def test_create(agw, group):
    c = client(agw, group)
    m = c.messages.create(model="any", max_tokens=200, messages=user("hello surface"))
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert m.model == MODEL[group]
    assert m.stop_reason == "end_turn"
    [block] = m.content
    assert block.type == "text" and "Hello from the mock" in block.text and "hello surface" in block.text
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0


@pytest.mark.parametrize("group", GROUPS)
def test_stream(agw, group):
    c = client(agw, group)
    with c.messages.stream(model="any", max_tokens=200, messages=user("hello stream")) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_message()
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "content_block_start" in events and "message_delta" in events
    assert final.stop_reason == "end_turn" and final.model == MODEL[group]
    assert "hello stream" in final.content[0].text
    assert final.usage.output_tokens > 0 and final.usage.input_tokens > 0


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_tool_round_trip(agw, group, stream):
    c = client(agw, group)
    ask = dict(model="any", max_tokens=200, tools=[LOOKUP], tool_choice={"type": "any"},
               messages=user("look it up"))
    first, _ = anthropic_message(c, stream, **ask)
    assert first.stop_reason == "tool_use"
    calls = [b for b in first.content if b.type == "tool_use"]
    assert [b.name for b in calls] == ["lookup"] and isinstance(calls[0].input, dict)
    assert "q" in calls[0].input
    messages = [*ask["messages"], {"role": "assistant", "content": first.content},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id,
                                              "content": "found it"}]}]
    second = c.messages.create(**{**ask, "tool_choice": {"type": "auto"}, "messages": messages})
    assert second.stop_reason == "end_turn"
    assert "Tool result received: found it" in second.content[0].text


COUNT = dict(model="any", messages=user("count these words please"), system="be brief", tools=[LOOKUP])


def test_count_tokens_is_anthropics_own_count(agw, test_id):
    """A group on Anthropic: the call goes to Anthropic's count_tokens, the
    client's body with the vendor model, and its count comes back unflagged."""
    c = client(agw, "mock-anthropic", test_id=test_id)
    raw = c.messages.with_raw_response.count_tokens(**COUNT)
    assert "x-llm-estimated" not in raw.headers
    counted = raw.parse().input_tokens
    # The mock counts as it bills: what the same request's answer says it used.
    assert counted == c.messages.create(max_tokens=50, **COUNT).usage.input_tokens
    sent = agw.mock_requests(test_id)[0]
    assert sent["path"] == "/v1/messages/count_tokens"
    assert sent["body"] == {**COUNT, "model": MODEL["mock-anthropic"]}
    assert sent["headers"]["x-api-key"] != ALL_GROUPS_KEY


# What each counting vendor is asked: its count call and the generation inside.
COUNTED = {
    "mock-gemini": (f"/v1beta/models/{MODEL['mock-gemini']}:countTokens",
                    lambda body: body["generateContentRequest"]),
    "mock-bedrock": (f"/model/{MODEL['mock-bedrock'].replace(':', '%3A')}/count-tokens",
                     lambda body: body["input"]["converse"]),
}


@pytest.mark.parametrize("group", sorted(COUNTED))
def test_count_tokens_is_the_vendors_own_count(agw, group, test_id):
    """Gemini's countTokens and Bedrock's CountTokens count exactly: the
    request translated as a generation (system and tools with it), the
    vendor's number as Anthropic's, not flagged as an estimate."""
    c = client(agw, group, test_id=test_id)
    raw = c.messages.with_raw_response.count_tokens(**COUNT)
    assert "x-llm-estimated" not in raw.headers
    counted = raw.parse().input_tokens
    # The mock counts as it bills (the prompt's words): not the gateway's estimate.
    assert counted == c.messages.create(max_tokens=50, **COUNT).usage.input_tokens == 6
    sent = agw.mock_requests(test_id)[0]
    path, generation = COUNTED[group]
    assert sent["path"] == path
    inner = generation(sent["body"])
    assert "be brief" in json.dumps(inner["system" if group == "mock-bedrock" else "systemInstruction"])
    assert "lookup" in json.dumps(inner["toolConfig" if group == "mock-bedrock" else "tools"])


@pytest.mark.parametrize("group", [g for g in GROUPS if g not in ("mock-anthropic", *COUNTED)])
def test_count_tokens_is_estimated_where_the_vendor_has_no_count(agw, group, test_id):
    raw = client(agw, group, test_id=test_id).messages.with_raw_response.count_tokens(**COUNT)
    assert raw.headers["x-llm-estimated"] == "true"
    assert raw.parse().input_tokens > 5
    assert agw.mock_requests(test_id) == [], "no vendor was asked"


def test_count_tokens_failing_over_to_a_vendor_without_a_count_is_estimated(agw, test_id):
    """mock-failover: Anthropic (always overloaded) then OpenAI. Envoy
    retries the 529 onto OpenAI, which has no count: the estimate, flagged."""
    raw = client(agw, "mock-failover", test_id=test_id).messages.with_raw_response.count_tokens(**COUNT)
    assert raw.headers["x-llm-estimated"] == "true"
    assert raw.parse().input_tokens > 5
    [asked] = agw.mock_requests(test_id)
    assert asked["path"].endswith("/v1/messages/count_tokens"), "Anthropic was asked first"


@pytest.mark.parametrize("group", ["mock-anthropic", "mock-gemini", "mock-bedrock"])
def test_count_tokens_is_logged_with_no_tokens(agw, group):
    """Admitted and logged as a request of the Messages surface; it uses no tokens."""
    rid = f"anthropic-count-{group}"
    client(agw, group, **{"x-request-id": rid}).messages.count_tokens(**COUNT)
    line = log_for(agw, rid)
    assert line["surface"] == "anthropic_messages" and line["group"] == group and line["status"] == 200
    assert line["prompt_tokens"] == 0 and line["completion_tokens"] == 0
    assert line["provider"] == group
    assert line["usage_estimated"] is False


def test_count_tokens_errors_are_anthropics(agw):
    c = client(agw, "mock-anthropic", **{"x-mock-scenario": "error-429"})
    with pytest.raises(anthropic.RateLimitError) as e:
        c.messages.count_tokens(**COUNT)
    assert e.value.body["error"]["type"] == "rate_limit_error"
    # The counting vendors' errors too, in Anthropic's envelope.
    for group in COUNTED:
        with pytest.raises(anthropic.RateLimitError) as e:
            client(agw, group, **{"x-mock-scenario": "error-429"}).messages.count_tokens(**COUNT)
        assert e.value.body["error"]["type"] == "rate_limit_error"
    # A key without the group: refused as a generation would be.
    with pytest.raises(anthropic.PermissionDeniedError):
        client(agw, "mock-anthropic", key=OPENAI_ONLY_KEY).messages.count_tokens(**COUNT)
    # What Anthropic refuses, the gateway refuses before any vendor.
    with pytest.raises(anthropic.BadRequestError):
        client(agw, "mock-anthropic").messages.count_tokens(model="any", messages=[])


def test_models_list(agw):
    c = client(agw)
    page = c.models.list()
    ids = [m.id for m in page.data]
    assert set(GROUPS) <= set(ids)
    assert all(m.type == "model" and m.display_name == m.id for m in page.data)
    assert page.has_more is False and page.first_id == ids[0] and page.last_id == ids[-1]
    assert c.models.retrieve("mock-openai").id == "mock-openai"
    with pytest.raises(anthropic.NotFoundError):
        c.models.retrieve("no-such-group")


# ------------------------------------------------------------ errors

# scenario -> (status, SDK class, Anthropic `type`, our code)
ERRORS = {
    "error-400": (400, anthropic.BadRequestError, "invalid_request_error", "INVALID_REQUEST"),
    "error-401": (401, anthropic.AuthenticationError, "authentication_error", "AUTH_FAILED"),
    "error-403": (403, anthropic.PermissionDeniedError, "permission_error", "PERMISSION_DENIED"),
    "error-404": (404, anthropic.NotFoundError, "not_found_error", "MODEL_NOT_FOUND"),
    "error-413": (413, anthropic.ContentTooLargeError, "request_too_large", "PAYLOAD_TOO_LARGE"),
    "error-429": (429, anthropic.RateLimitError, "rate_limit_error", "UPSTREAM_RATE_LIMIT"),
    "error-500": (500, anthropic.InternalServerError, "api_error", "UPSTREAM_ERROR"),
    "error-529": (529, anthropic.OverloadedError, "overloaded_error", "UPSTREAM_BUSY"),
    "error-503": (529, anthropic.OverloadedError, "overloaded_error", "UPSTREAM_BUSY"),
}


@pytest.mark.parametrize("group", ["mock-anthropic", "mock-openai", "mock-gemini"])
@pytest.mark.parametrize("scenario", list(ERRORS))
def test_vendor_errors_as_the_sdks_exceptions(agw, group, scenario):
    status, cls, kind, code = ERRORS[scenario]
    c = client(agw, group, **{"x-mock-scenario": scenario})
    with pytest.raises(cls) as info:
        c.messages.create(model="any", max_tokens=50, messages=user("fail please"))
    e = info.value
    assert type(e) is cls and e.status_code == status
    assert e.body["type"] == "error"
    assert e.body["error"]["type"] == kind and e.body["error"]["code"] == code
    assert e.body["error"]["provider"] == group
    assert e.response.headers["x-llm-provider"] == group
    assert e.body["request_id"] == e.response.headers["x-request-id"]


def test_gateway_errors_as_the_sdks_exceptions(agw):
    with pytest.raises(anthropic.AuthenticationError) as info:
        client(agw, "mock-anthropic", key="not-a-gateway-key").messages.create(
            model="any", max_tokens=10, messages=user("x"))
    assert info.value.body["error"]["code"] == "AUTH_FAILED"
    with pytest.raises(anthropic.PermissionDeniedError) as info:
        client(agw, "mock-anthropic", key=OPENAI_ONLY_KEY).messages.create(
            model="any", max_tokens=10, messages=user("x"))
    assert info.value.body["error"]["type"] == "permission_error"
    # Refused by the gateway's own parser, before any vendor, as Anthropic would.
    with pytest.raises(anthropic.BadRequestError) as info:
        client(agw, "mock-openai").messages.create(model="any", max_tokens=10, messages=user("x"),
                                                   extra_body={"frobnicate": True})
    assert info.value.body["error"]["message"] == "frobnicate: Extra inputs are not permitted"
    assert info.value.body["error"]["param"] == "frobnicate"
    with pytest.raises(anthropic.BadRequestError) as info:
        client(agw, "mock-openai").messages.create(model="any", max_tokens=2000, messages=user("x"),
                                                   thinking={"type": "enabled", "budget_tokens": 100})
    assert info.value.body["error"]["param"] == "thinking.budget_tokens"


def test_server_tools_only_to_anthropic(agw):
    """A server tool has no neutral form: another vendor's group answers
    400 naming it; an Anthropic vendor gets it as it came."""
    web = {"type": "web_search_20250305", "name": "web_search", "max_uses": 1}
    with pytest.raises(anthropic.BadRequestError) as info:
        client(agw, "mock-openai").messages.create(model="any", max_tokens=50, messages=user("x"), tools=[web])
    assert info.value.body["error"]["param"] == "tools.0 (web_search_20250305)"
    assert "only providers that speak the Anthropic Messages API" in info.value.body["error"]["message"]


@pytest.mark.parametrize("group", ["mock-anthropic", "mock-openai", "mock-gemini"])
def test_stream_error_after_content(agw, group):
    """An error after content was sent is Anthropic's `event: error` in the
    200 stream: the SDK raises it (status 200) with the envelope."""
    code = {"mock-openai": "UPSTREAM_ERROR"}.get(group, "UPSTREAM_BUSY")
    c = client(agw, group, **{"x-mock-scenario": "stream-error"})
    with pytest.raises(anthropic.APIStatusError) as info:
        with c.messages.stream(model="any", max_tokens=200, messages=user("hello stream")) as s:
            for _ in s:
                pass
    assert info.value.status_code == 200
    assert info.value.body["type"] == "error" and info.value.body["error"]["code"] == code


# ------------------------------------------------------------ pass-through

def test_passthrough_keeps_the_clients_request(agw, test_id):
    """To an Anthropic vendor the body goes on as the client sent it, a
    field the gateway does not model and a citation-enabled document
    included, only `model` replaced; `anthropic-beta` goes with it."""
    body = {"model": "any", "max_tokens": 64, "service_tier": "auto",
            "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "a    spaced\u00e9 text", "citations": None},
                {"type": "text", "text": "and more"}]}]}
    raw = json.dumps(body, indent=1).encode()
    status, headers, answer = agw.request("POST", "/v1/messages", raw=raw, headers={
        "x-model-group": "mock-anthropic", "x-test-id": test_id, "anthropic-version": "2023-06-01",
        "anthropic-beta": "some-beta-2025-01-01"})
    assert status == 200, answer
    [seen] = agw.mock_requests(test_id)
    assert seen["body"] == {**body, "model": "mock-claude-sonnet"}
    assert seen["headers"]["anthropic-beta"] == "some-beta-2025-01-01"
    assert seen["headers"]["anthropic-version"] == "2023-06-01"
    assert "authorization" not in seen["headers"]
    answer = json.loads(answer)
    assert answer["id"].startswith("msg_mock") and answer["model"] == "mock-claude-sonnet"


def test_passthrough_stream_is_the_vendors(agw, test_id):
    c = client(agw, "mock-anthropic", test_id=test_id)
    with c.messages.with_streaming_response.create(model="any", max_tokens=100, messages=user("hi"),
                                                   stream=True) as r:
        text = r.read().decode()
    # The mock's own events: its ids, its ping after the first block start.
    assert "msg_mock" in text and text.index("event: content_block_start") < text.index("event: ping")
    assert text.rstrip().endswith('data: {"type":"message_stop"}')


def test_anthropic_rules_are_the_mocks(agw):
    """What Anthropic refuses, the mock refuses, and the client gets its answer."""
    c = client(agw, "mock-anthropic")
    with pytest.raises(anthropic.BadRequestError) as info:
        # The SDK has no sampling parameters any more; older models still take them.
        c.messages.create(model="any", max_tokens=50, messages=user("x"),
                          extra_body={"temperature": 0.5, "top_p": 0.5})
    assert "cannot both be specified" in info.value.body["error"]["message"]


# ------------------------------------------------------------ metering

@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("group", ["mock-anthropic", "mock-openai"])
def test_usage_is_metered(agw, group, stream):
    rid = f"anthropic-meter-{group}-{stream}"
    c = client(agw, group, **{"x-request-id": rid})
    if stream:
        with c.messages.stream(model="any", max_tokens=100, messages=user("meter me")) as s:
            m = s.get_final_message()
    else:
        m = c.messages.create(model="any", max_tokens=100, messages=user("meter me"))
    line = log_for(agw, rid)
    assert line["surface"] == "anthropic_messages" and line["group"] == group
    assert line["stream"] is stream and line["status"] == 200
    assert line["completion_tokens"] == m.usage.output_tokens > 0
    assert line["prompt_tokens"] > 0 and line["usage_estimated"] is False


# ------------------------------------------------------------ thinking and caching

THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_thinking_round_trip_with_a_tool(agw, stream):
    """Anthropic thinks first (a signed thinking block, streamed as
    thinking and signature deltas); the signed block goes back before the
    tool use, as Anthropic requires, and the mock verifies the signature."""
    c = client(agw, "mock-anthropic", **{"x-mock-scenario": "tool"})
    ask = dict(model="any", max_tokens=2048, thinking=THINKING, tools=[LOOKUP], messages=user("think, then look"))
    first, events = anthropic_message(c, stream, **ask)
    if stream:
        deltas = delta_types(events)
        assert "thinking_delta" in deltas and "signature_delta" in deltas
    assert [b.type for b in first.content] == ["thinking", "text", "tool_use"]
    assert "think, then look" in first.content[0].thinking and first.content[0].signature
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[2].id,
                                           "content": "found it"}]}
    second = c.messages.create(**{**ask, "messages": [*ask["messages"],
                                                      {"role": "assistant", "content": first.content}, result]})
    assert second.content[0].type == "thinking"
    assert "Tool result received: found it" in second.content[1].text
    # A tampered signature is refused as Anthropic refuses it.
    forged = [first.content[0].model_copy(update={"signature": "forged"}), *first.content[1:]]
    with pytest.raises(anthropic.BadRequestError) as info:
        c.messages.create(**{**ask, "messages": [*ask["messages"], {"role": "assistant", "content": forged},
                                                 result]})
    assert "Invalid `signature` in `thinking` block" in info.value.body["error"]["message"]
    # The thinking left out (Claude refuses thinking then): answered without.
    bare = c.messages.create(**{**ask, "messages": [*ask["messages"],
                                                    {"role": "assistant", "content": first.content[1:]}, result]})
    assert [b.type for b in bare.content] == ["text"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_pause_turn_reaches_the_client_and_the_turn_continues(agw, test_id, stream):
    """Anthropic pauses a long server-tool turn (`stop_reason: pause_turn`;
    the mock does when its web search tool is offered): a Messages client
    gets it as Anthropic sent it, the `server_tool_use` block under way
    included, and continues by sending the assistant content back."""
    search = {"type": "web_search_20250305", "name": "web_search"}
    c = client(agw, "mock-anthropic", test_id=test_id, **{"x-mock-scenario": "pause-turn"})
    ask = dict(model="any", max_tokens=256, tools=[search], messages=user("any news?"))
    paused, events = anthropic_message(c, stream, **ask)
    assert paused.stop_reason == "pause_turn"
    assert [b.type for b in paused.content] == ["text", "server_tool_use"]
    if stream:
        [delta] = [e for e in events if e.type == "message_delta"]
        assert delta.delta.stop_reason == "pause_turn"
    content = [b.model_dump(exclude_none=True) for b in paused.content]
    done = c.messages.create(**{**ask, "messages": [*ask["messages"], {"role": "assistant", "content": content}]})
    assert done.stop_reason == "end_turn"
    *_, continued = agw.mock_requests(test_id)
    assert continued["body"]["messages"][-1] == {"role": "assistant", "content": content}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("first, then", [("mock-bedrock", "mock-anthropic"), ("mock-anthropic", "mock-bedrock")],
                         ids=["bedrock-then-anthropic", "anthropic-then-bedrock"])
def test_claude_thinking_signed_on_one_platform_continues_on_the_other(agw, test_id, stream, first, then):
    """Claude's thinking signatures are "compatible across platforms (Claude
    APIs, Amazon Bedrock, and Vertex AI)" (Anthropic, "Extended thinking"):
    turn 1 thought by Claude on one platform, turn 2 with that signed block
    on the other. Both mocks sign Claude's thinking one way and verify it
    (a foreign or forged signature is refused), so the block must arrive
    as issued: Bedrock's `reasoningContent.reasoningText {text, signature}`
    is the Messages `thinking {thinking, signature}` and back, as a redacted
    block (`redactedContent`, `redacted_thinking.data`) is."""
    # mock-bedrock maps claude-sonnet-4 to a Claude that thinks.
    ask = dict(model="claude-sonnet-4", max_tokens=2048, thinking=THINKING, tools=[LOOKUP],
               messages=user("think, then look"))
    turn, _ = anthropic_message(client(agw, first, **{"x-mock-scenario": "tool"}), stream, **ask)
    thought, *_ = turn.content
    [call] = [b for b in turn.content if b.type == "tool_use"]
    assert thought.type == "thinking" and "think, then look" in thought.thinking and thought.signature
    # A redacted block beside it, as Claude sends one when its safety
    # systems flag the thinking (the mocks make none: added here).
    redacted = {"type": "redacted_thinking", "data": "RW5jcnlwdGVkIHRoaW5raW5n"}
    blocks = [b.model_dump(exclude_none=True) for b in turn.content]
    history = [*ask["messages"], {"role": "assistant", "content": [blocks[0], redacted, *blocks[1:]]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                             "content": "found it"}]}]
    second, _ = anthropic_message(client(agw, then, test_id=test_id), stream, **{**ask, "messages": history})
    assert second.content[0].type == "thinking"
    assert "Tool result received: found it" in "".join(b.text for b in second.content if b.type == "text")
    [seen] = agw.mock_requests(test_id)
    if then == "mock-bedrock":
        given_back = seen["body"]["messages"][1]["content"][:2]
        assert given_back == [{"reasoningContent": {"reasoningText": {"text": thought.thinking,
                                                                      "signature": thought.signature}}},
                              {"reasoningContent": {"redactedContent": redacted["data"]}}]
        assert seen["body"]["additionalModelRequestFields"]["thinking"] == THINKING
    else:
        assert seen["body"]["messages"][1]["content"][:2] == [
            {"type": "thinking", "thinking": thought.thinking, "signature": thought.signature}, redacted]
        assert seen["body"]["thinking"] == THINKING
    # The other platform still refuses a signature it did not issue.
    forged = [{**blocks[0], "signature": thought.signature[:-2] + "x="}, *blocks[1:]]
    with pytest.raises(anthropic.BadRequestError) as info:
        client(agw, then).messages.create(**{**ask, "messages": [history[0], {"role": "assistant",
                                                                             "content": forged}, history[2]]})
    assert "Invalid `signature` in `thinking` block" in info.value.body["error"]["message"]


@pytest.mark.parametrize("first", ["mock-openai", "mock-gemini", "mock-dashscope"])
def test_a_thinking_conversation_another_vendor_began_continues_on_anthropic(agw, test_id, first):
    """Turn 1 answered by another vendor (as after a failover: its tool
    call comes without signed thinking, or with unsigned thinking), turn 2
    by Anthropic: Claude refuses thinking with a tool-use turn that does
    not start with its signed thinking (the mock as Anthropic: 400
    "Expected `thinking` or `redacted_thinking`"), so the pass-through
    goes on without `thinking`, every other member as the client sent it."""
    ask = dict(model="any", max_tokens=2048, thinking=THINKING, tools=[LOOKUP], messages=user("think, then look"))
    turn = client(agw, first, **{"x-mock-scenario": "tool"}).messages.create(**ask)
    [call] = [b for b in turn.content if b.type == "tool_use"]
    assert not any(b.type == "thinking" and b.signature for b in turn.content)
    history = [*ask["messages"], {"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                                  for b in turn.content]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "found it"}]}]
    second = client(agw, "mock-anthropic", test_id=test_id).messages.create(**{**ask, "messages": history})
    assert "Tool result received: found it" in second.content[0].text
    [seen] = agw.mock_requests(test_id)
    assert seen["body"] == {"model": "mock-claude-sonnet", "max_tokens": 2048, "tools": [LOOKUP],
                            "messages": signed_only(history)}
    # Claude's own signed turn keeps its thinking (the round trip above).


def signed_only(messages):
    """The history without the thinking blocks that have no signature (another vendor's reasoning)."""
    def keep(block):
        return not (block.get("type") == "thinking" and not block.get("signature"))
    return [{**m, "content": [b for b in m["content"] if keep(b)]} if isinstance(m["content"], list) else m
            for m in messages]


@pytest.mark.parametrize("first", ["mock-gemini", "mock-dashscope"])
def test_another_vendors_unsigned_thinking_is_left_out_for_anthropic(agw, test_id, first):
    """Turn 1 thought by a vendor whose reasoning has no signature (the
    surface gives it an empty one); turn 2 on Anthropic with thinking:
    Claude refuses a thinking block it cannot verify (the mock: "Invalid
    `signature` in `thinking` block"), so the pass-through leaves that
    block out, thinking and every other member as sent."""
    ask = dict(model="any", max_tokens=2048, thinking=THINKING, messages=user("think"))
    turn = client(agw, first).messages.create(**ask)
    assert turn.content[0].type == "thinking" and turn.content[0].signature == ""
    history = [*ask["messages"], {"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                                  for b in turn.content]},
               {"role": "user", "content": "again"}]
    second = client(agw, "mock-anthropic", test_id=test_id).messages.create(**{**ask, "messages": history})
    assert second.content[0].type == "thinking" and second.content[0].signature
    [seen] = agw.mock_requests(test_id)
    assert seen["body"] == {"model": "mock-claude-sonnet", "max_tokens": 2048, "thinking": THINKING,
                            "messages": signed_only(history)}
    assert len(seen["body"]["messages"][1]["content"]) == len(turn.content) - 1


@pytest.mark.parametrize("bad, says", [
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 1024},
     "`max_tokens` must be greater than `thinking.budget_tokens`"),
    ({"thinking": THINKING, "tool_choice": {"type": "any"}, "tools": [LOOKUP]},
     "Thinking may not be enabled when tool_choice forces tool use"),
    ({"thinking": THINKING, "extra_body": {"temperature": 0.5}}, "`temperature` may only be set to 1"),
    ({"thinking": THINKING, "extra_body": {"top_k": 5}}, "`top_k` is not supported when thinking is enabled"),
])
def test_thinking_rules_are_anthropics(agw, bad, says):
    c = client(agw, "mock-anthropic")
    with pytest.raises(anthropic.BadRequestError) as info:
        c.messages.create(**{"model": "any", "max_tokens": 4096, "messages": user("x"), **bad})
    assert says in info.value.body["error"]["message"]


def test_prompt_caching_counts(agw):
    """A long system prompt with a breakpoint: written to the cache once,
    read from it after; more than 4 breakpoints are refused."""
    c = client(agw, "mock-anthropic")
    system = [{"type": "text", "text": "cache me " * 700 + str(time.time()),
               "cache_control": {"type": "ephemeral"}}]
    first = c.messages.create(model="any", max_tokens=50, system=system, messages=user("hi"))
    second = c.messages.create(model="any", max_tokens=50, system=system, messages=user("hi again"))
    assert first.usage.cache_creation_input_tokens >= 1024 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.input_tokens < 10
    many = [{"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]
    with pytest.raises(anthropic.BadRequestError) as info:
        c.messages.create(model="any", max_tokens=50, system=many, messages=user("hi"))
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in info.value.body["error"]["message"]


@pytest.mark.parametrize("group", [g for g in GROUPS if g != "mock-anthropic"])
def test_thinking_request_to_other_vendors(agw, group):
    """Thinking asked of a vendor without signed thinking still answers
    (the effort reaches vendors that reason; see docs/src/features/reasoning-and-caching.md)."""
    c = client(agw, group)
    m = c.messages.create(model="any", max_tokens=2048, thinking=THINKING, messages=user("think"))
    assert m.stop_reason == "end_turn" and any(b.type == "text" for b in m.content)


# ------------------------------------------------------------ stop sequences

@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("group, says", [("mock-anthropic", True), ("mock-bedrock", True), ("mock-openai", False)])
def test_the_matched_stop_sequence_is_reported_where_the_vendor_says_it(agw, test_id, group, says, stream):
    """Anthropic says which stop sequence matched; so does Claude on
    Bedrock's Converse when asked (`additionalModelResponseFieldPaths:
    ["/stop_sequence"]`, the mock answering only then): the client gets
    `stop_reason: stop_sequence` and the sequence, JSON and stream. OpenAI
    says only that it stopped: `end_turn`."""
    c = client(agw, group, test_id=test_id)
    m, _ = anthropic_message(c, stream, model="claude-sonnet-4", max_tokens=200, stop_sequences=["zzz", "mock"],
                             messages=user("hi"))
    if says:
        assert (m.stop_reason, m.stop_sequence) == ("stop_sequence", "mock")
    else:
        assert (m.stop_reason, m.stop_sequence) == ("end_turn", None)
    assert "mock" not in m.content[0].text
    if group == "mock-bedrock":
        [seen] = agw.mock_requests(test_id)
        assert seen["body"]["additionalModelResponseFieldPaths"] == ["/stop_sequence"]


# ------------------------------------------------------------ failover

@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_failover_from_anthropic_to_openai(agw, stream):
    """mock-failover's Anthropic vendor always answers 529: the same
    request, passed through to it, is translated for the OpenAI vendor
    Envoy retries on, and the client gets one Messages answer."""
    c = client(agw, "mock-failover")
    if stream:
        with c.messages.stream(model="any", max_tokens=100, messages=user("fail over")) as s:
            m = s.get_final_message()
    else:
        m = c.messages.create(model="any", max_tokens=100, messages=user("fail over"))
    assert m.model == "mock-gpt-4o" and "Hello from the mock openai provider" in m.content[0].text


# What each mock's stream error is: Anthropic's and Gemini's an overload, OpenAI's a server error.
STREAM_FAILURE = {"mock-anthropic": (529, anthropic.OverloadedError, "UPSTREAM_BUSY"),
                  "mock-openai": (500, anthropic.InternalServerError, "UPSTREAM_ERROR"),
                  "mock-gemini": (529, anthropic.OverloadedError, "UPSTREAM_BUSY")}


@pytest.mark.parametrize("group", list(STREAM_FAILURE))
@pytest.mark.parametrize("scenario", ["stream-error-first", "stream-error-after-start"])
def test_stream_failing_before_content_is_an_error_status(agw, group, scenario):
    """A vendor stream that fails before any content (also after its
    opening events: Anthropic's message_start, an empty text block, ping)
    is held back and answered as an error status, so the SDK raises the
    status's class."""
    status, cls, code = STREAM_FAILURE[group]
    c = client(agw, group, **{"x-mock-scenario": scenario})
    with pytest.raises(cls) as info:
        with c.messages.stream(model="any", max_tokens=100, messages=user("x")) as s:
            for _ in s:
                pass
    assert type(info.value) is cls and info.value.status_code == status
    assert info.value.body["error"]["code"] == code


def test_sdk_version_is_pinned():
    """The SDK these tests ran is the one tests/requirements.txt pins."""
    from pathlib import Path
    pins = (Path(__file__).parent / "requirements.txt").read_text().split()
    assert f"anthropic=={anthropic.__version__}" in pins


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@pytest.mark.parametrize("group", GROUPS)
def test_image_input(agw, group):
    c = client(agw, group)
    ask = dict(model="any", max_tokens=100, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "text", "text": "what is this"}]}])
    if group == "mock-dashscope":
        # Its text model takes no images (a vision model must be mapped: docs/src/features/routing.md).
        with pytest.raises(anthropic.BadRequestError) as info:
            c.messages.create(**ask)
        assert "takes no images" in info.value.body["error"]["message"]
        return
    assert "what is this" in c.messages.create(**ask).content[0].text


def test_documents_where_the_vendor_reads_them(agw):
    """A document block reaches Anthropic as it came; a vendor that reads
    no documents answers 400 naming the block (its neutral path)."""
    doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}, "title": "N"}
    messages = [{"role": "user", "content": [doc, {"type": "text", "text": "summarise"}]}]
    m = client(agw, "mock-anthropic").messages.create(model="any", max_tokens=100, messages=messages)
    assert "summarise" in m.content[0].text
    with pytest.raises(anthropic.BadRequestError) as info:
        client(agw, "mock-openai").messages.create(model="any", max_tokens=100, messages=messages)
    assert info.value.body["error"]["param"] == "messages[0].content[0]"
    assert "does not accept document content" in info.value.body["error"]["message"]
