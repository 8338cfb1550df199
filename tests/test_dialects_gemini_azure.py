"""Gemini (native) and Azure OpenAI through a real Envoy: translation both
ways, streams, tool round trips (Gemini's thought signature included),
vendor errors, content filtering, and the official OpenAI SDK."""

import http.client
import json

import openai
import pytest

from conftest import ALL_GROUPS_KEY
from sse_client import chunks, content_of, finishes, stream, tool_calls_of
from test_gateway import USER_HI, WEATHER_TOOL, assert_unified_error

GEMINI = "mock-gemini"
AZURE = "mock-azure"
# The same deployment through Azure's v1 API (tests/conftest.py).
AZURE_V1 = "mock-azure-v1"
TIME_TOOL = {"type": "function", "function": {"name": "get_time"}}
# What the mock's Azure deployment runs, as Azure names it in its answers.
AZURE_MODEL = "gpt-4o-2024-08-06"






# --- plain chat -------------------------------------------------------------------

def test_gemini_non_stream(gw, test_id):
    status, headers, body = gw.chat(
        {"model": "m", "max_tokens": 50, "stop": ["STOPHERE"], "temperature": 0.3, "seed": 7, "user": "u1",
         "presence_penalty": 0.5, "frequency_penalty": 0.25, "top_k": 40,
         "messages": [{"role": "system", "content": "be brief"}] + USER_HI},
        **{"x-model-group": GEMINI, "x-test-id": test_id})
    assert status == 200, body
    assert body["provider"] == GEMINI and body["model"] == "mock-gemini-flash"
    assert body["choices"][0]["message"]["content"] == "Hello from the mock gemini provider. You said: hi there"
    assert body["choices"][0]["finish_reason"] == "stop"
    # The mock's counts (a token per word): "be brief" and "hi there" in, its 10-word answer out.
    assert (body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"], body["usage"]["total_tokens"]) == \
        (4, 10, 14)
    assert headers["x-llm-provider"] == GEMINI
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == "/v1beta/models/mock-gemini-flash:generateContent"
    assert sent["headers"]["x-goog-api-key"] == "mock-gemini-key"
    assert "authorization" not in sent["headers"], "other vendors' auth headers are removed"
    # The mock rejects unknown fields as Gemini does; this is the exact body
    # (OpenAI's penalties and top_k as Gemini's own members).
    assert sent["body"] == {
        "contents": [{"role": "user", "parts": [{"text": "hi there"}]}],
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "generationConfig": {"stopSequences": ["STOPHERE"], "temperature": 0.3, "topK": 40, "maxOutputTokens": 50,
                             "seed": 7, "presencePenalty": 0.5, "frequencyPenalty": 0.25},
    }


def test_gemini_max_tokens_is_length(gw):
    status, _, body = gw.chat({"model": "m", "max_tokens": 2, "messages": USER_HI}, **{"x-model-group": GEMINI})
    assert status == 200
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 2


def test_azure_v1_api_non_stream(gw, test_id):
    status, headers, body = gw.chat(
        {"model": "m", "messages": USER_HI, "temperature": 0.2},
        **{"x-model-group": AZURE_V1, "x-test-id": test_id})
    assert status == 200, body
    assert body["provider"] == AZURE_V1
    # The model Azure says answered, not the deployment's name.
    assert body["model"] == AZURE_MODEL
    assert body["choices"][0]["message"]["content"] == "Hello from the mock azure provider. You said: hi there"
    [sent] = gw.mock_requests(test_id)
    assert (sent["path"], sent["query"]) == ("/openai/v1/chat/completions", "")
    assert sent["body"]["model"] == "mock-gpt4o-deployment"
    assert sent["headers"]["api-key"] == "mock-azure-key"
    assert "authorization" not in sent["headers"]


def test_azure_non_stream(gw, test_id):
    status, headers, body = gw.chat(
        {"model": "m", "messages": USER_HI, "temperature": 0.2},
        **{"x-model-group": AZURE, "x-test-id": test_id})
    assert status == 200, body
    assert body["provider"] == AZURE
    assert body["model"] == AZURE_MODEL
    assert body["choices"][0]["message"]["content"] == "Hello from the mock azure provider. You said: hi there"
    assert body["choices"][0]["finish_reason"] == "stop"
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == "/openai/deployments/mock-gpt4o-deployment/chat/completions"
    assert sent["query"] == "api-version=2024-10-21"
    assert sent["headers"]["api-key"] == "mock-azure-key"
    assert "authorization" not in sent["headers"]
    assert sent["body"]["temperature"] == 0.2


# --- streams ----------------------------------------------------------------------

@pytest.mark.parametrize("group", [GEMINI, AZURE, AZURE_V1])
@pytest.mark.parametrize("include_usage", [False, True])
def test_stream(gw, group, include_usage):
    body = {"model": "m", "messages": USER_HI, "stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    status, headers, events = stream(gw, body, {"x-model-group": group})
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert events[-1][1] == "[DONE]"
    cs = chunks(events)
    assert len({c["id"] for c in cs}) == 1, "one id per response"
    if group != GEMINI:
        assert {c["model"] for c in cs} == {AZURE_MODEL}, "the model Azure names, in every chunk"
    assert cs[0]["choices"][0]["delta"]["role"] == "assistant"
    assert content_of(events).endswith("You said: hi there")
    assert finishes(events) == ["stop"]
    empty_choices = [c for c in cs if not c["choices"]]
    if include_usage:
        assert len(empty_choices) == 1
        usage = empty_choices[0]["usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (2, 10, 12)
    else:
        assert empty_choices == [], "Azure's annotation chunks never reach the client"


def test_gemini_stream_path_and_split_utf8(gw, test_id):
    status, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
                               {"x-model-group": GEMINI, "x-mock-scenario": "split", "x-test-id": test_id})
    assert status == 200
    for piece in ("héllo", "wörld", "你好", "🌍"):
        assert piece in content_of(events)
    assert events[-1][1] == "[DONE]"
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == "/v1beta/models/mock-gemini-flash:streamGenerateContent"
    assert sent["query"] == "alt=sse"


# Gemini's overload (UNAVAILABLE), Azure's server_error.
@pytest.mark.parametrize("group,code,message", [
    (GEMINI, "UPSTREAM_BUSY", "The model is overloaded. Please try again later."),
    (AZURE, "UPSTREAM_ERROR", "The server had an error while processing your request."),
    (AZURE_V1, "UPSTREAM_ERROR", "The server had an error while processing your request."),
])
def test_stream_error_mid_stream(gw, group, code, message):
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
                          {"x-model-group": group, "x-mock-scenario": "stream-error"})
    assert content_of(events), "content came first: the error is mid-stream"
    last = events[-1][1]
    assert isinstance(last, dict), events[-3:]
    assert (last["error"]["code"], last["error"]["message"], last["error"]["provider"]) == (code, message, group)
    assert all(e != "[DONE]" for _, e in events)


def test_gemini_stream_cut_is_a_failure(gw):
    with pytest.raises(http.client.IncompleteRead):
        stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
               {"x-model-group": GEMINI, "x-mock-scenario": "cut"})


