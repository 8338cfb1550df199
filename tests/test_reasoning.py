"""Reasoning and prompt caching through the chat surface, with the OpenAI
Python SDK: `reasoning_effort` (and OpenRouter's `reasoning` object) to
each vendor's controls, the model's reasoning back as `reasoning_content`
and `reasoning_details` (signed blocks), those sent back in a multi-turn
tool conversation (the mock accepts only the signatures it issued),
`cache_control` to Bedrock's `cachePoint`s, and OpenAI's
`prompt_cache_breakpoint` both ways."""

import copy
import json

import anthropic
import openai
import pytest

from conftest import ALL_GROUPS_KEY
from sse_client import chunks, stream
from test_gateway import USER_HI, WEATHER_TOOL

GEMINI, BEDROCK, DASHSCOPE = "mock-gemini", "mock-bedrock", "mock-dashscope"
# envoy/gateway.yaml maps these to models that think (mock-bedrock's default,
# Claude 3 Haiku, does not).
CLAUDE_THINKING = "claude-sonnet-4"
WEATHER = [{"role": "user", "content": "weather in Paris?"}]


@pytest.fixture
def client(gw):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0, timeout=60)


def headers(group, test_id, scenario=None):
    h = {"x-model-group": group, "x-test-id": test_id}
    if scenario:
        h["x-mock-scenario"] = scenario
    return h


def assistant_turn(message):
    """The assistant message as an OpenAI client sends it back: what it got."""
    return message.model_dump(exclude_none=True)


def streamed_turn(stream_chunks):
    """The assistant message a client rebuilds from a stream's chunks (as
    dicts): text, the reasoning (its `reasoning_details` pieces joined by
    index), tool calls."""
    text, reasoning, details, calls = "", "", [], {}
    for c in stream_chunks:
        if not c.get("choices"):
            continue
        delta = c["choices"][0]["delta"]
        text += delta.get("content") or ""
        reasoning += delta.get("reasoning_content") or ""
        for d in delta.get("reasoning_details") or []:
            if details and details[-1]["index"] == d["index"]:
                block = details[-1]
                block["text"] = block.get("text", "") + d.get("text", "")
                block.update({k: v for k, v in d.items() if k in ("signature", "data")})
            else:
                details.append(dict(d))
        for tc in delta.get("tool_calls") or []:
            slot = calls.setdefault(tc["index"], {"id": None, "type": "function",
                                                  "function": {"name": None, "arguments": ""}})
            slot["id"] = tc.get("id") or slot["id"]
            slot["function"]["name"] = tc["function"].get("name") or slot["function"]["name"]
            slot["function"]["arguments"] += tc["function"].get("arguments") or ""
    message = {"role": "assistant", "content": text or None,
               "reasoning_content": reasoning, "reasoning_details": details}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def tool_result(message, content="sunny, 21C"):
    [call] = message["tool_calls"]
    return {"role": "tool", "tool_call_id": call["id"], "content": content}


def error_message(excinfo):
    """The message of an SDK error (its `body` is the envelope's `error`)."""
    return excinfo.value.body["message"]


# --- Gemini ------------------------------------------------------------------------

def test_gemini_reasoning_round_trip_with_the_signed_call(gw, client, test_id):
    h = headers(GEMINI, test_id, "tool")
    first = client.chat.completions.create(model="m", messages=WEATHER, tools=[WEATHER_TOOL],
                                           reasoning_effort="low", extra_headers=h)
    message = first.choices[0].message
    assert message.reasoning_content == "The user said: weather in Paris?. I will answer briefly."
    assert message.reasoning_details == [{"type": "reasoning.text", "text": message.reasoning_content,
                                          "index": 0}]
    assert first.usage.completion_tokens_details.reasoning_tokens == 10
    [call] = message.tool_calls
    assert "_ts_" in call.id, "Gemini's signature rides in the call id"
    turn = assistant_turn(message)
    second = client.chat.completions.create(model="m", messages=WEATHER + [turn, tool_result(turn)],
                                            tools=[WEATHER_TOOL], reasoning_effort="low",
                                            extra_headers=headers(GEMINI, test_id))
    assert second.choices[0].message.content == "Tool result received: sunny, 21C"
    asked, answered = gw.mock_requests(test_id)
    assert asked["body"]["generationConfig"] == {
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024}}
    model_turn = answered["body"]["contents"][1]
    assert model_turn["parts"] == [{"functionCall": {"name": "get_weather", "args": {"city": "example"}},
                                    "thoughtSignature": model_turn["parts"][0]["thoughtSignature"]}], \
        "the thought text is not sent back; the call's signature is"

    # A signature Gemini did not issue for the call is refused.
    forged = copy.deepcopy(turn)
    forged["tool_calls"][0]["id"] = call.id[:-4] + ("AAAA" if not call.id.endswith("AAAA") else "BBBB")
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=WEATHER + [forged, tool_result(forged)],
                                       tools=[WEATHER_TOOL], extra_headers=headers(GEMINI, test_id))
    assert "Corrupted thought signature" in error_message(e)


