"""The Vercel AI SDK 7 (`ai`, `@ai-sdk/openai`, `@ai-sdk/anthropic`, pinned in
tests/node) against every mock group, through each of its three ways in:

- `createOpenAI({baseURL}).chat(model)`: Chat Completions (`/v1/chat/completions`);
- `createOpenAI({baseURL}).responses(model)`: the Responses API (`/v1/responses`),
  with `providerOptions.openai.store = false`;
- `createAnthropic({baseURL}).messages(model)`: the Messages API (`/v1/messages`).

Each (API, group) runs `generateText` and `streamText` (text, usage,
finishReason), a tool loop (`tools` with `execute`, `stopWhen:
isStepCount(n)`, v7's name for v6's `stepCountIs`) over one and over two
parallel calls, streamed and not, structured output (`generateText` with
`output: Output.object`, v7's replacement for the deprecated
`generateObject`) and the errors (`APICallError` with `statusCode` and
`isRetryable`) of a 429, a 5xx, an overload and a 400 context overflow, and
a stream failing after content (`streamText`'s error part). ONE node process
(tests/node/vercel_ai.mjs) runs the whole plan, cases concurrently.

Known limits, asserted as they are today:

- Responses with the SDK's default `store: true`: from the second step of a
  tool loop on the SDK sends the earlier turn's output as `item_reference`s
  (ids of items the server stored), not the items. On a group that
  translates the Responses API the gateway's response store resolves them
  (docs/src/features/responses-store.md): `test_responses_store_true_on_a_translated_group`
  runs the loop, whole and streamed, on Anthropic, Gemini, Bedrock and
  DashScope; every other Responses case sets `store: false`, which sends
  the turns inline.
- The AI SDK has no context-overflow classification of its own (no error
  class or flag for it in `ai` 7 or its providers): a context overflow is an
  `APICallError` with status 400, not retryable, whose message is the
  vendor's wording (OpenAI's "maximum context length", Anthropic's "prompt
  is too long"), which is what the tests check.
"""

import json

import pytest

from test_clients import MODEL, NODE_DIR, address_cases, node_plan

STORE_GROUPS = ["mock-anthropic", "mock-gemini", "mock-bedrock", "mock-dashscope"]
GROUPS = ["mock-openai", "mock-anthropic", "mock-gemini", "mock-azure",
          "mock-bedrock", "mock-dashscope", "mock-failover", "mock-ab"]
APIS = ["chat", "responses", "anthropic"]
PROMPT = "hello matrix"
CITY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}

# scenario -> the status each surface answers: OpenAI's surfaces say 502 for
# a vendor's 500 (the gateway's UPSTREAM_ERROR), Anthropic's its own 500.
ERRORS = {
    "error-429": {"chat": 429, "responses": 429, "anthropic": 429},
    "error-500": {"chat": 502, "responses": 502, "anthropic": 500},
    # An overload: OpenAI's 503, Anthropic's 529.
    "error-503": {"chat": 503, "responses": 503, "anthropic": 529},
    "error-400-context": {"chat": 400, "responses": 400, "anthropic": 400},
}
# The failover group's 5xx: the fallback's answer or the primary's overload,
# whichever attempt was last.
FAILOVER_5XX = {"chat": {502, 503}, "responses": {502, 503}, "anthropic": {500, 529}}
CONTEXT_WORDS = {"chat": "maximum context length", "responses": "maximum context length",
                 "anthropic": "prompt is too long"}


