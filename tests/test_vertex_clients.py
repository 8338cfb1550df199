"""Client tools against the Vertex AI groups `make run` serves
(scripts/vertex_groups.py: `mock-vertex`, Gemini on Vertex, and
`mock-vertex-anthropic`, Claude on Vertex, with a service-account key made
at start-up whose JWTs the mock's token endpoint verifies): Claude Code
(`claude -p`, a plain answer and its Bash tool run through the gateway) and
the Node SDKs (`openai`, `@anthropic-ai/sdk`, `@google/genai`, one node
process each, as tests/test_clients.py runs them). Every request the mock
saw went to Vertex's path for the group's publisher with a token the gateway
obtained, never the client's key.
"""

import json
import os
import sys
from pathlib import Path

import pytest

import gateway
from conftest import ALL_GROUPS_KEY, Gateway, configure_test_gateway, leaks
from test_claude_code import claude, ensure_claude_code, requests_of
from test_clients import node_plan

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import vertex_groups  # noqa: E402

GEMINI, CLAUDE = "mock-vertex", "mock-vertex-anthropic"
GROUPS = [GEMINI, CLAUDE]
# The Vertex method each group's requests end with (Claude Code streams).
METHOD = {GEMINI: ":streamGenerateContent", CLAUDE: ":streamRawPredict"}
PUBLISHER = {GEMINI: "/publishers/google/models/gemini-2.5-flash:",
             CLAUDE: f"/publishers/anthropic/models/{vertex_groups.MOCK_CLAUDE_MODEL}:"}
TOOL_NAMES = {
    GEMINI: lambda b: [f["name"] for t in b["tools"] for f in t["functionDeclarations"]],
    CLAUDE: lambda b: [t["name"] for t in b["tools"]],
}
VENDOR = {GEMINI: "gemini", CLAUDE: "anthropic"}


