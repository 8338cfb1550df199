"""Each client surface words each error class as its own vendor does,
whatever vendor answered (issue 27), so the frameworks on the vendor's SDK
classify it as they would the vendor's own error; and every refusal on the
Messages API's paths is in Anthropic's envelope.

The frameworks (pinned in tests/requirements.txt) and what they look at:

- LangChain: `langchain-openai` (Chat Completions and Responses) and
  `langchain-anthropic` classify by the SDK's exception class (the status),
  but a context overflow only by WORDING: `context_length_exceeded` anywhere
  in `str(e)` (OpenAI), "prompt is too long" in the message (Anthropic).
- LiteLLM (`litellm.completion` / `litellm.responses` with `openai/` and
  `anthropic/` and `api_base`): `ContextWindowExceededError` only for text
  such as "this model's maximum context length is" or "prompt is too long";
  `ContentPolicyViolationError` for "Invalid prompt" with "violating our
  usage policy" (OpenAI's own refusal of a flagged prompt) or
  `content_policy_violation` beside `invalid_request_error` in the error's
  text (OpenAI; the openai 3 SDK's error text is the message alone, so on
  Chat Completions only the first matches), or "content filtering policy"
  (Anthropic); overloads by "overloaded_error"/"Overloaded" (Anthropic);
  the rest by status. Its OpenAI mapping has no 403 class: a 403 stays
  a 403 (`request_forbidden`, OpenAI's own type for it).
- pydantic-ai: its OpenAI chat and Responses models and its Anthropic model
  raise a `ModelHTTPError` (status and body) that is also its category:
  `ModelContextWindowExceededError` for OpenAI's `context_length_exceeded`
  code or "maximum context length" in the message, and for Anthropic's
  `invalid_request_error` saying "prompt is too long";
  `ModelOverloadedError` for a 529, Anthropic's `overloaded_error`, or a 503
  whose message says "overloaded"; `ModelUnavailableError` for any other
  503; `ModelRateLimitError` (429), `ModelAuthenticationError` (401, 403),
  `ModelNotFoundError` (404), `ModelServerError` (other 5xx), and
  `ModelRequestRejectedError` for any other 400 (a content filter: only
  Azure's own `content_filter` code, from an Azure client, becomes its
  `ContentFilterError`). `ModelQuotaExceededError` (OpenAI's
  `insufficient_quota`, Anthropic's `billing_error`) no mock group answers;
  the gateway's own spent budget is one on the OpenAI surfaces
  (tests/test_limits.py).

Each mock group is asked for each class with the mock's scenarios; one
test per (surface client, group) keeps the count modest. Import cost, once
per session on this machine: litellm ~5 s, langchain-anthropic ~3.5 s,
pydantic-ai ~1.3 s.
"""

import asyncio
import json
import os
from importlib.metadata import version

# LiteLLM fetches its model price map over the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import anthropic  # noqa: E402
import httpx  # noqa: E402
import litellm  # noqa: E402
import openai  # noqa: E402
import pytest  # noqa: E402
from langchain_anthropic import ChatAnthropic  # noqa: E402
from langchain_core import exceptions as lc  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai import exceptions as pai  # noqa: E402
from pydantic_ai.models.anthropic import AnthropicModel  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel  # noqa: E402
from pydantic_ai.providers.anthropic import AnthropicProvider  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from conftest import ALL_GROUPS_KEY  # noqa: E402
from test_envoy_hardening import WASM_FLOOR, crash_mode, raw_http, shipped  # noqa: E402,F401 (shipped: a fixture)

GROUPS = ["mock-openai", "mock-anthropic", "mock-gemini", "mock-azure", "mock-bedrock", "mock-dashscope"]
# Vendors whose content filter refuses with an error (OpenAI's and
# Anthropic's mocks answer a `blocked-prompt` normally).
FILTERING = {"mock-gemini", "mock-azure", "mock-bedrock", "mock-dashscope"}

CLASSES = ["context", "rate_limit", "auth", "permission", "not_found", "overloaded", "content_filter", "server"]


def scenario(group, kind):
    return {
        "context": "error-400-context", "rate_limit": "error-429", "auth": "error-401",
        "permission": "error-403", "not_found": "error-404", "content_filter": "blocked-prompt",
        "server": "error-500",
        # Anthropic's overload is its 529; the others' a 503.
        "overloaded": "error-529" if group == "mock-anthropic" else "error-503",
    }[kind]


def classes_for(group):
    return [k for k in CLASSES if k != "content_filter" or group in FILTERING]