def test_gemini_stream_reasoning_comes_first(gw, test_id):
    status, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True,
                                    "reasoning": {"max_tokens": 2048}}, headers(GEMINI, test_id))
    assert status == 200
    message = streamed_turn(chunks(events))
    assert message["reasoning_content"] == "The user said: hi there. I will answer briefly."
    assert message["reasoning_details"] == [{"type": "reasoning.text", "text": message["reasoning_content"],
                                             "index": 0}]
    deltas = [c["choices"][0]["delta"] for c in chunks(events) if c.get("choices")]
    first_content = next(i for i, d in enumerate(deltas) if d.get("content"))
    assert all("reasoning_content" not in d for d in deltas[first_content:]), "thoughts before the answer"
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 2048}


@pytest.mark.parametrize("model,reasoning,config", [
    ("gemini-3-pro", {"reasoning_effort": "medium"}, {"includeThoughts": True, "thinkingLevel": "high"}),
    ("gemini-3-pro", {"reasoning_effort": "none"}, {"includeThoughts": True, "thinkingLevel": "low"}),
    ("gemini-2.5-pro", {"reasoning_effort": "none"}, {"includeThoughts": True, "thinkingBudget": 128}),
    ("m", {"reasoning_effort": "none"}, {"thinkingBudget": 0}),
    ("m", {"reasoning": {"enabled": True}}, {"includeThoughts": True}),
])
def test_gemini_thinking_config_by_model_family(gw, test_id, model, reasoning, config):
    status, _, body = gw.chat({"model": model, "messages": USER_HI, **reasoning}, **headers(GEMINI, test_id))
    assert status == 200, body
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["generationConfig"]["thinkingConfig"] == config
    thought = body["choices"][0]["message"].get("reasoning_content")
    assert (thought is not None) == config.get("includeThoughts", False)


def test_gemini_refuses_a_budget_out_of_range(gw, test_id):
    status, _, body = gw.chat({"model": "m", "messages": USER_HI, "reasoning": {"max_tokens": 30000}},
                              **headers(GEMINI, test_id))
    assert status == 400, body
    assert "between 0 and 24576" in body["error"]["message"]


# --- Bedrock -----------------------------------------------------------------------

def test_bedrock_claude_reasoning_round_trip_needs_the_signed_block(gw, client, test_id):
    h = headers(BEDROCK, test_id, "tool")
    first = client.chat.completions.create(model=CLAUDE_THINKING, messages=WEATHER, tools=[WEATHER_TOOL],
                                           reasoning_effort="low", extra_headers=h)
    message = first.choices[0].message
    thought = "The user said: weather in Paris?. I will answer briefly."
    assert message.reasoning_content == thought
    [detail] = message.reasoning_details
    assert detail["type"] == "reasoning.text" and detail["text"] == thought
    assert detail["signature"].startswith("bW9ja3NpZy+/")
    [sent] = gw.mock_requests(test_id)
    # Effort low: Claude's budget for it (as on Anthropic's API), room for the answer on top.
    assert sent["body"]["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert sent["body"]["inferenceConfig"] == {"maxTokens": 2048 + 4096}

    turn = assistant_turn(message)
    later = {"tools": [WEATHER_TOOL], "reasoning_effort": "low", "extra_headers": headers(BEDROCK, test_id)}
    second = client.chat.completions.create(model=CLAUDE_THINKING, messages=WEATHER + [turn, tool_result(turn)],
                                            **later)
    assert second.choices[0].message.content == "Tool result received: sunny, 21C"
    answered = gw.mock_requests(test_id)[-1]
    assistant = answered["body"]["messages"][1]["content"]
    assert assistant[0] == {"reasoningContent": {"reasoningText": {"text": thought,
                                                                   "signature": detail["signature"]}}}

    # Without the signed block (reasoning_content alone is unsigned: dropped)
    # Claude refuses thinking: as on Anthropic's API, it is sent without.
    unsigned = {k: v for k, v in turn.items() if k != "reasoning_details"}
    third = client.chat.completions.create(model=CLAUDE_THINKING, messages=WEATHER + [unsigned, tool_result(turn)],
                                           **later)
    assert third.choices[0].message.content == "Tool result received: sunny, 21C"
    sent = gw.mock_requests(test_id)[-1]["body"]
    assert "additionalModelRequestFields" not in sent
    assert all("reasoningContent" not in b for b in sent["messages"][1]["content"])
    # A signature changed on the way: refused too.
    forged = copy.deepcopy(turn)
    forged["reasoning_details"][0]["signature"] = detail["signature"][:-2] + "x="
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=CLAUDE_THINKING, messages=WEATHER + [forged, tool_result(turn)],
                                       **later)
    assert "Invalid `signature`" in error_message(e)


