"""Gemini's API as a client surface (issue 32): the `google-genai` Python
SDK, unchanged but for its base URL, against every mock group through a
real Envoy: answers, streams, function-call round trips, thinking, token
counting, the model list, and errors as the SDK's own error classes. The
model in the path picks the group; the gateway key is `x-goog-api-key` (the
SDK's) or `?key=`, and never reaches a vendor. To a Gemini provider the
request passes through (the mock records what it got, and refuses what
Gemini refuses).
"""

import json
import urllib.request

import httpx2
import pytest
from google import genai
from google.genai import errors, types

from conftest import ALL_GROUPS_KEY, OPENAI_ONLY_KEY, own_gateway

GROUPS = ["mock-gemini", "mock-openai", "mock-anthropic", "mock-bedrock", "mock-dashscope", "mock-azure"]
# The vendor model that answers each group.
MODEL = {
    "mock-openai": "mock-gpt-4o",
    "mock-anthropic": "mock-claude-sonnet",
    "mock-gemini": "mock-gemini-flash",
    "mock-azure": "gpt-4o-2024-08-06",  # the deployment's model, as Azure names it
    "mock-bedrock": "anthropic.claude-3-haiku-20240307-v1:0",
    "mock-dashscope": "qwen-plus",
}
# Vendors that think when asked (and say so in their usage).
THINKERS = ["mock-gemini", "mock-anthropic", "mock-dashscope"]
LOOKUP = types.FunctionDeclaration(
    name="lookup", description="Look something up",
    parameters_json_schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})


@pytest.fixture(scope="module")
def ggw(tmp_path_factory):
    with own_gateway(tmp_path_factory.mktemp("envoy-gemini")) as gw:
        yield gw


def client(ggw, key=ALL_GROUPS_KEY, **headers):
    """The SDK pointed at the gateway (its own `/v1beta/...` paths)."""
    return genai.Client(api_key=key, http_options=types.HttpOptions(
        base_url=ggw.base, headers=headers, retry_options=types.HttpRetryOptions(attempts=1)))


