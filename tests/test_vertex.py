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
                 "location": "us-central1", "models": {"text-embedding-005": "text-embedding-005",
                                                      "gemini-embedding-001": "gemini-embedding-001",
                                                      "*": "gemini-2.5-flash"}},
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


@pytest.mark.parametrize("stream", [False, True])
def test_n_choices_are_vertex_gemini_candidates(vgw, stream, test_id):
    """Chat's `n` to Gemini on Vertex AI is its `candidateCount`, each candidate a choice; Claude on
    Vertex AI answers one choice: a 400 before it is called."""
    client = chat_client(vgw, GEMINI, test_id)
    messages = [{"role": "user", "content": "two please"}]
    if stream:
        text = {}
        for chunk in client.chat.completions.create(model=GEMINI, messages=messages, n=2, stream=True):
            for c in chunk.choices:
                text[c.index] = text.get(c.index, "") + (c.delta.content or "")
    else:
        answer = client.chat.completions.create(model=GEMINI, messages=messages, n=2)
        text = {c.index: c.message.content for c in answer.choices}
    assert set(text) == {0, 1} and text[0] == text[1] and "two please" in text[0]
    [req] = seen(vgw, test_id)
    assert req["body"]["generationConfig"]["candidateCount"] == 2
    with pytest.raises(openai.BadRequestError) as e:
        chat_client(vgw, CLAUDE, test_id).chat.completions.create(model=CLAUDE, messages=messages, n=2)
    assert e.value.body["param"] == "n"
    assert len(seen(vgw, test_id)) == 1


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


