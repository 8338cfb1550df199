"""The Anthropic Node SDK (`@anthropic-ai/sdk`, pinned in tests/node) against
the Messages surface (`/v1/messages`) of every mock group: create, both
streams (the `messages.stream` helper and `create({stream: true})`), tool
round trips, `countTokens`, and each error as the SDK's own class and status.

As in tests/test_clients.py, ONE node process (tests/node/anthropic.mjs)
runs the whole plan, cases concurrently, and prints what the SDK returned
or raised; the tests below assert on that. The expectations are those
tests/test_anthropic_surface.py holds the Python `anthropic` SDK to.
"""

import json

import pytest

from conftest import OPENAI_ONLY_KEY
from test_clients import MODEL, NODE_DIR, RETRY_AFTER_GROUPS, address_cases, node_plan

GROUPS = ["mock-openai", "mock-anthropic", "mock-gemini", "mock-azure",
          "mock-bedrock", "mock-dashscope", "mock-failover", "mock-ab"]

PROMPT = "hello matrix"
LOOKUP = {"name": "lookup", "description": "Look something up",
          "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}
WEATHER = {"name": "weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
# As tests/test_anthropic_surface.py counts: 6 words the vendors' counts see.
COUNT = {"model": "any", "messages": [{"role": "user", "content": "count these words please"}],
         "system": "be brief", "tools": [LOOKUP]}
# Groups whose vendor counts (Anthropic's count_tokens, Gemini's countTokens,
# Bedrock's CountTokens; mock-ab's user lands on Anthropic); the others'
# count is the gateway's estimate, flagged `x-llm-estimated: true`.
COUNTED = {"mock-anthropic", "mock-gemini", "mock-bedrock", "mock-ab"}


def user(text):
    return [{"role": "user", "content": text}]


def ask(text, **more):
    return {"model": "any", "max_tokens": 200, "messages": user(text), **more}


# scenario -> (status, Node SDK class, Anthropic `type`, our code), as
# tests/test_anthropic_surface.py has the Python SDK see them.
ERRORS = {
    "error-400": (400, "BadRequestError", "invalid_request_error", "INVALID_REQUEST"),
    "error-400-context": (400, "BadRequestError", "invalid_request_error", "CONTEXT_LENGTH_EXCEEDED"),
    "error-401": (401, "AuthenticationError", "authentication_error", "AUTH_FAILED"),
    # The client's gateway key is wrong (the gateway answers itself).
    "wrong-key": (401, "AuthenticationError", "authentication_error", "AUTH_FAILED"),
    "error-403": (403, "PermissionDeniedError", "permission_error", "PERMISSION_DENIED"),
    # A gateway key that may not use the group (the gateway answers itself).
    "forbidden-group": (403, "PermissionDeniedError", "permission_error", "PERMISSION_DENIED"),
    "error-404": (404, "NotFoundError", "not_found_error", "MODEL_NOT_FOUND"),
    "error-413": (413, "ContentTooLargeError", "request_too_large", "PAYLOAD_TOO_LARGE"),
    "error-429": (429, "RateLimitError", "rate_limit_error", "UPSTREAM_RATE_LIMIT"),
    "error-500": (500, "InternalServerError", "api_error", "UPSTREAM_ERROR"),
    # An overload is Anthropic's 529 whichever vendor said it.
    "error-503": (529, "OverloadedError", "overloaded_error", "UPSTREAM_BUSY"),
    "error-529": (529, "OverloadedError", "overloaded_error", "UPSTREAM_BUSY"),
}
GATEWAY_ERRORS = {"wrong-key", "forbidden-group"}


def error_cases(group):
    # OPENAI_ONLY_KEY may use mock-openai: no refusal to see there.
    return [s for s in ERRORS if not (s == "forbidden-group" and group == "mock-openai")]


def plan():
    cases = {}
    for g in GROUPS:
        cases[f"{g}:create"] = {"op": "create", "body": ask(PROMPT)}
        cases[f"{g}:stream"] = {"op": "stream", "body": ask(PROMPT)}
        cases[f"{g}:stream-raw"] = {"op": "stream_raw", "body": ask(PROMPT)}
        for first in ("json", "stream"):
            cases[f"{g}:round-trip-{first}"] = {
                "op": "round_trip", "stream_first": first == "stream", "results": ["found it"],
                "body": ask("look it up", tools=[LOOKUP], tool_choice={"type": "any"})}
        cases[f"{g}:parallel-round-trip"] = {
            "op": "round_trip", "results": ["sunny", "22C"], "scenario": "two-tools",
            "body": ask("both please", tools=[LOOKUP, WEATHER])}
        cases[f"{g}:count"] = {"op": "count", "body": COUNT}
        cases[f"{g}:count-create"] = {"op": "create", "body": {**COUNT, "max_tokens": 50}}
        cases[f"{g}:stream-error"] = {"op": "stream", "scenario": "stream-error", "body": ask(PROMPT)}
        for s in error_cases(g):
            case = {"op": "create", "body": ask("fail please")}
            if s == "wrong-key":
                case["key"] = "not-a-gateway-key"
            elif s == "forbidden-group":
                case["key"] = OPENAI_ONLY_KEY
            else:
                case["scenario"] = s
            cases[f"{g}:{s}"] = case
    for cid, case in cases.items():
        case["group"] = cid.split(":")[0]
    return address_cases(cases, "anthropic-node-")


@pytest.fixture(scope="module")
def seen(gw):
    """case id -> what the SDK saw, the whole plan run once in one node process."""
    out = node_plan(gw, "anthropic.mjs", gw.base, plan())
    for obs in out.values():
        gw.record({}, json.dumps(obs))
    return out


def ok(seen, cid):
    obs = seen[cid]
    assert obs["ok"], f"{cid}: {obs.get('error')}"
    return obs


groups = pytest.mark.parametrize("group", GROUPS)


def check_message(m, group):
    assert m["type"] == "message" and m["role"] == "assistant" and m["id"].startswith("msg_"), m
    assert m["model"] == MODEL[group], m
    assert m["usage"]["input_tokens"] > 0 and m["usage"]["output_tokens"] > 0, m


@groups
def test_create(seen, group):
    m = ok(seen, f"{group}:create")["result"]
    check_message(m, group)
    assert m["stop_reason"] == "end_turn"
    [block] = m["content"]
    assert block["type"] == "text" and block["text"].endswith(f"You said: {PROMPT}"), block
    # The mock's counts (a token per word): the prompt's 2 words, the answer's 10.
    assert (m["usage"]["input_tokens"], m["usage"]["output_tokens"]) == (2, 10), m["usage"]


def check_events(events, group):
    """Anthropic's event grammar; returns the text the deltas carried."""
    types = [e["type"] for e in events]
    assert types[0] == "message_start" and types[-1] == "message_stop", types
    assert types.count("message_delta") == 1 and types.index("message_delta") == len(types) - 2, types
    assert events[0]["message"]["model"] == MODEL[group], events[0]
    starts = [e for e in events if e["type"] == "content_block_start"]
    stops = [e for e in events if e["type"] == "content_block_stop"]
    assert [e["index"] for e in starts] == [e["index"] for e in stops] == list(range(len(starts))), types
    deltas = [e for e in events if e["type"] == "content_block_delta"]
    assert deltas and all(d["delta"]["type"] == "text_delta" for d in deltas), deltas
    return "".join(d["delta"]["text"] for d in deltas), events[-2]


@groups
def test_stream_helper(seen, group):
    obs = ok(seen, f"{group}:stream")
    # The helper's events also carry its own `text` / `contentBlock` events.
    wire = [e for e in obs["events"] if e["type"] in {
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"}]
    text, delta = check_events(wire, group)
    final = obs["result"]
    check_message(final, group)
    assert final["stop_reason"] == delta["delta"]["stop_reason"] == "end_turn"
    assert text.endswith(f"You said: {PROMPT}") and final["content"][0]["text"] == text
    assert final["usage"]["output_tokens"] == delta["usage"]["output_tokens"] == 10


@groups
def test_stream_raw(seen, group):
    events = ok(seen, f"{group}:stream-raw")["events"]
    text, delta = check_events(events, group)
    assert text.endswith(f"You said: {PROMPT}")
    assert delta["delta"]["stop_reason"] == "end_turn" and delta["usage"]["output_tokens"] == 10
    # The prompt's count: in message_start, or (a vendor that counts only at
    # the end) in message_delta, which the SDK's accumulation takes over it.
    start = events[0]["message"]["usage"]["input_tokens"]
    assert delta["usage"].get("input_tokens", start) == 2, (start, delta)


@groups
@pytest.mark.parametrize("first", ["json", "stream"])
def test_tool_round_trip(seen, group, first):
    obs = ok(seen, f"{group}:round-trip-{first}")
    check_message(obs["first"], group)
    assert obs["first"]["stop_reason"] == "tool_use"
    calls = [b for b in obs["first"]["content"] if b["type"] == "tool_use"]
    assert [(b["name"], b["input"]) for b in calls] == [("lookup", {"q": "example"})], calls
    assert isinstance(calls[0]["id"], str) and calls[0]["id"], calls
    check_message(obs["result"], group)
    assert obs["result"]["stop_reason"] == "end_turn"
    assert obs["result"]["content"][-1]["text"] == "Tool result received: found it"


@groups
def test_parallel_tool_round_trip(seen, group):
    obs = ok(seen, f"{group}:parallel-round-trip")
    calls = [b for b in obs["first"]["content"] if b["type"] == "tool_use"]
    assert [(b["name"], b["input"]) for b in calls] == [("lookup", {"q": "example"}), ("weather", {"city": "example"})]
    assert len({b["id"] for b in calls}) == 2
    assert obs["result"]["content"][-1]["text"] == "Tool result received: sunny | 22C"


@groups
def test_count_tokens(seen, group):
    obs = ok(seen, f"{group}:count")
    counted = obs["result"]["input_tokens"]
    if group in COUNTED:
        # The vendor's own count, unflagged: what the same request is billed.
        assert obs["estimated"] is None, obs
        assert counted == ok(seen, f"{group}:count-create")["result"]["usage"]["input_tokens"] == 6
    else:
        assert obs["estimated"] == "true", obs
        assert counted > 5, obs


@pytest.mark.parametrize("group,scenario", [(g, s) for g in GROUPS for s in error_cases(g)])
def test_error_classes(seen, group, scenario):
    obs = seen[f"{group}:{scenario}"]
    assert not obs["ok"], obs
    e = obs["error"]
    status, cls, kind, code = ERRORS[scenario]
    if group == "mock-failover" and status >= 500:
        # The fallback's answer or the primary's 529, whichever attempt was last.
        assert (e["status"], e["class"], e["body"]["error"]["code"]) in {
            (500, "InternalServerError", "UPSTREAM_ERROR"), (529, "OverloadedError", "UPSTREAM_BUSY")}, e
    else:
        assert (e["status"], e["class"], e["type"]) == (status, cls, kind), e
        assert (e["body"]["error"]["type"], e["body"]["error"]["code"]) == (kind, code), e
    body = e["body"]
    assert body["type"] == "error" and body["error"]["message"], body
    assert body["request_id"] == e["headers"]["x-request-id"], e
    if scenario not in GATEWAY_ERRORS:
        assert body["error"]["provider"] == e["headers"]["x-llm-provider"], e
        if group not in ("mock-failover", "mock-ab"):
            assert body["error"]["provider"] == group, e
    if scenario == "error-400-context":
        # The wording Anthropic uses, which Anthropic-aware code looks for.
        assert "prompt is too long" in body["error"]["message"], body
    if scenario == "error-429" and group in RETRY_AFTER_GROUPS:
        assert e["headers"]["retry-after"] == "7", e


@groups
def test_mid_stream_error(seen, group):
    """An error after content was sent is Anthropic's `event: error` in the 200
    stream: the Node SDK throws its generic APIError (no status) with the
    envelope and its type."""
    obs = seen[f"{group}:stream-error"]
    assert not obs["ok"], obs
    e = obs["error"]
    assert (e["class"], e["status"]) == ("APIError", None), e
    assert e["body"]["type"] == "error" and e["type"] == e["body"]["error"]["type"], e
    assert (e["type"], e["body"]["error"]["code"]) in {
        ("api_error", "UPSTREAM_ERROR"), ("overloaded_error", "UPSTREAM_BUSY")}, e
    # Content had come: the helper saw text before the error.
    assert any(ev["type"] == "content_block_delta" for ev in obs.get("events", [])), obs


def test_sdk_version_is_pinned():
    """The SDK that ran is the locked one."""
    lock = json.loads((NODE_DIR / "package-lock.json").read_text())
    pkg = json.loads((NODE_DIR / "package.json").read_text())
    installed = json.loads((NODE_DIR / "node_modules/@anthropic-ai/sdk/package.json").read_text())
    name = "@anthropic-ai/sdk"
    assert pkg["dependencies"][name] == lock["packages"][f"node_modules/{name}"]["version"] == installed["version"]