def raw(ggw, method, path, body=None, headers=None):
    """(status, headers, body bytes) of a request the SDK would not make."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(ggw.base + path, data=data, method=method,
                                 headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            out = (r.status, dict(r.headers), r.read())
    except urllib.error.HTTPError as e:
        out = (e.code, dict(e.headers), e.read())
    ggw.record(out[1], out[2])
    return out


def tools_config(mode="ANY"):
    return types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[LOOKUP])],
        tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(mode=mode)),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))


def merged(chunks):
    """A stream's chunks as one answer: its text, and its function call parts
    (with their thought signatures, which must go back with them)."""
    text, calls = "", []
    for chunk in chunks:
        for part in (chunk.candidates[0].content.parts or []) if chunk.candidates and chunk.candidates[0].content else []:
            if part.function_call:
                calls.append(part)
            elif part.text and not part.thought:
                text += part.text
    return text, calls


# ------------------------------------------------------------ every group

@pytest.mark.parametrize("group", GROUPS)
def test_generate(ggw, group):
    c = client(ggw)
    r = c.models.generate_content(model=group, contents="hello surface")
    assert "Hello from the mock" in r.text and "hello surface" in r.text
    assert r.model_version == MODEL[group]
    assert r.candidates[0].finish_reason == types.FinishReason.STOP
    u = r.usage_metadata
    assert u.prompt_token_count > 0 and u.candidates_token_count > 0
    assert u.total_token_count == u.prompt_token_count + u.candidates_token_count + (u.thoughts_token_count or 0)


@pytest.mark.parametrize("group", GROUPS)
def test_stream(ggw, group):
    c = client(ggw)
    chunks = list(c.models.generate_content_stream(model=group, contents="hello stream"))
    assert len(chunks) > 1, "incremental"
    text, _ = merged(chunks)
    assert "hello stream" in text
    last = chunks[-1]
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata.candidates_token_count > 0 and last.usage_metadata.prompt_token_count > 0
    assert all(c.model_version == MODEL[group] for c in chunks)


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_function_call_round_trip(ggw, group, stream):
    c = client(ggw)
    ask = [types.Content(role="user", parts=[types.Part(text="look it up")])]
    if stream:
        _, parts = merged(c.models.generate_content_stream(model=group, contents=ask, config=tools_config()))
    else:
        first = c.models.generate_content(model=group, contents=ask, config=tools_config())
        parts = [p for p in first.candidates[0].content.parts if p.function_call]
        assert first.candidates[0].finish_reason == types.FinishReason.STOP
    calls = [p.function_call for p in parts]
    assert [f.name for f in calls] == ["lookup"] and "q" in calls[0].args
    history = [*ask, types.Content(role="model", parts=parts),
               types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
                   id=calls[0].id, name="lookup", response={"output": "found it"}))])]
    second = c.models.generate_content(model=group, contents=history, config=tools_config("AUTO"))
    # Gemini's mock quotes the whole response object, the others its output.
    assert "Tool result received: " in second.text and "found it" in second.text


@pytest.mark.parametrize("group", THINKERS)
def test_thinking(ggw, group):
    config = types.GenerateContentConfig(
        max_output_tokens=4096,
        thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=2048))
    c = client(ggw)
    r = c.models.generate_content(model=group, contents="think about it", config=config)
    parts = r.candidates[0].content.parts
    assert any(p.thought for p in parts), parts
    assert "Hello from the mock" in r.text
    if group != "mock-anthropic":  # Anthropic counts thinking among the output tokens
        assert r.usage_metadata.thoughts_token_count > 0


@pytest.mark.parametrize("group", THINKERS)
def test_a_thinking_budget_without_an_output_limit_leaves_room_for_the_answer(ggw, group):
    # Gemini CLI sends a budget and no maxOutputTokens; Claude requires its
    # max_tokens above the budget: the gateway adds the answer's room.
    config = types.GenerateContentConfig(
        thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=8192))
    c = client(ggw)
    r = c.models.generate_content(model=group, contents="think about it", config=config)
    assert any(p.thought for p in r.candidates[0].content.parts)
    assert "Hello from the mock" in r.text


def test_the_paths_model_chooses_the_group(ggw, test_id):
    """Not a header, not the body: the path's model names the group."""
    c = client(ggw, **{"x-test-id": test_id})
    c.models.generate_content(model="mock-openai", contents="hi")
    [sent] = ggw.mock_requests(test_id)
    assert sent["path"] == "/v1/chat/completions" and sent["body"]["model"] == MODEL["mock-openai"]


def test_passes_through_to_gemini(ggw, test_id):
    """To a Gemini provider the client's bytes go on; the model is the vendor's, in the path."""
    body = {"contents": [{"role": "user", "parts": [{"text": "pass me"}]}],
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}],
            "generationConfig": {"topK": 3, "candidateCount": 1}}
    headers = {"x-goog-api-key": ALL_GROUPS_KEY, "x-test-id": test_id}
    status, _, answer = raw(ggw, "POST", "/v1beta/models/mock-gemini:generateContent", body, headers)
    assert status == 200 and "pass me" in answer.decode()
    [sent] = ggw.mock_requests(test_id)
    assert sent["path"] == f"/v1beta/models/{MODEL['mock-gemini']}:generateContent"
    assert sent["body"] == body
    assert sent["headers"]["x-goog-api-key"] != ALL_GROUPS_KEY


@pytest.mark.parametrize("group", GROUPS)
def test_the_sdks_service_tier_and_logging_choice_are_taken(ggw, group, test_id):
    """google-genai writes `serviceTier` and `store` at the request's top:
    to Gemini they go on as they came (the mock refuses what Gemini does
    not know); to other vendors they are Google's own choices, dropped."""
    c = client(ggw, **{"x-test-id": test_id})
    r = c.models.generate_content(model=group, contents="tiered", config=types.GenerateContentConfig(
        service_tier=types.ServiceTier.FLEX, store=False))
    assert "tiered" in r.text
    [sent] = ggw.mock_requests(test_id)
    if group == "mock-gemini":
        assert (sent["body"]["serviceTier"], sent["body"]["store"]) == ("flex", False), sent["body"]
    else:
        assert not {"serviceTier", "service_tier", "store"} & set(sent["body"]), sent["body"]