def test_bedrock_claude_stream_round_trip(gw, client, test_id):
    """With the SDK's stream: the client rebuilds the signed block from the
    deltas and sends it back."""
    ask = {"model": CLAUDE_THINKING, "tools": [WEATHER_TOOL], "stream": True, "max_tokens": 3000,
           "extra_body": {"reasoning": {"max_tokens": 2000}}}
    first = client.chat.completions.create(messages=WEATHER, extra_headers=headers(BEDROCK, test_id, "tool"), **ask)
    turn = streamed_turn(c.model_dump() for c in first)
    thought = "The user said: weather in Paris?. I will answer briefly."
    assert turn["reasoning_content"] == thought
    [detail] = turn["reasoning_details"]
    assert detail["text"] == thought and detail["signature"].startswith("bW9ja3NpZy+/")
    second = client.chat.completions.create(messages=WEATHER + [turn, tool_result(turn)],
                                            extra_headers=headers(BEDROCK, test_id), **ask)
    assert streamed_turn(c.model_dump() for c in second)["content"] == "Tool result received: sunny, 21C"
    asked, answered = gw.mock_requests(test_id)
    assert asked["body"]["additionalModelRequestFields"]["thinking"]["budget_tokens"] == 2000
    assert asked["body"]["inferenceConfig"] == {"maxTokens": 3000}
    assert answered["body"]["messages"][1]["content"][0]["reasoningContent"]["reasoningText"]["signature"] == \
        detail["signature"]


