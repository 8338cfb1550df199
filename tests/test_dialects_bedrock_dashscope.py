"""AWS Bedrock Converse and Alibaba DashScope through a real Envoy: what the
client gets, what the mock received, content filters, vendor errors, and the
SigV4 proof (the mock recomputes every Bedrock signature)."""

import http.client
import json
import os
import urllib.error
import urllib.request

import openai
import pytest

import gateway
from conftest import Gateway, configure_test_gateway
from sse_client import chunks, content_of, finishes, stream, tool_calls_of
from test_gateway import USER_HI, WEATHER_TOOL, assert_unified_error

BEDROCK, DASHSCOPE = "mock-bedrock", "mock-dashscope"
BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
BEDROCK_PATH = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
DASHSCOPE_PATH = "/api/v1/services/aigc/text-generation/generation"
TIME_TOOL = {"type": "function", "function": {"name": "get_time"}}






# --- non-stream ----------------------------------------------------------------

def test_bedrock_non_stream(gw, test_id):
    status, headers, body = gw.chat(
        {"model": "any", "max_tokens": 50, "stop": ["STOPHERE"], "temperature": 0.3, "top_k": 5,
         "messages": [{"role": "system", "content": "be brief"}] + USER_HI},
        **{"x-model-group": BEDROCK, "x-test-id": test_id})
    assert status == 200, body
    assert body["provider"] == BEDROCK and body["model"] == BEDROCK_MODEL
    assert body["choices"][0]["message"]["content"] == "Hello from the mock bedrock provider. You said: hi there"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 4, "completion_tokens": 10, "total_tokens": 14}
    assert headers["x-llm-model"] == BEDROCK_MODEL
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == BEDROCK_PATH
    assert sent["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDMOCKBEDROCK/")
    assert sent["body"] == {
        "messages": [{"role": "user", "content": [{"text": "hi there"}]}],
        "system": [{"text": "be brief"}],
        "inferenceConfig": {"maxTokens": 50, "temperature": 0.3, "stopSequences": ["STOPHERE"]},
        # Claude's top_k, which Converse has no field for.
        "additionalModelRequestFields": {"top_k": 5},
        # Claude says which stop sequence matched when asked.
        "additionalModelResponseFieldPaths": ["/stop_sequence"],
    }


def test_dashscope_non_stream(gw, test_id):
    status, headers, body = gw.chat(
        {"model": "any", "max_tokens": 2, "seed": 7, "response_format": {"type": "json_object"},
         "top_k": 20, "presence_penalty": 0.5,
         "messages": [{"role": "system", "content": "be brief"}] + USER_HI},
        **{"x-model-group": DASHSCOPE, "x-test-id": test_id, "x-api-key": "client-key"})
    assert status == 200, body
    assert body["provider"] == DASHSCOPE and body["model"] == "qwen-plus"
    assert body["id"].startswith("mock-ds-"), "the vendor's request_id is the response id"
    # json_object: the mock answers JSON, cut after 2 words like a real model at max_tokens.
    assert body["choices"][0]["message"]["content"] == '{"answer":"Hello from'
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 2
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == DASHSCOPE_PATH
    assert sent["headers"]["authorization"] == "Bearer sk-mock-dashscope"
    assert "x-api-key" not in sent["headers"]
    assert sent["body"] == {
        "model": "qwen-plus",
        "input": {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]},
        "parameters": {"result_format": "message", "top_k": 20, "max_tokens": 2, "seed": 7,
                       "presence_penalty": 0.5, "response_format": {"type": "json_object"}},
    }


def test_images(gw, test_id):
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "what is it?"}, image]}]
    # DashScope takes images on its multimodal endpoint with vision models only:
    # the client asks for one (envoy/gateway.yaml maps qwen-vl-plus).
    for group, model in ((BEDROCK, "m"), (DASHSCOPE, "qwen-vl-plus")):
        status, _, body = gw.chat({"model": model, "messages": messages},
                                  **{"x-model-group": group, "x-test-id": test_id})
        assert status == 200, body
    # A text model with an image is refused before DashScope is called.
    status, _, body = gw.chat({"model": "m", "messages": messages}, **{"x-model-group": DASHSCOPE, "x-test-id": test_id})
    assert (status, body["error"]["param"]) == (400, "messages"), body
    bedrock, dashscope = gw.mock_requests(test_id)
    assert bedrock["body"]["messages"][0]["content"][1] == {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}}
    assert dashscope["path"] == "/api/v1/services/aigc/multimodal-generation/generation"
    assert dashscope["body"]["input"]["messages"][0]["content"] == [
        {"text": "what is it?"}, {"image": "data:image/png;base64,iVBORw0KGgo="}]


