"""Google's error details (`google.rpc.Status.details`) through the Gemini
surface with the `google-genai` SDK: on the pass-through to Gemini they
reach the client as the vendor sent them (clients read `QuotaFailure` to
tell a per-day quota from a per-minute one); on a translation the
vendor's retry hint becomes the gateway's `RetryInfo`."""

import pytest
from google import genai
from google.genai import errors, types

from conftest import ALL_GROUPS_KEY

RETRY = "type.googleapis.com/google.rpc.RetryInfo"
QUOTA = "type.googleapis.com/google.rpc.QuotaFailure"
HELP = "type.googleapis.com/google.rpc.Help"
INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def client(gw, scenario):
    return genai.Client(api_key=ALL_GROUPS_KEY, http_options=types.HttpOptions(
        base_url=gw.base, headers={"x-mock-scenario": scenario},
        retry_options=types.HttpRetryOptions(attempts=1)))


def refused(gw, group, scenario, stream=False):
    c = client(gw, scenario)
    with pytest.raises(errors.APIError) as info:
        if stream:
            list(c.models.generate_content_stream(model=group, contents="over quota"))
        else:
            c.models.generate_content(model=group, contents="over quota")
    return info.value


@pytest.mark.parametrize("stream", [False, True])
def test_the_vendors_details_pass_through_untouched(gw, stream):
    """Gemini's 429 with QuotaFailure, Help and RetryInfo (as the mock
    answers it, as Gemini does): the client gets those three, in order,
    and no detail of the gateway's."""
    e = refused(gw, "mock-gemini", "error-429", stream)
    assert e.code == 429 and e.status == "RESOURCE_EXHAUSTED"
    details = e.details["error"]["details"]
    assert [d["@type"] for d in details] == [QUOTA, HELP, RETRY]
    assert details[0]["violations"][0]["quotaId"] == "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
    assert details[1]["links"][0]["url"] == "https://ai.google.dev/gemini-api/docs/rate-limits"
    assert details[2]["retryDelay"] == "7s"


def test_a_vendor_error_without_details_keeps_none(gw):
    e = refused(gw, "mock-gemini", "error-503")
    assert e.code == 503 and "details" not in e.details["error"]


@pytest.mark.parametrize("group", ["mock-openai", "mock-anthropic", "mock-bedrock"])
def test_a_translated_errors_retry_hint_is_retry_info(gw, group):
    """Another vendor's wait (its `retry-after`, or OpenAI's "Please try
    again in 7s") is Google's RetryInfo beside the gateway's ErrorInfo."""
    e = refused(gw, group, "error-429,retry-after=7")
    details = e.details["error"]["details"]
    assert [d["@type"] for d in details] == [INFO, RETRY]
    assert details[1]["retryDelay"] == "7s"
    assert details[0]["metadata"]["provider"] == group
