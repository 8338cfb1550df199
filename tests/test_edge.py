"""The edge role against hostile and broken input, gateway keys and secrets.

Every bad request must get a clear unified 4xx before any upstream is
touched, and the filter must keep serving everyone afterwards."""

import json

import pytest

import gateway
from conftest import ALL_GROUPS_KEY, DIAGNOSTICS_ADMIN_KEY, NATIVE, OPENAI_ONLY_KEY, VENDOR_KEYS, Gateway
from sse_client import stream

OK_MSG = [{"role": "user", "content": "hi"}]


def req(**fields):
    body = {"model": "mock-openai", "messages": OK_MSG}
    body.update(fields)
    return json.dumps(body).encode()


def nested(depth):
    return "[" * depth + "]" * depth


# (id, method, path, raw body, extra headers, status, code, param or None)
CORPUS = [
    # not JSON, not an object
    ("truncated-json", "POST", "/v1/chat/completions", b'{"model": "m", "messages": [', {}, 400, "INVALID_REQUEST", None),
    ("trailing-comma", "POST", "/v1/chat/completions", b'{"model":"m","messages":[],}', {}, 400, "INVALID_REQUEST", None),
    ("array-body", "POST", "/v1/chat/completions", b"[]", {}, 400, "INVALID_REQUEST", "body"),
    ("string-body", "POST", "/v1/chat/completions", b'"hello"', {}, 400, "INVALID_REQUEST", "body"),
    ("number-body", "POST", "/v1/chat/completions", b"42", {}, 400, "INVALID_REQUEST", "body"),
    ("null-body", "POST", "/v1/chat/completions", b"null", {}, 400, "INVALID_REQUEST", "body"),
    ("whitespace-body", "POST", "/v1/chat/completions", b"   \n ", {}, 400, "INVALID_REQUEST", "body"),
    ("empty-body", "POST", "/v1/chat/completions", b"", {}, 400, "INVALID_REQUEST", "body"),
    ("invalid-utf8", "POST", "/v1/chat/completions", b'{"model":"m","messages":[{"role":"user","content":"\xff\xfe"}]}', {}, 400, "INVALID_REQUEST", None),
    ("deep-nesting", "POST", "/v1/chat/completions", req()[:-1] + b',"metadata":' + nested(5000).encode() + b"}", {}, 400, "INVALID_REQUEST", None),
    ("nul-byte", "POST", "/v1/chat/completions", b'\x00{"model":"m"}', {}, 400, "INVALID_REQUEST", None),
    # request line and headers
    ("text-content-type", "POST", "/v1/chat/completions", req(), {"content-type": "text/plain"}, 400, "INVALID_REQUEST", "content-type"),
    ("form-content-type", "POST", "/v1/chat/completions", req(), {"content-type": "application/x-www-form-urlencoded"}, 400, "INVALID_REQUEST", "content-type"),
    ("get-chat", "GET", "/v1/chat/completions", None, {}, 405, "METHOD_NOT_ALLOWED", "method"),
    ("put-chat", "PUT", "/v1/chat/completions", req(), {}, 405, "METHOD_NOT_ALLOWED", "method"),
    ("delete-models", "DELETE", "/v1/models", None, {}, 405, "METHOD_NOT_ALLOWED", "method"),
    ("unknown-path-completions", "POST", "/v1/completions", req(), {}, 404, "MODEL_NOT_FOUND", "path"),
    ("unknown-path-images", "POST", "/v1/images/generations", req(), {}, 404, "MODEL_NOT_FOUND", "path"),
    ("get-embeddings", "GET", "/v1/embeddings", None, {}, 405, "METHOD_NOT_ALLOWED", "method"),
    ("unknown-path-chat", "POST", "/v1/chat", req(), {}, 404, "MODEL_NOT_FOUND", "path"),
    # messages
    ("messages-missing", "POST", "/v1/chat/completions", b'{"model":"m"}', {}, 400, "INVALID_REQUEST", "messages"),
    ("messages-empty", "POST", "/v1/chat/completions", req(messages=[]), {}, 400, "INVALID_REQUEST", "messages"),
    ("messages-string", "POST", "/v1/chat/completions", req(messages="hi"), {}, 400, "INVALID_REQUEST", "messages"),
    ("messages-null", "POST", "/v1/chat/completions", req(messages=None), {}, 400, "INVALID_REQUEST", "messages"),
    ("messages-object", "POST", "/v1/chat/completions", req(messages={"role": "user"}), {}, 400, "INVALID_REQUEST", "messages"),
    ("message-string", "POST", "/v1/chat/completions", req(messages=["hi"]), {}, 400, "INVALID_REQUEST", "messages[0]"),
    ("role-missing", "POST", "/v1/chat/completions", req(messages=[{"content": "x"}]), {}, 400, "INVALID_REQUEST", "messages[0].role"),
    ("role-unknown", "POST", "/v1/chat/completions", req(messages=[{"role": "robot", "content": "x"}]), {}, 400, "INVALID_REQUEST", "messages[0].role"),
    ("role-number", "POST", "/v1/chat/completions", req(messages=[{"role": 1, "content": "x"}]), {}, 400, "INVALID_REQUEST", "messages[0].role"),
    ("second-message-bad", "POST", "/v1/chat/completions", req(messages=OK_MSG + [{"role": "user"}]), {}, 400, "INVALID_REQUEST", "messages[1].content"),
    ("content-missing", "POST", "/v1/chat/completions", req(messages=[{"role": "user"}]), {}, 400, "INVALID_REQUEST", "messages[0].content"),
    ("content-number", "POST", "/v1/chat/completions", req(messages=[{"role": "user", "content": 5}]), {}, 400, "INVALID_REQUEST", "messages[0].content"),
    ("content-object", "POST", "/v1/chat/completions", req(messages=[{"role": "user", "content": {"text": "x"}}]), {}, 400, "INVALID_REQUEST", "messages[0].content"),
    ("part-unknown-type", "POST", "/v1/chat/completions", req(messages=[{"role": "user", "content": [{"type": "hologram"}]}]), {}, 400, "INVALID_REQUEST", "messages[0].content[0].type"),
    ("image-without-url", "POST", "/v1/chat/completions", req(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]), {}, 400, "INVALID_REQUEST", "messages[0].content[0].image_url"),
    ("image-ftp-url", "POST", "/v1/chat/completions", req(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x/y.png"}}]}]), {}, 400, "INVALID_REQUEST", "messages[0].content[0].image_url.url"),
    ("image-data-not-image", "POST", "/v1/chat/completions", req(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:text/html;base64,PGI+"}}]}]), {}, 400, "INVALID_REQUEST", "messages[0].content[0].image_url.url"),
    ("image-data-not-base64", "POST", "/v1/chat/completions", req(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png,abc"}}]}]), {}, 400, "INVALID_REQUEST", "messages[0].content[0].image_url.url"),
    ("tool-without-call-id", "POST", "/v1/chat/completions", req(messages=[{"role": "tool", "content": "x"}]), {}, 400, "INVALID_REQUEST", "messages[0].tool_call_id"),
    ("tool-empty-call-id", "POST", "/v1/chat/completions", req(messages=[{"role": "tool", "content": "x", "tool_call_id": ""}]), {}, 400, "INVALID_REQUEST", "messages[0].tool_call_id"),
    ("tool-call-args-not-json", "POST", "/v1/chat/completions", req(messages=[{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{city: Paris"}}]}]), {}, 400, "INVALID_REQUEST", "messages[0].tool_calls[0].function.arguments"),
    ("tool-calls-not-array", "POST", "/v1/chat/completions", req(messages=[{"role": "assistant", "tool_calls": {"id": "c"}}]), {}, 400, "INVALID_REQUEST", "messages[0].tool_calls"),
    ("tool-call-without-function", "POST", "/v1/chat/completions", req(messages=[{"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}]), {}, 400, "INVALID_REQUEST", "messages[0].tool_calls"),
    # sampling and sizes
    ("temperature-negative", "POST", "/v1/chat/completions", req(temperature=-1), {}, 400, "INVALID_REQUEST", "temperature"),
    ("temperature-too-high", "POST", "/v1/chat/completions", req(temperature=2.5), {}, 400, "INVALID_REQUEST", "temperature"),
    ("temperature-string", "POST", "/v1/chat/completions", req(temperature="hot"), {}, 400, "INVALID_REQUEST", "temperature"),
    ("top-p-too-high", "POST", "/v1/chat/completions", req(top_p=1.5), {}, 400, "INVALID_REQUEST", "top_p"),
    ("top-p-negative", "POST", "/v1/chat/completions", req(top_p=-0.1), {}, 400, "INVALID_REQUEST", "top_p"),
    ("max-tokens-zero", "POST", "/v1/chat/completions", req(max_tokens=0), {}, 400, "INVALID_REQUEST", "max_tokens"),
    ("max-tokens-negative", "POST", "/v1/chat/completions", req(max_tokens=-5), {}, 400, "INVALID_REQUEST", "max_tokens"),
    ("max-tokens-huge", "POST", "/v1/chat/completions", req(max_tokens=10**12), {}, 400, "INVALID_REQUEST", "max_tokens"),
    ("max-tokens-string", "POST", "/v1/chat/completions", req(max_tokens="10"), {}, 400, "INVALID_REQUEST", "max_tokens"),
    ("max-tokens-fraction", "POST", "/v1/chat/completions", req(max_tokens=1.5), {}, 400, "INVALID_REQUEST", "max_tokens"),
    ("max-completion-tokens-zero", "POST", "/v1/chat/completions", req(max_completion_tokens=0), {}, 400, "INVALID_REQUEST", "max_completion_tokens"),
    ("n-zero", "POST", "/v1/chat/completions", req(n=0), {}, 400, "INVALID_REQUEST", "n"),
    ("n-string", "POST", "/v1/chat/completions", req(n="2"), {}, 400, "INVALID_REQUEST", "n"),
    ("n-two-on-anthropic", "POST", "/v1/chat/completions", req(n=2), {"x-model-group": "mock-anthropic"}, 400, "INVALID_REQUEST", "n"),
    ("stream-string", "POST", "/v1/chat/completions", req(stream="yes"), {}, 400, "INVALID_REQUEST", "stream"),
    ("stream-options-string", "POST", "/v1/chat/completions", req(stream_options="usage"), {}, 400, "INVALID_REQUEST", "stream_options"),
    ("stream-options-unknown", "POST", "/v1/chat/completions", req(stream_options={"include_usage": True, "x": 1}), {}, 400, "INVALID_REQUEST", "stream_options"),
    ("stop-five", "POST", "/v1/chat/completions", req(stop=["a", "b", "c", "d", "e"]), {}, 400, "INVALID_REQUEST", "stop"),
    ("stop-number", "POST", "/v1/chat/completions", req(stop=7), {}, 400, "INVALID_REQUEST", "stop"),
    ("seed-string", "POST", "/v1/chat/completions", req(seed="x"), {}, 400, "INVALID_REQUEST", "seed"),
    ("user-number", "POST", "/v1/chat/completions", req(user=5), {}, 400, "INVALID_REQUEST", "user"),
    ("request-id-spaces", "POST", "/v1/chat/completions", req(request_id="a b"), {}, 400, "INVALID_REQUEST", "request_id"),
    ("parallel-tool-calls-string", "POST", "/v1/chat/completions", req(parallel_tool_calls="yes"), {}, 400, "INVALID_REQUEST", "parallel_tool_calls"),
    # tools
    ("tools-object", "POST", "/v1/chat/completions", req(tools={"type": "function"}), {}, 400, "INVALID_REQUEST", "tools"),
    ("tool-type-unknown", "POST", "/v1/chat/completions", req(tools=[{"type": "retrieval"}]), {}, 400, "INVALID_REQUEST", "tools[0]"),
    ("tool-without-name", "POST", "/v1/chat/completions", req(tools=[{"type": "function", "function": {}}]), {}, 400, "INVALID_REQUEST", "tools[0].function"),
    ("tool-choice-unknown", "POST", "/v1/chat/completions", req(tool_choice="sometimes"), {}, 400, "INVALID_REQUEST", "tool_choice"),
    ("tool-choice-missing-tool", "POST", "/v1/chat/completions", req(tools=[{"type": "function", "function": {"name": "f"}}], tool_choice={"type": "function", "function": {"name": "g"}}), {}, 400, "INVALID_REQUEST", "tool_choice"),
    ("tool-choice-object-without-function", "POST", "/v1/chat/completions", req(tool_choice={"type": "function"}), {}, 400, "INVALID_REQUEST", "tool_choice"),
    ("too-many-tools", "POST", "/v1/chat/completions", req(tools=[{"type": "function", "function": {"name": f"f{i}"}} for i in range(129)]), {}, 400, "INVALID_REQUEST", "tools"),
    ("response-format-xml", "POST", "/v1/chat/completions", req(response_format={"type": "xml"}), {}, 400, "INVALID_REQUEST", "response_format"),
    ("response-format-schema-missing", "POST", "/v1/chat/completions", req(response_format={"type": "json_schema"}), {}, 400, "INVALID_REQUEST", "response_format"),
    # model names and duplicates
    ("model-missing", "POST", "/v1/chat/completions", json.dumps({"messages": OK_MSG}).encode(), {}, 400, "INVALID_REQUEST", "model"),
    ("model-empty", "POST", "/v1/chat/completions", req(model=""), {}, 400, "INVALID_REQUEST", "model"),
    ("model-number", "POST", "/v1/chat/completions", req(model=4), {}, 400, "INVALID_REQUEST", "model"),
    ("model-megabyte", "POST", "/v1/chat/completions", req(model="m" * (1 << 20)), {}, 400, "INVALID_REQUEST", "model"),
    ("model-header-injection", "POST", "/v1/chat/completions", req(model="gpt\r\nx-llm-cluster: mock_anthropic"), {}, 400, "INVALID_REQUEST", "model"),
    ("model-nul", "POST", "/v1/chat/completions", req(model="gpt\u0000"), {}, 400, "INVALID_REQUEST", "model"),
    ("duplicate-model", "POST", "/v1/chat/completions", b'{"model":"mock-openai","model":"mock-anthropic","messages":[{"role":"user","content":"x"}]}', {}, 400, "INVALID_REQUEST", "model"),
    ("duplicate-messages", "POST", "/v1/chat/completions", b'{"model":"m","messages":[{"role":"user","content":"x"}],"messages":[]}', {}, 400, "INVALID_REQUEST", "messages"),
    ("duplicate-unknown-field", "POST", "/v1/chat/completions", b'{"model":"m","messages":[{"role":"user","content":"x"}],"foo":1,"foo":2}', {}, 400, "INVALID_REQUEST", "foo"),
    ("duplicate-in-message", "POST", "/v1/chat/completions", b'{"model":"m","messages":[{"role":"user","content":"x","content":"y"}]}', {}, 400, "INVALID_REQUEST", "messages[0].content"),
    ("hundred-thousand-messages", "POST", "/v1/chat/completions", req(messages=OK_MSG * 100_000), {}, 400, "INVALID_REQUEST", "messages"),
    ("over-max-messages", "POST", "/v1/chat/completions", req(messages=OK_MSG * 1001), {}, 400, "INVALID_REQUEST", "messages"),
    # routing and keys
    ("unknown-group-header", "POST", "/v1/chat/completions", req(), {"x-model-group": "no-such-group"}, 404, "MODEL_NOT_FOUND", "x-model-group"),
    ("group-not-allowed", "POST", "/v1/chat/completions", req(), {"x-model-group": "mock-anthropic", "authorization": f"Bearer {OPENAI_ONLY_KEY}"}, 403, "PERMISSION_DENIED", None),
    ("missing-key", "POST", "/v1/chat/completions", req(), {"authorization": None}, 401, "AUTH_FAILED", None),
    ("wrong-key", "POST", "/v1/chat/completions", req(), {"authorization": "Bearer not-a-key"}, 401, "AUTH_FAILED", None),
    ("basic-auth", "POST", "/v1/chat/completions", req(), {"authorization": "Basic Zm9vOmJhcg=="}, 401, "AUTH_FAILED", None),
    ("empty-bearer", "POST", "/v1/chat/completions", req(), {"authorization": "Bearer "}, 401, "AUTH_FAILED", None),
    ("wrong-x-api-key", "POST", "/v1/chat/completions", req(), {"authorization": None, "x-api-key": "nope"}, 401, "AUTH_FAILED", None),
    ("models-without-key", "GET", "/v1/models", None, {"authorization": None}, 401, "AUTH_FAILED", None),
    # the diagnostics view (/llm-gateway/): admin keys, never routed
    ("diagnostics-without-key", "GET", "/llm-gateway/api/view", None, {"authorization": None}, 401, "AUTH_FAILED", None),
    ("diagnostics-gateway-key", "GET", "/llm-gateway/api/view", None, {}, 401, "AUTH_FAILED", None),
    ("diagnostics-wrong-key", "GET", "/llm-gateway/api/requests", None, {"authorization": "Bearer gw-test-diagnostics-admiN"}, 401, "AUTH_FAILED", None),
    ("diagnostics-post", "POST", "/llm-gateway/api/view", req(), {"authorization": f"Bearer {DIAGNOSTICS_ADMIN_KEY}"}, 405, "METHOD_NOT_ALLOWED", "method"),
    ("diagnostics-chat-under-prefix", "POST", "/llm-gateway/v1/chat/completions", req(), {}, 405, "METHOD_NOT_ALLOWED", "method"),
    ("diagnostics-unknown-path", "GET", "/llm-gateway/api/secrets", None, {"authorization": f"Bearer {DIAGNOSTICS_ADMIN_KEY}"}, 404, "MODEL_NOT_FOUND", "path"),
    ("diagnostics-bad-status", "GET", "/llm-gateway/api/requests?status=teapot", None, {"authorization": f"Bearer {DIAGNOSTICS_ADMIN_KEY}"}, 400, "INVALID_REQUEST", "status"),
    ("diagnostics-bad-limit", "GET", "/llm-gateway/api/requests?limit=-1", None, {"authorization": f"Bearer {DIAGNOSTICS_ADMIN_KEY}"}, 400, "INVALID_REQUEST", "limit"),
    ("diagnostics-unknown-filter", "GET", "/llm-gateway/api/view?colour=red", None, {"authorization": f"Bearer {DIAGNOSTICS_ADMIN_KEY}"}, 400, "INVALID_REQUEST", "colour"),
    ("diagnostics-no-such-request", "GET", "/llm-gateway/api/requests/never-seen", None, {"authorization": f"Bearer {DIAGNOSTICS_ADMIN_KEY}"}, 404, "MODEL_NOT_FOUND", "request_id"),
]


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 60
    assert len({c[0] for c in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=[c[0] for c in CORPUS])
def test_bad_request(gw, test_id, case):
    _, method, path, raw, headers, status, code, param = case
    s, hdrs, body = gw.request(method, path, raw=raw, headers=dict(headers, **{"x-test-id": test_id}))
    assert s == status, body[:500]
    assert hdrs["content-type"].startswith("application/json")
    err = json.loads(body)["error"]
    assert err["code"] == code, err
    assert err["message"], "the message names the problem"
    if param is not None:
        assert err["param"] == param, err
    assert gw.mock_requests(test_id) == [], "no vendor is contacted"


def test_still_serving_after_the_corpus(gw):
    # Runs after the corpus (file order): the VM did not crash or reload.
    status, _, body = gw.chat({"model": "mock-anthropic", "messages": OK_MSG})
    assert status == 200, body
    stats = gw.stats("wasm")
    # VMs rebuilt after dying (FAIL_RELOAD); `vm_reload` itself never moves.
    assert stats.get("wasm.llm_edge.vm_reload_success", "0") == "0"
    assert stats.get("wasm.llm_upstream.vm_reload_success", "0") == "0"
    if not NATIVE:  # the native host has no wasm runtime
        assert int(stats["wasm.envoy.wasm.runtime.v8.active"]) >= 1
    log = (gw.workdir / "envoy.log").read_text()
    assert "panicked" not in log and "Function: proxy_on" not in log


# --- gateway keys -----------------------------------------------------------------

def test_key_as_bearer_or_x_api_key(gw, test_id):
    for headers in ({"authorization": f"Bearer {ALL_GROUPS_KEY}"},
                    {"authorization": None, "x-api-key": ALL_GROUPS_KEY}):
        status, _, body = gw.chat({"model": "mock-openai", "messages": OK_MSG}, **headers, **{"x-test-id": test_id})
        assert status == 200, body
    sent = gw.mock_requests(test_id)
    assert len(sent) == 2
    for attempt in sent:
        assert ALL_GROUPS_KEY not in json.dumps(attempt["headers"]), "the caller's key never reaches a vendor"


def test_restricted_key_reaches_only_its_groups(gw):
    headers = {"authorization": f"Bearer {OPENAI_ONLY_KEY}"}
    status, _, _ = gw.chat({"model": "mock-openai", "messages": OK_MSG}, **headers)
    assert status == 200
    status, _, body = gw.chat({"model": "mock-anthropic", "messages": OK_MSG}, **headers)
    assert status == 403 and body["error"]["code"] == "PERMISSION_DENIED"
    status, _, body = gw.request("GET", "/v1/models", headers=headers)
    listed = json.loads(body)["data"]
    assert [m["id"] for m in listed if m["owned_by"] == "llm-gateway"] == ["mock-openai"]
    # And the models discovered at its group's provider only (docs/src/features/model-discovery.md).
    assert {m["owned_by"] for m in listed if m["owned_by"] != "llm-gateway"} <= {"mock-openai"}
    # One group: only those the key may use; the others do not exist for it.
    status, _, body = gw.request("GET", "/v1/models/mock-openai", headers=headers)
    assert status == 200 and json.loads(body)["id"] == "mock-openai"
    status, _, body = gw.request("GET", "/v1/models/mock-anthropic", headers=headers)
    assert (status, json.loads(body)["error"]["code"]) == (404, "MODEL_NOT_FOUND")


def test_models_retrieve_and_created(gw):
    import time
    status, _, body = gw.request("GET", "/v1/models")
    # The groups (discovered models have their vendors' times).
    listed = [m for m in json.loads(body)["data"] if m["owned_by"] == "llm-gateway"]
    created = {m["created"] for m in listed}
    assert len(created) == 1, "one configuration, one time"
    assert time.time() - 3600 < created.pop() <= time.time(), "when the configuration loaded"
    status, headers, body = gw.request("GET", "/v1/models/mock-gemini")
    assert status == 200, body
    assert json.loads(body) == next(m for m in listed if m["id"] == "mock-gemini")
    status, _, body = gw.request("GET", "/v1/models/mock%2Dgemini")
    assert status == 200 and json.loads(body)["id"] == "mock-gemini", "the id is percent-decoded"
    status, _, body = gw.request("GET", "/v1/models/no-such-group")
    err = json.loads(body)["error"]
    assert (status, err["code"], err["param"], err["type"]) == (404, "MODEL_NOT_FOUND", "model", "invalid_request_error")


@pytest.mark.parametrize("method,path,allow", [("GET", "/v1/chat/completions", "POST"),
                                               ("PUT", "/v1/chat/completions", "POST"),
                                               ("POST", "/v1/models", "GET"),
                                               ("DELETE", "/v1/models/mock-openai", "GET")])
def test_wrong_methods_are_405_with_allow(gw, method, path, allow):
    status, headers, body = gw.request(method, path, raw=b"{}" if method in ("POST", "PUT") else None)
    assert status == 405, body
    assert headers["allow"] == allow
    assert json.loads(body)["error"]["code"] == "METHOD_NOT_ALLOWED"


@pytest.fixture(scope="module")
def open_gw(tmp_path_factory):
    """A gateway with auth explicitly off, as in a sidecar behind mesh auth."""
    workdir = tmp_path_factory.mktemp("envoy-open")
    mock, mock_port = gateway.start_mock()
    envoy = None
    try:
        envoy = gateway.start_envoy(gateway.build_bootstrap(0, 0, mock_port, env={}), workdir)
        yield Gateway(envoy.port, envoy.admin_port, mock_port, workdir, key=None)
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


def test_auth_disabled_mode(open_gw, test_id):
    status, _, body = open_gw.chat({"model": "mock-anthropic", "messages": OK_MSG},
                                   **{"authorization": "Bearer whatever-the-mesh-sent", "x-test-id": test_id})
    assert status == 200, body
    [sent] = open_gw.mock_requests(test_id)
    assert "whatever-the-mesh-sent" not in json.dumps(sent["headers"])
    status, _, body = open_gw.request("GET", "/v1/models")
    assert {"mock-openai", "mock-anthropic"} <= {m["id"] for m in json.loads(body)["data"]}


def test_make_run_turns_keys_on_with_gateway_api_keys():
    bootstrap = gateway.build_bootstrap(1, 2, 3, env={"GATEWAY_API_KEYS": "k1, k2"})
    config = json.loads(gateway._wasm_filters(bootstrap)[1]["configuration"]["value"])
    assert config["auth"]["enabled"] is True
    assert [k["sha256"] for k in config["auth"]["keys"]] == [gateway.key_hash("k1"), gateway.key_hash("k2")]
    assert "k1" not in json.dumps(config).replace(gateway.key_hash("k1"), "")
    bootstrap = gateway.build_bootstrap(1, 2, 3, env={})
    config = json.loads(gateway._wasm_filters(bootstrap)[1]["configuration"]["value"])
    assert config["auth"] == {"enabled": False}


# --- vendor secrets ------------------------------------------------------------------

@pytest.mark.parametrize("group", ["mock-openai", "mock-anthropic"])
def test_vendor_key_quoted_in_error_is_redacted(gw, group):
    status, _, body = gw.chat({"model": "m", "messages": OK_MSG}, **{"x-model-group": group, "x-mock-scenario": "echo-key"})
    assert status == 401 and body["error"]["code"] == "AUTH_FAILED"
    assert "[REDACTED]" in body["error"]["message"]
    for key in VENDOR_KEYS:
        assert key not in json.dumps(body)


def test_streams_and_errors_never_carry_vendor_keys(gw):
    # Exercise the paths a key could leak through, then scan everything seen so far.
    stream(gw, {"model": "m", "messages": OK_MSG, "stream": True}, {"x-model-group": "mock-anthropic", "x-mock-scenario": "stream-error"})
    for group in ("mock-openai", "mock-anthropic"):
        gw.chat({"model": "m", "messages": OK_MSG}, **{"x-model-group": group, "x-mock-scenario": "error-401"})
    assert gw.seen, "responses were recorded"
    for headers, body in gw.seen:
        for key in VENDOR_KEYS:
            assert key not in headers and key.encode() not in body