def test_gemini_stream_tool_round_trip(gw, client, test_id):
    ask = {"model": "m", "tools": [WEATHER_TOOL], "stream": True, "reasoning_effort": "high"}
    first = client.chat.completions.create(messages=WEATHER, extra_headers=headers(GEMINI, test_id, "tool"), **ask)
    turn = streamed_turn(c.model_dump() for c in first)
    assert turn["reasoning_content"] == "The user said: weather in Paris?. I will answer briefly."
    [call] = turn["tool_calls"]
    assert "_ts_" in call["id"]
    second = client.chat.completions.create(messages=WEATHER + [turn, tool_result(turn)],
                                            extra_headers=headers(GEMINI, test_id), **ask)
    assert streamed_turn(c.model_dump() for c in second)["content"] == "Tool result received: sunny, 21C"
    asked, _ = gw.mock_requests(test_id)
    assert asked["body"]["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 24576}


@pytest.mark.parametrize("group", [BEDROCK, "mock-anthropic"])
def test_claude_rules_are_one_wherever_claude_runs(gw, test_id, group):
    """An effort's budget is lowered below the output limit, and the
    sampling controls thinking refuses are dropped, on Bedrock as on
    Anthropic's API (each mock refuses a budget not below the limit and a
    temperature with thinking, as the vendor does)."""
    status, _, body = gw.chat({"model": CLAUDE_THINKING, "messages": USER_HI, "reasoning_effort": "high",
                               "max_tokens": 5000, "temperature": 0.5, "top_p": 0.5}, **headers(group, test_id))
    assert status == 200, body
    [sent] = gw.mock_requests(test_id)
    if group == BEDROCK:
        assert sent["body"]["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 4999}}
        assert sent["body"]["inferenceConfig"] == {"maxTokens": 5000}
    else:
        assert sent["body"]["thinking"] == {"type": "enabled", "budget_tokens": 4999}
        assert sent["body"]["max_tokens"] == 5000
        assert not {"temperature", "top_p", "top_k"} & set(sent["body"])


@pytest.mark.parametrize("group", [BEDROCK, "mock-anthropic"])
@pytest.mark.parametrize("model,extra,param,message", [
    # The gateway's own refusals, naming the field.
    (CLAUDE_THINKING, {"max_tokens": 1024}, "max_tokens", "thinks with at least 1024 tokens"),
    (CLAUDE_THINKING, {"tool_choice": "required", "tools": [WEATHER_TOOL]}, "tool_choice", "forced to call a tool"),
])
def test_claude_thinking_refusals(gw, test_id, group, model, extra, param, message):
    status, _, body = gw.chat({"model": model, "messages": USER_HI, "reasoning_effort": "low", **extra},
                              **headers(group, test_id))
    assert status == 400, body
    assert message in body["error"]["message"]
    if param:
        assert body["error"]["param"] == param


def test_a_claude_model_without_thinking_answers_without_it(gw, test_id):
    # mock-bedrock's default, Claude 3 Haiku, refuses `thinking` (the mock
    # says so: "thinking: Extra inputs are not permitted"): none is sent.
    status, _, body = gw.chat({"model": "any", "messages": USER_HI, "reasoning_effort": "high"},
                              **headers(BEDROCK, test_id))
    assert status == 200, body
    [sent] = gw.mock_requests(test_id)
    assert "claude-3-haiku" in sent["path"]
    assert "additionalModelRequestFields" not in sent["body"]
    assert "reasoning_content" not in body["choices"][0]["message"]


def test_bedrock_cache_control_becomes_cache_points(gw, test_id):
    ephemeral = {"type": "ephemeral"}
    body = {"model": CLAUDE_THINKING, "messages": [
        {"role": "system", "content": [{"type": "text", "text": "you are a terse weather bot",
                                        "cache_control": ephemeral}]},
        {"role": "user", "content": [{"type": "text", "text": "long shared context here",
                                      "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                                     {"type": "text", "text": "hi there"}]}],
        "tools": [dict(WEATHER_TOOL, cache_control=ephemeral)]}
    status, _, answer = gw.chat(body, **headers(BEDROCK, test_id))
    assert status == 200, answer
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["system"] == [{"text": "you are a terse weather bot"}, {"cachePoint": {"type": "default"}}]
    assert sent["body"]["messages"][0]["content"] == [
        {"text": "long shared context here"}, {"cachePoint": {"type": "default", "ttl": "1h"}}, {"text": "hi there"}]
    assert sent["body"]["toolConfig"]["tools"][1] == {"cachePoint": {"type": "default"}}
    # The mock reads the prefix before the last cache point from its cache.
    assert answer["usage"]["prompt_tokens_details"] == {"cached_tokens": 10}
    assert answer["usage"]["prompt_tokens"] == 12

    # Claude takes at most four breakpoints.
    part = {"type": "text", "text": "x", "cache_control": ephemeral}
    body["messages"][1]["content"] = [part, part, part, {"type": "text", "text": "hi"}]
    status, _, answer = gw.chat(body, **headers(BEDROCK, test_id))
    assert status == 400, answer
    assert "A maximum of 4 blocks with cache_control" in answer["error"]["message"]


def test_cache_control_is_checked(gw):
    status, _, body = gw.chat({"model": "m", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "forever"}}]}]},
        **{"x-model-group": BEDROCK})
    assert status == 400, body
    assert body["error"]["param"] == "messages[0].content[0].cache_control.type"
    assert "forever" in body["error"]["message"]


# --- Anthropic (the chat surface to Claude) -------------------------------------------

ANTHROPIC = "mock-anthropic"


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
def test_anthropic_reasoning_round_trip_needs_the_signed_block(gw, client, test_id, streamed):
    ask = {"model": "any", "tools": [WEATHER_TOOL], "reasoning_effort": "low"}
    h = headers(ANTHROPIC, test_id, "tool")
    if streamed:
        first = client.chat.completions.create(messages=WEATHER, stream=True, extra_headers=h, **ask)
        turn = streamed_turn(c.model_dump() for c in first)
    else:
        first = client.chat.completions.create(messages=WEATHER, extra_headers=h, **ask)
        turn = assistant_turn(first.choices[0].message)
    assert "weather in Paris?" in turn["reasoning_content"]
    [detail] = turn["reasoning_details"]
    assert detail["type"] == "reasoning.text" and detail["signature"]
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["body"]["max_tokens"] > 2048

    later = {**ask, "extra_headers": headers(ANTHROPIC, test_id)}
    second = client.chat.completions.create(messages=WEATHER + [turn, tool_result(turn)], **later)
    assert "Tool result received: sunny, 21C" in second.choices[0].message.content
    _, asked = gw.mock_requests(test_id)
    thinking, *_ = asked["body"]["messages"][1]["content"]
    assert thinking == {"type": "thinking", "thinking": turn["reasoning_content"], "signature": detail["signature"]}

    # Anthropic refuses a forged signature; a history without the signed
    # block is sent without thinking (Claude refuses thinking then).
    forged = copy.deepcopy(turn)
    forged["reasoning_details"][0]["signature"] = "Zm9yZ2Vk"
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(messages=WEATHER + [forged, tool_result(forged)], **later)
    assert "Invalid `signature` in `thinking` block" in error_message(info)
    bare = {k: v for k, v in turn.items() if k not in ("reasoning_content", "reasoning_details")}
    third = client.chat.completions.create(messages=WEATHER + [bare, tool_result(bare)], **later)
    assert "Tool result received" in third.choices[0].message.content
    *_, unsigned = gw.mock_requests(test_id)
    assert "thinking" not in unsigned["body"]


def test_anthropic_cache_control_reaches_claude_and_is_counted(gw, test_id):
    ephemeral = {"type": "ephemeral"}
    shared = f"{test_id} " + "shared context " * 600  # over the 1024 words the mock caches
    body = {"model": "any", "messages": [
        {"role": "system", "content": [{"type": "text", "text": "you are terse", "cache_control": ephemeral}]},
        {"role": "user", "content": [{"type": "text", "text": shared, "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                                     {"type": "text", "text": "hi there"}]}],
        "tools": [dict(WEATHER_TOOL, cache_control=ephemeral)]}
    status, _, first = gw.chat(body, **headers(ANTHROPIC, test_id))
    assert status == 200, first
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["system"] == [{"type": "text", "text": "you are terse", "cache_control": ephemeral}]
    assert sent["body"]["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" not in sent["body"]["messages"][0]["content"][1]
    assert sent["body"]["tools"][0]["cache_control"] == ephemeral
    # The first request writes the cache, the second reads it: both count
    # every prompt token, the second says how many came from the cache.
    status, _, second = gw.chat(body, **headers(ANTHROPIC, test_id))
    assert status == 200, second
    assert "prompt_tokens_details" not in first["usage"] or first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached > 1024 and second["usage"]["prompt_tokens"] == first["usage"]["prompt_tokens"]


# --- DashScope ---------------------------------------------------------------------

def test_dashscope_thinking(gw, test_id):
    status, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True,
                                    "reasoning": {"max_tokens": 500}}, headers(DASHSCOPE, test_id))
    assert status == 200
    turn = streamed_turn(chunks(events))
    assert turn["reasoning_content"] == "The user said: hi there. I will answer briefly."
    assert turn["content"].startswith("Hello from the mock dashscope provider.")
    status, _, body = gw.chat({"model": "m", "messages": USER_HI, "reasoning_effort": "none"},
                              **headers(DASHSCOPE, test_id))
    assert status == 200, body
    assert "reasoning_content" not in body["choices"][0]["message"]
    streamed, plain = gw.mock_requests(test_id)
    assert (streamed["body"]["parameters"]["enable_thinking"], streamed["body"]["parameters"]["thinking_budget"]) \
        == (True, 500)
    assert plain["body"]["parameters"]["enable_thinking"] is False
    assert "thinking_budget" not in plain["body"]["parameters"]


def test_dashscope_open_source_qwen3_thinks_only_in_streams(gw, test_id):
    ask = {"model": "qwen3-32b", "messages": USER_HI, "reasoning_effort": "medium"}
    status, _, body = gw.chat(ask, **headers(DASHSCOPE, test_id))
    assert status == 400, body
    assert "enable_thinking must be set to false for non-streaming calls" in body["error"]["message"]
    status, _, events = stream(gw, dict(ask, stream=True), headers(DASHSCOPE, test_id))
    assert status == 200
    assert streamed_turn(chunks(events))["reasoning_content"] == "The user said: hi there. I will answer briefly."
    status, _, body = gw.chat(dict(ask, reasoning_effort="none"), **headers(DASHSCOPE, test_id))
    assert status == 200, body
    assert "reasoning_content" not in body["choices"][0]["message"]
    status, _, body = gw.chat({"model": "m", "messages": USER_HI, "reasoning_effort": "high"},
                              **headers(DASHSCOPE, test_id))
    assert status == 200, body
    assert body["choices"][0]["message"]["reasoning_content"] == "The user said: hi there. I will answer briefly."
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 9}


# --- OpenAI ------------------------------------------------------------------------

def test_openai_reasoning_effort_passes(gw, client, test_id):
    client.chat.completions.create(model="m", messages=USER_HI, reasoning_effort="high",
                                   extra_headers=headers("reasoning", test_id))
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["reasoning_effort"] == "high"
    assert sent["body"]["model"] == "o3"


@pytest.mark.parametrize("effort", ["xhigh", "max"])
def test_openais_newest_efforts_reach_each_vendor_in_its_terms(gw, client, test_id, effort):
    """The SDK's `xhigh` and `max` (OpenAI documents them for its recent
    models) reach OpenAI as they came, and Claude as the larger budgets
    they amount to (the mock refuses any effort name OpenAI does not list)."""
    client.chat.completions.create(model="m", messages=USER_HI, reasoning_effort=effort,
                                   extra_headers=headers("reasoning", test_id))
    client.chat.completions.create(model=CLAUDE_THINKING, messages=USER_HI, reasoning_effort=effort,
                                   max_tokens=40000, extra_headers=headers("mock-anthropic", test_id))
    openai_sent, claude_sent = gw.mock_requests(test_id)
    assert openai_sent["body"]["reasoning_effort"] == effort
    budget = {"xhigh": 24576, "max": 32000}[effort]
    assert claude_sent["body"]["thinking"] == {"type": "enabled", "budget_tokens": budget}


def test_openai_takes_a_budget_as_the_effort_it_amounts_to(gw, test_id):
    # OpenRouter's budget (or an Anthropic client's thinking budget): OpenAI takes efforts only.
    status, _, body = gw.chat({"model": "m", "messages": USER_HI, "reasoning": {"max_tokens": 6000}},
                              **{"x-model-group": "reasoning", "x-test-id": test_id})
    assert status == 200, body
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["reasoning_effort"] == "medium"
    assert "reasoning" not in sent["body"]


@pytest.mark.parametrize("fields,param", [
    ({"reasoning_effort": "extreme"}, "reasoning_effort"),
    ({"reasoning": {"effort": "low"}, "reasoning_effort": "low"}, "reasoning"),
    ({"reasoning": {"exclude": True}}, "reasoning"),
])
def test_openai_reasoning_refusals_name_the_field(gw, fields, param):
    status, _, body = gw.chat({"model": "m", "messages": USER_HI, **fields}, **{"x-model-group": "reasoning"})
    assert status == 400, body
    assert body["error"]["param"] == param, body


# --- OpenAI's explicit cache breakpoints -------------------------------------------

BREAKPOINT_12H = {"mode": "explicit", "ttl": "12h"}


def cached_prompt(test_id):
    return [{"role": "system", "content": [{"type": "text", "text": "you are terse",
                                            "prompt_cache_breakpoint": BREAKPOINT_12H}]},
            {"role": "user", "content": [{"type": "text", "text": f"{test_id} hi there"}]}]


def test_openai_breakpoints_reach_the_models_that_take_them(gw, client, test_id):
    """OpenAI's `prompt_cache_breakpoint` (GPT-5.6 and later; the mock
    refuses it on other models, as OpenAI does) is the request's breakpoint:
    sent on to GPT-5.6, left out for GPT-4o (which caches by itself), and
    Claude's `cache_control` at Anthropic (its longest TTL, an hour)."""
    messages = cached_prompt(test_id)
    client.chat.completions.create(model="gpt-5.6", messages=messages,
                                   extra_headers=headers("mock-openai", test_id))
    client.chat.completions.create(model="m", messages=messages, extra_headers=headers("mock-openai", test_id))
    client.chat.completions.create(model="any", messages=messages, extra_headers=headers(ANTHROPIC, test_id))
    gpt56, gpt4o, claude = gw.mock_requests(test_id)
    assert gpt56["body"]["messages"][0]["content"] == [
        {"type": "text", "text": "you are terse", "prompt_cache_breakpoint": BREAKPOINT_12H}]
    assert "prompt_cache_breakpoint" not in json.dumps(gpt4o["body"])
    assert claude["body"]["system"] == [{"type": "text", "text": "you are terse",
                                         "cache_control": {"type": "ephemeral", "ttl": "1h"}}]


def test_a_messages_clients_cache_control_is_openais_breakpoint(gw, test_id):
    """An Anthropic client's `cache_control` to GPT-5.6: OpenAI's breakpoint
    (5 minutes is within OpenAI's default, so no TTL; an hour is 12)."""
    client = anthropic.Anthropic(api_key=ALL_GROUPS_KEY, base_url=gw.base, max_retries=0,
                                 default_headers=headers("mock-openai", test_id))
    client.messages.create(model="gpt-5.6", max_tokens=64, system=[
        {"type": "text", "text": "you are terse", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "long context", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
            {"type": "text", "text": "hi there"}]}])
    [sent] = gw.mock_requests(test_id)
    system, user = sent["body"]["messages"]
    assert system["content"] == [{"type": "text", "text": "you are terse",
                                  "prompt_cache_breakpoint": {"mode": "explicit"}}]
    assert user["content"] == [
        {"type": "text", "text": "long context", "prompt_cache_breakpoint": BREAKPOINT_12H},
        {"type": "text", "text": "hi there"}]


def test_a_responses_input_breakpoint_is_read_and_passed(gw, client, test_id):
    """The Responses API's `prompt_cache_breakpoint` on an input part (a 400
    "Unknown parameter" before): as it came to OpenAI (a pass-through),
    Claude's `cache_control` elsewhere."""
    ask = {"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "long context", "prompt_cache_breakpoint": {"mode": "explicit"}},
        {"type": "input_text", "text": "hi there"}]}], "store": False}
    client.responses.create(model="gpt-5.6", **ask, extra_headers=headers("mock-openai", test_id))
    client.responses.create(model="any", **ask, extra_headers=headers(ANTHROPIC, test_id))
    to_openai, to_claude = gw.mock_requests(test_id)
    assert to_openai["body"]["input"] == ask["input"]
    assert to_claude["body"]["messages"][0]["content"][0] == {
        "type": "text", "text": "long context", "cache_control": {"type": "ephemeral"}}
    # A malformed one is the gateway's 400, in OpenAI's words.
    bad = copy.deepcopy(ask)
    bad["input"][0]["content"][0]["prompt_cache_breakpoint"] = {"mode": "implicit"}
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="any", **bad, extra_headers=headers(ANTHROPIC, test_id))
    assert e.value.body["param"] == "input[0].content[0].prompt_cache_breakpoint.mode"


