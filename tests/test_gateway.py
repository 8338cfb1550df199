"""The gateway through a real Envoy: translation both ways, streams, errors,
retries, routing safety. Each test checks what the client got AND what the
mock provider received."""

import http.client
import json
import time

import pytest

from conftest import ALL_GROUPS_KEY, MAX_BODY_BYTES
from sse_client import chunks, content_of, finishes, stream, tool_calls_of

USER_HI = [{"role": "user", "content": "hi there"}]






# --- plain chat, both dialects ------------------------------------------------

def test_openai_non_stream(gw, test_id):
    status, headers, body = gw.chat(
        {"model": "mock-openai", "messages": USER_HI, "request_id": "req-" + test_id, "temperature": 0.2},
        **{"x-test-id": test_id})
    assert status == 200, body
    assert body["object"] == "chat.completion"
    assert body["provider"] == "mock-openai"
    assert body["model"] == "mock-gpt-4o"
    assert body["choices"][0]["message"]["content"].endswith("You said: hi there")
    assert body["choices"][0]["finish_reason"] == "stop"
    # The mock's counts (a token per word): "hi there", and the 10 words of its answer.
    assert {k: body["usage"][k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")} == \
        {"prompt_tokens": 2, "completion_tokens": 10, "total_tokens": 12}
    assert headers["x-llm-provider"] == "mock-openai"
    assert headers["x-llm-model"] == "mock-gpt-4o"
    assert headers["x-request-id"] == "req-" + test_id
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer sk-mock-openai", "vendor key replaces the caller's"
    assert sent["headers"]["x-request-id"] == "req-" + test_id, "request id is the upstream idempotency key"
    assert sent["body"]["model"] == "mock-gpt-4o"
    assert sent["body"]["temperature"] == 0.2
    assert "request_id" not in sent["body"], "our extension must not reach the vendor"


def test_anthropic_non_stream(gw, test_id):
    status, headers, body = gw.chat(
        {"model": "whatever", "max_tokens": 50, "stop": ["STOPHERE"],
         "messages": [{"role": "system", "content": "be brief"}] + USER_HI},
        # The gateway key as x-api-key this time: Anthropic's own auth header name.
        **{"x-model-group": "mock-anthropic", "x-test-id": test_id, "authorization": None,
           "x-api-key": ALL_GROUPS_KEY})
    assert status == 200, body
    assert body["object"] == "chat.completion"
    assert body["provider"] == "mock-anthropic"
    assert body["model"] == "mock-claude-sonnet"
    assert body["choices"][0]["message"]["content"].endswith("You said: hi there")
    assert body["choices"][0]["finish_reason"] == "stop"
    # System "be brief" and "hi there": 4 words in, 10 out.
    assert (body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"], body["usage"]["total_tokens"]) == \
        (4, 10, 14)
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == "/v1/messages"
    assert sent["headers"]["x-api-key"] == "sk-mock-anthropic"
    assert sent["headers"]["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent["headers"], "other vendors' auth headers are removed"
    assert "gw-test-key" not in json.dumps(sent["headers"]), "the caller's gateway key never reaches a vendor"
    assert sent["body"]["system"] == [{"type": "text", "text": "be brief"}]
    assert sent["body"]["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi there"}]}]
    assert sent["body"]["max_tokens"] == 50
    assert sent["body"]["stop_sequences"] == ["STOPHERE"]


def test_anthropic_finish_reason_length(gw, test_id):
    status, _, body = gw.chat({"model": "m", "max_tokens": 2, "messages": USER_HI},
                              **{"x-model-group": "mock-anthropic"})
    assert status == 200
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 2


# --- streams ------------------------------------------------------------------

@pytest.mark.parametrize("group", ["mock-openai", "mock-anthropic"])
@pytest.mark.parametrize("include_usage", [False, True])
def test_stream(gw, group, include_usage):
    body = {"model": "m", "messages": USER_HI, "stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    status, headers, events = stream(gw, body, {"x-model-group": group})
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert "content-length" not in headers
    assert events[-1][1] == "[DONE]"
    cs = chunks(events)
    assert len({c["id"] for c in cs}) == 1, "one id per response"
    assert all(c["object"] == "chat.completion.chunk" for c in cs)
    assert cs[0]["choices"][0]["delta"]["role"] == "assistant"
    assert content_of(events).endswith("You said: hi there")
    assert finishes(events) == ["stop"]
    usage_chunks = [c for c in cs if c.get("usage")]
    if include_usage:
        assert len(usage_chunks) == 1 and usage_chunks[0]["choices"] == []
        usage = usage_chunks[0]["usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (2, 10, 12)
    else:
        assert usage_chunks == []


def test_stream_always_asks_openai_for_usage(gw, test_id):
    stream(gw, {"model": "mock-openai", "messages": USER_HI, "stream": True}, {"x-test-id": test_id})
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("group", ["mock-openai", "mock-anthropic"])
def test_stream_split_mid_utf8_is_reassembled(gw, group):
    status, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
                               {"x-model-group": group, "x-mock-scenario": "split"})
    assert status == 200
    text = content_of(events)
    for piece in ("héllo", "wörld", "你好", "🌍"):
        assert piece in text, text
    assert events[-1][1] == "[DONE]"


def test_stream_crlf(gw):
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
                          {"x-model-group": "mock-anthropic", "x-mock-scenario": "crlf"})
    assert content_of(events).endswith("You said: hi there")


def test_stream_arrives_incrementally(gw):
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
                          {"x-model-group": "mock-anthropic", "x-mock-scenario": "slow=100"})
    times = [t for t, e in events if isinstance(e, dict) and e["choices"] and e["choices"][0]["delta"].get("content")]
    assert len(times) >= 5
    # Paced 100 ms apart upstream: a gateway that buffered would deliver them together.
    assert times[-1] - times[0] > 0.3