def test_a_continuation_token_is_geminis_alone(ggw, test_id):
    """`continuationToken` resumes an answer only Gemini holds: passed on to
    Gemini, refused (400, naming it) for another vendor."""
    body = {"contents": [{"role": "user", "parts": [{"text": "go on"}]}], "continuationToken": "dG9rZW4="}
    headers = {"x-goog-api-key": ALL_GROUPS_KEY, "x-test-id": test_id}
    status, _, answer = raw(ggw, "POST", "/v1beta/models/mock-gemini:generateContent", body, headers)
    assert status == 200, answer
    status, _, answer = raw(ggw, "POST", "/v1beta/models/mock-anthropic:generateContent", body, headers)
    assert status == 400 and "continuationToken" in answer.decode(), answer
    assert len(ggw.mock_requests(test_id)) == 1


def test_the_key_as_a_query_parameter_is_taken_and_removed(ggw, test_id):
    body = {"contents": [{"parts": [{"text": "query key"}]}]}
    status, _, answer = raw(ggw, "POST", f"/v1beta/models/mock-gemini:streamGenerateContent?alt=sse&key={ALL_GROUPS_KEY}",
                            body, {"x-test-id": test_id})
    assert status == 200 and answer.startswith(b"data: ")
    [sent] = ggw.mock_requests(test_id)
    assert ALL_GROUPS_KEY not in sent["path"] and ALL_GROUPS_KEY not in json.dumps(sent["headers"])
    status, _, answer = raw(ggw, "POST", "/v1beta/models/mock-gemini:generateContent?key=wrong", body)
    assert status == 401 and json.loads(answer)["error"]["status"] == "UNAUTHENTICATED"


def test_every_key_parameter_is_removed(ggw, test_id):
    """A second `key=`, or one whose name is percent-encoded, is a key to
    the vendor too: none reaches it; the first authenticates."""
    body = {"contents": [{"parts": [{"text": "two keys"}]}]}
    second = "second-key-never-forwarded"
    status, _, answer = raw(ggw, "POST", f"/v1beta/models/mock-gemini:generateContent?key={ALL_GROUPS_KEY}"
                            f"&key={second}&k%65y={second}", body, {"x-test-id": test_id})
    assert status == 200, answer
    [sent] = ggw.mock_requests(test_id)
    seen = sent["path"] + "?" + (sent.get("query") or "") + json.dumps(sent["headers"])
    assert second not in seen and ALL_GROUPS_KEY not in seen


@pytest.mark.parametrize("group", ["mock-gemini", "mock-openai"])
def test_stream_without_alt_sse_is_one_json_array(ggw, group):
    status, headers, body = raw(ggw, "POST", f"/v1/models/{group}:streamGenerateContent",
                                {"contents": [{"parts": [{"text": "array please"}]}]},
                                {"x-goog-api-key": ALL_GROUPS_KEY})
    assert status == 200
    chunks = json.loads(body)
    assert isinstance(chunks, list) and len(chunks) > 1
    text = "".join(p.get("text", "") for c in chunks for cand in c.get("candidates", [])
                   for p in cand.get("content", {}).get("parts", []))
    assert "array please" in text
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP" and chunks[-1]["usageMetadata"]


