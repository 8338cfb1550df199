"""A framework on top of the OpenAI SDK, LangChain (`langchain-openai`, pinned
in tests/requirements.txt), classifying the gateway's errors on every mock
group as it would api.openai.com's (issue 15).

What langchain-openai 1.7.4 looks at (langchain_openai/chat_models/base.py,
`_handle_openai_bad_request` and `_handle_openai_api_error`, wrapped around
every invoke and stream of the Chat Completions API):

- Context window: only an `openai.BadRequestError` (HTTP 400) can become
  `OpenAIContextOverflowError` (a `langchain_core.exceptions.ContextOverflowError`),
  and only by WORDING: the lowercase string `context_length_exceeded` anywhere
  in `str(e)` (the SDK's "Error code: 400 - {body as a Python dict}", so a
  `code` or any other field of the body counts; OpenAI's own code is exactly
  `context_length_exceeded`; it is case-sensitive, so our `CONTEXT_LENGTH_EXCEEDED`
  does not match), or in the message one of "Input tokens exceed the
  configured limit", "prompt is too long" (Anthropic's wording) or
  "ContextWindowExceededError" (LiteLLM's). Any other 400 becomes
  `OpenAIInvalidRequestError`. For a non-400 `APIError` the message must
  contain "exceeds the context window". Neither `type` nor our `code` matter.
- Rate limit: by the SDK's class alone, i.e. HTTP status 429
  (`openai.RateLimitError` -> `OpenAIRateLimitError`, a
  `langchain_core.exceptions.ModelRateLimitError`, `is_retryable` True).
- Server errors: status >= 500 (`openai.InternalServerError`) ->
  `OpenAIAPIError` (`ModelAPIError`). A mid-stream error event is a plain
  `openai.APIError` without status, which LangChain re-raises unclassified
  whatever its body says.
"""

from importlib.metadata import version

import openai
import pytest
from langchain_core.exceptions import ContextOverflowError, ModelAPIError, ModelRateLimitError
from langchain_openai import ChatOpenAI

from test_clients import AB_USER, GROUPS


def test_versions_are_the_pinned_ones():
    """The source described above is the source that ran."""
    assert (version("langchain-openai"), version("langchain-core")) == ("1.7.4", "1.8.3")


groups = pytest.mark.parametrize("group", GROUPS)


def chat(gw, group, scenario):
    headers = {"x-model-group": group, "x-mock-scenario": scenario}
    if group == "mock-ab":
        headers["x-user-id"] = AB_USER
    # No retries: each test sees the first answer's classification.
    return ChatOpenAI(model="any", base_url=gw.base + "/v1", api_key=gw.key, max_retries=0,
                      default_headers=headers)


def call(model, mode):
    if mode == "invoke":
        return model.invoke("hello framework")
    return "".join(chunk.text for chunk in model.stream("hello framework"))


@groups
@pytest.mark.parametrize("mode", ["invoke", "stream"])
def test_context_window_error_is_context_overflow(gw, group, mode):
    with pytest.raises(ContextOverflowError) as e:
        call(chat(gw, group, "error-400-context"), mode)
    assert isinstance(e.value, openai.BadRequestError)
    assert e.value.status_code == 400 and e.value.body["code"] == "CONTEXT_LENGTH_EXCEEDED"


@groups
@pytest.mark.parametrize("mode", ["invoke", "stream"])
def test_rate_limit_is_model_rate_limit_error(gw, group, mode):
    with pytest.raises(ModelRateLimitError) as e:
        call(chat(gw, group, "error-429"), mode)
    assert e.value.is_retryable
    assert isinstance(e.value, openai.RateLimitError)
    assert e.value.status_code == 429 and e.value.body["code"] == "UPSTREAM_RATE_LIMIT"


@groups
def test_server_error_is_model_api_error(gw, group):
    with pytest.raises(ModelAPIError) as e:
        call(chat(gw, group, "error-500"), "invoke")
    assert e.value.is_retryable and isinstance(e.value, openai.InternalServerError)
    assert e.value.body["code"] in {"UPSTREAM_ERROR", "UPSTREAM_BUSY"}


@groups
def test_other_bad_request_is_not_context_overflow(gw, group):
    """The classification is not "every 400": a plain vendor 400 stays an invalid request."""
    with pytest.raises(openai.BadRequestError) as e:
        call(chat(gw, group, "error-400"), "invoke")
    assert not isinstance(e.value, ContextOverflowError)
    assert e.value.body["code"] == "INVALID_REQUEST"


@groups
def test_plain_answer(gw, group):
    answer = chat(gw, group, "").invoke("hello framework")
    assert answer.content.endswith("You said: hello framework")