# Each vendor's own mid-stream error: OpenAI's server_error, Anthropic's overloaded_error.
@pytest.mark.parametrize("group,code,message", [
    ("mock-openai", "UPSTREAM_ERROR", "The server had an error"),
    ("mock-anthropic", "UPSTREAM_BUSY", "Overloaded"),
])
def test_stream_error_mid_stream(gw, group, code, message):
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
                          {"x-model-group": group, "x-mock-scenario": "stream-error"})
    assert content_of(events), "content came first: the error is mid-stream"
    last = events[-1][1]
    assert isinstance(last, dict) and "error" in last, events[-3:]
    assert (last["error"]["code"], last["error"]["message"], last["error"]["provider"]) == (code, message, group)
    assert last["error"]["type"] == "server_error"
    assert all(e != "[DONE]" for _, e in events)


# --- tools ----------------------------------------------------------------------

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def test_anthropic_tool_call_round_trip(gw, test_id):
    headers = {"x-model-group": "mock-anthropic", "x-test-id": test_id}
    messages = [{"role": "user", "content": "weather in Paris?"}]
    status, _, body = gw.chat({"model": "m", "messages": messages, "tools": [WEATHER_TOOL],
                               "tool_choice": "required"}, **headers)
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert call["id"].startswith("toolu_"), "vendor ids are kept"
    assert json.loads(call["function"]["arguments"]) == {"city": "example"}
    messages += [choice["message"], {"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21C"}]
    status, _, body = gw.chat({"model": "m", "messages": messages, "tools": [WEATHER_TOOL]}, **headers)
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == "Tool result received: sunny, 21C"
    first, second = gw.mock_requests(test_id)
    assert first["body"]["tool_choice"] == {"type": "any"}
    assert first["body"]["tools"][0]["input_schema"] == WEATHER_TOOL["function"]["parameters"]
    follow_up = second["body"]["messages"]
    assert follow_up[1]["role"] == "assistant"
    assert {"type": "tool_use", "id": call["id"], "name": "get_weather", "input": {"city": "example"}} in follow_up[1]["content"]
    assert follow_up[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call["id"], "content": "sunny, 21C"}]}


