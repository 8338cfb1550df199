"""Context fitting with the real coding agents (docs/src/features/context-fitting.md),
through Envoy: Claude Code (with its tools and thinking) and Codex keep one
session going over several turns, each a long prompt and a shell tool call,
on groups whose model has a 32K window (`mock-claude-32k`, `mock-gpt-4o-32k`):
their system prompt and tools fit, the growing history does not. With a
`fitting` policy the session keeps working, its later answers say
`x-llm-context: trimmed=...`, and the strict mock (which refuses a prompt
over its window, an orphan tool result, broken alternation, a thinking turn
without its signature) accepts every request; the same session on a group
without the policy gets the vendor's window error (Claude Code then
compacts the session itself; Codex fails the turn).

The prompts' words are three letters and a space: the gateway's estimate
(about 4 bytes a token) and the mock's count (a word a token) agree, so
what the gateway fits is what the mock counts. The mock's tool call ids
are unique (`unique-ids`), as real vendors' are: a trimmed conversation
must not get an id the agent already holds from the turns it dropped."""

import json
import os
import re
import subprocess

import pytest

from conftest import ALL_GROUPS_KEY, configure_test_gateway, log_lines, own_gateway
from test_claude_code import CLAUDE, ensure_claude_code
from test_codex import CODEX

import gateway

WINDOW = 32768
WORDS = "one two six ten red sun map key cup box art ink owl elk fig jam".split()
# Each turn's prompt: five turns are over the window, one or two fit.
PROMPT_WORDS = 7000
TURNS = 5
TRIMMED = re.compile(r"^trimmed=(\d+); tokens=(\d+)/32768$")
TIMEOUT = 120


def long_prompt(turn):
    filler = " ".join(WORDS[(turn + i) % len(WORDS)] for i in range(PROMPT_WORDS))
    return f"turn {turn}: run the marker command. {filler}"


def edit(config):
    configure_test_gateway(config)
    facts = config.setdefault("model_facts", {}).setdefault("models", {})
    for model in ("mock-claude-32k", "mock-gpt-4o-32k"):
        facts[model] = {"context_window": WINDOW}
    fit = {"strategies": ["route", "trim", "reject"]}
    groups = config["model_groups"]
    for name, cluster, provider, model in [("agent-claude", "mock_anthropic", "mock-anthropic", "mock-claude-32k"),
                                           ("agent-codex", "mock_openai", "mock-openai", "mock-gpt-4o-32k")]:
        candidates = [{"cluster": cluster, "provider": provider, "model": model}]
        groups[f"fit-{name}"] = {"candidates": candidates, "fitting": fit}
        groups[f"nofit-{name}"] = {"candidates": candidates}


@pytest.fixture(scope="module")
def agw(tmp_path_factory):
    ensure_claude_code()
    if not CODEX.exists():
        pytest.fail("tests/codex is not installed: run make tests/codex/node_modules/.installed")
    with own_gateway(tmp_path_factory.mktemp("envoy-fitting-agents"), edit=edit) as g:
        yield g


def group_lines(g, group):
    return [line for line in log_lines(g) if line["group"] == group]


def check_session(g, group, turns_answered):
    """Every request of the session answered (the mock refused none), the
    later ones trimmed and saying so."""
    lines = group_lines(g, group)
    assert len(lines) >= 2 * turns_answered, lines
    assert all(line["status"] == 200 for line in lines), [(l["status"], l.get("code")) for l in lines]
    trimmed = [TRIMMED.match(line.get("context") or "") for line in lines]
    assert any(trimmed), [line.get("context") for line in lines]
    for m in filter(None, trimmed):
        assert int(m.group(1)) > 0 and int(m.group(2)) <= WINDOW
    return lines


# --- Claude Code -------------------------------------------------------------

def claude(g, home, group, prompt, test_id, scenario, resume):
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": g.base,
        "ANTHROPIC_API_KEY": ALL_GROUPS_KEY,
        "ANTHROPIC_CUSTOM_HEADERS": f"x-test-id: {test_id}\nx-mock-scenario: {scenario}",
        "ANTHROPIC_SMALL_FAST_MODEL": group,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": group,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        # Thinking on; an output limit the 32K window leaves room for.
        "MAX_THINKING_TOKENS": "1024",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "4096",
    }
    args = [str(CLAUDE), "-p", prompt, "--model", group, "--output-format", "json", "--allowedTools", "Bash"]
    if resume:
        args.insert(1, "--continue")
    proc = subprocess.run(args, env=env, cwd=home, capture_output=True, text=True, timeout=TIMEOUT)
    g.record({}, proc.stdout.encode())
    lines = proc.stdout.strip().splitlines()
    assert lines, (proc.returncode, proc.stderr[-3000:])
    return proc.returncode, json.loads(lines[-1])


