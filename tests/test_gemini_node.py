"""The Google Gen AI Node SDK (`@google/genai`, pinned in tests/node) against
the Gemini surface of every mock group: generate, stream, function-call
round trips (JSON and streamed first turn), countTokens, the model list,
and each error as the SDK's `ApiError` with its status.

As in tests/test_anthropic_node.py, ONE node process (tests/node/genai.mjs)
runs the whole plan and prints what the SDK returned or raised; the tests
below assert on that. The expectations are those tests/test_gemini_surface.py
holds the Python SDK to.
"""

import json

import pytest

from conftest import ALL_GROUPS_KEY, OPENAI_ONLY_KEY
from test_clients import node_plan

GROUPS = ["mock-gemini", "mock-openai", "mock-anthropic", "mock-bedrock", "mock-dashscope", "mock-azure"]
MODEL = {
    "mock-openai": "mock-gpt-4o",
    "mock-anthropic": "mock-claude-sonnet",
    "mock-gemini": "mock-gemini-flash",
    "mock-azure": "gpt-4o-2024-08-06",  # the deployment's model, as Azure names it
    "mock-bedrock": "anthropic.claude-3-haiku-20240307-v1:0",
    "mock-dashscope": "qwen-plus",
}
LOOKUP = {"name": "lookup", "description": "Look something up",
          "parametersJsonSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}
TOOLS = {"tools": [{"functionDeclarations": [LOOKUP]}],
         "toolConfig": {"functionCallingConfig": {"mode": "ANY"}}}
# scenario -> (status, Google status, our code)
ERRORS = {
    "error-400": (400, "INVALID_ARGUMENT", "INVALID_REQUEST"),
    "error-401": (401, "UNAUTHENTICATED", "AUTH_FAILED"),
    "error-403": (403, "PERMISSION_DENIED", "PERMISSION_DENIED"),
    "error-404": (404, "NOT_FOUND", "MODEL_NOT_FOUND"),
    "error-429": (429, "RESOURCE_EXHAUSTED", "UPSTREAM_RATE_LIMIT"),
    "error-500": (500, "INTERNAL", "UPSTREAM_ERROR"),
    "error-503": (503, "UNAVAILABLE", "UPSTREAM_BUSY"),
}


def user(text):
    return [{"role": "user", "parts": [{"text": text}]}]


def plan():
    cases = {}
    for g in GROUPS:
        cases[f"{g}:generate"] = {"op": "generate", "model": g, "contents": user("hello node")}
        cases[f"{g}:stream"] = {"op": "stream", "model": g, "contents": user("hello node stream")}
        for first in ("json", "stream"):
            cases[f"{g}:round-trip-{first}"] = {"op": "round_trip", "model": g, "contents": user("look it up"),
                                                "config": TOOLS, "stream_first": first == "stream",
                                                "result": "found it"}
        cases[f"{g}:count"] = {"op": "count", "model": g, "contents": user("count these words please")}
        for scenario in ERRORS:
            cases[f"{g}:{scenario}"] = {"op": "generate", "model": g, "contents": user("fail please"),
                                        "headers": {"x-mock-scenario": scenario}}
    # Embeddings (`embedContent` → `:batchEmbedContents`), the group chosen by header.
    for g in ["mock-openai", "mock-gemini", "mock-dashscope"]:
        cases[f"{g}:embed"] = {"op": "embed", "model": "text-embedding-3-small", "contents": ["a b", "c"],
                               "config": {"taskType": "RETRIEVAL_DOCUMENT", "outputDimensionality": 256},
                               "headers": {"x-model-group": g}}
    cases["list"] = {"op": "list"}
    cases["get"] = {"op": "get", "model": "mock-anthropic"}
    cases["wrong-key"] = {"op": "generate", "model": "mock-openai", "contents": user("x"), "key": "nope"}
    cases["forbidden-group"] = {"op": "generate", "model": "mock-anthropic", "contents": user("x"),
                                "key": OPENAI_ONLY_KEY}
    for case in cases.values():
        case.setdefault("key", ALL_GROUPS_KEY)
        case.setdefault("headers", {})
    return cases


@pytest.fixture(scope="module")
def seen(gw):
    out = node_plan(gw, "genai.mjs", gw.base, plan(), timeout=300)
    for obs in out.values():
        gw.record({}, json.dumps(obs))
    return out


def ok(seen, case):
    obs = seen[case]
    assert obs["ok"], obs
    return obs


@pytest.mark.parametrize("group", GROUPS)
def test_generate(seen, group):
    r = ok(seen, f"{group}:generate")["result"]
    assert "Hello from the mock" in r["text"] and "hello node" in r["text"]
    assert r["modelVersion"] == MODEL[group]
    assert r["candidates"][0]["finishReason"] == "STOP"
    assert r["usage"]["promptTokenCount"] > 0 and r["usage"]["candidatesTokenCount"] > 0


@pytest.mark.parametrize("group", GROUPS)
def test_stream(seen, group):
    chunks = ok(seen, f"{group}:stream")["chunks"]
    assert len(chunks) > 1
    assert "hello node stream" in "".join(c.get("text") or "" for c in chunks)
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usage"]["candidatesTokenCount"] > 0


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("first", ["json", "stream"])
def test_function_call_round_trip(seen, group, first):
    obs = ok(seen, f"{group}:round-trip-{first}")
    assert [c["name"] for c in obs["calls"]] == ["lookup"] and "q" in obs["calls"][0]["args"]
    assert "Tool result received: " in obs["result"]["text"] and "found it" in obs["result"]["text"]


@pytest.mark.parametrize("group", GROUPS)
def test_count_tokens(seen, group):
    assert ok(seen, f"{group}:count")["result"]["totalTokens"] > 0


@pytest.mark.parametrize("group", ["mock-openai", "mock-gemini", "mock-dashscope"])
def test_embed_content(seen, group):
    assert ok(seen, f"{group}:embed")["result"]["sizes"] == [256, 256]


def test_models(seen):
    names = ok(seen, "list")["result"]
    assert "models/mock-gemini" in names and "models/mock-openai" in names
    assert ok(seen, "get")["result"]["name"] == "models/mock-anthropic"


@pytest.mark.parametrize("group", ["mock-gemini", "mock-openai", "mock-anthropic"])
@pytest.mark.parametrize("scenario", list(ERRORS))
def test_vendor_errors(seen, group, scenario):
    status, google_status, code = ERRORS[scenario]
    obs = seen[f"{group}:{scenario}"]
    assert not obs["ok"] and obs["error"]["api_error"], obs
    assert obs["error"]["status"] == status
    error = obs["error"]["body"]["error"]
    assert error["status"] == google_status
    if group == "mock-gemini":
        # The pass-through: Google's own details, none of the gateway's.
        assert all(d.get("domain") != "llm-gateway" for d in error.get("details", [])), error
    else:
        assert error["details"][0]["reason"] == code


def test_gateway_errors(seen):
    for case, status in [("wrong-key", 401), ("forbidden-group", 403)]:
        obs = seen[case]
        assert not obs["ok"] and obs["error"]["api_error"] and obs["error"]["status"] == status, obs
