"""Claude Code (the `claude` CLI, pinned in tests/claude-code) through the
gateway's Anthropic Messages surface, non-interactive (`claude -p`), against
every vendor (Anthropic, OpenAI, Gemini, Bedrock, DashScope, Azure): a
plain answer, and a task in
which the model asks for Claude Code's own Bash tool, Claude Code runs it
and sends its output back, and the model's final answer quotes it.

Claude Code stays off the network (no telemetry, error reports, updates or
other nonessential traffic; `HOME` a fresh directory); its main and its
small side-task ("haiku") model both name the group, and the mock's record
shows what it sent.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ALL_GROUPS_KEY, configure_test_gateway, own_gateway, log_lines

CLAUDE_DIR = Path(__file__).resolve().parent / "claude-code"
CLAUDE = CLAUDE_DIR / "node_modules" / ".bin" / "claude"
# The vendor name the mock answers with, the path its API is called on, and
# the names of the tools in its request body.
VENDORS = {
    "mock-anthropic": ("anthropic", "/v1/messages", lambda b: [t["name"] for t in b["tools"]]),
    "mock-openai": ("openai", "/v1/chat/completions", lambda b: [t["function"]["name"] for t in b["tools"]]),
    "mock-gemini": ("gemini", ":streamGenerateContent",
                    lambda b: [f["name"] for t in b["tools"] for f in t["functionDeclarations"]]),
    "mock-bedrock": ("bedrock", "/converse-stream", lambda b: [t["toolSpec"]["name"] for t in b["toolConfig"]["tools"]]),
    "mock-dashscope": ("dashscope", "/text-generation/generation",
                       lambda b: [t["function"]["name"] for t in b["parameters"]["tools"]]),
    "mock-azure": ("azure", "/chat/completions", lambda b: [t["function"]["name"] for t in b["tools"]]),
}


def ensure_claude_code():
    """The pinned CLI, installed from the lockfile when missing (as `make test-integration` does)."""
    if not CLAUDE.exists():
        subprocess.run(["npm", "ci", "--prefix", str(CLAUDE_DIR), "--no-audit", "--no-fund"],
                       check=True, timeout=600)


@pytest.fixture(scope="module")
def cgw(tmp_path_factory):
    ensure_claude_code()
    with own_gateway(tmp_path_factory.mktemp("envoy-claude-code")) as gw:
        yield gw


def claude(cgw, tmp_path, group, prompt, test_id, scenario=None, thinking_tokens=None):
    """Runs `claude -p` against the gateway; its JSON result."""
    headers = [f"x-test-id: {test_id}"]
    if scenario:
        headers.append(f"x-mock-scenario: {scenario}")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "ANTHROPIC_BASE_URL": cgw.base,
        "ANTHROPIC_API_KEY": ALL_GROUPS_KEY,
        "ANTHROPIC_CUSTOM_HEADERS": "\n".join(headers),
        # Side tasks (titles, summaries) go to the same group.
        "ANTHROPIC_SMALL_FAST_MODEL": group,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": group,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    if thinking_tokens:
        env["MAX_THINKING_TOKENS"] = str(thinking_tokens)
    proc = subprocess.run([str(CLAUDE), "-p", prompt, "--model", group, "--output-format", "json",
                           "--allowedTools", "Bash"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    cgw.record({}, proc.stdout.encode())
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])




def requests_of(cgw, test_id, count, timeout=5.0):
    """The mock's record of this test (at least `count` requests)."""
    deadline = time.time() + timeout
    while True:
        seen = cgw.mock_requests(test_id)
        if len(seen) >= count or time.time() > deadline:
            return seen
        time.sleep(0.05)


