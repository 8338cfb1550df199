"""Context fitting (docs/src/features/context-fitting.md), through Envoy:
a long conversation on a group whose model has a small window is trimmed
(its oldest turns dropped) for the attempt that carries it, and says so in
`x-llm-context`, the access log and a metric; the strict mock refuses a
prompt over the model's window with the vendor's own error and what a bad
trim would produce (orphan tool results, a conversation opening with the
assistant, a thinking turn without its signature), so these tests fail if
fitting does not fit or trims badly."""

import json
import re
import time

import anthropic
import openai
import pytest

from conftest import ALL_GROUPS_KEY, DIAGNOSTICS_ADMIN_KEY, configure_test_gateway, log_for, own_gateway

# The mock counts a prompt's words as its tokens; the gateway estimates
# about 4 bytes a token, so these words (5 to 8 bytes with their space)
# are over-estimated, never under.
WORDS = "the gateway fits every request to the context window of the model that answers it".split()
SMALL_WINDOW = 4096
CONTEXT = re.compile(r"^trimmed=(\d+); tokens=(\d+)/(\d+)$")


def words(n, start=0):
    return " ".join(WORDS[(start + i) % len(WORDS)] for i in range(n))


def history(turns, size=250):
    """An old conversation of `turns` user/assistant pairs, about
    2 x `size` words each: far over a 4096-token window for 8 turns."""
    out = []
    for i in range(turns):
        out.append({"role": "user", "content": f"question {i}: {words(size, i)}"})
        out.append({"role": "assistant", "content": f"answer {i}: {words(size, i + 1)}"})
    return out


def edit(config):
    configure_test_gateway(config)
    facts = config.setdefault("model_facts", {}).setdefault("models", {})
    # The configuration's facts (the mock lists the same windows).
    for model in ("mock-gpt-small", "mock-claude-small", "mock-gemini-small"):
        facts[model] = {"context_window": SMALL_WINDOW}
    groups = config["model_groups"]
    trim = {"strategies": ["route", "trim", "reject"]}
    groups["fit-claude"] = {"candidates": [
        {"cluster": "mock_anthropic", "provider": "mock-anthropic", "model": "mock-claude-small"}], "fitting": trim}
    groups["fit-gemini"] = {"candidates": [
        {"cluster": "mock_gemini", "provider": "mock-gemini", "model": "mock-gemini-small"}], "fitting": trim}
    # Anthropic (down: 529) first, then OpenAI's small model (this group's
    # mapping at mock-openai): the first attempt goes whole, the second trimmed.
    groups["fit-failover"] = {"candidates": [
        {"cluster": "mock_failover", "provider": "mock-anthropic-down", "model": "mock-claude-sonnet"}],
        "fitting": trim}
    config["providers"]["mock-openai"]["models"]["fit-failover"] = "mock-gpt-small"
    groups["fit-none"] = {"candidates": [
        {"cluster": "mock_openai", "provider": "mock-openai", "model": "mock-gpt-small"}]}
    groups["fit-reject"] = {"candidates": [
        {"cluster": "mock_openai", "provider": "mock-openai", "model": "mock-gpt-small"}],
        "fitting": {"strategies": ["reject"]}}


@pytest.fixture(scope="module")
def fgw(tmp_path_factory):
    with own_gateway(tmp_path_factory.mktemp("envoy-fitting"), edit=edit) as g:
        yield g


def oai(g, test_id, **headers):
    return openai.OpenAI(api_key=ALL_GROUPS_KEY, base_url=f"{g.base}/v1", max_retries=0,
                         default_headers={"x-test-id": test_id, **headers})


def claude(g, group, test_id):
    return anthropic.Anthropic(api_key=ALL_GROUPS_KEY, base_url=g.base, max_retries=0,
                               default_headers={"x-model-group": group, "x-test-id": test_id})


def fitted(headers, window=SMALL_WINDOW):
    """The trim `x-llm-context` reports: (messages dropped, tokens)."""
    m = CONTEXT.match(headers.get("x-llm-context", ""))
    assert m, headers.get("x-llm-context")
    dropped, tokens, said_window = map(int, m.groups())
    assert dropped > 0 and said_window == window
    return dropped, tokens