@pytest.mark.parametrize("group", ["mock-gemini", "mock-anthropic"])
@pytest.mark.parametrize("method", ["generateContent", "streamGenerateContent?alt=sse"])
def test_unknown_members_inside_parts_are_refused_as_gemini_does(ggw, group, method, test_id):
    """A member Gemini does not know, at any depth, is its 400 before any vendor
    is called: on the pass-through to Gemini as on the translated path."""
    headers = {"x-goog-api-key": ALL_GROUPS_KEY, "x-test-id": test_id}
    cases = [
        ({"contents": [{"role": "user", "parts": [{"text": "hi", "x": 1}]}]}, "x", "contents[0].parts[0]"),
        ({"contents": [{"role": "user", "parts": [{"text": "hi"}]},
                       {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}, "argz": {}}}]}]},
         "argz", "contents[1].parts[0].function_call"),
        ({"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"thinkingConfig": {"budget": 1}}},
         "budget", "generation_config.thinking_config"),
    ]
    for body, name, at in cases:
        status, _, answer = raw(ggw, "POST", f"/v1beta/models/{group}:{method}", body, headers)
        error = json.loads(answer)["error"]
        assert status == 400 and error["status"] == "INVALID_ARGUMENT", answer
        assert error["message"] == f"Invalid JSON payload received. Unknown name \"{name}\" at '{at}': Cannot find field."
        assert error["details"][0]["metadata"]["param"] == f"{at}.{name}"
    assert ggw.mock_requests(test_id) == [], "refused before any vendor"
    # The SDK's own members of a part (signatures, ids, metadata) are taken.
    c = client(ggw)
    asked = types.Content(role="user", parts=[types.Part(text="look it up", part_metadata={"k": "v"})])
    first = c.models.generate_content(model=group, contents=[asked], config=tools_config())
    [call] = [p.function_call for p in first.candidates[0].content.parts if p.function_call]
    answered = types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
        id=call.id, name=call.name, response={"output": "42"}, will_continue=False))])
    answer = c.models.generate_content(model=group, contents=[asked, first.candidates[0].content, answered],
                                       config=tools_config("AUTO"))
    assert answer.text


# ------------------------------------------------------------ large thought signatures

BIG_SIGNATURE = 70_000  # base64 characters: above 64 KB, across many of the mock's 4 KB chunks


def signed_parts(parts):
    return [p.thought_signature for p in parts if p.thought_signature]


@pytest.mark.parametrize("group", ["mock-gemini", "mock-anthropic"])
def test_large_thought_signatures_stream_whole_and_come_back_byte_equal(ggw, group, test_id):
    """Gemini's signatures on function calls (passed through) and Claude's on
    its thinking (signature deltas, carried in `thoughtSignature`), 70 KB
    each, in a stream the mock writes in 4 KB chunks: none truncated (the
    stream's equal the whole answer's), and each back at the vendor as it
    was issued (the mock checks it against what it signed)."""
    big = f"big-signatures={BIG_SIGNATURE}"
    config = types.GenerateContentConfig(
        max_output_tokens=4096, thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=2048),
        tools=[types.Tool(function_declarations=[LOOKUP])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    c = client(ggw, **{"x-mock-scenario": f"tool,{big}", "x-test-id": test_id})
    ask = [types.Content(role="user", parts=[types.Part(text="look it up")])]
    parts = [p for ch in c.models.generate_content_stream(model=group, contents=ask, config=config)
             if ch.candidates and ch.candidates[0].content for p in ch.candidates[0].content.parts or []]
    streamed = signed_parts(parts)
    assert streamed and all(len(s) >= BIG_SIGNATURE * 3 // 4 for s in streamed), [len(s) for s in streamed]
    whole = c.models.generate_content(model=group, contents=ask, config=config)
    assert signed_parts(whole.candidates[0].content.parts) == streamed
    [call] = [p.function_call for p in parts if p.function_call]
    history = [*ask, types.Content(role="model", parts=parts),
               types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
                   id=call.id, name=call.name, response={"output": "found it"}))])]
    again = client(ggw, **{"x-mock-scenario": big, "x-test-id": test_id})
    second = again.models.generate_content(model=group, contents=history, config=config)
    assert "found it" in second.text
    sent = ggw.mock_requests(test_id)[-1]["body"]
    if group == "mock-gemini":
        back = [p["thoughtSignature"] for p in sent["contents"][1]["parts"] if "thoughtSignature" in p]
    else:
        back = [b["signature"] for b in sent["messages"][1]["content"] if b["type"] == "thinking"]
    assert back and all(len(s) >= BIG_SIGNATURE for s in back), [len(s) for s in back]


# ------------------------------------------------------------ blocked prompts

