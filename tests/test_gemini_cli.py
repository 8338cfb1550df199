"""Gemini CLI (`gemini`, pinned in tests/gemini-cli) through the gateway's
Gemini surface, non-interactive (`gemini -p ... -m <group> --yolo`), against
every vendor: a plain answer, and a task in which the model asks for Gemini
CLI's own shell tool (`run_shell_command`), the CLI runs it and sends its
output back, and the model's final answer quotes it.

The CLI reaches the gateway through `GOOGLE_GEMINI_BASE_URL` with the gateway
key as `GEMINI_API_KEY`; `HOME` is a fresh directory holding only the
settings that pick API-key auth and turn off telemetry and updates.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ALL_GROUPS_KEY, own_gateway
from test_clients import PINNED_NODE

CLI_DIR = Path(__file__).resolve().parent / "gemini-cli"
GEMINI = CLI_DIR / "node_modules" / ".bin" / "gemini"
# The path each vendor's API is called on (the mock records it).
VENDORS = {
    "mock-gemini": ":streamGenerateContent",
    "mock-openai": "/v1/chat/completions",
    "mock-anthropic": "/v1/messages",
    "mock-bedrock": "/converse-stream",
    "mock-dashscope": "/text-generation/generation",
    "mock-azure": "/chat/completions",
}
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    "telemetry": {"enabled": False},
}


def ensure_gemini_cli():
    """The pinned CLI, installed from the lockfile when missing (as `make test` does)."""
    if not GEMINI.exists():
        subprocess.run(["npm", "ci", "--prefix", str(CLI_DIR), "--no-audit", "--no-fund"],
                       check=True, timeout=600)


@pytest.fixture(scope="module")
def cligw(tmp_path_factory):
    ensure_gemini_cli()
    with own_gateway(tmp_path_factory.mktemp("envoy-gemini-cli")) as gw:
        yield gw


def gemini(gw, tmp_path, group, prompt, test_id, scenario=None):
    """Runs `gemini -p` against the gateway; its JSON result."""
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
    work = tmp_path / "work"
    work.mkdir()
    headers = f"x-test-id: {test_id}"
    if scenario:
        headers += f", x-mock-scenario: {scenario}"
    path = os.environ["PATH"]
    if PINNED_NODE.exists():
        path = f"{PINNED_NODE.parent}:{path}"
    env = {
        "PATH": path,
        "HOME": str(home),
        "GOOGLE_GEMINI_BASE_URL": gw.base,
        "GEMINI_API_KEY": ALL_GROUPS_KEY,
        "GEMINI_CLI_CUSTOM_HEADERS": headers,
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "NO_COLOR": "1",
    }
    proc = subprocess.run([str(GEMINI), "-p", prompt, "-m", group, "--output-format", "json",
                           "--yolo", "--skip-trust"],
                          env=env, cwd=work, capture_output=True, text=True, timeout=180)
    gw.record({}, proc.stdout.encode())
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    return json.loads(proc.stdout)


@pytest.mark.parametrize("group", list(VENDORS))
def test_plain_answer(cligw, tmp_path, group, test_id):
    out = gemini(cligw, tmp_path, group, "say hello to the gateway", test_id)
    assert "Hello from the mock" in out["response"], out
    sent = cligw.mock_requests(test_id)
    assert sent and all(VENDORS[group] in r["path"] for r in sent)
    # The gateway key never reaches the vendor.
    assert all(ALL_GROUPS_KEY not in json.dumps(r["headers"]) + r["path"] for r in sent)


@pytest.mark.parametrize("group", list(VENDORS))
def test_shell_tool_round_trip(cligw, tmp_path, group, test_id):
    """The model calls `run_shell_command` (`echo PINEAPPLE`); the CLI runs it
    and the model's answer quotes the output it was sent back."""
    out = gemini(cligw, tmp_path, group, "run a command for me", test_id,
                 scenario="call=run_shell_command:PINEAPPLE")
    tools = out["stats"]["tools"]
    assert tools["byName"]["run_shell_command"]["success"] == 1, tools
    assert "Tool result received" in out["response"] and "PINEAPPLE" in out["response"], out
    # Two generations: the call, then the answer to its result.
    assert len(cligw.mock_requests(test_id)) >= 2