def test_a_gemini_clients_error_from_vertex_keeps_googles_details(vgw, test_id):
    """The Gemini pass-through on Vertex AI: Vertex's status as it came
    (its 429 carries no details), none of the gateway's added."""
    status, _, data = vgw.request(
        "POST", f"/v1beta/models/{GEMINI}:generateContent", {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        {"x-test-id": test_id, "x-mock-scenario": "error-429"})
    error = json.loads(data)["error"]
    assert status == 429 and error["status"] == "RESOURCE_EXHAUSTED", error
    assert "details" not in error, error


# --- credentials the gateway obtains: a service-account key, the metadata server ---

import time
import urllib.request
from pathlib import Path

SA_KEY = (Path(__file__).parent / "fixtures/TEST-ONLY-vertex-service-account.json").read_text()
TTL = 8  # the mock's token lifetime: refreshed every 6 s, a quarter before expiry


def managed_providers():
    return {
        "vertex-sa": {"dialect": "vertex_anthropic", "api_key_env": "VERTEX_SA_KEY", "project": "mock-project",
                      "location": "us-east5", "credentials": "service_account", "token_cluster": "google_oauth",
                      "token_wait_ms": 10000, "models": {"*": CLAUDE_MODEL}},
        "vertex-md": {"dialect": "vertex_gemini", "project": "mock-project", "location": "global",
                      "credentials": "metadata_server", "token_cluster": "gce_metadata",
                      "models": {"*": "gemini-2.5-flash"}},
        # Its token endpoint refuses connections: no token, ever.
        "vertex-no-token": {"dialect": "vertex_gemini", "project": "mock-project", "location": "global",
                            "credentials": "metadata_server", "token_cluster": "dead_metadata",
                            "token_wait_ms": 300, "models": {"*": "gemini-2.5-flash"}},
    }


@pytest.fixture(scope="module")
def mgw(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("envoy-vertex-managed")
    mock, mock_port = gateway.start_mock(args=("--google-token-ttl", str(TTL)), log=open(workdir / "mock.log", "w"))
    dead, dead_port = gateway.refusing_port()
    envoy = None
    try:
        clusters = [gateway.static_cluster(name.replace("-", "_"), mock_port, name) for name in managed_providers()]
        # The token endpoint and the metadata server (the mock answers both).
        clusters += [gateway.static_cluster("google_oauth", mock_port, "none"),
                     gateway.static_cluster("gce_metadata", mock_port, "none"),
                     gateway.static_cluster("dead_metadata", dead_port, "none"),
                     # vertex-sa again, on a route without retries.
                     gateway.static_cluster("vertex_sa_once", mock_port, "vertex-sa")]

        def no_retry_route(template):
            route = {k: v for k, v in template["route"].items() if k != "retry_policy"}
            return [{"match": {"prefix": "/v1/", "headers": [{"name": "x-llm-cluster", "string_match": {
                "exact": "vertex_sa_once"}}]}, "route": route}]
        groups = {name: {"cluster": name.replace("-", "_")} for name in managed_providers()}
        groups["vertex-sa-once"] = {"cluster": "vertex_sa_once"}
        bootstrap = gateway.build_bootstrap(
            0, 0, mock_port, env={}, extra_providers=managed_providers(), extra_groups=groups,
            extra_clusters=clusters, edit=configure_test_gateway, access_log=workdir / "access.log",
            extra_routes=no_retry_route)
        for role in gateway._wasm_filters(bootstrap)[1:]:
            env = role["vm_config"].setdefault("environment_variables", {})
            env.setdefault("key_values", {})["VERTEX_SA_KEY"] = SA_KEY
        # Two workers: one token for both.
        envoy = gateway.start_envoy(bootstrap, workdir, log_level="info", concurrency=2)
        mgw = Gateway(envoy.port, envoy.admin_port, mock_port, workdir)
        yield mgw
        gateway.stop(envoy)
        logs = {p.name: p.read_text(errors="replace") for p in (workdir / "envoy.log", workdir / "access.log")}
        secret_lines = [line for line in json.loads(SA_KEY)["private_key"].splitlines() if "PRIVATE" not in line]
        assert not leaks(mgw.seen, logs, keys=tuple(secret_lines[:3])), "the service-account key leaked"
        assert "ya29.mock-" not in logs["envoy.log"] + logs["access.log"], "a token was logged"
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)
        dead.close()


def google(mgw, action="", method="GET"):
    req = urllib.request.Request(f"{mgw.mock}/_mock/google{action}", method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def ask(mgw, group, test_id):
    return mgw.chat({"model": group, "messages": [{"role": "user", "content": "hello there"}]}, **{"x-test-id": test_id})


def until_ok(mgw, group, test_id, timeout=15):
    """Requests until one succeeds (the first token arrives within a tick or two); the others' answers."""
    deadline, seen = time.time() + timeout, []
    while time.time() < deadline:
        status, headers, data = ask(mgw, group, test_id)
        if status == 200:
            return seen
        seen.append((status, data))
        time.sleep(0.2)
    raise AssertionError(f"no success: {seen[-3:]}")


def test_service_account_token_reaches_vertex_and_the_key_never_does(mgw, test_id):
    # The first request finds no token (Envoy just started): it waits for the
    # first one (paused, resumed when it comes), and is answered.
    status, _, data = ask(mgw, "vertex-sa", test_id)
    assert status == 200, data
    sent = mgw.mock_requests(test_id)
    assert len(sent) == 1, "no request reached Vertex without a token"
    assert sent[0]["headers"]["authorization"].startswith("Bearer ya29.mock-sa-")
    assert "PRIVATE" not in json.dumps(sent[0])
    assert sent[0]["path"] == f"/v1/projects/mock-project/locations/us-east5/publishers/anthropic/models/{CLAUDE_MODEL}:rawPredict"


def test_no_token_within_the_wait_is_a_clear_503_and_no_vendor_call(mgw, test_id):
    for stream in (False, True):
        status, headers, data = mgw.chat({"model": "vertex-no-token", "stream": stream,
                                          "messages": [{"role": "user", "content": "hi"}]}, **{"x-test-id": test_id})
        assert status == 503 and data["error"]["code"] == "UPSTREAM_BUSY", data
        assert "no Google access token" in data["error"]["message"]
        assert headers.get("retry-after") == "1"
    assert mgw.mock_requests(test_id) == []


def test_tokens_rotate_mid_traffic_without_a_failed_request(mgw, test_id):
    until_ok(mgw, "vertex-sa", test_id)
    issued = google(mgw)["issued"]
    statuses = []
    end = time.time() + 2.5 * TTL
    while time.time() < end:
        statuses.append(ask(mgw, "vertex-sa", test_id)[0])
        time.sleep(0.1)
    assert set(statuses) == {200}, statuses
    tokens = {r["headers"]["authorization"] for r in mgw.mock_requests(test_id)}
    assert len(tokens) >= 2, "the token was refreshed before it expired"
    # One fetch per refresh for both workers (and the metadata provider's).
    assert google(mgw)["issued"] - issued <= 2 * (2.5 * TTL / (0.75 * TTL) + 1)


def test_a_401_refreshes_the_token_and_the_attempt_is_retried_with_it(mgw, test_id):
    """A token Vertex refuses (revoked by the mock): the attempt's 401 is
    answered 503 to the router, whose retry policy (`5xx`) retries it; the
    retry waits for the token fetched in its place. The client sees a 200."""
    until_ok(mgw, "vertex-sa", test_id)
    issued = google(mgw)["issued"]
    google(mgw, "/revoke", "POST")
    status, headers, data = ask(mgw, "vertex-sa", test_id)
    assert status == 200, data
    assert headers["x-llm-attempts"] == "2"
    refused, retried = mgw.mock_requests(test_id)[-2:]
    assert refused["headers"]["authorization"] != retried["headers"]["authorization"]
    assert google(mgw)["issued"] > issued


def test_a_401_without_a_retry_policy_is_a_retriable_503(mgw, test_id):
    until_ok(mgw, "vertex-sa", test_id)
    google(mgw, "/revoke", "POST")
    status, headers, data = ask(mgw, "vertex-sa-once", test_id)
    assert status == 503 and data["error"]["code"] == "UPSTREAM_BUSY", data
    assert "refused the gateway's Google access token" in data["error"]["message"]
    assert headers.get("retry-after") == "1"
    assert "ya29" not in json.dumps(data)
    until_ok(mgw, "vertex-sa", test_id, timeout=5)


def test_the_token_endpoint_down_is_retried_with_backoff(mgw, test_id):
    until_ok(mgw, "vertex-sa", test_id)
    google(mgw, "/fail?n=2", "POST")
    google(mgw, "/revoke", "POST")
    # Two failed fetches (1 s, then 2 s apart), then a token; the retried
    # attempt waits for it (10 s at most, the provider's token_wait_ms).
    status, _, data = ask(mgw, "vertex-sa", test_id)
    assert status == 200, data
    assert google(mgw)["failing"] == 0
    assert "the token endpoint answered HTTP 503" in (mgw.workdir / "envoy.log").read_text(errors="replace")


def test_a_slow_token_endpoint_is_waited_for(mgw, test_id):
    """The refresh in flight is waited for, not refused: Vertex refuses the
    token (401), and the retried attempt finds none while the token endpoint
    takes 2 s (several ticks) to answer the one fetch made for both workers;
    the attempt goes on with the new token when it lands."""
    until_ok(mgw, "vertex-sa", test_id)
    google(mgw, "/slow?ms=2000", "POST")
    google(mgw, "/revoke", "POST")
    status, headers, data = ask(mgw, "vertex-sa", test_id)
    assert status == 200, data
    assert headers["x-llm-attempts"] == "2"
    refused, retried = mgw.mock_requests(test_id)[-2:]
    assert refused["headers"]["authorization"] != retried["headers"]["authorization"]
    assert "no Google access token" not in json.dumps(data)


def test_the_metadata_server(mgw, test_id):
    until_ok(mgw, "vertex-md", test_id)
    # (The tests before revoked every token: this one may have met a 401 first.)
    sent = mgw.mock_requests(test_id)[-1]
    assert sent["headers"]["authorization"].startswith("Bearer ya29.mock-md-")
    assert sent["path"].endswith("/publishers/google/models/gemini-2.5-flash:generateContent")
    assert google(mgw)["refused"] == 0, "the metadata server was asked with Metadata-Flavor: Google"


@pytest.mark.parametrize("group", [GEMINI, CLAUDE])
def test_every_client_surface(vgw, group, test_id):
    """Chat (above), Responses and Messages clients to both publishers, streamed too."""
    chat = chat_client(vgw, group, test_id)
    response = chat.responses.create(model=group, input="hello from responses")
    assert response.output_text and response.usage.input_tokens == 3
    events = [e.type for e in chat.responses.create(model=group, input="stream it", stream=True)]
    assert events[0] == "response.created" and events[-1] == "response.completed"
    claude = claude_client(vgw, test_id)
    message = claude.messages.create(model=group, max_tokens=64, messages=[{"role": "user", "content": "hi"}],
                                     extra_headers={"x-model-group": group})
    assert message.content[0].text
    with claude.messages.stream(model=group, max_tokens=64, messages=[{"role": "user", "content": "go"}],
                                extra_headers={"x-model-group": group}) as stream:
        assert "".join(stream.text_stream)
    assert len(seen(vgw, test_id)) == 4
    assert all(r["headers"]["authorization"] == f"Bearer {TOKEN}" for r in seen(vgw, test_id))


def test_a_gemini_client_passes_through_with_vertexs_own_top_level_members(vgw, test_id):
    """The Gemini surface to Vertex's Gemini: the client's body goes on as it
    came, and Vertex's rules hold (the mock's): `labels` and `serviceTier`
    are Vertex's too, `store` (the Gemini API's logging choice) is refused."""
    def generate(extra):
        body = {"contents": [{"role": "user", "parts": [{"text": "vertex top"}]}], **extra}
        status, _, answer = vgw.request("POST", f"/v1beta/models/{GEMINI}:generateContent", body, {
            "authorization": None, "x-goog-api-key": ALL_GROUPS_KEY, "x-test-id": test_id})
        return status, json.loads(answer)

    status, answer = generate({"labels": {"team": "a"}, "serviceTier": "flex"})
    assert status == 200, answer
    assert {k: seen(vgw, test_id)[-1]["body"][k] for k in ("labels", "serviceTier")} == {
        "labels": {"team": "a"}, "serviceTier": "flex"}
    status, answer = generate({"store": False})
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT", answer
    assert 'Unknown name "store"' in answer["error"]["message"], answer


def test_embeddings_through_the_openai_sdk(vgw, test_id):
    """Vertex's Text embeddings API (`:predict`), from the OpenAI SDK's
    embeddings (base64 as the SDK asks, floats too), with the vendor's
    token counts as usage."""
    client = chat_client(vgw, GEMINI, test_id)
    answer = client.embeddings.create(model="text-embedding-005", input=["hello vertex world", "second"],
                                      dimensions=256)
    assert [len(d.embedding) for d in answer.data] == [256, 256]
    assert answer.usage.prompt_tokens == 4 and answer.model == "text-embedding-005"
    floats = client.embeddings.create(model="text-embedding-005", input="hello vertex world",
                                      encoding_format="float")
    assert len(floats.data[0].embedding) == 768
    pairs = zip(floats.data[0].embedding[:256], answer.data[0].embedding)
    assert all(abs(a - b) < 1e-6 for a, b in pairs), "the same text, the same vector (truncated)"
    first, second = seen(vgw, test_id)
    assert first["path"] == ("/v1/projects/mock-project/locations/us-central1/publishers/google/models/"
                             "text-embedding-005:predict")
    assert first["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert first["body"] == {"instances": [{"content": "hello vertex world"}, {"content": "second"}],
                             "parameters": {"outputDimensionality": 256}}
    assert second["body"] == {"instances": [{"content": "hello vertex world"}]}


def test_embeddings_within_vertexs_batch_limits(vgw, test_id):
    client = chat_client(vgw, GEMINI, test_id)
    one = client.embeddings.create(model="gemini-embedding-001", input="just one", dimensions=768,
                                   extra_body={"task_type": "retrieval_query"})
    assert len(one.data[0].embedding) == 768
    [req] = seen(vgw, test_id)
    assert req["body"]["instances"] == [{"content": "just one", "task_type": "RETRIEVAL_QUERY"}]
    # gemini-embedding-001 takes one instance a request: the gateway splits
    # a batch into a call per input (self-calls) and answers it whole.
    two = client.embeddings.create(model="gemini-embedding-001", input=["a", "b"])
    assert [d.index for d in two.data] == [0, 1]
    parts = seen(vgw, test_id)[1:]
    assert sorted(r["body"]["instances"][0]["content"] for r in parts) == ["a", "b"]
    assert all(len(r["body"]["instances"]) == 1 for r in parts)
    # What the mock's Vertex refuses (a size over the model's) is Vertex's 400, unified.
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="text-embedding-005", input="x", dimensions=1024)
    assert "outputDimensionality" in e.value.message


def test_claude_on_vertex_does_not_embed(vgw, test_id):
    status, headers, data = vgw.request("POST", "/v1/embeddings", {"model": CLAUDE, "input": "hi"},
                                        {"x-test-id": test_id})
    assert seen(vgw, test_id) == []
    error = json.loads(data)["error"]
    assert (status, error["code"]) == (400, "INVALID_REQUEST"), data
    assert "embed" in error["message"]