@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_prompt_gemini_blocks_is_its_verdict_on_the_gemini_surface(ggw, stream):
    """Gemini's 200 with `promptFeedback.blockReason` and no candidates reaches
    a Gemini client in Gemini's shape (the SDK's `prompt_feedback`), whole and
    as a stream's one chunk; the unified API's clients get 400 CONTENT_FILTERED."""
    c = client(ggw, **{"x-mock-scenario": "blocked-prompt"})
    if stream:
        chunks = list(c.models.generate_content_stream(model="mock-gemini", contents="block me"))
        [answer] = [ch for ch in chunks if ch.prompt_feedback]
        assert not any(ch.candidates for ch in chunks)
    else:
        answer = c.models.generate_content(model="mock-gemini", contents="block me")
        assert not answer.candidates
    assert answer.prompt_feedback.block_reason == types.BlockedReason.SAFETY
    assert answer.text is None
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    status, _, body = raw(ggw, "POST", f"/v1beta/models/mock-gemini:{method}",
                          {"contents": [{"parts": [{"text": "block me"}]}]},
                          {"x-goog-api-key": ALL_GROUPS_KEY, "x-mock-scenario": "blocked-prompt"})
    verdict = json.loads(body.decode().removeprefix("data: ")) if stream else json.loads(body)
    assert status == 200 and verdict["promptFeedback"]["blockReason"] == "SAFETY" and "candidates" not in verdict
    # The unified API: the error vocabulary.
    status, _, body = raw(ggw, "POST", "/v1/chat/completions",
                          {"model": "mock-gemini", "stream": stream, "messages": [{"role": "user", "content": "block me"}]},
                          {"authorization": f"Bearer {ALL_GROUPS_KEY}", "x-mock-scenario": "blocked-prompt"})
    error = json.loads(body)["error"]
    assert status == 400 and error["code"] == "CONTENT_FILTERED" and error["provider"] == "mock-gemini", body


# ------------------------------------------------------------ countTokens

@pytest.mark.parametrize("group", ["mock-gemini", "mock-anthropic", "mock-bedrock"])
def test_count_tokens_is_the_vendors_own(ggw, group, test_id):
    c = client(ggw, **{"x-test-id": test_id})
    n = c.models.count_tokens(model=group, contents="count these words please")
    answer = c.models.generate_content(model=group, contents="count these words please")
    assert n.total_tokens == answer.usage_metadata.prompt_token_count
    sent = ggw.mock_requests(test_id)[0]
    assert "count" in sent["path"].lower()
    raw_status, headers, _ = raw(ggw, "POST", f"/v1beta/models/{group}:countTokens",
                                 {"contents": [{"parts": [{"text": "x"}]}]}, {"x-goog-api-key": ALL_GROUPS_KEY})
    assert raw_status == 200 and "x-llm-estimated" not in headers


@pytest.mark.parametrize("group", ["mock-openai", "mock-dashscope", "mock-azure"])
def test_count_tokens_estimated_elsewhere(ggw, group):
    status, headers, body = raw(ggw, "POST", f"/v1beta/models/{group}:countTokens",
                                {"contents": [{"parts": [{"text": "count these words please"}]}]},
                                {"x-goog-api-key": ALL_GROUPS_KEY})
    assert status == 200 and json.loads(body)["totalTokens"] > 0
    assert headers.get("x-llm-estimated") == "true"


def test_count_tokens_of_a_generate_content_request_maps_the_model(ggw, test_id):
    body = {"generateContentRequest": {"model": "models/mock-gemini",
                                       "contents": [{"role": "user", "parts": [{"text": "one two three"}]}]}}
    status, _, answer = raw(ggw, "POST", "/v1beta/models/mock-gemini:countTokens", body,
                            {"x-goog-api-key": ALL_GROUPS_KEY, "x-test-id": test_id})
    assert status == 200 and json.loads(answer)["totalTokens"] > 0
    [sent] = ggw.mock_requests(test_id)
    assert sent["body"]["generateContentRequest"]["model"] == f"models/{MODEL['mock-gemini']}"


# ------------------------------------------------------------ models

def test_models_list_and_get(ggw):
    c = client(ggw)
    names = [m.name for m in c.models.list()]
    assert "models/mock-gemini" in names and "models/mock-openai" in names
    m = c.models.get(model="mock-anthropic")
    assert m.name == "models/mock-anthropic"
    assert "generateContent" in m.supported_actions
    limited = client(ggw, key=OPENAI_ONLY_KEY)
    with pytest.raises(errors.ClientError) as e:
        limited.models.get(model="mock-anthropic")
    assert e.value.code in (403, 404)