def test_anthropic_streamed_parallel_tool_calls(gw):
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True,
                                    "tools": [WEATHER_TOOL, {"type": "function", "function": {"name": "get_time"}}]},
                          {"x-model-group": "mock-anthropic", "x-mock-scenario": "two-tools"})
    calls = tool_calls_of(events)
    assert sorted(calls) == [0, 1], "tool calls are numbered 0,1 whatever the vendor block index"
    assert calls[0]["name"] == "get_weather" and json.loads(calls[0]["args"]) == {"city": "example"}
    assert calls[1]["name"] == "get_time" and json.loads(calls[1]["args"] or "{}") == {}
    assert finishes(events) == ["tool_calls"]


# --- web search (web_search_options) ------------------------------------------------
# A chat client's `web_search_options` are the vendor's own search where it
# has one (Anthropic's server tool with the user's location, Gemini's
# Google Search, Qwen's enable_search), OpenAI's field as written, and
# elsewhere left out with `x-llm-dropped-tools: web_search` on the answer.

LYON = {"type": "approximate", "approximate": {"city": "Lyon", "country": "FR", "timezone": "Europe/Paris"}}
SEARCH_OPTIONS = {"search_context_size": "low", "user_location": LYON}
NEWS = [{"role": "user", "content": "any news?"}]


def search_tools(body):
    """The tools in a vendor body that are not the client's functions."""
    return [t for t in body.get("tools", []) if t.get("type") != "function" and "functionDeclarations" not in t]


@pytest.mark.parametrize("group,found", [
    ("mock-anthropic", lambda body: search_tools(body) == [{
        "type": "web_search_20250305", "name": "web_search",
        "user_location": {"type": "approximate", "city": "Lyon", "country": "FR", "timezone": "Europe/Paris"}}]),
    ("mock-gemini", lambda body: search_tools(body) == [{"googleSearch": {}}]),
    ("mock-dashscope", lambda body: body["parameters"].get("enable_search") is True),
    ("mock-openai", lambda body: body["web_search_options"] == SEARCH_OPTIONS and "tools" not in body),
])
def test_chat_web_search_is_the_vendors_own(gw, test_id, group, found):
    status, headers, body = gw.chat({"model": "m", "messages": NEWS, "web_search_options": SEARCH_OPTIONS},
                                    **{"x-model-group": group, "x-test-id": test_id})
    assert status == 200, body
    assert body["choices"][0]["finish_reason"] == "stop"
    assert "x-llm-dropped-tools" not in headers
    [sent] = gw.mock_requests(test_id)
    assert found(sent["body"]), sent["body"]
    assert "web_search_options" not in sent["body"] or group == "mock-openai"


@pytest.mark.parametrize("stream_it", [False, True], ids=["json", "stream"])
def test_chat_web_search_without_a_vendor_search_is_dropped_and_said(gw, test_id, stream_it):
    """Bedrock runs no web search: the request goes without it, and the answer says so."""
    body = {"model": "m", "messages": NEWS, "web_search_options": {}, "stream": stream_it}
    headers = {"x-model-group": "mock-bedrock", "x-test-id": test_id}
    if stream_it:
        status, resp_headers, events = stream(gw, body, headers)
        assert finishes(events) == ["stop"]
    else:
        status, resp_headers, resp = gw.chat(body, **headers)
        assert resp["choices"][0]["finish_reason"] == "stop", resp
    assert status == 200
    assert resp_headers.get("x-llm-dropped-tools") == "web_search"
    [sent] = gw.mock_requests(test_id)
    assert "toolConfig" not in sent["body"] and "web_search_options" not in sent["body"], sent["body"]