def test_claude_code_long_session_on_a_32k_model(agw, tmp_path, test_id):
    for turn in range(TURNS):
        marker = f"marker-{turn}"
        code, result = claude(agw, tmp_path, "fit-agent-claude", long_prompt(turn), test_id,
                              f"call=Bash:{marker}, unique-ids", resume=turn > 0)
        assert code == 0 and result["is_error"] is False, result
        assert f"Tool result received: {marker}" in result["result"], result
    check_session(agw, "fit-agent-claude", TURNS)
    sent = [r["body"] for r in agw.mock_requests(test_id) if "/v1/messages" in r["path"]]
    assert all(r_model == "mock-claude-32k" for r_model in (b["model"] for b in sent))
    last = sent[-1]["messages"]
    # Trimmed: the oldest turns are gone, the latest tool turn is whole, with
    # its signed thinking (the mock checks the signature).
    assert "turn 0:" not in json.dumps(last)
    assert last[0]["role"] == "user"
    assert any(b.get("type") == "thinking" and b.get("signature")
               for m in last if m["role"] == "assistant" and isinstance(m["content"], list) for b in m["content"])
    assert any(b.get("type") == "tool_result" for b in last[-1]["content"] if isinstance(b, dict))
    # The same session without a policy: the vendor refuses it whole with its
    # window error (Claude Code then compacts the session on its own: the
    # summary it asks for fits, and the turn goes on without the history).
    code, result = claude(agw, tmp_path, "nofit-agent-claude", long_prompt(TURNS), f"{test_id}-nofit",
                          f"call=Bash:marker-{TURNS}, unique-ids", resume=True)
    refused = group_lines(agw, "nofit-agent-claude")
    assert (refused[0]["status"], refused[0]["code"]) == (400, "CONTEXT_LENGTH_EXCEEDED"), refused
    assert not refused[0].get("context")
    whole = agw.mock_requests(f"{test_id}-nofit")[0]["body"]
    assert "turn 0:" in json.dumps(whole), "the vendor got the whole session"


# --- Codex ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def dead_proxy():
    held, port = gateway.refusing_port()
    yield f"http://127.0.0.1:{port}"
    held.close()


def codex(g, tmp_path, dead_proxy, group, prompt, scenario, test_id, resume):
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    headers = {"x-model-group": group, "x-test-id": test_id, "x-mock-scenario": scenario}
    header_table = ", ".join(f'"{k}" = {json.dumps(v)}' for k, v in headers.items())
    provider = (f'model_providers.gw={{name = "gw", base_url = "{g.base}/v1", wire_api = "responses", '
                f'env_key = "GW_KEY", http_headers = {{{header_table}}}, '
                f'request_max_retries = 0, stream_max_retries = 0}}')
    args = [str(CODEX), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
            "--cd", str(work), "-m", "gateway-model",
            "-c", "model_provider=gw", "-c", provider,
            "-c", "check_for_update_on_startup=false",
            "-c", "analytics.enabled=false",
            "-c", "feedback.enabled=false",
            "-c", 'otel.exporter="none"']
    args += ["resume", "--last", prompt] if resume else [prompt]
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


def test_codex_long_session_on_a_32k_model(agw, tmp_path, dead_proxy, test_id):
    for turn in range(TURNS):
        marker = f"gateway-{turn}"
        code, out, err = codex(agw, tmp_path, dead_proxy, "fit-agent-codex", long_prompt(turn),
                               f"call-shell=echo {marker}, unique-ids", test_id, resume=turn > 0)
        assert code == 0, err[-3000:]
        assert "Tool result received" in out and marker in out, (out[-2000:], err[-3000:])
    check_session(agw, "fit-agent-codex", TURNS)
    sent = agw.mock_requests(test_id)
    # A trimmed request is encoded from the neutral model (OpenAI's dialect
    # writes Chat Completions); the oldest turns are gone from the latest.
    last = sent[-1]
    assert last["path"].endswith("/chat/completions"), last["path"]
    assert "turn 0:" not in json.dumps(last["body"]) and "turn 4:" in json.dumps(last["body"])
    code, out, err = codex(agw, tmp_path, dead_proxy, "nofit-agent-codex", long_prompt(TURNS),
                           f"call-shell=echo gateway-{TURNS}, unique-ids", test_id, resume=True)
    assert code != 0
    assert "maximum context length is 32768 tokens" in out + err, (out[-2000:], err[-3000:])
