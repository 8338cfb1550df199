"""Claude on Bedrock through InvokeModel (`claude_invoke`, issue 17): a
gateway of its own whose Bedrock provider has the option, the official
`anthropic` SDK and the OpenAI SDK against it through a real Envoy (which
SigV4-signs what the filter sends; the mock checks the signature). A
Messages client's body reaches Bedrock as it came, but for `model` and
`stream` (the path says them) and Bedrock's `anthropic_version`: thinking
signatures and cache points arrive unchanged; Bedrock's answer and its
event stream (base64 Anthropic events in `chunk` frames) come back as
Anthropic's message and SSE. Chat clients get the Anthropic dialect's
translation over the same wire. Models that are not Claude stay on
Converse. The mock refuses what Bedrock refuses.
"""

import base64
import json

import anthropic
import httpx2
import openai
import pytest

from conftest import ALL_GROUPS_KEY, configure_test_gateway, own_gateway, log_for, anthropic_message, delta_types, event_types

GROUP = "mock-bedrock"
SONNET = "anthropic.claude-sonnet-4-20250514-v1:0"
HAIKU = "anthropic.claude-3-haiku-20240307-v1:0"
NOVA = "amazon.nova-pro-v1:0"
THINKING = {"type": "enabled", "budget_tokens": 1024}
LOOKUP = {"name": "lookup", "description": "Look something up",
          "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}


def with_claude_invoke(config):
    configure_test_gateway(config)
    bedrock = config["providers"][GROUP]
    bedrock["claude_invoke"] = True
    bedrock["models"] = {**bedrock["models"], "nova": NOVA}


@pytest.fixture(scope="module")
def bgw(tmp_path_factory):
    with own_gateway(tmp_path_factory.mktemp("envoy-bedrock-invoke"), edit=with_claude_invoke) as gw:
        yield gw


def _seen(bgw, response):
    """Every response body goes to the secrets scan."""
    response.read()
    bgw.record(dict(response.headers), response.content)


def claude(bgw, test_id=None, **headers):
    hdrs = {"x-model-group": GROUP, **headers}
    if test_id:
        hdrs["x-test-id"] = test_id
    http = httpx2.Client(event_hooks={"response": [lambda r: _seen(bgw, r)]})
    return anthropic.Anthropic(api_key=ALL_GROUPS_KEY, base_url=bgw.base, default_headers=hdrs,
                               max_retries=0, http_client=http)


def chat(bgw, test_id=None, **headers):
    hdrs = {"x-model-group": GROUP, **headers}
    if test_id:
        hdrs["x-test-id"] = test_id
    http = httpx2.Client(event_hooks={"response": [lambda r: _seen(bgw, r)]})
    return openai.OpenAI(base_url=bgw.base + "/v1", api_key=ALL_GROUPS_KEY, default_headers=hdrs,
                         max_retries=0, http_client=http)


def user(text):
    return [{"role": "user", "content": text}]




def seen_by_bedrock(bgw, test_id):
    [request] = bgw.mock_requests(test_id)
    return request


# ------------------------------------------------------------ Messages clients

@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_messages_pass_through_to_invoke_model(bgw, test_id, stream):
    c = claude(bgw, test_id)
    ask = dict(model="claude-sonnet-4", max_tokens=200, messages=user("hello invoke"))
    m, streamed = anthropic_message(c, stream, **ask)
    if stream:
        events = event_types(streamed)
        assert events[0] == "message_start" and events[-1] == "message_stop"
        assert "content_block_delta" in events and "message_delta" in events
    assert m.type == "message" and m.id.startswith("msg_mock") and m.model == SONNET
    assert m.stop_reason == "end_turn" and "hello invoke" in m.content[0].text
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0
    seen = seen_by_bedrock(bgw, test_id)
    operation = "invoke-with-response-stream" if stream else "invoke"
    assert seen["path"] == f"/model/{SONNET.replace(':', '%3A')}/{operation}"
    assert seen["body"] == {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 200,
                            "messages": user("hello invoke")}
    assert seen["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 ")
    assert "x-api-key" not in seen["headers"] and "anthropic-version" not in seen["headers"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_passed_through_answers_are_metered(bgw, stream):
    """The usage Claude reported, read from the message or the unwrapped events."""
    rid = f"bedrock-invoke-meter-{stream}"
    c = claude(bgw, **{"x-request-id": rid})
    ask = dict(model="claude-sonnet-4", max_tokens=100, messages=user("meter me"))
    m, _ = anthropic_message(c, stream, **ask)
    line = log_for(bgw, rid)
    assert line["surface"] == "anthropic_messages" and line["group"] == GROUP
    assert line["stream"] is stream and line["status"] == 200 and line["model"] == SONNET
    assert line["completion_tokens"] == m.usage.output_tokens > 0
    assert line["prompt_tokens"] == m.usage.input_tokens > 0 and line["usage_estimated"] is False


def test_the_stream_is_anthropics_sse(bgw):
    """The chunks unwrapped: Anthropic's own event names and data, ending
    with Bedrock's message_stop (its invocation metrics included)."""
    c = claude(bgw)
    with c.messages.with_streaming_response.create(model="claude-sonnet-4", max_tokens=100,
                                                   messages=user("hi"), stream=True) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        text = r.read().decode()
    frames = [f for f in text.split("\n\n") if f.strip()]
    assert frames[0].startswith("event: message_start\ndata: ")
    last = frames[-1].split("\n")
    assert last[0] == "event: message_stop"
    assert "amazon-bedrock-invocationMetrics" in json.loads(last[1].removeprefix("data: "))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_tool_round_trip(bgw, stream):
    c = claude(bgw)
    ask = dict(model="claude-sonnet-4", max_tokens=200, tools=[LOOKUP], tool_choice={"type": "any"},
               messages=user("look it up"))
    first, _ = anthropic_message(c, stream, **ask)
    assert first.stop_reason == "tool_use"
    [call] = [b for b in first.content if b.type == "tool_use"]
    assert call.name == "lookup" and "q" in call.input
    messages = [*ask["messages"], {"role": "assistant", "content": first.content},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                              "content": "found it"}]}]
    second = c.messages.create(**{**ask, "tool_choice": {"type": "auto"}, "messages": messages})
    assert second.stop_reason == "end_turn"
    assert "Tool result received: found it" in second.content[0].text


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_thinking_round_trip_keeps_signatures_and_cache_points(bgw, test_id, stream):
    """Claude thinks (a signed block, streamed as thinking and signature
    deltas); the block goes back before the tool use with its signature,
    which the mock verifies, and a cache point, all as the client wrote them."""
    c = claude(bgw, **{"x-mock-scenario": "tool"})
    system = [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    ask = dict(model="claude-sonnet-4", max_tokens=2048, thinking=THINKING, tools=[LOOKUP], system=system,
               messages=user("think, then look"))
    first, events = anthropic_message(c, stream, **ask)
    if stream:
        deltas = delta_types(events)
        assert "thinking_delta" in deltas and "signature_delta" in deltas
    assert [b.type for b in first.content] == ["thinking", "text", "tool_use"]
    thinking = first.content[0]
    assert "think, then look" in thinking.thinking and thinking.signature
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[2].id,
                                           "content": "found it"}]}
    history = [*ask["messages"], {"role": "assistant", "content": first.content}, result]
    second = claude(bgw, test_id).messages.create(**{**ask, "messages": history})
    assert second.content[0].type == "thinking"
    assert "Tool result received: found it" in second.content[1].text
    body = seen_by_bedrock(bgw, test_id)["body"]
    assert body["thinking"] == THINKING and body["system"] == system
    given_back = body["messages"][1]["content"][0]
    assert given_back == {"type": "thinking", "thinking": thinking.thinking, "signature": thinking.signature}
    # A tampered signature is refused, as Claude refuses it.
    forged = [thinking.model_copy(update={"signature": "forged"}), *first.content[1:]]
    with pytest.raises(anthropic.BadRequestError) as info:
        c.messages.create(**{**ask, "messages": [*ask["messages"], {"role": "assistant", "content": forged},
                                                 result]})
    assert "Invalid `signature` in `thinking` block" in info.value.body["error"]["message"]