# What a client of each surface sees: status, `type`, `code`, and the words
# its vendor's frameworks look for (lowercase), as in docs/src/apis/errors.md.
OPENAI_SEES = {
    "context": (400, "invalid_request_error", "CONTEXT_LENGTH_EXCEEDED",
                ["this model's maximum context length is", "context_length_exceeded"]),
    "rate_limit": (429, "requests", "UPSTREAM_RATE_LIMIT", []),
    "auth": (401, "invalid_request_error", "AUTH_FAILED", []),
    "permission": (403, "request_forbidden", "PERMISSION_DENIED", []),
    "not_found": (404, "invalid_request_error", "MODEL_NOT_FOUND", []),
    "overloaded": (503, "server_error", "UPSTREAM_BUSY", ["overloaded"]),
    "content_filter": (400, "invalid_request_error", "CONTENT_FILTERED", ["content_policy_violation"]),
    "server": (502, "server_error", "UPSTREAM_ERROR", []),
}
ANTHROPIC_SEES = {
    "context": (400, "invalid_request_error", "CONTEXT_LENGTH_EXCEEDED", ["prompt is too long"]),
    "rate_limit": (429, "rate_limit_error", "UPSTREAM_RATE_LIMIT", []),
    "auth": (401, "authentication_error", "AUTH_FAILED", []),
    "permission": (403, "permission_error", "PERMISSION_DENIED", []),
    "not_found": (404, "not_found_error", "MODEL_NOT_FOUND", []),
    "overloaded": (529, "overloaded_error", "UPSTREAM_BUSY", ["overloaded"]),
    "content_filter": (400, "invalid_request_error", "CONTENT_FILTERED", ["content filtering policy"]),
    "server": (500, "api_error", "UPSTREAM_ERROR", []),
}

LANGCHAIN = {
    "context": lc.ContextOverflowError, "rate_limit": lc.ModelRateLimitError,
    "auth": lc.ModelAuthenticationError, "permission": lc.ModelPermissionDeniedError,
    "not_found": lc.ModelNotFoundError, "overloaded": lc.ModelAPIError,
    "content_filter": lc.ModelInvalidRequestError, "server": lc.ModelAPIError,
}
LITELLM_OPENAI = {
    "context": litellm.ContextWindowExceededError, "rate_limit": litellm.RateLimitError,
    "auth": litellm.AuthenticationError, "permission": litellm.APIError,
    "not_found": litellm.NotFoundError, "overloaded": litellm.ServiceUnavailableError,
    "content_filter": litellm.ContentPolicyViolationError, "server": litellm.BadGatewayError,
}
LITELLM_ANTHROPIC = {
    "context": litellm.ContextWindowExceededError, "rate_limit": litellm.RateLimitError,
    "auth": litellm.AuthenticationError, "permission": litellm.PermissionDeniedError,
    "not_found": litellm.NotFoundError, "overloaded": litellm.InternalServerError,
    "content_filter": litellm.ContentPolicyViolationError, "server": litellm.InternalServerError,
}

# The same on both surfaces: the statuses differ (503 / 529), the class not.
PYDANTIC_AI = {
    "context": pai.ModelContextWindowExceededError, "rate_limit": pai.ModelRateLimitError,
    "auth": pai.ModelAuthenticationError, "permission": pai.ModelAuthenticationError,
    "not_found": pai.ModelNotFoundError, "overloaded": pai.ModelOverloadedError,
    "content_filter": pai.ModelRequestRejectedError, "server": pai.ModelServerError,
}


def test_versions_are_the_pinned_ones():
    """The behaviour described above is that of the versions that ran."""
    assert (version("langchain-anthropic"), version("litellm"), version("pydantic-ai-slim")) == \
        ("1.7.10", "1.110.2", "2.68.0")


def headers(group, kind):
    return {"x-model-group": group, "x-mock-scenario": scenario(group, kind)}


def check_body(body, sees, kind, envelope):
    """The error object a client got has its surface's type, code and words."""
    status, kind_type, code, words = sees[kind]
    if envelope == "anthropic":
        assert body["type"] == "error", body
    err = body["error"]
    assert (err["type"], err["code"]) == (kind_type, code), err
    for word in words:
        assert word in err["message"].lower(), err
    return status


def run_all(group, ask, classes=None):
    """`ask(kind)` for every class the group has; the failures, all at once."""
    failures = []
    for kind in classes or classes_for(group):
        try:
            ask(kind)
        except AssertionError as e:
            failures.append(f"{kind}: {e}")
    assert not failures, "\n".join(failures)


