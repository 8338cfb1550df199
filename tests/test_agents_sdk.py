"""The OpenAI Agents SDK (`openai-agents`, pinned in tests/requirements.txt)
on the gateway's Responses API: one agent with one function tool, through
translated groups (Anthropic, Gemini) and OpenAI's (passed through), and with server-managed
conversation state (`auto_previous_response_id`, `previous_response_id`) on the translated groups. The SDK's default client is pointed at the gateway;
tracing is off (nothing leaves loopback)."""

import asyncio

import openai
import pytest
from agents import (Agent, Runner, function_tool, set_default_openai_api, set_default_openai_client,
                    set_tracing_disabled)

from conftest import ALL_GROUPS_KEY

GROUPS = ["mock-anthropic", "mock-gemini", "mock-openai"]
TRANSLATED = ["mock-anthropic", "mock-gemini", "mock-bedrock", "mock-dashscope"]

CALLS = []


@function_tool
def lookup(q: str) -> str:
    """Look something up in the catalogue."""
    CALLS.append(q)
    return f"catalogue-entry-for-{q}"


def agent_for(gw, group):
    client = openai.AsyncOpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0, timeout=60,
                                default_headers={"x-model-group": group, "x-mock-scenario": "tool"})
    set_tracing_disabled(True)
    set_default_openai_client(client, use_for_tracing=False)
    set_default_openai_api("responses")
    return Agent(name="librarian", instructions="Use the lookup tool.", tools=[lookup], model="any")


@pytest.mark.parametrize("stream", [False, True], ids=["run", "streamed"])
@pytest.mark.parametrize("group", GROUPS)
def test_agent_calls_its_tool_and_answers(gw, group, stream):
    CALLS.clear()
    agent = agent_for(gw, group)

    async def run():
        if not stream:
            return await Runner.run(agent, "find the catalogue entry")
        result = Runner.run_streamed(agent, "find the catalogue entry")
        async for _ in result.stream_events():
            pass
        return result

    result = asyncio.run(run())
    assert len(CALLS) == 1, "the model called the tool once"
    # The model read the tool's output and said so.
    assert "Tool result received" in result.final_output
    assert f"catalogue-entry-for-{CALLS[0]}" in result.final_output


@pytest.mark.parametrize("stream", [False, True], ids=["run", "streamed"])
@pytest.mark.parametrize("group", TRANSLATED)
def test_server_side_conversation_state(gw, group, stream):
    """Server-managed state (`auto_previous_response_id`): each turn of the
    run sends only its new items and the previous response's id, and a
    second run continues the first with `previous_response_id`. On the
    translated groups the gateway's response store resolves them (the
    OpenAI mock's own store does not model a tool loop's state: OpenAI's
    pass-through is covered by tests/test_responses.py)."""
    CALLS.clear()
    agent = agent_for(gw, group)

    async def run(text, **kwargs):
        if not stream:
            return await Runner.run(agent, text, auto_previous_response_id=True, **kwargs)
        result = Runner.run_streamed(agent, text, auto_previous_response_id=True, **kwargs)
        async for _ in result.stream_events():
            pass
        return result

    async def both():
        first = await run("find the catalogue entry")
        return first, await run("and once more", previous_response_id=first.last_response_id)

    first, again = asyncio.run(both())
    assert len(CALLS) >= 1 and "Tool result received" in first.final_output
    assert first.last_response_id.startswith("resp_gw")
    assert again.final_output and again.last_response_id != first.last_response_id