# --- streams -------------------------------------------------------------------

@pytest.mark.parametrize("group", [BEDROCK, DASHSCOPE])
@pytest.mark.parametrize("include_usage", [False, True])
def test_stream(gw, test_id, group, include_usage):
    body = {"model": "m", "messages": USER_HI, "stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    status, headers, events = stream(gw, body, {"x-model-group": group, "x-test-id": test_id})
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert events[-1][1] == "[DONE]"
    cs = chunks(events)
    assert len({c["id"] for c in cs}) == 1
    assert cs[0]["choices"][0]["delta"]["role"] == "assistant"
    assert content_of(events).endswith("You said: hi there")
    assert finishes(events) == ["stop"]
    usage = [c for c in cs if c.get("usage")]
    assert (len(usage) == 1 and usage[0]["usage"]["completion_tokens"] == 10) if include_usage else usage == []
    [sent] = gw.mock_requests(test_id)
    if group == BEDROCK:
        assert sent["path"] == BEDROCK_PATH + "-stream"
    else:
        assert sent["headers"]["x-dashscope-sse"] == "enable"
        assert sent["body"]["parameters"]["incremental_output"] is True


@pytest.mark.parametrize("group", [BEDROCK, DASHSCOPE])
def test_stream_split_into_tiny_chunks(gw, group):
    # Bedrock's binary frames and DashScope's events arrive 3-7 bytes at a time.
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
                          {"x-model-group": group, "x-mock-scenario": "split"})
    text = content_of(events)
    for piece in ("héllo", "wörld", "你好", "🌍", "You said: hi there"):
        assert piece in text, text
    assert events[-1][1] == "[DONE]"


@pytest.mark.parametrize("group", [BEDROCK, DASHSCOPE])
def test_stream_arrives_incrementally(gw, group):
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
                          {"x-model-group": group, "x-mock-scenario": "slow=100"})
    times = [t for t, e in events if isinstance(e, dict) and e["choices"] and e["choices"][0]["delta"].get("content")]
    assert len(times) >= 5
    # Paced 100 ms apart upstream: a gateway that buffered would deliver them together.
    assert times[-1] - times[0] > 0.3


@pytest.mark.parametrize("group", [BEDROCK, DASHSCOPE])
def test_stream_cut_mid_event_fails_the_client_stream(gw, group):
    with pytest.raises(http.client.IncompleteRead):
        stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
               {"x-model-group": group, "x-mock-scenario": "cut"})


@pytest.mark.parametrize("group,code", [(BEDROCK, "UPSTREAM_BUSY"), (DASHSCOPE, "UPSTREAM_ERROR")])
def test_exception_mid_stream(gw, group, code):
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
                          {"x-model-group": group, "x-mock-scenario": "stream-error"})
    assert content_of(events), "some content came first"
    last = events[-1][1]
    assert last["error"]["code"] == code
    assert all(e != "[DONE]" for _, e in events)


@pytest.mark.parametrize("group,status,code", [(BEDROCK, 503, "UPSTREAM_BUSY"), (DASHSCOPE, 502, "UPSTREAM_ERROR")])
def test_exception_as_first_event_is_an_http_error(gw, group, status, code):
    # First-event gating holds the headers: an error before any content
    # (Bedrock's exception frame, DashScope's event:error) becomes the status.
    s, headers, body = gw.chat({"model": "m", "messages": USER_HI, "stream": True},
                               **{"x-model-group": group, "x-mock-scenario": "stream-error-first"})
    err = assert_unified_error(s, headers, body, status, code)
    assert err["provider"] == group


# --- tools -----------------------------------------------------------------------