def plan():
    cases = {}
    for api in APIS:
        for g in GROUPS:
            p = f"{api}:{g}"
            cases[f"{p}:text"] = {"op": "text", "prompt": PROMPT}
            cases[f"{p}:stream"] = {"op": "stream", "prompt": PROMPT}
            cases[f"{p}:stream-error"] = {"op": "stream", "prompt": PROMPT, "scenario": "stream-error"}
            for op in ("tools", "stream_tools"):
                cases[f"{p}:{op}"] = {"op": op, "prompt": "look it up", "scenario": "tool",
                                      "tool_results": ["found it"]}
                cases[f"{p}:{op}-parallel"] = {"op": op, "prompt": "both please", "scenario": "two-tools",
                                               "tool_results": ["sunny", "22C"]}
            cases[f"{p}:object"] = {"op": "object", "prompt": "a city as JSON", "schema": CITY_SCHEMA}
            for s in ERRORS:
                cases[f"{p}:{s}"] = {"op": "text", "prompt": "fail please", "scenario": s}
    # The SDK's default store: true, on the groups that translate the Responses API.
    for g in STORE_GROUPS:
        for op in ("tools", "stream_tools"):
            cases[f"responses:{g}:{op}-store-true"] = {
                "op": op, "prompt": "look it up", "scenario": "tool", "tool_results": ["found it"], "store": True}
    for cid, case in cases.items():
        case["api"], case["group"] = cid.split(":")[:2]
    return address_cases(cases, "vercel-ai-")


@pytest.fixture(scope="module")
def seen(gw):
    """case id -> what the SDK saw, the whole plan run once in one node process."""
    out = node_plan(gw, "vercel_ai.mjs", gw.base + "/v1", plan(), concurrency=8)
    for obs in out.values():
        gw.record({}, json.dumps(obs))
    return out


def ok(seen, cid):
    obs = seen[cid]
    assert obs["ok"], f"{cid}: {obs.get('error')}"
    assert not obs.get("errors"), f"{cid}: {obs['errors']}"
    return obs


cells = pytest.mark.parametrize("api,group", [(a, g) for a in APIS for g in GROUPS])


def check_usage(u, prompt, completion):
    assert (u["inputTokens"], u["outputTokens"], u["totalTokens"]) == (prompt, completion, prompt + completion), u


@cells
@pytest.mark.parametrize("op", ["text", "stream"])
def test_text(seen, api, group, op):
    obs = ok(seen, f"{api}:{group}:{op}")
    r = obs["result"]
    assert r["text"].endswith(f"You said: {PROMPT}"), r
    assert r["finishReason"] == "stop", r
    # The mock's counts (a token per word): the prompt's 2 words, the answer's 10.
    check_usage(r["usage"], 2, 10)
    assert r["response"]["modelId"] == MODEL[group], r["response"]
    if op == "stream":
        parts = obs["parts"]
        assert parts[0] == "start" and parts[-1] == "finish", parts
        assert "text-delta" in parts and "finish-step" in parts, parts


@cells
@pytest.mark.parametrize("op", ["tools", "stream_tools"])
@pytest.mark.parametrize("kind,calls,answer", [
    ("", [("lookup", {"q": "example"})], "found it"),
    ("-parallel", [("lookup", {"q": "example"}), ("weather", {"city": "example"})], "sunny | 22C"),
], ids=["one", "parallel"])
def test_tool_loop(seen, api, group, op, kind, calls, answer):
    """The SDK runs the tools the model called and sends their results back:
    two steps, the second the model's answer to the results."""
    obs = ok(seen, f"{api}:{group}:{op}{kind}")
    assert [(e["name"], e["input"]) for e in obs["executed"]] == calls, obs["executed"]
    first, second = obs["steps"]
    assert first["finishReason"] == "tool-calls", first
    assert [(c["name"], c["input"]) for c in first["toolCalls"]] == calls, first
    ids = [c["id"] for c in first["toolCalls"]]
    assert all(ids) and len(set(ids)) == len(ids), ids
    assert [t["id"] for t in first["toolResults"]] == ids
    assert second["finishReason"] == "stop" and second["toolCalls"] == [], second
    assert second["text"] == f"Tool result received: {answer}", second
    r = obs["result"]
    assert r["text"] == second["text"] and r["finishReason"] == "stop", r
    # The result's usage is the loop's total.
    for k in ("inputTokens", "outputTokens", "totalTokens"):
        assert r["usage"][k] == first["usage"][k] + second["usage"][k] > 0, (k, r["usage"], first, second)