def expect(error_class, call):
    try:
        call()
    except error_class as e:
        return e
    except Exception as e:  # noqa: BLE001 - the assertion names what came instead
        raise AssertionError(f"{type(e).__module__}.{type(e).__name__} instead of "
                             f"{error_class.__module__}.{error_class.__name__}: {str(e)[:300]}") from e
    raise AssertionError(f"no error, {error_class.__name__} expected")


# ---- LangChain --------------------------------------------------------------

@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("responses_api", [False, True], ids=["chat", "responses"])
def test_langchain_openai(gw, group, responses_api):
    def ask(kind):
        model = ChatOpenAI(model="any", base_url=gw.base + "/v1", api_key=gw.key, max_retries=0,
                           use_responses_api=responses_api, default_headers=headers(group, kind))
        e = expect(LANGCHAIN[kind], lambda: model.invoke("hello framework"))
        # The OpenAI SDK's `body` is the envelope's `error` object.
        assert e.status_code == check_body({"error": e.body}, OPENAI_SEES, kind, "openai")
    run_all(group, ask)


@pytest.mark.parametrize("group", GROUPS)
def test_langchain_anthropic(gw, group):
    def ask(kind):
        model = ChatAnthropic(model="any", base_url=gw.base, api_key=gw.key, max_retries=0,
                              default_headers=headers(group, kind))
        e = expect(LANGCHAIN[kind], lambda: model.invoke("hello framework"))
        assert isinstance(e, anthropic.APIStatusError)
        assert e.status_code == check_body(e.body, ANTHROPIC_SEES, kind, "anthropic")
        if kind == "overloaded":
            assert isinstance(e, anthropic.OverloadedError)
    run_all(group, ask)


# ---- LiteLLM ----------------------------------------------------------------

def litellm_status(e):
    return getattr(e, "status_code", None)


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_litellm_openai(gw, group, api):
    def ask(kind):
        common = dict(model="openai/any", api_base=gw.base + "/v1", api_key=gw.key,
                      extra_headers=headers(group, kind), num_retries=0, max_retries=0)
        if api == "chat":
            call = lambda: litellm.completion(messages=[{"role": "user", "content": "hi"}], **common)  # noqa: E731
        else:
            call = lambda: litellm.responses(input="hi", **common)  # noqa: E731
        e = expect(LITELLM_OPENAI[kind], call)
        assert litellm_status(e) == OPENAI_SEES[kind][0], (kind, litellm_status(e))
    run_all(group, ask)


@pytest.mark.parametrize("group", GROUPS)
def test_litellm_anthropic(gw, group):
    def ask(kind):
        e = expect(LITELLM_ANTHROPIC[kind], lambda: litellm.completion(
            model="anthropic/any", api_base=gw.base, api_key=gw.key, max_tokens=50,
            messages=[{"role": "user", "content": "hi"}], extra_headers=headers(group, kind),
            num_retries=0, max_retries=0))
        if kind == "overloaded":
            assert "overloaded_error" in str(e)
    run_all(group, ask)


# ---- pydantic-ai ------------------------------------------------------------

def pydantic_agent(gw, group, kind, api):
    if api == "messages":
        client = anthropic.AsyncAnthropic(base_url=gw.base, api_key=gw.key, max_retries=0,
                                          default_headers=headers(group, kind))
        return Agent(AnthropicModel("any", provider=AnthropicProvider(anthropic_client=client)))
    client = openai.AsyncOpenAI(base_url=gw.base + "/v1", api_key=gw.key, max_retries=0,
                                default_headers=headers(group, kind))
    model = OpenAIChatModel if api == "chat" else OpenAIResponsesModel
    return Agent(model("any", provider=OpenAIProvider(openai_client=client)))


def pydantic_class(e, kind):
    """`e` is `kind`'s category and no other, more specific one (a context
    overflow is also a rejected request, an overload also unavailable)."""
    want = PYDANTIC_AI[kind]
    others = set(PYDANTIC_AI.values()) | {pai.ModelUnavailableError, pai.ModelQuotaExceededError}
    wrong = [c.__name__ for c in others if isinstance(e, c) and not issubclass(want, c)]
    assert not wrong, f"{want.__name__} expected, also {wrong}"


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_pydantic_ai(gw, group, api):
    """Its OpenAI chat and Responses models and its Anthropic model: the
    category, the HTTP error's status, the body, the provider's `type`."""
    sees, envelope = (ANTHROPIC_SEES, "anthropic") if api == "messages" else (OPENAI_SEES, "openai")

    def ask(kind):
        agent = pydantic_agent(gw, group, kind, api)
        e = expect(PYDANTIC_AI[kind], lambda: asyncio.run(agent.run("hello framework")))
        pydantic_class(e, kind)
        assert isinstance(e, pai.ModelHTTPError)
        # The OpenAI SDK's `body` is the envelope's `error` object, the Anthropic SDK's the whole envelope.
        body = e.body if envelope == "anthropic" else {"error": e.body}
        assert e.status_code == check_body(body, sees, kind, envelope)
        assert e.provider_error_type == sees[kind][1], e.provider_error_type
    run_all(group, ask)


