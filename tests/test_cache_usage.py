"""Prompt-cache writes in usage, through a real Envoy with each client API's
SDK: a vendor's count of prompt tokens written to its cache (OpenAI's
`prompt_tokens_details.cache_write_tokens`, Bedrock's
`cacheWriteInputTokens`, Anthropic's `cache_creation_input_tokens`) reaches
every client API in its own member, never as uncached input. The mock's
`cached-usage` reports 2 tokens read from the cache and 3 written."""

import anthropic
import openai
import pytest

from conftest import ALL_GROUPS_KEY

PROMPT = "please summarise the cached context of this conversation for me now"
HEADERS = {"x-mock-scenario": "cached-usage"}


def openai_client(gw, group):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0,
                         default_headers={"x-model-group": group, **HEADERS})


@pytest.mark.parametrize("group", ["mock-openai", "mock-bedrock"])
def test_a_messages_client_sees_cache_writes_as_cache_creation(gw, group):
    client = anthropic.Anthropic(api_key=ALL_GROUPS_KEY, base_url=gw.base, max_retries=0,
                                 default_headers={"x-model-group": group, **HEADERS})
    m = client.messages.create(model="any", max_tokens=64, messages=[{"role": "user", "content": PROMPT}])
    u = m.usage
    assert (u.cache_read_input_tokens, u.cache_creation_input_tokens) == (2, 3)
    # input_tokens is the rest: the prompt's words less what the cache read and wrote.
    assert u.input_tokens == len(PROMPT.split()) - 2 - 3


@pytest.mark.parametrize("group", ["mock-openai", "mock-bedrock"])
def test_a_responses_client_sees_cache_writes(gw, group):
    """The pinned SDK's `InputTokensDetails.cache_write_tokens` is required:
    every Responses answer has it, translated ones too."""
    r = openai_client(gw, group).responses.create(model="any", input=PROMPT, store=False)
    assert r.usage.input_tokens_details.cache_write_tokens == 3
    assert r.usage.input_tokens_details.cached_tokens == 2
    plain = openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0,
                          default_headers={"x-model-group": "mock-gemini"}).responses.create(
        model="any", input=PROMPT, store=False)
    assert plain.usage.input_tokens_details.cache_write_tokens == 0


@pytest.mark.parametrize("group", ["mock-openai", "mock-bedrock", "mock-anthropic"])
def test_a_chat_client_sees_cache_writes(gw, group):
    c = openai_client(gw, group).chat.completions.create(
        model="any", messages=[{"role": "user", "content": PROMPT}])
    details = c.usage.prompt_tokens_details
    if group == "mock-anthropic":
        # The Anthropic mock writes only what a cache breakpoint marks: none here.
        assert details.cache_write_tokens is None
    else:
        assert (details.cached_tokens, details.cache_write_tokens) == (2, 3)
    assert c.usage.prompt_tokens == len(PROMPT.split())