# --- Reasoning beside tools, adaptive thinking, room for the answer ------------------

CALC_TOOL_ANTHROPIC = {"name": "calc", "description": "Add numbers",
                       "input_schema": {"type": "object", "properties": {"a": {"type": "number"}}}}


def messages_client(gw, group, test_id):
    return anthropic.Anthropic(api_key=ALL_GROUPS_KEY, base_url=gw.base, max_retries=0,
                               default_headers=headers(group, test_id))


def test_adaptive_thinking_on_an_earlier_claude_fits_or_goes_without(gw, test_id):
    """Adaptive thinking lets Claude decide, so it is never refused for a
    small limit: a Claude before 4.6 (no adaptive mode; the mock refuses it
    there) thinks with the budget that fits below `max_tokens`, and without
    thinking when none does (the 1024 minimum is `enabled`'s)."""
    client = messages_client(gw, BEDROCK, test_id)
    for limit in (1000, 5000):
        client.messages.create(model=CLAUDE_THINKING, max_tokens=limit, thinking={"type": "adaptive"},
                               messages=[{"role": "user", "content": "hi"}])
    small, large = gw.mock_requests(test_id)
    assert "additionalModelRequestFields" not in small["body"]
    assert small["body"]["inferenceConfig"]["maxTokens"] == 1000
    assert large["body"]["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 4999}}


@pytest.mark.parametrize("group", [BEDROCK, "mock-anthropic"])
def test_claude_4_6_and_later_think_adaptively(gw, test_id, group):
    """Claude 4.6 takes adaptive thinking with an effort; 4.7 takes nothing
    else (the mocks refuse `enabled` there, and `adaptive` before 4.6): an
    effort (a chat client's, an Anthropic client's `output_config.effort`)
    is adaptive thinking at that effort; a named budget stays `enabled`
    where the model still takes it."""
    model = "claude-opus-4-7"
    status, _, body = gw.chat({"model": model, "messages": USER_HI, "reasoning_effort": "high",
                               "max_tokens": 2000}, **headers(group, test_id))
    assert status == 200, body
    status, _, body = gw.chat({"model": "claude-opus-4-6", "messages": USER_HI,
                               "reasoning": {"max_tokens": 2048}, "max_tokens": 4000}, **headers(group, test_id))
    assert status == 200, body
    effort, budget = gw.mock_requests(test_id)
    if group == BEDROCK:
        assert effort["body"]["additionalModelRequestFields"] == {
            "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}}
        assert budget["body"]["additionalModelRequestFields"] == {
            "thinking": {"type": "enabled", "budget_tokens": 2048}}
    else:
        assert effort["body"]["thinking"] == {"type": "adaptive"}
        assert effort["body"]["output_config"] == {"effort": "high"}
        assert budget["body"]["thinking"] == {"type": "enabled", "budget_tokens": 2048}


@pytest.mark.parametrize("group", [BEDROCK, "mock-anthropic"])
def test_an_effort_without_a_limit_leaves_room_for_the_answer(gw, test_id, group):
    """No `max_tokens`: the effort's whole budget, and the provider's
    default output limit (4096) on top of it for the answer, on Anthropic
    as on Bedrock (before: 4096 with a budget of 4095 on Anthropic)."""
    status, _, body = gw.chat({"model": CLAUDE_THINKING, "messages": USER_HI, "reasoning_effort": "medium"},
                              **headers(group, test_id))
    assert status == 200, body
    [sent] = gw.mock_requests(test_id)
    if group == BEDROCK:
        assert sent["body"]["additionalModelRequestFields"]["thinking"]["budget_tokens"] == 8192
        assert sent["body"]["inferenceConfig"]["maxTokens"] == 8192 + 4096
    else:
        assert sent["body"]["thinking"] == {"type": "enabled", "budget_tokens": 8192}
        assert sent["body"]["max_tokens"] == 8192 + 4096


def test_openai_reasoning_beside_function_tools(gw, client, test_id):
    """OpenAI's recent models refuse function tools with a reasoning effort
    on Chat Completions ("set reasoning_effort to 'none'"; the mock does
    too): a request that asked for no effort, or adaptive thinking (the
    model decides), gets `none` there; an effort the client named is sent,
    and OpenAI's refusal reaches it in its own envelope."""
    messages_client(gw, "mock-openai", test_id).messages.create(
        model="gpt-5.6", max_tokens=256, thinking={"type": "adaptive"}, tools=[CALC_TOOL_ANTHROPIC],
        messages=[{"role": "user", "content": "add 1 and 2"}])
    client.chat.completions.create(model="gpt-5.6", messages=USER_HI, tools=[WEATHER_TOOL],
                                   extra_headers=headers("mock-openai", test_id))
    client.chat.completions.create(model="gpt-5.6", messages=USER_HI, reasoning_effort="high",
                                   extra_headers=headers("mock-openai", test_id))
    adaptive, no_effort, no_tools = gw.mock_requests(test_id)
    assert adaptive["body"]["reasoning_effort"] == "none"
    assert no_effort["body"]["reasoning_effort"] == "none"
    assert no_tools["body"]["reasoning_effort"] == "high"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="gpt-5.6", messages=USER_HI, tools=[WEATHER_TOOL],
                                       reasoning_effort="high", extra_headers=headers("mock-openai", test_id))
    assert e.value.body["param"] == "reasoning_effort"
    assert "set reasoning_effort to 'none'" in e.value.body["message"]