@pytest.mark.parametrize("stream_it", [False, True], ids=["json", "stream"])
def test_chat_anthropic_pause_turn_is_length(gw, test_id, stream_it):
    """Anthropic pauses a long server-tool turn (`stop_reason: pause_turn`;
    the mock's `pause-turn`, only with its web search tool offered): a chat
    client gets the text so far and `finish_reason: length`, as
    tests/golden/client/openai_chat/anthropic/{pause_turn,stream_pause_turn}.txt."""
    body = {"model": "m", "messages": NEWS, "web_search_options": {}, "stream": stream_it}
    headers = {"x-model-group": "mock-anthropic", "x-test-id": test_id, "x-mock-scenario": "pause-turn"}
    if stream_it:
        status, _, events = stream(gw, body, headers)
        assert status == 200
        assert events[-1][1] == "[DONE]"
        assert finishes(events) == ["length"]
        assert content_of(events) == "Let me search the web."
    else:
        status, _, resp = gw.chat(body, **headers)
        assert status == 200, resp
        assert resp["choices"][0]["finish_reason"] == "length"
        assert resp["choices"][0]["message"]["content"] == "Let me search the web."
        assert "tool_calls" not in resp["choices"][0]["message"], "the paused search is not the client's to run"
    [sent] = gw.mock_requests(test_id)
    assert [t["type"] for t in search_tools(sent["body"])] == ["web_search_20250305"], "paused only with its search"


def test_chat_web_search_options_are_checked(gw, test_id):
    status, headers, resp = gw.chat(
        {"model": "m", "messages": NEWS, "web_search_options": {"user_location": {"approximate": {"street": "x"}}}},
        **{"x-model-group": "mock-anthropic", "x-test-id": test_id})
    err = assert_unified_error(status, headers, resp, 400, "INVALID_REQUEST")
    assert err["param"] == "web_search_options.user_location.approximate.street", err
    assert gw.mock_requests(test_id) == [], "no upstream is contacted"


# --- errors ---------------------------------------------------------------------

def assert_unified_error(status, headers, body, want_status, code):
    assert status == want_status, body
    assert headers["content-type"].startswith("application/json")
    err = body["error"]
    assert err["code"] == code
    assert set(err) == {"message", "type", "code", "param", "provider", "request_id"}
    assert err["request_id"] == headers["x-request-id"]
    return err


def test_anthropic_529_becomes_503_upstream_busy(gw, test_id):
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI},
                                    **{"x-model-group": "mock-anthropic", "x-mock-scenario": "error-529", "x-test-id": test_id})
    err = assert_unified_error(status, headers, body, 503, "UPSTREAM_BUSY")
    assert err["provider"] == "mock-anthropic"
    assert err["message"] == "Overloaded"
    # 529 is mapped to 503 before the router sees it, so Envoy's retry policy applies.
    assert len(gw.mock_requests(test_id)) == 3


@pytest.mark.parametrize("group", ["mock-openai", "mock-anthropic"])
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
    if scenario == "error-429":
        assert headers["retry-after"] == "7"


def test_connection_refused_is_503_json(gw):
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI}, **{"x-model-group": "dead"})
    err = assert_unified_error(status, headers, body, 503, "UPSTREAM_BUSY")
    assert "connect" in err["message"]


def test_route_timeout_is_504_json(gw):
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI},
                                    **{"x-model-group": "mock-anthropic", "x-mock-scenario": "slow=3000",
                                       "x-test-route": "short-timeout"})
    assert_unified_error(status, headers, body, 504, "UPSTREAM_TIMEOUT")


def test_retry_is_translated_per_attempt(gw, test_id):
    rid = "retry-" + str(time.time_ns())
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI},
                                    **{"x-model-group": "mock-anthropic", "x-mock-scenario": "fail-first",
                                       "x-request-id": rid, "x-test-id": test_id})
    assert status == 200, body
    assert body["choices"][0]["message"]["content"].endswith("You said: hi there")
    first, second = gw.mock_requests(test_id)
    for attempt in (first, second):
        assert attempt["path"] == "/v1/messages"
        assert attempt["headers"]["x-api-key"] == "sk-mock-anthropic"
        assert attempt["headers"]["x-request-id"] == rid
        assert attempt["body"]["model"] == "mock-claude-sonnet"
    assert first["body"] == second["body"]


