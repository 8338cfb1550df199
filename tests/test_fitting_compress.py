"""Context fitting's `compress` (docs/src/features/context-fitting.md,
"Compress"), through Envoy, with the openai SDK: a long agent history with
one huge old tool result, to a group on a 4096-token model with
`route, compress, trim, reject`, has that result summarised by the
summariser group (one vendor call, made by the edge with the caller's
key, metered to it) and replaced by the summary in what the vendor gets;
with the summariser down, the policy goes on to `trim`. The strict mock
refuses a prompt over the model's window, so the first test fails if the
summary did not make it fit, and the second if trimming did not."""

import json
import re
import socket
import time
import urllib.request

import openai
import pytest

import gateway
from conftest import ALL_GROUPS_KEY, configure_test_gateway, log_for, own_gateway, prometheus_names

SMALL_WINDOW = 4096
COMPRESS, COMPRESS_DOWN = "compress", "compress-down"
SUMMARISER, SUMMARISER_DOWN = "compress-sum", "compress-sum-down"
MARK = "[summary of an earlier tool result by the gateway] "


def closed_port():
    """A local port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def edit(config):
    configure_test_gateway(config)
    config.setdefault("model_facts", {}).setdefault("models", {})["mock-gpt-small"] = {
        "context_window": SMALL_WINDOW}
    config["providers"][SUMMARISER_DOWN] = {"dialect": "openai", "api_key": "sk-mock-openai",
                                            "models": {"*": "mock-gpt-4o"}}
    small = [{"cluster": "mock_openai", "provider": "mock-openai", "model": "mock-gpt-small"}]
    policy = {"strategies": ["route", "compress", "trim", "reject"], "summariser": {"group": SUMMARISER}}
    config["model_groups"].update({
        SUMMARISER: {"candidates": [{"cluster": "mock_openai", "provider": "mock-openai",
                                     "model": "mock-gpt-4o"}]},
        SUMMARISER_DOWN: {"candidates": [{"cluster": "summariser_down", "provider": SUMMARISER_DOWN}]},
        COMPRESS: {"candidates": small, "fitting": policy},
        COMPRESS_DOWN: {"candidates": small,
                        "fitting": dict(policy, summariser={"group": SUMMARISER_DOWN})},
    })


@pytest.fixture(scope="module")
def cgw(tmp_path_factory):
    down = closed_port()
    with own_gateway(tmp_path_factory.mktemp("envoy-compress"), edit=edit,
                     extra_clusters=lambda _: [gateway.static_cluster("summariser_down", down,
                                                                      SUMMARISER_DOWN)]) as g:
        yield g


def words(n):
    return " ".join(f"line{i} ok" for i in range(n))


# About 3000 words, 24 KB: over the window by itself.
TOOL_RESULT = words(1500)


def agent_history():
    """An old turn that read a huge log, then the latest question."""
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "read the build log"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_log", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"build.log\"}"}}]},
        {"role": "tool", "tool_call_id": "call_log", "content": TOOL_RESULT},
        {"role": "assistant", "content": "I read it."},
        {"role": "user", "content": "so what failed?"},
    ]


def ask(g, group, test_id):
    c = openai.OpenAI(api_key=ALL_GROUPS_KEY, base_url=f"{g.base}/v1", max_retries=0, timeout=30,
                      default_headers={"x-test-id": test_id, "x-model-group": group})
    return c.chat.completions.with_raw_response.create(
        model="any", messages=agent_history(), max_tokens=256, extra_body={"request_id": f"req-{test_id}"})


def requests_count(g, **labels):
    """`llm_gateway.requests` summed over the samples with these labels."""
    names = prometheus_names("llm_gateway.requests")
    with urllib.request.urlopen(f"{g.admin}/stats/prometheus", timeout=5) as r:
        text = r.read().decode()
    total = 0
    for line in text.splitlines():
        sample, _, value = line.rpartition(" ")
        name, _, rest = sample.partition("{")
        if name not in names:
            continue
        have = dict((k, v.strip('"')) for k, v in (p.split("=", 1) for p in rest.rstrip("}").split(",") if "=" in p))
        if all(have.get(k) == v for k, v in labels.items()):
            total += int(float(value))
    return total


def test_an_old_tool_result_is_summarised_and_the_summary_sent(cgw, test_id):
    charged = {"group": SUMMARISER, "key": "tester", "status": "200"}
    before = requests_count(cgw, **charged)
    raw = ask(cgw, COMPRESS, test_id)
    assert raw.parse().choices[0].message.content
    context = raw.headers["x-llm-context"]
    assert re.fullmatch(r"compressed=1; tokens=\d+/4096", context), context
    summarised, sent = cgw.mock_requests(test_id)
    # The summariser's call: the block, to its group's model.
    call = summarised["body"]
    assert call["model"] == "mock-gpt-4o" and call["max_tokens"] == 256
    assert call["messages"][-1] == {"role": "user", "content": TOOL_RESULT}
    # The vendor got the summary (the mock's answer) in the tool result's
    # place, its id kept, everything else as it came.
    body = sent["body"]
    assert body["model"] == "mock-gpt-small"
    history = agent_history()
    messages = body["messages"]
    assert len(messages) == len(history)
    tool = messages[3]
    assert tool["tool_call_id"] == "call_log"
    assert tool["content"].startswith(MARK + "Hello from the mock"), tool["content"]
    assert "line0 ok line1 ok" in tool["content"], "the mock's summary quotes the block's start"
    assert [m for i, m in enumerate(messages) if i != 3] == [m for i, m in enumerate(history) if i != 3]
    assert log_for(cgw, f"req-{test_id}")["context"] == context
    assert int(cgw.stat(f"wasmcustom.llm_gateway.context_fitting;group={COMPRESS};outcome=compressed") or 0) >= 1
    # The summariser call is the key's request: metered and charged to it.
    deadline = time.monotonic() + 10
    while requests_count(cgw, **charged) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert requests_count(cgw, **charged) == before + 1


def test_the_summariser_down_leaves_trim_to_fit(cgw, test_id):
    failed = f"wasmcustom.llm_gateway.context_fitting;group={COMPRESS_DOWN};outcome=summariser_failed"
    before = int(cgw.stat(failed) or 0)
    raw = ask(cgw, COMPRESS_DOWN, test_id)
    assert raw.parse().choices[0].message.content
    context = raw.headers["x-llm-context"]
    assert re.fullmatch(r"trimmed=4; tokens=\d+/4096", context), context
    [sent] = cgw.mock_requests(test_id)
    messages = sent["body"]["messages"]
    assert messages == [agent_history()[0], agent_history()[-1]], "the old turn dropped whole"
    assert not any(MARK in json.dumps(m) for m in messages)
    assert int(cgw.stat(failed) or 0) == before + 1