# --- tools ------------------------------------------------------------------------

def test_gemini_tool_round_trip_keeps_the_thought_signature(gw, test_id):
    headers = {"x-model-group": GEMINI, "x-test-id": test_id}
    messages = [{"role": "user", "content": "weather in Paris?"}]
    status, _, body = gw.chat({"model": "m", "messages": messages, "tools": [WEATHER_TOOL, TIME_TOOL],
                               "tool_choice": "required"}, **{**headers, "x-mock-scenario": "two-tools"})
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    first, second = choice["message"]["tool_calls"]
    assert first["function"] == {"name": "get_weather", "arguments": '{"city":"example"}'}
    assert second["function"]["name"] == "get_time"
    assert first["id"] != second["id"]
    assert "_ts_" in first["id"] and "_ts_" not in second["id"], "the signed call carries the signature"
    messages += [choice["message"],
                 {"role": "tool", "tool_call_id": second["id"], "content": "noon"},
                 {"role": "tool", "tool_call_id": first["id"], "content": "sunny, 21C"}]
    status, _, body = gw.chat({"model": "m", "messages": messages, "tools": [WEATHER_TOOL, TIME_TOOL]}, **headers)
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == "Tool result received: noon | sunny, 21C"
    call_request, result_request = gw.mock_requests(test_id)
    assert call_request["body"]["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert call_request["body"]["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == \
        WEATHER_TOOL["function"]["parameters"]
    model_turn, results = result_request["body"]["contents"][1:3]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0]["thoughtSignature"].startswith("bW9ja3NpZy+/"), "signature back, as issued"
    assert model_turn["parts"][0]["functionCall"] == {"name": "get_weather", "args": {"city": "example"}}
    assert results == {"role": "user", "parts": [
        {"functionResponse": {"name": "get_time", "response": {"result": "noon"}}},
        {"functionResponse": {"name": "get_weather", "response": {"result": "sunny, 21C"}}}]}