@cells
def test_structured_output(seen, api, group):
    r = ok(seen, f"{api}:{group}:object")["result"]
    out = r["output"]
    assert isinstance(out, dict) and set(CITY_SCHEMA["required"]) <= set(out), out
    assert isinstance(out["city"], str) and isinstance(out["population"], int), out


@cells
@pytest.mark.parametrize("scenario", list(ERRORS))
def test_errors_are_api_call_errors(seen, api, group, scenario):
    obs = seen[f"{api}:{group}:{scenario}"]
    assert not obs["ok"], obs
    e = obs["error"]
    assert e["api_call_error"] and e["name"] == "AI_APICallError", e
    status = ERRORS[scenario][api]
    if group == "mock-failover" and status >= 500:
        assert e["statusCode"] in FAILOVER_5XX[api], e
    else:
        assert e["statusCode"] == status, e
    # The SDK's own rule: 408, 409, 429 and 5xx are retried.
    assert e["isRetryable"] is (e["statusCode"] in (429,) or e["statusCode"] >= 500), e
    assert e["url"].startswith("http://127.0.0.1:") and e["message"], e
    if scenario == "error-400-context":
        assert CONTEXT_WORDS[api] in e["message"].lower(), e


@cells
def test_stream_error_after_content(seen, api, group):
    """A vendor stream that fails after some text: `streamText` yields the
    text, then one error part (the SDK's StreamProviderError, retryable),
    and finishes with finishReason "error"."""
    obs = seen[f"{api}:{group}:stream-error"]
    assert obs["ok"], obs
    parts = obs["parts"]
    assert parts.count("error") == 1 and "text-delta" in parts[:parts.index("error")], parts
    [e] = obs["errors"]
    assert (e["name"], e["isRetryable"]) == ("AI_StreamProviderError", True), e
    assert e["message"], e
    # The status the SDK infers: Anthropic's error event says overload (529)
    # or a server error (500); OpenAI's error object reads as a server error.
    assert e["statusCode"] in ({500, 529} if api == "anthropic" else {500}), e
    r = obs["result"]
    # The text that came before the failure, not the whole answer.
    assert r["finishReason"] == "error" and r["text"].startswith("Hello"), r
    assert not r["text"].endswith(f"You said: {PROMPT}"), r


def test_responses_store_false_sends_the_turns_inline(gw, seen):
    """What `store: false` changes, as the OpenAI mock received it (passed
    through): the loop's second request carries the call and its output as
    items, no `item_reference`."""
    ok(seen, "responses:mock-openai:tools")
    first, second = gw.mock_requests("vercel-ai-responses-mock-openai-tools")
    assert first["body"]["store"] is False and second["body"]["store"] is False
    kinds = [item.get("type") for item in second["body"]["input"]]
    assert "function_call" in kinds and "function_call_output" in kinds, kinds
    assert "item_reference" not in kinds, kinds


@pytest.mark.parametrize("op", ["tools", "stream_tools"])
@pytest.mark.parametrize("group", STORE_GROUPS)
def test_responses_store_true_on_a_translated_group(seen, group, op):
    """With `store: true` the loop's second request refers to the first
    turn's items by id (`item_reference`): the gateway's response store
    resolves them, so the vendor gets the call and its result and answers
    the result."""
    obs = ok(seen, f"responses:{group}:{op}-store-true")
    assert [e["name"] for e in obs["executed"]] == ["lookup"], obs
    first, second = obs["steps"]
    assert first["finishReason"] == "tool-calls", first
    assert second["finishReason"] == "stop", second
    assert second["text"] == "Tool result received: found it", second


def test_versions_are_pinned():
    """The packages that ran are the locked ones."""
    lock = json.loads((NODE_DIR / "package-lock.json").read_text())
    pkg = json.loads((NODE_DIR / "package.json").read_text())
    for name in ("ai", "@ai-sdk/openai", "@ai-sdk/anthropic"):
        installed = json.loads((NODE_DIR / "node_modules" / name / "package.json").read_text())
        assert pkg["dependencies"][name] == lock["packages"][f"node_modules/{name}"]["version"] \
            == installed["version"], name