def test_a_thinking_conversation_another_vendor_began_continues_on_claude(bgw, test_id):
    """Turn 1 answered by OpenAI (a tool call without signed thinking),
    turn 2 by Claude through InvokeModel: passed through without `thinking`
    (Claude refuses it with such a history, and the mock as Claude), every
    other member as the client sent it."""
    ask = dict(model="claude-sonnet-4", max_tokens=2048, thinking=THINKING, tools=[LOOKUP],
               messages=user("think, then look"))
    turn = claude(bgw, **{"x-model-group": "mock-openai", "x-mock-scenario": "tool"}).messages.create(**ask)
    [call] = [b for b in turn.content if b.type == "tool_use"]
    history = [*ask["messages"], {"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                                  for b in turn.content]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "found it"}]}]
    second = claude(bgw, test_id).messages.create(**{**ask, "messages": history})
    assert "Tool result received: found it" in second.content[0].text
    body = seen_by_bedrock(bgw, test_id)["body"]
    assert body == {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 2048, "tools": [LOOKUP],
                    "messages": history}


def test_anthropic_beta_header_becomes_the_bodys_list(bgw, test_id):
    """InvokeModel takes betas as the body's `anthropic_beta`: the client's
    header becomes that list; the header itself is never sent on (nor
    signed)."""
    c = claude(bgw, test_id, **{"anthropic-beta": "some-beta-2025-01-01, other-beta-2025-02-02"})
    m = c.messages.create(model="claude-sonnet-4", max_tokens=50, messages=user("beta"))
    assert m.stop_reason == "end_turn"
    seen = seen_by_bedrock(bgw, test_id)
    assert "anthropic-beta" not in seen["headers"]
    assert seen["body"]["anthropic_beta"] == ["some-beta-2025-01-01", "other-beta-2025-02-02"]


def test_what_bedrock_refuses_is_its_400(bgw):
    """A member Bedrock's Claude body does not have reaches Bedrock (the
    client's body is kept) and comes back as Bedrock's 400, naming it."""
    c = claude(bgw)
    with pytest.raises(anthropic.BadRequestError) as info:
        c.messages.create(model="claude-sonnet-4", max_tokens=50, messages=user("x"), service_tier="auto")
    error = info.value.body["error"]
    assert "extraneous key [service_tier]" in error["message"] and error["provider"] == GROUP


@pytest.mark.parametrize("scenario, status, cls", [
    ("error-429", 429, anthropic.RateLimitError),
    ("error-400", 400, anthropic.BadRequestError),
    ("error-503", 529, anthropic.OverloadedError),
])
def test_bedrock_errors_as_the_sdks_exceptions(bgw, scenario, status, cls):
    c = claude(bgw, **{"x-mock-scenario": scenario})
    with pytest.raises(cls) as info:
        c.messages.create(model="claude-sonnet-4", max_tokens=50, messages=user("fail please"))
    assert info.value.status_code == status and info.value.body["error"]["provider"] == GROUP


def test_an_exception_mid_stream_is_anthropics_error_event(bgw):
    c = claude(bgw, **{"x-mock-scenario": "stream-error"})
    with pytest.raises(anthropic.APIStatusError) as info:
        with c.messages.stream(model="claude-sonnet-4", max_tokens=200, messages=user("hello stream")) as s:
            for _ in s:
                pass
    assert info.value.status_code == 200
    assert info.value.body["type"] == "error" and info.value.body["error"]["code"] == "UPSTREAM_BUSY"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_other_models_stay_on_converse(bgw, test_id, stream):
    """Nova on the same provider: the Messages request is translated for
    Converse, and the answer rendered as a Messages answer."""
    c = claude(bgw, test_id)
    ask = dict(model="nova", max_tokens=100, messages=user("hello nova"))
    m, streamed = anthropic_message(c, stream, **ask)
    if stream:
        events = event_types(streamed)
        assert events[0] == "message_start" and events[-1] == "message_stop"
    assert m.type == "message" and "hello nova" in m.content[0].text and m.stop_reason == "end_turn"
    seen = seen_by_bedrock(bgw, test_id)
    assert seen["path"].endswith("/converse-stream" if stream else "/converse")
    assert "anthropic_version" not in seen["body"]


def test_count_tokens_is_count_tokens_with_the_invoke_model_body(bgw, test_id):
    """count_tokens for Claude: Bedrock's CountTokens, the InvokeModel body
    (base64) as a generation would send it; Bedrock's exact count, unflagged."""
    c = claude(bgw, test_id)
    ask = dict(model="claude-sonnet-4", system="be brief", tools=[LOOKUP], messages=user("count these words please"))
    raw = c.messages.with_raw_response.count_tokens(**ask)
    assert "x-llm-estimated" not in raw.headers
    assert raw.parse().input_tokens == c.messages.create(max_tokens=50, **ask).usage.input_tokens == 6
    seen = bgw.mock_requests(test_id)[0]
    assert seen["path"] == f"/model/{SONNET.replace(':', '%3A')}/count-tokens"
    assert seen["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 ")
    body = json.loads(base64.b64decode(seen["body"]["input"]["invokeModel"]["body"]))
    assert body["anthropic_version"] == "bedrock-2023-05-31" and "model" not in body
    assert body["system"] == "be brief" or "be brief" in json.dumps(body["system"])
    assert [t["name"] for t in body["tools"]] == ["lookup"]


def test_count_tokens_for_a_model_bedrock_does_not_count_is_estimated(bgw, test_id):
    raw = claude(bgw, test_id).messages.with_raw_response.count_tokens(
        model="nova", messages=user("count these words please"))
    assert raw.headers["x-llm-estimated"] == "true"
    assert raw.parse().input_tokens > 0
    assert bgw.mock_requests(test_id) == [], "Bedrock was not asked"


# ------------------------------------------------------------ chat clients

@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_chat_clients_get_claude_through_invoke_model(bgw, test_id, stream):
    c = chat(bgw, test_id)
    ask = dict(model="claude-sonnet-4", max_tokens=100, messages=user("hello chat"))
    if stream:
        chunks = list(c.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}))
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
        assert finish == ["stop"] and chunks[-1].usage.completion_tokens > 0
    else:
        r = c.chat.completions.create(**ask)
        text = r.choices[0].message.content
        assert r.choices[0].finish_reason == "stop" and r.usage.prompt_tokens > 0
    assert "hello chat" in text
    seen = seen_by_bedrock(bgw, test_id)
    assert seen["path"].endswith("/invoke-with-response-stream" if stream else "/invoke")
    body = seen["body"]
    assert body["anthropic_version"] == "bedrock-2023-05-31" and "model" not in body and "stream" not in body
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello chat"}]}]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_chat_tools_round_trip(bgw, stream):
    c = chat(bgw)
    tools = [{"type": "function", "function": {"name": "lookup", "description": "Look something up",
                                               "parameters": LOOKUP["input_schema"]}}]
    ask = dict(model="claude-sonnet-4", max_tokens=200, tools=tools, tool_choice="required",
               messages=user("look it up"))
    if stream:
        calls = {}
        for ch in c.chat.completions.create(**ask, stream=True):
            for tc in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
                call = calls.setdefault(tc.index, {"id": tc.id, "name": "", "arguments": ""})
                call["name"] += tc.function.name or ""
                call["arguments"] += tc.function.arguments or ""
        [call] = calls.values()
    else:
        message = c.chat.completions.create(**ask).choices[0].message
        [tc] = message.tool_calls
        call = {"id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
    assert call["name"] == "lookup" and "q" in json.loads(call["arguments"])
    messages = [*ask["messages"],
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call["id"], "type": "function",
                     "function": {"name": call["name"], "arguments": call["arguments"]}}]},
                {"role": "tool", "tool_call_id": call["id"], "content": "found it"}]
    second = c.chat.completions.create(**{**ask, "tool_choice": "auto", "messages": messages})
    assert "Tool result received: found it" in second.choices[0].message.content


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_responses_clients_get_claude_through_invoke_model(bgw, test_id, stream):
    c = chat(bgw, test_id)
    ask = dict(model="claude-sonnet-4", max_output_tokens=100, input="hello responses")
    if stream:
        events = list(c.responses.create(**ask, stream=True))
        assert events[-1].type == "response.completed"
        r = events[-1].response
    else:
        r = c.responses.create(**ask)
    assert r.status == "completed" and "hello responses" in r.output_text
    seen = seen_by_bedrock(bgw, test_id)
    assert seen["path"].endswith("/invoke-with-response-stream" if stream else "/invoke")
    assert seen["body"]["anthropic_version"] == "bedrock-2023-05-31" and "model" not in seen["body"]