def test_azure_tool_round_trip(gw, test_id):
    headers = {"x-model-group": AZURE, "x-test-id": test_id}
    messages = [{"role": "user", "content": "weather in Paris?"}]
    status, _, body = gw.chat({"model": "m", "messages": messages, "tools": [WEATHER_TOOL],
                               "tool_choice": "required"}, **headers)
    assert status == 200, body
    [call] = body["choices"][0]["message"]["tool_calls"]
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert json.loads(call["function"]["arguments"]) == {"city": "example"}
    messages += [body["choices"][0]["message"], {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}]
    status, _, body = gw.chat({"model": "m", "messages": messages, "tools": [WEATHER_TOOL]}, **headers)
    assert body["choices"][0]["message"]["content"] == "Tool result received: sunny"
    _, second = gw.mock_requests(test_id)
    assert second["body"]["messages"][2] == {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}


@pytest.mark.parametrize("group", [GEMINI, AZURE, AZURE_V1])
def test_streamed_parallel_tool_calls(gw, group):
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True,
                                    "tools": [WEATHER_TOOL, TIME_TOOL]},
                          {"x-model-group": group, "x-mock-scenario": "two-tools"})
    calls = tool_calls_of(events)
    assert sorted(calls) == [0, 1]
    assert calls[0]["name"] == "get_weather" and json.loads(calls[0]["args"]) == {"city": "example"}
    assert calls[1]["name"] == "get_time" and json.loads(calls[1]["args"] or "{}") == {}
    assert finishes(events) == ["tool_calls"]
    assert events[-1][1] == "[DONE]"


# --- errors -----------------------------------------------------------------------

@pytest.mark.parametrize("group", [GEMINI, AZURE, AZURE_V1])
@pytest.mark.parametrize("scenario,status,code", [
    ("error-400", 400, "INVALID_REQUEST"),
    ("error-400-context", 400, "CONTEXT_LENGTH_EXCEEDED"),
    ("error-401", 401, "AUTH_FAILED"),
    ("error-403", 403, "PERMISSION_DENIED"),
    ("error-404", 404, "MODEL_NOT_FOUND"),
    ("error-413", 413, "PAYLOAD_TOO_LARGE"),
    ("error-429", 429, "UPSTREAM_RATE_LIMIT"),
    ("error-500", 502, "UPSTREAM_ERROR"),
    ("error-503", 503, "UPSTREAM_BUSY"),
    ("empty-200", 502, "UPSTREAM_ERROR"),
])
def test_vendor_errors_are_unified(gw, group, scenario, status, code):
    s, headers, body = gw.chat({"model": "m", "messages": USER_HI},
                               **{"x-model-group": group, "x-mock-scenario": scenario})
    err = assert_unified_error(s, headers, body, status, code)
    assert err["provider"] == group
    if scenario == "error-429" and group in (AZURE, AZURE_V1):
        assert headers["retry-after"] == "7"