# ---- envelopes on the Messages API's paths ---------------------------------

def anthropic_envelope(status, hdrs, body, want_status, error_type, code):
    """Anthropic's envelope with the gateway's extras, as the Messages surface's other errors."""
    assert status == want_status, body
    assert hdrs["content-type"].startswith("application/json"), hdrs
    doc = json.loads(body)
    assert doc["type"] == "error" and set(doc) == {"type", "error", "request_id"}, doc
    err = doc["error"]
    assert (err["type"], err["code"]) == (error_type, code), err
    return doc


@pytest.mark.parametrize("path", [
    "/v1/messages/batches", "/v1/messages/", "/v1/messages/batches/msgbatch_1/results",
    # However the Messages prefix is spelled: another case, an escaped slash, a path parameter.
    "/v1/Messages", "/v1/MESSAGES/count_tokens", "/v1/messages%2Fcount_tokens", "/v1/messages;x",
])
def test_unknown_messages_paths_are_anthropic_errors(gw, path):
    status, hdrs, body = gw.request("POST", path, raw=b"{}", headers={"x-request-id": "wording-path"})
    doc = anthropic_envelope(status, hdrs, body, 404, "not_found_error", "MODEL_NOT_FOUND")
    assert doc["error"]["param"] == "path" and doc["request_id"] == hdrs["x-request-id"] == "wording-path"
    # And the SDK raises its own class for it.
    client = anthropic.Anthropic(api_key=ALL_GROUPS_KEY, base_url=gw.base, max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as e:
        client.post("/v1/messages/batches", cast_to=httpx.Response, body={})
    assert e.value.body["error"]["type"] == "not_found_error"


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/Messages", "/v1/messages%2Fcount_tokens", "/v1/messages;x"])
def test_codec_refusal_on_messages_is_anthropic_error(gw, path):
    """Refused by the HCM before any filter ran (no Host header)."""
    status, hdrs, body = raw_http(gw, b"POST " + path.encode() + b" HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}")
    doc = anthropic_envelope(status, hdrs, body, 400, "invalid_request_error", "INVALID_REQUEST")
    assert doc["error"]["message"] == "the gateway refused the HTTP request: missing_host_header"


@pytest.mark.parametrize("name,request_bytes,status,details", [
    ("transfer-encoding", b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ntransfer-encoding: gzip\r\n\r\n",
     501, "http1.invalid_transfer_encoding"),
    ("http-1.0", b"POST /v1/messages HTTP/1.0\r\nhost: x\r\n\r\n", 426, "low_version"),
    ("headers-too-large", b"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * (70 << 10) + b"\r\n\r\n",
     431, "http1.headers_too_large"),
])
def test_codec_refusal_before_a_path_is_both_envelopes(gw, name, request_bytes, status, details):
    """Envoy parsed no path, so it cannot tell the API: the body is
    Anthropic's envelope and OpenAI's at once."""
    got, hdrs, body = raw_http(gw, request_bytes)
    doc = anthropic_envelope(got, hdrs, body, status, "invalid_request_error", "INVALID_REQUEST")
    assert set(doc["error"]) == {"message", "type", "code", "param", "provider", "request_id"}, doc
    assert doc["error"]["message"] == f"the gateway refused the HTTP request: {details}"
    assert json.loads(body)["request_id"] is None  # no request id exists yet


def test_a_dead_vm_on_messages_is_anthropics_overload(shipped):
    """The VM died mid-request (benches/wasm-floor's test-only crash mode):
    Envoy's own 503 (wasm_fail_stream), as Anthropic's 529 overload."""
    s = shipped(wasm=WASM_FLOOR, edit_bootstrap=crash_mode)
    status, hdrs, body = s.gw.request("POST", "/v1/messages", raw=b"{}", headers={
        "x-llm-cluster": "mock_anthropic", "x-crash-test": "1", "x-request-id": "crash-messages"})
    doc = anthropic_envelope(status, hdrs, body, 529, "overloaded_error", "UPSTREAM_BUSY")
    assert doc["request_id"] == hdrs["x-request-id"] == "crash-messages"
    assert hdrs["retry-after"] == "1"
    assert doc["error"]["message"].startswith("Overloaded: ")


UPGRADE = ("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions", "/v1/responses"])
def test_websocket_upgrade_is_a_unified_error(gw, path):
    """No upgrade is configured: Envoy's 403, in the surface's envelope, with a request id."""
    status, hdrs, body = raw_http(gw, (f"GET {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {gw.key}\r\n"
                                       f"x-request-id: ws-{path[4:].replace('/', '-')}\r\n{UPGRADE}\r\n").encode())
    want_id = f"ws-{path[4:].replace('/', '-')}"
    if path == "/v1/messages":
        doc = anthropic_envelope(status, hdrs, body, 403, "permission_error", "PERMISSION_DENIED")
        err = doc["error"]
        assert doc["request_id"] == want_id
    else:
        assert status == 403 and hdrs["content-type"].startswith("application/json"), body
        err = json.loads(body)["error"]
        assert (err["type"], err["code"], err["request_id"]) == ("request_forbidden", "PERMISSION_DENIED", want_id)
    assert hdrs["x-request-id"] == want_id
    assert "websocket" in err["message"].lower()



