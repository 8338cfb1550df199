"""Codex CLI (`@openai/codex`, pinned in tests/codex) against the gateway's
Responses API: `codex exec` with a model provider whose `base_url` is the
gateway (`wire_api = "responses"`) and Codex's default configuration (its
web search, its namespaced sub-agent tools, reasoning summaries asked of a
model without reasoning), for every group: OpenAI (pass-through), the
translated vendors, a failover and an A/B split. A plain answer, a task
where the model calls Codex's shell tool (the mock's `call-shell=`
directive), Codex runs it and the model's final answer carries the
command's output, and one where the model calls a tool of Codex's
`multi_agent_v1` namespace and Codex runs that tool.

Nothing leaves loopback: a fresh HOME and CODEX_HOME, update checks,
analytics and feedback off, and every proxy variable pointing at a port
where nothing listens (NO_PROXY lets only 127.0.0.1 through)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

import gateway
from conftest import ALL_GROUPS_KEY

CODEX_DIR = Path(__file__).resolve().parent / "codex"
CODEX = CODEX_DIR / "node_modules" / ".bin" / "codex"
GROUPS = ["mock-openai", "mock-anthropic", "mock-gemini", "mock-azure", "mock-bedrock",
          "mock-dashscope", "mock-failover", "mock-ab"]
# Groups whose vendor has no namespaces: the gateway flattens them.
TRANSLATED = ["mock-anthropic", "mock-gemini", "mock-azure", "mock-bedrock", "mock-dashscope"]
# Bounds a run that went wrong (Codex retries a failing provider).
TIMEOUT = 120


@pytest.fixture(scope="module")
def dead_proxy():
    """A bound port that never accepts: where Codex's non-loopback traffic would go."""
    held, port = gateway.refusing_port()
    yield f"http://127.0.0.1:{port}"
    held.close()


def codex(gw, tmp_path, dead_proxy, group, prompt, scenario="", test_id="codex", model="gateway-model"):
    """Runs `codex exec`; returns (returncode, stdout, stderr)."""
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    headers = {"x-model-group": group, "x-test-id": test_id}
    if scenario:
        headers["x-mock-scenario"] = scenario
    header_table = ", ".join(f'"{k}" = {json.dumps(v)}' for k, v in headers.items())
    provider = (f'model_providers.gw={{name = "gw", base_url = "{gw.base}/v1", wire_api = "responses", '
                f'env_key = "GW_KEY", http_headers = {{{header_table}}}, '
                f'request_max_retries = 0, stream_max_retries = 0}}')
    args = [str(CODEX), "exec", "--skip-git-repo-check", "--ephemeral",
            "--dangerously-bypass-approvals-and-sandbox", "--cd", str(work),
            "-m", model,
            "-c", "model_provider=gw", "-c", provider,
            "-c", "check_for_update_on_startup=false",
            "-c", "analytics.enabled=false",
            "-c", "feedback.enabled=false",
            "-c", 'otel.exporter="none"',
            prompt]
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "GW_KEY": ALL_GROUPS_KEY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        **{name: dead_proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                          "http_proxy", "https_proxy", "all_proxy")},
    }
    r = subprocess.run(args, env=env, cwd=work, capture_output=True, text=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


@pytest.fixture(autouse=True)
def installed():
    if not CODEX.exists():
        pytest.fail("tests/codex is not installed: run make tests/codex/node_modules/.installed")


@pytest.mark.parametrize("group", GROUPS)
def test_plain_answer(gw, tmp_path, dead_proxy, group, test_id):
    code, out, err = codex(gw, tmp_path, dead_proxy, group, "say hello codex", test_id=test_id)
    assert code == 0, err[-3000:]
    assert "Hello from the mock" in out, (out, err[-3000:])
    sent = gw.mock_requests(test_id)
    assert sent, "the request reached the vendor"


@pytest.mark.parametrize("group", GROUPS)
def test_shell_tool_round_trip(gw, tmp_path, dead_proxy, group, test_id):
    # The command computes the marker: only its output, not its text, has it.
    marker = "gateway-42"
    code, out, err = codex(gw, tmp_path, dead_proxy, group, "run the marker command",
                           scenario="call-shell=echo gateway-$((40+2))", test_id=test_id)
    assert code == 0, err[-3000:]
    # The model called Codex's shell tool; Codex ran it and sent the output back;
    # the final answer quotes it.
    assert "Tool result received" in out and marker in out, (out, err[-3000:])
    sent = gw.mock_requests(test_id)
    assert len(sent) >= 2, "a second turn carried the tool's output"
    assert marker not in json.dumps(sent[0]["body"])
    assert marker in json.dumps(sent[-1]["body"]), "the command's output went back to the vendor"


@pytest.mark.parametrize("group", TRANSLATED)
def test_namespaced_tool_round_trip(gw, tmp_path, dead_proxy, group, test_id):
    # The vendor saw `multi_agent_v1__close_agent`; Codex must get the call
    # back in its namespace, as it declared it, and run its own tool.
    code, out, err = codex(gw, tmp_path, dead_proxy, group, "close the agent",
                           scenario="call=multi_agent_v1__close_agent", test_id=test_id)
    assert code == 0, err[-3000:]
    sent = gw.mock_requests(test_id)
    assert len(sent) >= 2, "a second turn carried the tool's output"
    first, last = json.dumps(sent[0]["body"]), json.dumps(sent[-1]["body"])
    assert "multi_agent_v1__close_agent" in first, "the namespace's tools, flattened"
    assert "Tool result received" in out, (out, err[-3000:])
    # close_agent itself answered (about the mock's made-up agent id), not
    # Codex's refusal of a tool it does not know.
    assert "invalid agent id" in last, last[-2000:]


def test_gemini_3_searches_beside_codex_tools(gw, tmp_path, dead_proxy, test_id):
    """Codex's default tools on a Gemini 3 model (mock-gemini maps
    gemini-3-pro to gemini-3-pro-preview): its web search goes as Gemini's
    Google Search beside Codex's function tools, with
    `includeServerSideToolInvocations` (Gemini 3 refuses the mix without
    it, as the mock does); the search Gemini ran itself (`toolCall` and
    `toolResponse` parts, which the mock sends) is no tool call of Codex's,
    and the shell tool round trip goes on."""
    marker = "gateway-42"
    code, out, err = codex(gw, tmp_path, dead_proxy, "mock-gemini", "run the marker command",
                           scenario="call-shell=echo gateway-$((40+2))", test_id=test_id, model="gemini-3-pro")
    assert code == 0, err[-3000:]
    assert "Tool result received" in out and marker in out, (out, err[-3000:])
    first, *_, last = gw.mock_requests(test_id)
    assert first["path"].startswith("/v1beta/models/gemini-3-pro-preview:")
    assert {"googleSearch": {}} in first["body"]["tools"]
    assert any("functionDeclarations" in t for t in first["body"]["tools"])
    assert first["body"]["toolConfig"]["includeServerSideToolInvocations"] is True
    assert marker in json.dumps(last["body"]), "the command's output went back to the vendor"