def test_gemini_rejects_https_images_before_the_vendor(gw, test_id):
    status, headers, body = gw.chat(
        {"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]},
        **{"x-model-group": GEMINI, "x-test-id": test_id})
    err = assert_unified_error(status, headers, body, 400, "INVALID_REQUEST")
    assert err["param"] == "messages[0].content[0].image_url.url"
    assert gw.mock_requests(test_id) == []


def test_gemini_image_as_inline_data(gw, test_id):
    status, _, body = gw.chat(
        {"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}],
         "response_format": {"type": "json_object"}},
        **{"x-model-group": GEMINI, "x-test-id": test_id})
    assert status == 200, body
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["contents"][0]["parts"][1] == {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    assert sent["body"]["generationConfig"] == {"responseMimeType": "application/json"}


# --- content filtering --------------------------------------------------------------

@pytest.mark.parametrize("group", [GEMINI, AZURE, AZURE_V1])
def test_blocked_prompt_is_400_content_filtered(gw, group):
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI},
                                    **{"x-model-group": group, "x-mock-scenario": "blocked-prompt"})
    err = assert_unified_error(status, headers, body, 400, "CONTENT_FILTERED")
    assert err["provider"] == group


def test_gemini_prompt_blocked_in_a_stream_is_400(gw):
    # Gemini's verdict arrives as the first event of a 200 stream; first-event
    # gating holds the headers, so the client gets a proper 400 instead.
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI, "stream": True},
                                    **{"x-model-group": GEMINI, "x-mock-scenario": "blocked-prompt"})
    assert_unified_error(status, headers, body, 400, "CONTENT_FILTERED")


def test_azure_prompt_blocked_before_a_stream_is_400(gw):
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI, "stream": True},
                                    **{"x-model-group": AZURE, "x-mock-scenario": "blocked-prompt"})
    assert_unified_error(status, headers, body, 400, "CONTENT_FILTERED")


@pytest.mark.parametrize("group", [GEMINI, AZURE, AZURE_V1])
def test_filtered_answer_is_finish_reason_content_filter(gw, group):
    status, _, body = gw.chat({"model": "m", "messages": USER_HI},
                              **{"x-model-group": group, "x-mock-scenario": "filtered-answer"})
    assert status == 200, body
    assert body["choices"][0]["finish_reason"] == "content_filter"
    assert not body["choices"][0]["message"]["content"]


@pytest.mark.parametrize("group", [GEMINI, AZURE, AZURE_V1])
def test_filtered_stream_finishes_with_content_filter(gw, group):
    status, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True,
                                         "stream_options": {"include_usage": True}},
                               {"x-model-group": group, "x-mock-scenario": "filtered-stream"})
    assert status == 200
    assert content_of(events) == "Hello from the"
    assert finishes(events) == ["content_filter"]
    assert events[-1][1] == "[DONE]"
    assert [c for c in chunks(events) if not c["choices"]] == [chunks(events)[-1]], "only the usage chunk"


# --- the official SDK -----------------------------------------------------------------

@pytest.mark.parametrize("group", [GEMINI, AZURE, AZURE_V1])
def test_sdk_streamed_tool_call_and_result(gw, group):
    client = openai.OpenAI(base_url=gw.base + "/v1", api_key=gw.key, max_retries=0,
                           default_headers={"x-model-group": group})
    tools = [WEATHER_TOOL]
    messages = [{"role": "user", "content": "weather?"}]
    call_id, name, args = None, None, ""
    for chunk in client.chat.completions.create(model="any", messages=messages, tools=tools,
                                                tool_choice="required", stream=True):
        for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            assert tc.index == 0
            call_id = tc.id or call_id
            name = tc.function.name or name
            args += tc.function.arguments or ""
    assert name == "get_weather" and json.loads(args) == {"city": "example"}
    # Echo the call back as the SDK user would: Gemini needs its signature again.
    messages += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}]},
                 {"role": "tool", "tool_call_id": call_id, "content": "sunny"}]
    r = client.chat.completions.create(model="any", messages=messages, tools=tools)
    assert r.choices[0].message.content == "Tool result received: sunny"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="any", messages=[{"role": "user", "content": "x"}],
                                       extra_headers={"x-mock-scenario": "blocked-prompt"})
    assert e.value.body["code"] == "CONTENT_FILTERED"