@pytest.fixture(scope="module")
def vxgw(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("envoy-vertex-clients")
    key, pem = vertex_groups.service_account(workdir)
    mock, mock_port = gateway.start_mock(
        args=("--aws-credentials", gateway.MOCK_AWS_CREDENTIALS, "--google-public-key", str(pem)),
        log=open(workdir / "mock.log", "w"))
    envoy = None
    try:
        providers, groups, clusters = vertex_groups.mock_groups(mock_port)
        bootstrap = gateway.build_bootstrap(
            0, 0, mock_port, env={}, extra_providers=providers, extra_groups=groups, extra_clusters=clusters,
            edit=configure_test_gateway, access_log=workdir / "access.log",
            edit_bootstrap=lambda b: vertex_groups.set_vm_env(b, {vertex_groups.MOCK_KEY_ENV: key}))
        envoy = gateway.start_envoy(bootstrap, workdir, log_level="info",
                                    extra_args=["--file-flush-interval-msec", "50"])
        gw = Gateway(envoy.port, envoy.admin_port, mock_port, workdir)
        yield gw
        gateway.stop(envoy)
        logs = {p.name: p.read_text(errors="replace") for p in (workdir / "envoy.log", workdir / "access.log")}
        secret = [line for line in json.loads(key)["private_key"].splitlines() if "PRIVATE" not in line][:3]
        assert not leaks(gw.seen, logs, keys=tuple(secret)), "the service-account key leaked"
        assert "ya29.mock-" not in logs["envoy.log"] + logs["access.log"], "a token was logged"
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


def reached_vertex(gw, test_id, group, count=1):
    """The mock's record of `test_id`: every request on the group's Vertex
    path with a token of the mock's token endpoint."""
    seen = requests_of(gw, test_id, count)
    assert len(seen) >= count, seen
    for r in seen:
        assert r["path"].startswith("/v1/projects/mock-project/locations/"), r["path"]
        assert PUBLISHER[group] in r["path"] or r["path"].endswith("count-tokens:rawPredict"), r["path"]
        assert r["headers"]["authorization"].startswith("Bearer ya29.mock-sa-"), r["headers"]
        assert ALL_GROUPS_KEY not in json.dumps(r)
    return seen


# --- Claude Code ---

@pytest.mark.parametrize("group", GROUPS)
def test_claude_code_plain_answer(vxgw, tmp_path, group, test_id):
    ensure_claude_code()
    result = claude(vxgw, tmp_path, group, "say hello", test_id)
    assert result["is_error"] is False and result["subtype"] == "success", result
    assert f"Hello from the mock {VENDOR[group]} provider." in result["result"]
    seen = reached_vertex(vxgw, test_id, group)
    assert any(METHOD[group] in r["path"] for r in seen)
    assert "Bash" in TOOL_NAMES[group](next(r for r in seen if METHOD[group] in r["path"])["body"])


@pytest.mark.parametrize("group", GROUPS)
def test_claude_code_bash_round_trip(vxgw, tmp_path, group, test_id):
    ensure_claude_code()
    marker = f"marker-{group}-{os.getpid()}"
    result = claude(vxgw, tmp_path, group, "run the marker command", test_id, scenario=f"call=Bash:{marker}")
    assert result["is_error"] is False and result["num_turns"] >= 2, result
    assert f"Tool result received: {marker}" in result["result"]
    seen = reached_vertex(vxgw, test_id, group, 2)
    last = json.dumps(seen[-1]["body"])
    assert f"echo {marker}" in last and marker in last.replace(f"echo {marker}", "")


# --- the Node SDKs ---

LOOKUP_OPENAI = {"type": "function", "function": {"name": "lookup", "description": "Look something up", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
LOOKUP_ANTHROPIC = {"name": "lookup", "description": "Look something up", "input_schema": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}
LOOKUP_GEMINI = {"tools": [{"functionDeclarations": [{"name": "lookup", "description": "Look something up",
                 "parametersJsonSchema": {"type": "object", "properties": {"q": {"type": "string"}},
                                          "required": ["q"]}}]}],
                 "toolConfig": {"functionCallingConfig": {"mode": "ANY"}}}


def headers(group, case, sdk):
    return {"x-model-group": group, "x-test-id": f"vertex-node-{sdk}-{group}-{case}"}


def openai_plan():
    cases = {}
    for g in GROUPS:
        user = [{"role": "user", "content": "hello node"}]
        cases[f"{g}:chat"] = {"op": "chat", "body": {"model": "any", "messages": user}}
        cases[f"{g}:stream"] = {"op": "stream", "body": {"model": "any", "messages": user}}
        cases[f"{g}:round_trip"] = {"op": "round_trip", "results": ["found it"], "body": {
            "model": "any", "messages": [{"role": "user", "content": "look it up"}], "tools": [LOOKUP_OPENAI],
            "tool_choice": "required"}}
    for cid, case in cases.items():
        g, name = cid.split(":")
        case.update(key=ALL_GROUPS_KEY, headers=headers(g, name, "openai"))
    return cases


def anthropic_plan():
    cases = {}
    for g in GROUPS:
        ask = {"model": "any", "max_tokens": 200, "messages": [{"role": "user", "content": "hello node"}]}
        cases[f"{g}:create"] = {"op": "create", "body": ask}
        cases[f"{g}:stream"] = {"op": "stream", "body": ask}
        cases[f"{g}:stream_raw"] = {"op": "stream_raw", "body": ask}
        for first in ("json", "stream"):
            cases[f"{g}:round_trip_{first}"] = {
                "op": "round_trip", "stream_first": first == "stream", "results": ["found it"],
                "body": {**ask, "messages": [{"role": "user", "content": "look it up"}], "tools": [LOOKUP_ANTHROPIC],
                         "tool_choice": {"type": "any"}}}
        cases[f"{g}:count"] = {"op": "count", "body": {"model": "any", "messages": [
            {"role": "user", "content": "count these words please"}]}}
    for cid, case in cases.items():
        g, name = cid.split(":")
        case.update(key=ALL_GROUPS_KEY, headers=headers(g, name, "anthropic"))
    return cases


def genai_plan():
    def user(text):
        return [{"role": "user", "parts": [{"text": text}]}]
    cases = {}
    for g in GROUPS:
        cases[f"{g}:generate"] = {"op": "generate", "model": g, "contents": user("hello node")}
        cases[f"{g}:stream"] = {"op": "stream", "model": g, "contents": user("hello node stream")}
        for first in ("json", "stream"):
            cases[f"{g}:round_trip_{first}"] = {"op": "round_trip", "model": g, "contents": user("look it up"),
                                                "config": LOOKUP_GEMINI, "stream_first": first == "stream",
                                                "result": "found it"}
        cases[f"{g}:count"] = {"op": "count", "model": g, "contents": user("count these words please")}
    for cid, case in cases.items():
        g, name = cid.split(":")
        h = headers(g, name, "genai")
        del h["x-model-group"]  # the path's model names the group
        case.update(key=ALL_GROUPS_KEY, headers=h)
    return cases


@pytest.fixture(scope="module")
def node(vxgw):
    out = {"openai": node_plan(vxgw, "clients.mjs", vxgw.base + "/v1", openai_plan()),
           "anthropic": node_plan(vxgw, "anthropic.mjs", vxgw.base, anthropic_plan()),
           "genai": node_plan(vxgw, "genai.mjs", vxgw.base, genai_plan())}
    for seen in out.values():
        for obs in seen.values():
            vxgw.record({}, json.dumps(obs))
    return out


def ok(node, sdk, case):
    obs = node[sdk][case]
    assert obs["ok"], obs
    return obs


@pytest.mark.parametrize("group", GROUPS)
def test_openai_node_sdk(vxgw, node, group):
    chat = ok(node, "openai", f"{group}:chat")["result"]
    assert "hello node" in chat["choices"][0]["message"]["content"]
    assert chat["provider"] == group
    chunks = ok(node, "openai", f"{group}:stream")["chunks"]
    assert "hello node" in "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    trip = ok(node, "openai", f"{group}:round_trip")
    assert trip["first"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "lookup"
    assert "found it" in trip["result"]["choices"][0]["message"]["content"]
    for case in ("chat", "stream", "round_trip"):
        reached_vertex(vxgw, f"vertex-node-openai-{group}-{case}", group)


@pytest.mark.parametrize("group", GROUPS)
def test_anthropic_node_sdk(vxgw, node, group):
    message = ok(node, "anthropic", f"{group}:create")["result"]
    assert message["type"] == "message" and "hello node" in message["content"][0]["text"]
    streamed = ok(node, "anthropic", f"{group}:stream")
    assert streamed["events"][0]["type"] == "message_start"
    assert "hello node" in streamed["result"]["content"][0]["text"]
    raw = ok(node, "anthropic", f"{group}:stream_raw")["events"]
    assert raw[0]["type"] == "message_start" and raw[-1]["type"] == "message_stop"
    for first in ("json", "stream"):
        trip = ok(node, "anthropic", f"{group}:round_trip_{first}")
        assert [b["name"] for b in trip["first"]["content"] if b["type"] == "tool_use"] == ["lookup"]
        assert "found it" in trip["result"]["content"][0]["text"]
    count = ok(node, "anthropic", f"{group}:count")
    assert count["result"]["input_tokens"] == 4 and count["estimated"] is None, count
    for case in ("create", "stream", "stream_raw", "round_trip_json", "round_trip_stream", "count"):
        reached_vertex(vxgw, f"vertex-node-anthropic-{group}-{case}", group)


@pytest.mark.parametrize("group", GROUPS)
def test_genai_node_sdk(vxgw, node, group):
    generated = ok(node, "genai", f"{group}:generate")["result"]
    assert "hello node" in generated["text"]
    chunks = ok(node, "genai", f"{group}:stream")["chunks"]
    assert "hello node stream" in "".join(c.get("text") or "" for c in chunks)
    for first in ("json", "stream"):
        trip = ok(node, "genai", f"{group}:round_trip_{first}")
        assert [c["name"] for c in trip["calls"]] == ["lookup"]
        assert "found it" in trip["result"]["text"]
    assert ok(node, "genai", f"{group}:count")["result"]["totalTokens"] > 0
    for case in ("generate", "stream", "round_trip_json", "round_trip_stream", "count"):
        reached_vertex(vxgw, f"vertex-node-genai-{group}-{case}", group)
