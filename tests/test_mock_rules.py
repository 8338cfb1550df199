"""The mock as the vendor: each documented rule refused when sent directly
to the mock (so the rule can fail), and the gateway's translation passing
it (so a wrong translation would fail). Also SigV4 configs that AWS would
refuse, compressed bodies, Anthropic's overload after message_start, cached
and reasoning usage, and structured output in every dialect."""

import gzip
import json
import urllib.error
import urllib.request

import pytest

import gateway
from conftest import Gateway, configure_test_gateway

ANTHROPIC_H = {"x-api-key": "sk-mock-anthropic", "anthropic-version": "2023-06-01"}
OPENAI_H = {"authorization": "Bearer sk-mock-openai"}
GEMINI_H = {"x-goog-api-key": "mock-gemini-key"}
AZURE_H = {"api-key": "mock-azure-key"}
DASHSCOPE_H = {"authorization": "Bearer sk-mock-dashscope"}
GEMINI_PATH = "/v1beta/models/mock-gemini-flash:generateContent"
DS_TEXT = "/api/v1/services/aigc/text-generation/generation"
DS_MM = "/api/v1/services/aigc/multimodal-generation/generation"
USER = [{"role": "user", "content": "hi"}]


def direct(gw, path, body, headers, raw=False):
    """POST straight to the mock: (status, headers, parsed body or bytes)."""
    hdrs = {"content-type": "application/json", **headers}
    req = urllib.request.Request(gw.mock + path, data=json.dumps(body).encode(), method="POST", headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, h, data = r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        status, h, data = e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
    return status, h, data if raw else json.loads(data)


def openai_error(gw, body, headers=OPENAI_H, path="/v1/chat/completions"):
    status, _, data = direct(gw, path, body, headers)
    assert status == 400, data
    return data["error"]


# --- OpenAI (and Azure, which applies the same rules) -------------------------

@pytest.mark.parametrize("body, message, param", [
    ({"model": "gpt-4o", "messages": USER, "request_id": "r"},
     "Unrecognized request argument supplied: request_id", None),
    ({"model": "gpt-4o", "messages": USER, "stream_options": {"include_usage": True}},
     "The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options"),
    ({"model": "gpt-4o", "messages": [*USER, {"role": "tool", "tool_call_id": "call_9", "content": "x"}]},
     "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
     "messages.[1].role"),
    ({"model": "o3", "messages": USER, "max_tokens": 5},
     "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
     "max_tokens"),
    ({"model": "gpt-5-mini", "messages": USER, "temperature": 0.2},
     "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.",
     "temperature"),
    ({"model": "o4-mini", "messages": USER, "top_p": 0.5},
     "Unsupported value: 'top_p' does not support 0.5 with this model. Only the default (1) value is supported.",
     "top_p"),
    ({"model": "gpt-4o", "messages": USER, "metadata": {"task_type": "chat"}},
     "'metadata' is only allowed when 'store' is enabled.", "metadata"),
])
def test_openai_rules_refuse(gw, body, message, param):
    for path, headers in [("/v1/chat/completions", OPENAI_H),
                          ("/openai/deployments/d/chat/completions?api-version=2024-10-21", AZURE_H),
                          ("/openai/v1/chat/completions", AZURE_H)]:
        err = openai_error(gw, body, headers, path)
        assert (err["message"], err["param"], err["type"]) == (message, param, "invalid_request_error"), path


def test_openai_rules_accept_what_the_reference_allows(gw):
    ok = [{"model": "o3", "messages": USER, "max_completion_tokens": 5, "temperature": 1},
          {"model": "gpt-4o", "messages": USER, "metadata": {"a": "b"}, "store": True},
          {"model": "gpt-4o", "messages": USER, "stream": True, "stream_options": {"include_usage": True}},
          {"model": "gpt-4o", "messages": [*USER, {"role": "assistant", "content": None, "tool_calls": [
              {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": "x"}]}]
    for body in ok:
        status, _, data = direct(gw, "/v1/chat/completions", body, OPENAI_H, raw=True)
        assert status == 200, data


def test_credentials_must_be_exactly_the_configured_key(gw):
    status, _, data = direct(gw, "/v1/chat/completions", {"model": "m", "messages": USER},
                             {"authorization": "Bearer sk-wrong-key-123"})
    assert status == 401 and data["error"]["code"] == "invalid_api_key"
    assert data["error"]["message"].startswith("Incorrect API key provided: sk-*")
    status, _, data = direct(gw, "/v1/messages", {"model": "m", "max_tokens": 5, "messages": USER},
                             {**ANTHROPIC_H, "x-api-key": "sk-wrong"})
    assert (status, data["error"]["type"]) == (401, "authentication_error")
    status, _, data = direct(gw, GEMINI_PATH, {"contents": [{"parts": [{"text": "hi"}]}]},
                             {"x-goog-api-key": "wrong"})
    assert (status, data["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert data["error"]["details"][0]["reason"] == "API_KEY_INVALID"
    status, _, data = direct(gw, "/openai/v1/chat/completions", {"model": "d", "messages": USER}, {"api-key": "wrong"})
    assert (status, data["error"]["code"]) == (401, "401")
    status, _, data = direct(gw, DS_TEXT, {"model": "qwen-plus", "input": {"messages": USER},
                                           "parameters": {"result_format": "message"}},
                             {"authorization": "Bearer wrong"})
    assert (status, data["code"]) == (401, "InvalidApiKey")


def test_another_vendors_auth_header(gw):
    """Google and Azure read Authorization as an OAuth / Entra token and
    refuse it next to a valid key; OpenAI, Anthropic, DashScope ignore
    headers they do not use."""
    status, _, data = direct(gw, GEMINI_PATH, {"contents": [{"parts": [{"text": "hi"}]}]},
                             {**GEMINI_H, "authorization": "Bearer sk-mock-openai"})
    assert (status, data["error"]["status"]) == (401, "UNAUTHENTICATED")
    status, _, _ = direct(gw, "/openai/v1/chat/completions", {"model": "d", "messages": USER},
                          {**AZURE_H, "authorization": "Bearer sk-mock-openai"})
    assert status == 401
    status, _, _ = direct(gw, "/v1/chat/completions", {"model": "m", "messages": USER},
                          {**OPENAI_H, "x-api-key": "sk-mock-anthropic"}, raw=True)
    assert status == 200


def test_azure_v1_needs_no_api_version_and_classic_does(gw):
    status, _, data = direct(gw, "/openai/v1/chat/completions", {"model": "d", "messages": USER}, AZURE_H)
    # Azure's answer names the deployment's model, not the deployment.
    assert status == 200 and data["model"] == "gpt-4o-2024-08-06"
    err = openai_error(gw, {"messages": USER}, AZURE_H, "/openai/v1/chat/completions")
    assert err["message"] == "you must provide a model parameter"
    status, _, data = direct(gw, "/openai/deployments/d/chat/completions", {"model": "d", "messages": USER}, AZURE_H)
    assert status == 400 and "api-version" in data["error"]["message"]


def test_scenario_errors_answer_only_valid_requests(gw):
    """The rules come before x-mock-scenario: a vendor-error test proves the request was valid."""
    bad = {"model": "gpt-4o", "messages": USER, "request_id": "r"}
    status, _, _ = direct(gw, "/v1/chat/completions", bad, {**OPENAI_H, "x-mock-scenario": "error-429"})
    assert status == 400
    status, _, _ = direct(gw, "/v1/chat/completions", {"model": "gpt-4o", "messages": USER},
                          {**OPENAI_H, "x-mock-scenario": "error-429"})
    assert status == 429


# --- Anthropic ----------------------------------------------------------------

def anthropic_error(gw, **extra):
    body = {"model": "mock-claude-sonnet", "max_tokens": 10, "messages": USER, **extra}
    status, _, data = direct(gw, "/v1/messages", body, ANTHROPIC_H)
    assert status == 400 and data["error"]["type"] == "invalid_request_error", data
    return data["error"]["message"]


def test_anthropic_rules_refuse(gw):
    assert anthropic_error(gw, temperature=0.5, top_p=0.9) == \
        "`temperature` and `top_p` cannot both be specified for this model. Please use only one."
    assert anthropic_error(gw, temperature=1.5) == "temperature: Input should be less than or equal to 1"
    assert anthropic_error(gw, messages=[{"role": "user", "content": [{"type": "text", "text": "hi", "x": 1}]}]) == \
        "messages.0.content.0.text.x: Extra inputs are not permitted"
    assert anthropic_error(gw, messages=[{"role": "user", "content": [{"type": "text", "text": ""}]}]) == \
        "messages: text content blocks must be non-empty"
    # A custom tool takes the SDK's ToolParam keys (`strict` among them), no others.
    assert anthropic_error(gw, tools=[{"name": "f", "input_schema": {"type": "object"}, "parameters": {}}]) == \
        "tools.0.custom.parameters: Extra inputs are not permitted"
    history = [*USER, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]}]
    assert anthropic_error(gw, messages=history) == \
        "Requests which include `tool_use` or `tool_result` blocks must define tools."
    # Claude 3 models still take both.
    status, _, _ = direct(gw, "/v1/messages", {"model": "claude-3-haiku-20240307", "max_tokens": 5, "messages": USER,
                                               "temperature": 0.5, "top_p": 0.9}, ANTHROPIC_H)
    assert status == 200


@pytest.mark.parametrize("group", ["mock-anthropic", "mock-bedrock"])
def test_claude_through_the_gateway_keeps_temperature_drops_top_p(gw, test_id, group):
    status, _, body = gw.chat({"model": "m", "messages": USER, "temperature": 0.5, "top_p": 0.9},
                              **{"x-model-group": group, "x-test-id": test_id})
    assert status == 200, body
    (sent,) = gw.mock_requests(test_id)
    sampling = sent["body"].get("inferenceConfig", sent["body"])
    assert sampling["temperature"] == 0.5
    assert "top_p" not in sampling and "topP" not in sampling


TOOL_HISTORY = [{"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
                {"role": "user", "content": "thanks"}]


@pytest.mark.parametrize("group", ["mock-anthropic", "mock-bedrock"])
def test_tool_history_without_tools_passes_the_vendor(gw, test_id, group):
    status, _, body = gw.chat({"model": "m", "messages": TOOL_HISTORY}, **{"x-model-group": group, "x-test-id": test_id})
    assert status == 200, body
    assert body["choices"][0]["finish_reason"] == "stop"
    (sent,) = gw.mock_requests(test_id)
    if group == "mock-bedrock":
        assert sent["body"]["toolConfig"] == {"tools": [
            {"toolSpec": {"name": "get_weather", "inputSchema": {"json": {"type": "object"}}}}]}
    else:
        assert [t["name"] for t in sent["body"]["tools"]] == ["get_weather"]
        assert sent["body"]["tool_choice"] == {"type": "none"}


# --- Bedrock ------------------------------------------------------------------

def test_bedrock_gets_only_what_inference_config_takes(gw, test_id):
    # OpenAI takes seed and temperature up to 2; Bedrock's inferenceConfig
    # refuses seed and a temperature above 1 (the mock enforces both).
    status, _, body = gw.chat({"model": "m", "messages": USER, "seed": 7, "temperature": 1.7, "top_p": 0.5,
                               "max_tokens": 20, "stop": ["X"]},
                              **{"x-model-group": "mock-bedrock", "x-test-id": test_id})
    assert status == 200, body
    (sent,) = gw.mock_requests(test_id)
    assert sent["body"]["inferenceConfig"] == {"maxTokens": 20, "temperature": 1.0, "stopSequences": ["X"]}


def test_bedrock_rules_refuse(gw):
    """Direct to the mock, unsigned requests are refused first; the rules
    are checked through the gateway's own signing instead, with bodies
    the gateway never produces, so these go to the mock's validation via
    the unit-tested parser. Here: the auth error's Coral shape."""
    status, h, data = direct(gw, "/model/m/converse", {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}, {})
    assert status == 403
    assert data == {"__type": "com.amazon.coral.service#MissingAuthenticationTokenException",
                    "message": "Missing Authentication Token"}
    assert h["x-amzn-errortype"].startswith("MissingAuthenticationTokenException")


@pytest.mark.parametrize("edit, message", [
    ({"service_name": "bedrock-runtime"}, "Credential should be scoped to correct service: 'bedrock'."),
    ({"region": "us-west-2"}, "Credential should be scoped to a valid region, not 'us-west-2'."),
    ({"use_unsigned_payload": True}, "UNSIGNED-PAYLOAD"),
])
def test_sigv4_misconfigurations_are_refused(sigv4_gw, edit, message):
    gw, mock_log = sigv4_gw
    group = "bedrock-" + next(iter(edit)).replace("_", "-")
    status, _, body = gw.chat({"model": "m", "messages": USER}, **{"x-model-group": group})
    assert (status, body["error"]["code"]) == (401, "AUTH_FAILED"), body
    assert message in body["error"]["message"]


@pytest.fixture(scope="module")
def sigv4_gw(tmp_path_factory):
    """One Envoy from envoy/gateway.yaml with three more Bedrock clusters,
    each with one signing-filter setting AWS refuses."""
    workdir = tmp_path_factory.mktemp("sigv4")
    mock, mock_port = gateway.start_mock()
    edits = {"bedrock-service-name": {"service_name": "bedrock-runtime"},
             "bedrock-region": {"region": "us-west-2"},
             "bedrock-use-unsigned-payload": {"use_unsigned_payload": True}}

    def signer(node):
        if isinstance(node, dict):
            if "service_name" in node:
                return node
            return next((s for v in node.values() if (s := signer(v))), None)
        if isinstance(node, list):
            return next((s for v in node if (s := signer(v))), None)
        return None

    def edit_bootstrap(bootstrap):
        clusters = bootstrap["static_resources"]["clusters"]
        (template,) = [c for c in clusters if c["name"] == "mock_bedrock"]
        for group, change in edits.items():
            c = json.loads(json.dumps(template))
            c["name"] = c["load_assignment"]["cluster_name"] = group
            signer(c).update(change)
            clusters.append(c)

    bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={},
                                        extra_groups={g: {"cluster": g} for g in edits},
                                        edit=configure_test_gateway, edit_bootstrap=edit_bootstrap)
    envoy = None
    try:
        envoy = gateway.start_envoy(bootstrap, workdir)
        yield Gateway(envoy.port, envoy.admin_port, mock_port, workdir), workdir
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


# --- Gemini -------------------------------------------------------------------

@pytest.mark.parametrize("body, needle", [
    ({"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"temperature": "hot"}},
     "Invalid value at 'generation_config.temperature' (TYPE_FLOAT), \"hot\""),
    ({"contents": [{"parts": [{"text": ""}]}]},
     "contents[0].parts[0].data: required oneof field 'data' must have one initialized field"),
    ({"contents": [{"role": "model", "parts": [{"text": "hello"}]}, {"role": "user", "parts": [{"text": "hi"}]}]},
     "First content should be with role 'user', got model."),
    ({"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"responseJsonSchema": {"type": "object"}}},
     "response_json_schema is only supported with response_mime_type application/json"),
    ({"contents": [{"parts": [{"text": "hi"}]}],
      "generationConfig": {"responseSchema": {"type": "OBJECT"}, "responseMimeType": "text/plain"}},
     "response_schema is only supported with response_mime_type application/json"),
])
def test_gemini_rules_refuse(gw, body, needle):
    status, _, data = direct(gw, GEMINI_PATH, body, GEMINI_H)
    assert (status, data["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert needle in data["error"]["message"]


# --- DashScope ----------------------------------------------------------------

def test_dashscope_rules_refuse(gw):
    base = {"model": "qwen-plus", "input": {"messages": USER}, "parameters": {"result_format": "message"}}
    status, _, data = direct(gw, DS_TEXT, {**base, "parameters": {"result_format": "message", "max_completion_tokens": 5}},
                             DASHSCOPE_H)
    assert (status, data["code"]) == (400, "InvalidParameter")
    assert data["message"] == "parameters.max_completion_tokens: parameter max_completion_tokens is not supported."
    status, _, data = direct(gw, DS_TEXT, {**base, "stream": True}, DASHSCOPE_H)
    assert (status, data["message"]) == (400, "Parameter stream is not supported.")
    mm = {**base, "input": {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}}
    status, _, data = direct(gw, DS_MM, mm, DASHSCOPE_H)
    assert (status, data["code"]) == (400, "InvalidParameter")
    assert "`qwen-plus` is not supported by the multimodal-generation API" in data["message"]
    status, _, _ = direct(gw, DS_MM, {**mm, "model": "qwen-vl-plus"}, DASHSCOPE_H)
    assert status == 200


# --- Variations: compression, overload after start, usage, structured output ---

def test_mock_compresses_when_asked_and_gateway_never_sees_it(gw, test_id):
    status, h, data = direct(gw, "/v1/chat/completions", {"model": "m", "messages": USER},
                             {**OPENAI_H, "accept-encoding": "gzip"}, raw=True)
    assert status == 200 and h["content-encoding"] == "gzip"
    assert json.loads(gzip.decompress(data))["object"] == "chat.completion"
    status, h, data = gw.request("POST", "/v1/chat/completions", {"model": "m", "messages": USER},
                                 {"accept-encoding": "gzip", "x-model-group": "mock-anthropic", "x-test-id": test_id})
    assert status == 200 and "content-encoding" not in h
    assert json.loads(data)["object"] == "chat.completion"
    (sent,) = gw.mock_requests(test_id)
    assert "accept-encoding" not in {k.lower() for k in sent["headers"]}


def test_mock_compresses_streams(gw):
    body = {"model": "m", "messages": USER, "stream": True}
    status, h, data = direct(gw, "/v1/chat/completions", body, {**OPENAI_H, "accept-encoding": "gzip"}, raw=True)
    assert status == 200 and h["content-encoding"] == "gzip"
    assert gzip.decompress(data).decode().endswith("data: [DONE]\n\n")


def test_anthropic_overload_after_message_start_and_ping(gw):
    req = urllib.request.Request(gw.mock + "/v1/messages", method="POST", data=json.dumps(
        {"model": "m", "max_tokens": 50, "messages": USER, "stream": True}).encode(),
        headers={**ANTHROPIC_H, "content-type": "application/json", "x-mock-scenario": "stream-error-after-start"})
    with urllib.request.urlopen(req, timeout=10) as r:
        events = [line.split(": ", 1)[1] for line in r.read().decode().splitlines() if line.startswith("event: ")]
    assert events == ["message_start", "content_block_start", "ping", "error"]


def test_anthropic_overload_after_start_through_the_gateway(gw, test_id):
    # message_start, content_block_start, ping, then overloaded_error: no content
    # yet, so first-event gating answers with the error's status (503), which
    # Envoy retries (three attempts), instead of a broken 200 stream.
    status, headers, body = gw.chat({"model": "m", "messages": USER, "stream": True},
                                    **{"x-model-group": "mock-anthropic", "x-test-id": test_id,
                                       "x-mock-scenario": "stream-error-after-start"})
    assert status == 503, body
    assert headers["content-type"].startswith("application/json")
    assert (body["error"]["code"], body["error"]["provider"]) == ("UPSTREAM_BUSY", "mock-anthropic")
    assert len(gw.mock_requests(test_id)) == 3


@pytest.mark.parametrize("group", ["mock-openai", "mock-azure", "mock-anthropic", "mock-gemini", "mock-bedrock",
                                   "mock-dashscope"])
def test_cached_and_reasoning_usage_reach_the_client(gw, group):
    status, _, body = gw.chat({"model": "m", "messages": [{"role": "user", "content": "one two three four"}]},
                              **{"x-model-group": group, "x-mock-scenario": "cached-usage"})
    assert status == 200, body
    usage = body["usage"]
    assert usage["prompt_tokens"] == 4
    assert usage["prompt_tokens_details"]["cached_tokens"] == 2, usage
    if group in ("mock-openai", "mock-azure", "mock-gemini", "mock-dashscope"):
        assert usage["completion_tokens_details"]["reasoning_tokens"] == 3, usage


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                            "ok": {"type": "boolean"}}, "required": ["city", "days"]}


@pytest.mark.parametrize("group", ["mock-openai", "mock-azure", "mock-anthropic", "mock-gemini", "mock-bedrock",
                                   "mock-dashscope"])
def test_structured_output_is_json_matching_the_schema(gw, group):
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": SCHEMA}}
    status, _, body = gw.chat({"model": "m", "messages": USER, "response_format": fmt}, **{"x-model-group": group})
    assert status == 200, body
    assert json.loads(body["choices"][0]["message"]["content"]) == {"city": "example", "days": 1}
    status, _, body = gw.chat({"model": "m", "messages": USER, "response_format": {"type": "json_object"}},
                              **{"x-model-group": group})
    assert status == 200, body
    assert json.loads(body["choices"][0]["message"]["content"]) == {
        "answer": f"Hello from the mock {group.removeprefix('mock-')} provider. You said: hi"}