@pytest.mark.parametrize("group", [AZURE, AZURE_V1])
@pytest.mark.parametrize("streamed", [False, True])
def test_azure_responses_name_the_model_azure_names(gw, group, streamed):
    """The Responses API on Azure (translated on the classic API, passed
    through on v1): `model` is the deployment's model as Azure says it."""
    client = openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0,
                           default_headers={"x-model-group": group})
    if streamed:
        events = list(client.responses.create(model="m", input="hi", stream=True, store=False))
        models = {e.response.model for e in events if hasattr(e, "response")}
        assert models == {AZURE_MODEL}, models
    else:
        assert client.responses.create(model="m", input="hi", store=False).model == AZURE_MODEL


# --- several choices (n) ------------------------------------------------------------

GEMINI_ANSWER = "Hello from the mock gemini provider. You said: hi there"


def sdk(gw, group, **headers):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=gw.key, max_retries=0,
                         default_headers={"x-model-group": group, **headers})


def test_sdk_n_choices_from_gemini_candidates(gw, test_id):
    """`n` reaches Gemini as `candidateCount`; its candidates come back as the choices, the usage the
    whole answer's (the mock counts each candidate's tokens)."""
    r = sdk(gw, GEMINI, **{"x-test-id": test_id}).chat.completions.create(
        model="any", messages=USER_HI, n=2)
    assert [c.index for c in r.choices] == [0, 1]
    assert [c.message.content for c in r.choices] == [GEMINI_ANSWER] * 2
    assert [c.finish_reason for c in r.choices] == ["stop"] * 2
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (2, 20)
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["generationConfig"] == {"candidateCount": 2}


def test_sdk_n_choices_streamed_from_gemini_candidates(gw, test_id):
    text, finish, usage, first = {}, {}, None, {}
    for chunk in sdk(gw, GEMINI, **{"x-test-id": test_id}).chat.completions.create(
            model="any", messages=USER_HI, n=3, stream=True, stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            first.setdefault(c.index, c.delta.role)
            text[c.index] = text.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                assert c.index not in finish, "one finish per choice"
                finish[c.index] = c.finish_reason
    assert text == {0: GEMINI_ANSWER, 1: GEMINI_ANSWER, 2: GEMINI_ANSWER}
    assert finish == {0: "stop", 1: "stop", 2: "stop"}
    assert first == {0: "assistant", 1: "assistant", 2: "assistant"}, "each choice opens with its role"
    assert (usage.prompt_tokens, usage.completion_tokens) == (2, 30)
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["generationConfig"] == {"candidateCount": 3}
    assert sent["path"].endswith(":streamGenerateContent")


@pytest.mark.parametrize("group,n", [(GEMINI, 9), (GEMINI, 129), ("mock-anthropic", 2), ("mock-bedrock", 2)])
def test_choices_a_vendor_cannot_give_are_a_400_before_it(gw, test_id, group, n):
    """Beyond Gemini's 8 candidates, beyond Chat's 128, or any n > 1 to a vendor answering one
    choice: a clear 400 naming `n`, and the vendor is not called."""
    status, _, body = gw.chat({"model": "m", "messages": USER_HI, "n": n},
                              **{"x-model-group": group, "x-test-id": test_id})
    assert status == 400, body
    assert (body["error"]["code"], body["error"]["param"]) == ("INVALID_REQUEST", "n")
    assert gw.mock_requests(test_id) == []