@pytest.mark.parametrize("group", [BEDROCK, DASHSCOPE])
def test_tool_call_round_trip(gw, test_id, group):
    headers = {"x-model-group": group, "x-test-id": test_id}
    messages = [{"role": "user", "content": "weather in Paris?"}]
    status, _, body = gw.chat({"model": "m", "messages": messages, "tools": [WEATHER_TOOL],
                               "tool_choice": "required"}, **headers)
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "example"}
    messages += [choice["message"], {"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21C"}]
    status, _, body = gw.chat({"model": "m", "messages": messages, "tools": [WEATHER_TOOL]}, **headers)
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == "Tool result received: sunny, 21C"
    first, second = gw.mock_requests(test_id)
    if group == BEDROCK:
        assert call["id"] == "tooluse_1"
        assert first["body"]["toolConfig"]["toolChoice"] == {"any": {}}
        assert first["body"]["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {"json": WEATHER_TOOL["function"]["parameters"]}
        assert second["body"]["messages"][1:] == [
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "example"}}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "sunny, 21C"}]}}]},
        ]
    else:
        assert call["id"] == "call_1"
        assert first["body"]["parameters"]["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
        assert second["body"]["input"]["messages"][2] == {"role": "tool", "content": "sunny, 21C", "tool_call_id": "call_1"}


@pytest.mark.parametrize("group", [BEDROCK, DASHSCOPE])
def test_streamed_parallel_tool_calls(gw, group):
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True,
                                    "tools": [WEATHER_TOOL, TIME_TOOL]},
                          {"x-model-group": group, "x-mock-scenario": "two-tools"})
    calls = tool_calls_of(events)
    assert sorted(calls) == [0, 1], "tool calls are numbered 0,1 whatever the vendor's indexes"
    assert calls[0]["name"] == "get_weather" and json.loads(calls[0]["args"]) == {"city": "example"}
    assert calls[1]["name"] == "get_time" and json.loads(calls[1]["args"] or "{}") == {}
    assert calls[0]["id"] != calls[1]["id"]
    assert finishes(events) == ["tool_calls"]


@pytest.mark.parametrize("group", [BEDROCK, DASHSCOPE])
def test_openai_sdk_streamed_tool_call(gw, group):
    client = openai.OpenAI(base_url=gw.base + "/v1", api_key=gw.key, max_retries=0,
                           default_headers={"x-model-group": group})
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]
    args, name, usage = "", None, None
    for chunk in client.chat.completions.create(model="any", messages=[{"role": "user", "content": "x"}],
                                                tools=tools, tool_choice="required", stream=True,
                                                stream_options={"include_usage": True}):
        for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            assert tc.index == 0
            name = tc.function.name or name
            args += tc.function.arguments or ""
        usage = chunk.usage or usage
    assert name == "lookup" and json.loads(args) == {"q": "example"}
    assert usage.completion_tokens > 0


# --- errors and content filters ----------------------------------------------------

@pytest.mark.parametrize("group", [BEDROCK, DASHSCOPE])
@pytest.mark.parametrize("scenario,status,code", [
    ("error-400", 400, "INVALID_REQUEST"),
    ("error-400-context", 400, "CONTEXT_LENGTH_EXCEEDED"),
    ("error-401", 401, "AUTH_FAILED"),
    ("error-403", 403, "PERMISSION_DENIED"),
    ("error-404", 404, "MODEL_NOT_FOUND"),
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


@pytest.mark.parametrize("group", [BEDROCK, DASHSCOPE])
def test_blocked_prompt_is_400_content_filtered(gw, group):
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI},
                                    **{"x-model-group": group, "x-mock-scenario": "blocked-prompt"})
    err = assert_unified_error(status, headers, body, 400, "CONTENT_FILTERED")
    assert err["provider"] == group


def test_bedrock_filtered_answer(gw):
    status, _, body = gw.chat({"model": "m", "messages": USER_HI},
                              **{"x-model-group": BEDROCK, "x-mock-scenario": "filtered-answer"})
    assert status == 200, body
    assert body["choices"][0]["finish_reason"] == "content_filter"
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
                          {"x-model-group": BEDROCK, "x-mock-scenario": "filtered-stream"})
    assert finishes(events) == ["content_filter"]
    assert events[-1][1] == "[DONE]"


