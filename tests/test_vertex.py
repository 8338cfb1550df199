"""Vertex AI (issue 31): Gemini and Claude on Google Cloud through a real
Envoy against the mock's Vertex endpoints, which check what Vertex checks
(the bearer token, the path, Claude's `anthropic_version` in the body and
no `model` there, Gemini's roles, the count bodies). This module: an access
token supplied from outside (the provider's `api_key_env`), chat, streams,
tools and token counts for both publishers, regional and global locations.
"""

import json

import anthropic
import httpx2
import openai
import pytest

import gateway
from conftest import ALL_GROUPS_KEY, Gateway, configure_test_gateway, leaks

TOKEN = "ya29.mock-vertex-token"
GEMINI = "vertex-gemini"
CLAUDE = "vertex-claude"
CLAUDE_MODEL = "claude-sonnet-4-5@20250929"
# Google access tokens are credentials: never in a response or a log.
TOKENS = (TOKEN, "ya29.revoked")
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def vertex_providers():
    return {
        GEMINI: {"dialect": "vertex_gemini", "api_key_env": "VERTEX_ACCESS_TOKEN", "project": "mock-project",
                 "location": "us-central1", "models": {"*": "gemini-2.5-flash"}},
        CLAUDE: {"dialect": "vertex_anthropic", "api_key_env": "VERTEX_ACCESS_TOKEN", "project": "mock-project",
                 "location": "global", "models": {"*": CLAUDE_MODEL}},
        # A token Vertex does not take: its 401 is the client's AUTH_FAILED.
        "vertex-bad-token": {"dialect": "vertex_gemini", "api_key": "ya29.revoked", "project": "mock-project",
                             "location": "us-central1", "models": {"*": "gemini-2.5-flash"}},
    }


