"""The official OpenAI Python SDK, unchanged, through the gateway to the
Anthropic mock: what service owners actually run."""

import json
import time

import openai
import pytest


@pytest.fixture
def client(gw):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=gw.key, max_retries=0,
                         default_headers={"x-model-group": "mock-anthropic"})


def test_plain(client):
    r = client.chat.completions.create(model="any", messages=[{"role": "user", "content": "hello sdk"}])
    assert r.choices[0].message.content.endswith("You said: hello sdk")
    assert r.choices[0].finish_reason == "stop"
    assert r.model == "mock-claude-sonnet"
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_stream_is_incremental(client):
    arrivals = []
    pieces = []
    with client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "stream please"}], stream=True,
        stream_options={"include_usage": True}, extra_headers={"x-mock-scenario": "slow=80"},
    ) as stream:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic())
                pieces.append(chunk.choices[0].delta.content)
            if chunk.usage:
                usage = chunk.usage
    assert "".join(pieces).endswith("You said: stream please")
    assert len(arrivals) >= 5
    # Content arrives spread over time, not all at the end.
    assert arrivals[-1] - arrivals[0] > 0.25
    assert usage.completion_tokens > 0


def test_tools(client):
    tools = [{"type": "function", "function": {
        "name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]
    messages = [{"role": "user", "content": "look it up"}]
    r = client.chat.completions.create(model="any", messages=messages, tools=tools, tool_choice="required")
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "lookup" and json.loads(call.function.arguments) == {"q": "example"}
    messages += [r.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "found it"}]
    r = client.chat.completions.create(model="any", messages=messages, tools=tools)
    assert r.choices[0].message.content == "Tool result received: found it"


@pytest.mark.parametrize("group", ["mock-anthropic", "mock-openai"])
def test_streamed_tool_call(client, group):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]
    args, name = "", None
    for chunk in client.chat.completions.create(model="any", messages=[{"role": "user", "content": "x"}],
                                                tools=tools, tool_choice="required", stream=True,
                                                extra_headers={"x-model-group": group}):
        for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            assert tc.index == 0
            name = tc.function.name or name
            args += tc.function.arguments or ""
    assert name == "lookup" and json.loads(args) == {"q": "example"}


def test_errors_raise_the_sdk_exceptions(client):
    with pytest.raises(openai.RateLimitError) as e:
        client.chat.completions.create(model="any", messages=[{"role": "user", "content": "x"}],
                                       extra_headers={"x-mock-scenario": "error-429"})
    assert e.value.body["code"] == "UPSTREAM_RATE_LIMIT"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="any", messages=[])
    assert e.value.body["param"] == "messages"