def test_dashscope_filtered_answer(gw):
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI},
                                    **{"x-model-group": DASHSCOPE, "x-mock-scenario": "filtered-answer"})
    assert_unified_error(status, headers, body, 400, "CONTENT_FILTERED")
    # A stream whose first event is the inspection failure: a proper 400.
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI, "stream": True},
                                    **{"x-model-group": DASHSCOPE, "x-mock-scenario": "filtered-answer"})
    assert_unified_error(status, headers, body, 400, "CONTENT_FILTERED")
    # Discovered after the stream started: the answer ends as every dialect's
    # filtered stream does, finish_reason content_filter, then [DONE].
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True},
                          {"x-model-group": DASHSCOPE, "x-mock-scenario": "filtered-stream"})
    assert content_of(events)
    assert finishes(events) == ["content_filter"]
    assert events[-1][1] == "[DONE]"
    assert not [e for e in chunks(events) if "error" in e]


# --- SigV4: Envoy's aws_request_signing after our filter ------------------------------

def test_bedrock_retry_is_signed_again(gw, test_id):
    status, _, body = gw.chat({"model": "m", "messages": USER_HI},
                              **{"x-model-group": BEDROCK, "x-mock-scenario": "fail-first",
                                 "x-request-id": "sig-" + test_id, "x-test-id": test_id})
    assert status == 200, body
    first, second = gw.mock_requests(test_id)
    for attempt in (first, second):
        assert attempt["headers"]["authorization"].count("AWS4-HMAC-SHA256") == 1
        signed = attempt["headers"]["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
        assert {"host", "x-amz-content-sha256", "x-amz-date"} <= set(signed)
        # Signed with the payload's hash (not UNSIGNED-PAYLOAD); the mock
        # accepted it only because it is the hash of the translated body it received.
        assert len(attempt["headers"]["x-amz-content-sha256"]) == 64
        assert attempt["body"]["messages"] == [{"role": "user", "content": [{"text": "hi there"}]}]


def test_mock_refuses_a_bad_signature(gw):
    """The mock's check is real: a request signed with the wrong secret is refused."""
    req = urllib.request.Request(
        gw.mock + BEDROCK_PATH, method="POST", data=b'{"messages":[]}',
        headers={"content-type": "application/json", "x-amz-date": "20260101T000000Z",
                 "authorization": "AWS4-HMAC-SHA256 Credential=AKIDMOCKBEDROCK/20260101/us-east-1/bedrock/aws4_request, "
                                  "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 403
    assert e.value.headers["x-amzn-errortype"].startswith("InvalidSignatureException")


def use_default_credential_chain(bootstrap):
    """Drop the inline dummy credentials: Envoy then reads AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY."""
    for cluster in bootstrap["static_resources"]["clusters"]:
        options = cluster.get("typed_extension_protocol_options", {})
        for proto in options.values():
            for f in proto.get("http_filters", []):
                if f["name"] == "envoy.filters.http.aws_request_signing":
                    f["typed_config"].pop("credential_provider")


@pytest.fixture(scope="module")
def envoy_with_env_credentials(gw, tmp_path_factory):
    """Starts Envoys against the session's mock with AWS credentials from the environment."""
    started = []

    def start(secret):
        workdir = tmp_path_factory.mktemp("envoy-aws")
        mock_port = int(gw.mock.rsplit(":", 1)[1])
        bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={},
                                            edit=configure_test_gateway,
                                            edit_bootstrap=use_default_credential_chain)
        access_key, _ = gateway.MOCK_AWS_CREDENTIALS.split(":")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=access_key, AWS_SECRET_ACCESS_KEY=secret)
        env.pop("AWS_SESSION_TOKEN", None)
        envoy = gateway.start_envoy(bootstrap, workdir, env=env)
        started.append(envoy)
        return Gateway(envoy.port, envoy.admin_port, mock_port, workdir)

    yield start
    for proc in started:
        gateway.stop(proc)


def test_sigv4_with_credentials_from_envoys_environment(envoy_with_env_credentials):
    _, secret = gateway.MOCK_AWS_CREDENTIALS.split(":")
    good = envoy_with_env_credentials(secret)
    status, _, body = good.chat({"model": "m", "messages": USER_HI}, **{"x-model-group": BEDROCK})
    assert status == 200, body
    _, _, events = stream(good, {"model": "m", "messages": USER_HI, "stream": True}, {"x-model-group": BEDROCK})
    assert events[-1][1] == "[DONE]"
    wrong = envoy_with_env_credentials("not-the-secret")
    status, headers, body = wrong.chat({"model": "m", "messages": USER_HI}, **{"x-model-group": BEDROCK})
    err = assert_unified_error(status, headers, body, 401, "AUTH_FAILED")
    assert "signature" in err["message"]