def test_models_under_v1_for_a_gemini_client(ggw):
    status, _, body = raw(ggw, "GET", "/v1/models", headers={"x-goog-api-key": ALL_GROUPS_KEY,
                                                                "x-goog-api-client": "google-genai-sdk/1"})
    assert status == 200 and "models/mock-gemini" in [m["name"] for m in json.loads(body)["models"]]


# ------------------------------------------------------------ errors

# scenario -> (status, SDK class, Google status, our code)
ERRORS = {
    "error-400": (400, errors.ClientError, "INVALID_ARGUMENT", "INVALID_REQUEST"),
    "error-401": (401, errors.ClientError, "UNAUTHENTICATED", "AUTH_FAILED"),
    "error-403": (403, errors.ClientError, "PERMISSION_DENIED", "PERMISSION_DENIED"),
    "error-404": (404, errors.ClientError, "NOT_FOUND", "MODEL_NOT_FOUND"),
    "error-429": (429, errors.ClientError, "RESOURCE_EXHAUSTED", "UPSTREAM_RATE_LIMIT"),
    "error-500": (500, errors.ServerError, "INTERNAL", "UPSTREAM_ERROR"),
    "error-503": (503, errors.ServerError, "UNAVAILABLE", "UPSTREAM_BUSY"),
}


@pytest.mark.parametrize("group", ["mock-gemini", "mock-openai", "mock-anthropic"])
@pytest.mark.parametrize("scenario", list(ERRORS))
def test_vendor_errors_as_the_sdks_errors(ggw, group, scenario):
    status, cls, google_status, code = ERRORS[scenario]
    c = client(ggw, **{"x-mock-scenario": scenario})
    with pytest.raises(cls) as info:
        c.models.generate_content(model=group, contents="fail please")
    e = info.value
    assert e.code == status and e.status == google_status
    details = e.details["error"].get("details", [])
    if group == "mock-gemini":
        # The pass-through: Gemini's own details, none of the gateway's
        # (tests/test_gemini_error_details.py).
        assert all(d.get("domain") != "llm-gateway" for d in details), details
        return
    [detail, *_] = details
    assert detail["reason"] == code and detail["metadata"]["provider"] == group


def test_rate_limit_carries_retry_info(ggw):
    c = client(ggw, **{"x-mock-scenario": "error-429,retry-after=7"})
    with pytest.raises(errors.ClientError) as info:
        c.models.generate_content(model="mock-openai", contents="slow down")
    details = info.value.details["error"]["details"]
    retry = [d for d in details if d["@type"] == "type.googleapis.com/google.rpc.RetryInfo"]
    assert retry and retry[0]["retryDelay"] == "7s"


def test_stream_errors(ggw):
    c = client(ggw, **{"x-mock-scenario": "error-429"})
    with pytest.raises(errors.ClientError) as info:
        list(c.models.generate_content_stream(model="mock-anthropic", contents="x"))
    assert info.value.code == 429


def test_gateway_errors_as_the_sdks_errors(ggw):
    bad, limited = client(ggw, key="not-a-gateway-key"), client(ggw, key=OPENAI_ONLY_KEY)
    with pytest.raises(errors.ClientError) as info:
        bad.models.generate_content(model="mock-openai", contents="x")
    assert info.value.code == 401
    with pytest.raises(errors.ClientError) as info:
        limited.models.generate_content(model="mock-anthropic", contents="x")
    assert info.value.code == 403
    # Refused by the gateway's parser before any vendor, as Gemini would.
    status, _, body = raw(ggw, "POST", "/v1beta/models/mock-openai:generateContent",
                          {"contents": [], "frobnicate": 1}, {"x-goog-api-key": ALL_GROUPS_KEY})
    assert status == 400 and "frobnicate" in json.loads(body)["error"]["message"]
    # What only Gemini takes is refused, naming it, for the others.
    uri = {"contents": [{"parts": [{"fileData": {"fileUri": "https://x/y.pdf", "mimeType": "application/pdf"}}]}]}
    status, _, body = raw(ggw, "POST", "/v1beta/models/mock-openai:generateContent", uri,
                          {"x-goog-api-key": ALL_GROUPS_KEY})
    error = json.loads(body)["error"]
    assert status == 400 and error["details"][0]["metadata"]["param"] == "contents[0].parts[0].fileData"
    # An unknown method of the API: Gemini's 404.
    status, _, body = raw(ggw, "POST", "/v1beta/models/mock-openai:predict", {}, {"x-goog-api-key": ALL_GROUPS_KEY})
    assert status == 404 and json.loads(body)["error"]["status"] == "NOT_FOUND"