def test_stream_cut_mid_event_ends_with_error(gw):
    # The vendor closes the connection mid-event: Envoy resets the client's
    # stream, so the client sees a failure, never a silent, complete-looking answer.
    with pytest.raises(http.client.IncompleteRead):
        stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
               {"x-model-group": "mock-anthropic", "x-mock-scenario": "cut"})


# --- the edge's own answers -------------------------------------------------------

@pytest.mark.parametrize("body,param", [
    ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"model": "m", "messages": []}, "messages"),
    ({"model": "m"}, "messages"),
    ({"model": "m", "messages": USER_HI, "temperature": "hot"}, "temperature"),
    ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
])
def test_bad_input_is_400_naming_the_field(gw, test_id, body, param):
    status, headers, resp = gw.chat(body, **{"x-test-id": test_id})
    err = assert_unified_error(status, headers, resp, 400, "INVALID_REQUEST")
    assert err["param"] == param, err
    assert gw.mock_requests(test_id) == [], "no upstream is contacted"


def test_invalid_json_is_400(gw, test_id):
    status, headers, body = gw.request("POST", "/v1/chat/completions", raw=b'{"model": "m", "messages": [',
                                       headers={"x-test-id": test_id})
    assert_unified_error(status, headers, json.loads(body), 400, "INVALID_REQUEST")
    assert gw.mock_requests(test_id) == []


def test_unknown_model_group_is_404(gw):
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI}, **{"x-model-group": "nope"})
    err = assert_unified_error(status, headers, body, 404, "MODEL_NOT_FOUND")
    assert err["param"] == "x-model-group"


def test_provider_host_reaches_the_vendor(gw, test_id):
    # Behind a DNS cluster too: nothing in Envoy may rewrite it after us.
    status, _, body = gw.chat({"model": "m", "messages": USER_HI},
                              **{"x-model-group": "hosted", "x-test-id": test_id, "host": "client.example"})
    assert status == 200, body
    [sent] = gw.mock_requests(test_id)
    assert sent["headers"]["host"] == "api.example.test"


def test_client_cannot_steer_the_cluster(gw, test_id):
    status, headers, body = gw.chat({"model": "mock-openai", "messages": USER_HI},
                                    **{"x-llm-cluster": "mock_anthropic", "x-test-id": test_id})
    assert status == 200
    assert headers["x-llm-provider"] == "mock-openai"
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == "/v1/chat/completions"


def test_declared_body_over_limit_is_413_before_buffering(gw, test_id):
    # Only the headers and a few bytes are sent: the answer must come from the
    # declared content-length alone.
    import socket
    host, port = gw.base.split("//", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                   f"authorization: Bearer {ALL_GROUPS_KEY}\r\nx-test-id: {test_id}\r\n"
                   f"content-length: {MAX_BODY_BYTES + 1}\r\n\r\n{{\"model\"").encode())
        response = b""
        while b"\r\n\r\n" not in response or not response.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            response += chunk
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert b'"code":"PAYLOAD_TOO_LARGE"' in body
    assert gw.mock_requests(test_id) == []


def test_payload_over_envoy_buffer_limit_is_413_json(gw):
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * (9 * 1024 * 1024)}]}
    status, headers, body = gw.request("POST", "/v1/chat/completions", big)
    assert_unified_error(status, headers, json.loads(body), 413, "PAYLOAD_TOO_LARGE")


def test_models_list(gw):
    status, _, body = gw.request("GET", "/v1/models")
    assert status == 200
    data = json.loads(body)
    assert data["object"] == "list"
    assert {"mock-openai", "mock-anthropic"} <= {m["id"] for m in data["data"]}