def diagnostics_trace(g, request_id):
    """The diagnostics view's trace of a request (a bounded poll: it is
    recorded when the request ends)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        status, _, body = g.request("GET", f"/llm-gateway/api/requests/{request_id}",
                                    headers={"authorization": f"Bearer {DIAGNOSTICS_ADMIN_KEY}", "content-type": None})
        if status == 200:
            return json.loads(body)
        time.sleep(0.1)
    raise AssertionError(f"{request_id} was not recorded")


def sent_bodies(g, test_id):
    return [r["body"] for r in g.mock_requests(test_id)]


def test_a_long_chat_is_trimmed_for_the_small_model_and_says_so(fgw, test_id):
    old = history(8)
    question = {"role": "user", "content": "so what is the answer now?"}
    raw = oai(fgw, test_id).chat.completions.with_raw_response.create(
        model="mock-small", messages=[{"role": "system", "content": "be brief"}, *old, question],
        max_tokens=256, extra_body={"request_id": f"req-{test_id}"})
    answer = raw.parse()
    dropped, tokens = fitted(raw.headers)
    [body] = sent_bodies(fgw, test_id)
    sent = body["messages"]
    assert body["model"] == "mock-gpt-small"
    assert len(sent) == 2 + len(old) - dropped and dropped % 2 == 0, "whole turns"
    assert sent[0] == {"role": "system", "content": "be brief"}
    assert sent[1]["role"] == "user" and sent[-1] == question
    assert sent[1:] == [*old[dropped:], question], "the newest turns kept as they came"
    # The usage is the vendor's, for what was sent (the mock counts words).
    said = sum(len(m["content"].split()) for m in sent)
    assert answer.usage.prompt_tokens == said <= SMALL_WINDOW - 256
    assert said <= tokens, "the estimate errs on the safe side"
    line = log_for(fgw, f"req-{test_id}")
    assert line["context"] == raw.headers["x-llm-context"]
    assert int(fgw.stat("wasmcustom.llm_gateway.context_fitting;group=mock-small;outcome=trimmed") or 0) >= 1
    # The diagnostics view's trace of the request shows it per attempt.
    [attempt] = diagnostics_trace(fgw, f"req-{test_id}")["attempts"]
    assert attempt["context"] == raw.headers["x-llm-context"]


def test_a_short_chat_goes_whole(fgw, test_id):
    raw = oai(fgw, test_id).chat.completions.with_raw_response.create(
        model="mock-small", messages=[{"role": "user", "content": "hi"}])
    assert re.fullmatch(r"tokens=\d+/4096", raw.headers["x-llm-context"])
    [body] = sent_bodies(fgw, test_id)
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_a_long_responses_input_is_trimmed(fgw, test_id):
    # A pass-through pair (OpenAI's Responses API at OpenAI): re-encoded when fitted.
    items = [{"role": m["role"], "content": m["content"]} for m in history(8)]
    raw = oai(fgw, test_id).responses.with_raw_response.create(
        model="mock-small", instructions="be brief", input=[*items, {"role": "user", "content": "and now?"}],
        max_output_tokens=256)
    assert raw.parse().status == "completed"
    dropped, _ = fitted(raw.headers)
    [body] = sent_bodies(fgw, test_id)
    # Encoded from the neutral model: OpenAI's dialect writes Chat Completions.
    system, *sent = body["messages"]
    assert system == {"role": "system", "content": "be brief"}
    assert len(sent) == len(items) + 1 - dropped
    assert sent[0]["role"] == "user" and sent[-1]["content"] == "and now?"


TOOL = {"name": "list_files", "description": "Lists the files of a directory.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
THINKING = {"type": "enabled", "budget_tokens": 1024}


def test_claude_with_tools_and_thinking_keeps_its_tool_turn_whole(fgw, test_id):
    c = claude(fgw, "fit-claude", test_id)
    ask = {"role": "user", "content": "list the files of src, please"}
    first = c.messages.create(model="claude-x", max_tokens=2048, thinking=THINKING, tools=[TOOL], messages=[ask],
                              extra_headers={"x-mock-scenario": "tool"})
    assert [b.type for b in first.content][0] == "thinking" and first.stop_reason == "tool_use"
    use = next(b for b in first.content if b.type == "tool_use")
    turn = [ask, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "main.rs lib.rs"}]}]
    raw = c.messages.with_raw_response.create(model="claude-x", max_tokens=2048, thinking=THINKING, tools=[TOOL],
                                              system="be brief", messages=[*history(8), *turn])
    answer = raw.parse()
    assert answer.stop_reason == "end_turn", answer
    dropped, _ = fitted(raw.headers)
    *_, body = sent_bodies(fgw, test_id)
    assert body["model"] == "mock-claude-small"
    # The tool turn whole: its signed thinking first, its result next.
    asked, called, result = body["messages"][-3:]
    assert asked["content"][0]["text"] == ask["content"]
    thinking = first.content[0]
    assert called["content"][0] == {"type": "thinking", "thinking": thinking.thinking, "signature": thinking.signature}
    assert called["content"][-1]["id"] == use.id
    assert result["content"][0]["tool_use_id"] == use.id
    assert body["messages"][0]["role"] == "user"
    assert len(body["messages"]) == 16 + 3 - dropped


def test_a_long_gemini_conversation_is_trimmed(fgw, test_id):
    contents = [{"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
                for m in history(8)]
    contents.append({"role": "user", "parts": [{"text": "and now?"}]})
    status, headers, data = fgw.request("POST", "/v1beta/models/fit-gemini:generateContent",
                                        {"contents": contents, "generationConfig": {"maxOutputTokens": 256}},
                                        {"x-test-id": test_id})
    assert status == 200, data
    dropped, _ = fitted(headers)
    [body] = sent_bodies(fgw, test_id)
    assert body["contents"][0]["role"] == "user"
    assert body["contents"][-1]["parts"][0]["text"] == "and now?"
    assert len(body["contents"]) == len(contents) - dropped


def test_a_failover_to_a_small_model_fits_that_attempt(fgw, test_id):
    old = history(8)
    question = {"role": "user", "content": "and now?"}
    raw = oai(fgw, test_id).chat.completions.with_raw_response.create(
        model="fit-failover", messages=[*old, question], max_tokens=256)
    raw.parse()
    assert (raw.headers["x-llm-attempts"], raw.headers["x-llm-model"]) == ("2", "mock-gpt-small")
    dropped, _ = fitted(raw.headers)
    whole, trimmed = sent_bodies(fgw, test_id)
    # The first attempt (Anthropic, no window known) got the whole conversation.
    assert len(whole["messages"]) == len(old) + 1
    assert trimmed["messages"] == [*old[dropped:], question]


def test_without_a_policy_the_vendor_refuses_a_prompt_over_its_window(fgw, test_id):
    with pytest.raises(openai.BadRequestError) as e:
        oai(fgw, test_id).chat.completions.create(model="fit-none", messages=[*history(10), {"role": "user", "content": "x"}])
    # The vendor's error, as the gateway words it for the client.
    assert "maximum context length is 4096 tokens" in e.value.message
    assert "x-llm-context" not in e.value.response.headers
    [body] = sent_bodies(fgw, test_id)
    assert len(body["messages"]) == 21, "sent whole"
    raw = oai(fgw, test_id).chat.completions.with_raw_response.create(
        model="fit-none", messages=[{"role": "user", "content": "hi"}])
    assert "x-llm-context" not in raw.headers


def test_reject_is_the_clients_own_error_and_calls_no_vendor(fgw, test_id):
    with pytest.raises(openai.BadRequestError) as e:
        oai(fgw, test_id).chat.completions.create(model="fit-reject", messages=[*history(8), {"role": "user", "content": "x"}])
    # The gateway's own code for it (as the edge's candidate filter says it).
    assert e.value.code == "CONTEXT_LENGTH_EXCEEDED"
    assert re.fullmatch(r"tokens=\d+/4096", e.value.response.headers["x-llm-context"])
    assert "mock-gpt-small" in e.value.message and "(4096)" in e.value.message
    assert sent_bodies(fgw, test_id) == []
    with pytest.raises(anthropic.BadRequestError) as e:
        claude(fgw, "fit-reject", test_id).messages.create(
            model="claude-x", max_tokens=100, messages=[*history(8), {"role": "user", "content": "x"}])
    assert "prompt is too long" in e.value.message
    assert json.loads(e.value.response.text)["type"] == "error"


def test_reject_is_in_the_access_log(fgw, test_id):
    with pytest.raises(openai.BadRequestError) as e:
        oai(fgw, test_id).chat.completions.create(model="fit-reject", messages=[*history(8), {"role": "user", "content": "x"}],
                                                  extra_body={"request_id": f"req-{test_id}"})
    line = log_for(fgw, f"req-{test_id}")
    assert line["context"] == e.value.response.headers["x-llm-context"]
    assert (line["status"], line["code"], line["provider"]) == (400, "CONTEXT_LENGTH_EXCEEDED", "mock-openai")
    assert int(fgw.stat("wasmcustom.llm_gateway.context_fitting;group=fit-reject;outcome=rejected") or 0) >= 1


def test_count_tokens_counts_the_fitted_request_when_asked(fgw, test_id):
    c = claude(fgw, "fit-claude", test_id)
    messages = [*history(8), {"role": "user", "content": "and now?"}]
    whole = c.messages.with_raw_response.count_tokens(model="claude-x", messages=messages)
    assert "x-llm-context" not in whole.headers, "not asked"
    raw = c.messages.with_raw_response.count_tokens(model="claude-x", messages=messages,
                                                    extra_headers={"x-llm-context": "fit"})
    dropped, _ = fitted(raw.headers)
    counted = raw.parse().input_tokens
    assert counted < whole.parse().input_tokens
    first, second = sent_bodies(fgw, test_id)
    assert first["messages"] == messages
    # The vendor counted what a generation would send (the mock counts words).
    texts = [m["content"] if isinstance(m["content"], str) else "".join(b["text"] for b in m["content"])
             for m in second["messages"]]
    assert texts == [m["content"] for m in messages[dropped:]]
    assert counted == sum(len(t.split()) for t in texts)


def test_count_tokens_after_a_failover_still_counts_the_fitted_request(fgw, test_id):
    # The first attempt (Anthropic, down) withholds `x-llm-*` headers from its
    # vendor in the header map every attempt shares: the second still knows
    # the count was asked of the fitted request.
    c = claude(fgw, "fit-failover", test_id)
    messages = [*history(8), {"role": "user", "content": "and now?"}]
    whole = c.messages.with_raw_response.count_tokens(model="claude-x", messages=messages)
    raw = c.messages.with_raw_response.count_tokens(model="claude-x", messages=messages,
                                                    extra_headers={"x-llm-context": "fit"})
    assert (raw.headers["x-llm-attempts"], raw.headers["x-llm-estimated"]) == ("2", "true")
    fitted(raw.headers)
    assert raw.parse().input_tokens < whole.parse().input_tokens
    assert all("x-llm-context" not in r["headers"] for r in fgw.mock_requests(test_id))


def test_a_chain_rebuilt_from_previous_response_id_is_fitted(fgw, test_id):
    # The gateway stores translated responses (Anthropic keeps none): the
    # follow-up's chain is rebuilt into the whole conversation, then fitted.
    c = openai.OpenAI(api_key=ALL_GROUPS_KEY, base_url=f"{fgw.base}/v1", max_retries=0,
                      default_headers={"x-model-group": "fit-claude", "x-test-id": test_id})
    first = c.responses.create(model="any", input=history(3), max_output_tokens=256)
    assert first.id.startswith("resp_gw")
    raw = c.responses.with_raw_response.create(model="any", previous_response_id=first.id,
                                               input=[*history(3), {"role": "user", "content": "and now?"}],
                                               max_output_tokens=256)
    assert raw.parse().status == "completed"
    dropped, _ = fitted(raw.headers)
    whole, trimmed = sent_bodies(fgw, test_id)
    assert len(whole["messages"]) == 6, "the first went whole"
    # The chain: the first request's 6 items, its answer, then 7 more;
    # its oldest dropped (Anthropic's wire joins the two assistant turns).
    chain = [m["content"] for m in history(3)] + [first.output_text] + [m["content"] for m in history(3)] + ["and now?"]
    texts = [b["text"] for m in trimmed["messages"] for b in m["content"] if b["type"] == "text"]
    assert texts == chain[dropped:]
    assert trimmed["messages"][0]["role"] == "user"
    assert "previous_response_id" not in json.dumps(trimmed)


def test_a_fitted_stream_says_so_in_its_headers(fgw, test_id):
    status, headers, data = fgw.request(
        "POST", "/v1/chat/completions",
        {"model": "mock-small", "stream": True, "messages": [*history(8), {"role": "user", "content": "and now?"}]},
        {"x-test-id": test_id})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    fitted(headers)
    assert data.rstrip().endswith(b"data: [DONE]")