@pytest.mark.parametrize("body, message", [
    ({"contents": []}, "contents is not specified"),
    ({"contents": [{"role": "user", "parts": [{"text": "a"}]}, {"role": "model", "parts": []}]},
     "contents[1].parts: contents.parts must not be empty"),
])
def test_an_empty_conversation_is_refused_in_gemini_s_words_whatever_vendor(ggw, body, message):
    """Gemini's own refusals, before any vendor call (OpenAI would word them as its own)."""
    status, _, data = ggw.request("POST", "/v1beta/models/mock-openai:generateContent", body,
                                 {"x-goog-api-key": ALL_GROUPS_KEY, "authorization": None})
    answer = json.loads(data)
    assert status == 400 and message in answer["error"]["message"], answer
    assert answer["error"]["status"] == "INVALID_ARGUMENT"


# --------------------------------------------------------- several candidates

# Vendors that answer several choices: Gemini itself (its own candidateCount, passed through), and
# OpenAI and Azure (candidateCount as their `n`).
SEVERAL = ["mock-gemini", "mock-openai", "mock-azure"]


@pytest.mark.parametrize("group", SEVERAL)
def test_candidate_count_is_served_as_several_candidates(ggw, group, test_id):
    c = client(ggw, **{"x-test-id": test_id})
    one = c.models.generate_content(model=group, contents="hello twice")
    r = c.models.generate_content(model=group, contents="hello twice",
                                  config=types.GenerateContentConfig(candidate_count=2))
    assert [cand.index or 0 for cand in r.candidates] == [0, 1]
    for cand in r.candidates:
        assert cand.content.parts[0].text == one.text
        assert cand.finish_reason == types.FinishReason.STOP
    # The whole answer's usage: each candidate's tokens, counted once.
    assert r.usage_metadata.candidates_token_count == 2 * one.usage_metadata.candidates_token_count
    sent = ggw.mock_requests(test_id)[-1]["body"]
    if group == "mock-gemini":
        assert sent["generationConfig"] == {"candidateCount": 2}
    else:
        assert sent["n"] == 2


@pytest.mark.parametrize("group", SEVERAL)
def test_candidate_count_streamed(ggw, group):
    c = client(ggw)
    text, finish = {}, {}
    chunks = list(c.models.generate_content_stream(
        model=group, contents="hello stream", config=types.GenerateContentConfig(candidate_count=2)))
    for chunk in chunks:
        for cand in chunk.candidates or []:
            i = cand.index or 0
            for part in (cand.content.parts or []) if cand.content else []:
                text[i] = text.get(i, "") + (part.text or "")
            if cand.finish_reason:
                finish[i] = cand.finish_reason
    assert set(text) == {0, 1} and text[0] == text[1] and "hello stream" in text[0]
    assert finish == {0: types.FinishReason.STOP, 1: types.FinishReason.STOP}
    assert chunks[-1].usage_metadata.candidates_token_count > 0


@pytest.mark.parametrize("group,count", [("mock-openai", 9), ("mock-anthropic", 2), ("mock-bedrock", 2),
                                         ("mock-dashscope", 2)])
def test_candidates_a_vendor_cannot_give_are_refused(ggw, group, count, test_id):
    """Beyond Gemini's 8 candidates, or more than one from a vendor answering one: a 400 before
    the vendor is called."""
    c = client(ggw, **{"x-test-id": test_id})
    with pytest.raises(errors.ClientError) as e:
        c.models.generate_content(model=group, contents="x",
                                  config=types.GenerateContentConfig(candidate_count=count))
    assert e.value.code == 400
    assert ggw.mock_requests(test_id) == []