@pytest.mark.parametrize("group", list(VENDORS))
def test_plain_answer(cgw, tmp_path, group, test_id):
    vendor, path, tool_names = VENDORS[group]
    result = claude(cgw, tmp_path, group, "say hello", test_id)
    assert result["is_error"] is False and result["subtype"] == "success"
    assert f"Hello from the mock {vendor} provider." in result["result"]
    assert result["usage"]["output_tokens"] > 0
    seen = requests_of(cgw, test_id, 1)
    # Every request Claude Code made reached this group's vendor, with its
    # tools (Bash among them) in the vendor's own form, and none was refused.
    assert seen and all(path in r["path"] for r in seen)
    assert "Bash" in tool_names(seen[-1]["body"])
    lines = [line for line in log_lines(cgw) if line["group"] == group and line["surface"] == "anthropic_messages"]
    assert lines and all(line["status"] == 200 for line in lines), lines


@pytest.mark.parametrize("group", list(VENDORS))
def test_bash_tool_round_trip(cgw, tmp_path, group, test_id):
    """The mock calls Bash with `echo <marker>` (`call=Bash:<marker>`);
    Claude Code runs it and the model's final answer quotes the output."""
    marker = f"marker-{group}-{os.getpid()}"
    result = claude(cgw, tmp_path, group, "run the marker command", test_id, scenario=f"call=Bash:{marker}")
    assert result["is_error"] is False and result["num_turns"] >= 2
    assert f"Tool result received: {marker}" in result["result"]
    seen = requests_of(cgw, test_id, 2)
    last = json.dumps(seen[-1]["body"])
    assert f"echo {marker}" in last, "the tool call went back in the history"
    assert marker in last.replace(f"echo {marker}", ""), "and the tool's output with it"


def test_claude_code_version_is_pinned(tmp_path):
    """The CLI that ran is the locked one."""
    ensure_claude_code()
    lock = json.loads((CLAUDE_DIR / "package-lock.json").read_text())
    pkg = json.loads((CLAUDE_DIR / "package.json").read_text())
    pinned = pkg["dependencies"]["@anthropic-ai/claude-code"]
    assert lock["packages"]["node_modules/@anthropic-ai/claude-code"]["version"] == pinned
    out = subprocess.run([str(CLAUDE), "--version"], env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split()[0] == pinned, out


def first_turn_down(config):
    """mock-failover's Anthropic vendor down only for a conversation's first
    turn: turn 1 fails over to OpenAI, turn 2 (the tool's result) is Anthropic's."""
    configure_test_gateway(config)
    config["providers"]["mock-anthropic-down"]["base_path"] = "/scenario/busy-until-tool-results"


@pytest.fixture(scope="module")
def mixed_gw(tmp_path_factory):
    ensure_claude_code()
    with own_gateway(tmp_path_factory.mktemp("envoy-claude-code-mixed"), edit=first_turn_down) as gw:
        yield gw


def test_thinking_with_tools_across_a_failover(mixed_gw, tmp_path, test_id):
    """Claude Code thinking, with Bash, on mock-failover: OpenAI answers turn
    1 (a Bash call, no signed thinking), Anthropic turn 2, which Claude
    would refuse with thinking on ("Expected `thinking` or
    `redacted_thinking`", as the mock does): the pass-through goes without."""
    marker = f"marker-mixed-{os.getpid()}"
    result = claude(mixed_gw, tmp_path, "mock-failover", "run the marker command", test_id,
                    scenario=f"call=Bash:{marker}", thinking_tokens=2048)
    assert result["is_error"] is False and result["num_turns"] >= 2, result
    assert f"Tool result received: {marker}" in result["result"]
    seen = requests_of(mixed_gw, test_id, 2)
    assert any("/v1/chat/completions" in r["path"] for r in seen), "turn 1 failed over to OpenAI"
    first = next(r for r in seen if "/v1/messages" in r["path"])
    assert first["body"].get("thinking"), "Claude Code asked for thinking"
    answered = [r for r in seen if "/v1/messages" in r["path"] and f"echo {marker}" in json.dumps(r["body"])]
    assert answered and all("thinking" not in r["body"] for r in answered), "turn 2 without thinking"