@pytest.fixture(scope="module")
def vgw(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("envoy-vertex")
    mock, mock_port = gateway.start_mock(log=open(workdir / "mock.log", "w"))
    envoy = None
    try:
        clusters = [gateway.static_cluster(name.replace("-", "_"), mock_port, name) for name in vertex_providers()]
        bootstrap = gateway.build_bootstrap(
            0, 0, mock_port, env={}, extra_providers=vertex_providers(),
            extra_groups={name: {"cluster": name.replace("-", "_")} for name in vertex_providers()},
            extra_clusters=clusters, edit=configure_test_gateway, access_log=workdir / "access.log")
        for role in gateway._wasm_filters(bootstrap)[1:]:
            env = role["vm_config"].setdefault("environment_variables", {})
            env.setdefault("key_values", {})["VERTEX_ACCESS_TOKEN"] = TOKEN
        envoy = gateway.start_envoy(bootstrap, workdir, log_level="info")
        vgw = Gateway(envoy.port, envoy.admin_port, mock_port, workdir)
        yield vgw
        gateway.stop(envoy)
        logs = {p.name: p.read_text(errors="replace") for p in (workdir / "envoy.log", workdir / "access.log")
                if p.exists()}
        assert logs and not leaks(vgw.seen, logs, keys=TOKENS), "a Google access token leaked"
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


def seen(vgw, test_id):
    return vgw.mock_requests(test_id)


def chat_client(vgw, group, test_id):
    def record(r):
        r.read()
        vgw.record(dict(r.headers), r.content)
    http = httpx2.Client(event_hooks={"response": [record]})
    return openai.OpenAI(base_url=vgw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0, http_client=http,
                         default_headers={"x-model-group": group, "x-test-id": test_id})


def claude_client(vgw, test_id):
    def record(r):
        r.read()
        vgw.record(dict(r.headers), r.content)
    http = httpx2.Client(event_hooks={"response": [record]})
    return anthropic.Anthropic(api_key=ALL_GROUPS_KEY, base_url=vgw.base, max_retries=0, http_client=http,
                               default_headers={"x-model-group": CLAUDE, "x-test-id": test_id})


@pytest.mark.parametrize("group,path", [
    (GEMINI, "/v1/projects/mock-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"),
    (CLAUDE, f"/v1/projects/mock-project/locations/global/publishers/anthropic/models/{CLAUDE_MODEL}:rawPredict"),
])
def test_chat_reaches_vertex_with_the_token(vgw, group, path, test_id):
    client = chat_client(vgw, group, test_id)
    answer = client.chat.completions.create(model=group, messages=[{"role": "user", "content": "hello there"}])
    assert answer.choices[0].message.content
    assert answer.usage.prompt_tokens == 2
    [req] = seen(vgw, test_id)
    assert req["path"] == path
    assert req["headers"]["authorization"] == f"Bearer {TOKEN}"
    for header in ("x-goog-api-key", "x-api-key", "anthropic-version"):
        assert header not in req["headers"]
    body = req["body"]
    if group == CLAUDE:
        assert body["anthropic_version"] == "vertex-2023-10-16" and "model" not in body


@pytest.mark.parametrize("group,method", [(GEMINI, ":streamGenerateContent?alt=sse"), (CLAUDE, ":streamRawPredict")])
def test_streams(vgw, group, method, test_id):
    client = chat_client(vgw, group, test_id)
    chunks = list(client.chat.completions.create(model=group, stream=True, stream_options={"include_usage": True},
                                                 messages=[{"role": "user", "content": "stream please"}]))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    assert chunks[-1].usage.prompt_tokens == 2
    [req] = seen(vgw, test_id)
    path, _, query = method.partition("?")
    assert req["path"].endswith(path) and req["query"] == query, req


@pytest.mark.parametrize("group", [GEMINI, CLAUDE])
def test_tool_round_trip(vgw, group, test_id):
    client = chat_client(vgw, group, test_id)
    first = client.chat.completions.create(
        model=group, tools=[WEATHER], messages=[{"role": "user", "content": "weather in Paris?"}],
        extra_headers={"x-mock-scenario": "tool"})
    [call] = first.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    second = client.chat.completions.create(model=group, tools=[WEATHER], messages=[
        {"role": "user", "content": "weather in Paris?"}, first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"}])
    assert "sunny" in second.choices[0].message.content


def test_claude_messages_client_passes_through_and_counts(vgw, test_id):
    client = claude_client(vgw, test_id)
    message = client.messages.create(model=CLAUDE, max_tokens=64,
                                     messages=[{"role": "user", "content": "hi from messages"}])
    assert message.content[0].text
    with client.messages.stream(model=CLAUDE, max_tokens=64,
                                messages=[{"role": "user", "content": "stream it"}]) as stream:
        assert "".join(stream.text_stream)
    count = client.messages.count_tokens(model=CLAUDE, messages=[{"role": "user", "content": "one two three"}])
    assert count.input_tokens == 3
    generate, streamed, counted = seen(vgw, test_id)
    assert generate["path"].endswith(f"/publishers/anthropic/models/{CLAUDE_MODEL}:rawPredict")
    assert streamed["body"]["stream"] is True
    assert counted["path"] == "/v1/projects/mock-project/locations/global/publishers/anthropic/models/count-tokens:rawPredict"
    body = counted["body"]
    assert body["model"] == CLAUDE_MODEL and body["anthropic_version"] == "vertex-2023-10-16"


def test_gemini_counts_tokens_for_a_messages_client(vgw, test_id):
    status, _, data = vgw.request("POST", "/v1/messages/count_tokens", {
        "model": GEMINI, "system": "be brief", "messages": [{"role": "user", "content": "count these words"}]},
        {"x-test-id": test_id, "anthropic-version": "2023-06-01"})
    assert status == 200, data
    assert json.loads(data)["input_tokens"] == 5
    [req] = seen(vgw, test_id)
    assert req["path"].endswith("/publishers/google/models/gemini-2.5-flash:countTokens")
    assert "generateContentRequest" not in req["body"]


def test_a_token_vertex_refuses_is_auth_failed_without_the_token(vgw, test_id):
    status, _, data = vgw.chat({"model": "vertex-bad-token", "messages": [{"role": "user", "content": "hi"}]},
                               **{"x-test-id": test_id})
    assert status == 401 and data["error"]["code"] == "AUTH_FAILED", data
    assert "ya29.revoked" not in json.dumps(data)


@pytest.mark.parametrize("group", [GEMINI, CLAUDE])
def test_quota_is_a_rate_limit(vgw, group, test_id):
    status, headers, data = vgw.chat({"model": group, "messages": [{"role": "user", "content": "hi"}]},
                                     **{"x-test-id": test_id, "x-mock-scenario": "error-429"})
    assert status == 429, data
    assert data["error"]["code"] == "UPSTREAM_RATE_LIMIT"
    assert "Quota exceeded" in data["error"]["message"]