# ---- the Gemini surface -----------------------------------------------------

# LiteLLM's Gemini mapping (`gemini/` with `api_base`, the error's text):
# a context overflow by "exceeds the maximum number of tokens", a content
# filter by "The response was blocked.", "The model is overloaded." as
# its InternalServerError (as Gemini's own 503), a 403 as a BadRequestError
# (its mapping has no other class for Google's 403s).
LITELLM_GEMINI = {
    "context": litellm.ContextWindowExceededError, "rate_limit": litellm.RateLimitError,
    "auth": litellm.AuthenticationError, "permission": litellm.BadRequestError,
    "not_found": litellm.NotFoundError, "overloaded": litellm.InternalServerError,
    "content_filter": litellm.ContentPolicyViolationError, "server": litellm.InternalServerError,
}
# The google-genai SDK's error: (HTTP status, Google's status, our code, words).
GEMINI_SEES = {
    "context": (400, "INVALID_ARGUMENT", "CONTEXT_LENGTH_EXCEEDED", ["exceeds the maximum number of tokens"]),
    "rate_limit": (429, "RESOURCE_EXHAUSTED", "UPSTREAM_RATE_LIMIT", []),
    "auth": (401, "UNAUTHENTICATED", "AUTH_FAILED", []),
    "permission": (403, "PERMISSION_DENIED", "PERMISSION_DENIED", []),
    "not_found": (404, "NOT_FOUND", "MODEL_NOT_FOUND", []),
    "overloaded": (503, "UNAVAILABLE", "UPSTREAM_BUSY", ["the model is overloaded."]),
    "content_filter": (400, "INVALID_ARGUMENT", "CONTENT_FILTERED", ["the response was blocked."]),
    "server": (500, "INTERNAL", "UPSTREAM_ERROR", []),
}


def gemini_classes(group):
    """A prompt Gemini blocks is Gemini's own 200 verdict to a Gemini client
    (`promptFeedback`, tests/test_gemini_surface.py), not an error."""
    return [k for k in classes_for(group) if not (group == "mock-gemini" and k == "content_filter")]


@pytest.mark.parametrize("group", GROUPS)
def test_litellm_gemini(gw, group):
    def ask(kind):
        e = expect(LITELLM_GEMINI[kind], lambda: litellm.completion(
            model="gemini/any", api_base=gw.base + "/v1beta", api_key=gw.key,
            messages=[{"role": "user", "content": "hi"}], extra_headers=headers(group, kind),
            num_retries=0, max_retries=0))
        # That class itself, not a subclass (a context overflow is also a BadRequestError).
        assert type(e) is LITELLM_GEMINI[kind], type(e)
    run_all(group, ask, gemini_classes(group))


@pytest.mark.parametrize("group", GROUPS)
def test_google_genai(gw, group):
    from google import genai
    from google.genai import errors as genai_errors

    def ask(kind):
        client = genai.Client(api_key=gw.key, http_options={
            "base_url": gw.base, "headers": headers(group, kind), "retry_options": {"attempts": 1}})
        e = expect(genai_errors.APIError, lambda: client.models.generate_content(model="any", contents="hi"))
        status, google_status, code, words = GEMINI_SEES[kind]
        assert (e.code, e.status) == (status, google_status), (e.code, e.status, e.message)
        # Gemini's own errors keep Google's details (test_gemini_error_details.py).
        if group != "mock-gemini":
            assert e.details["error"]["details"][0]["reason"] == code, e.details
        for word in words:
            assert word in e.message.lower(), e.message
    run_all(group, ask, gemini_classes(group))
