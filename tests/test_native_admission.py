"""Native calls are admitted like generations: the stored-response calls
take no body (one sent is refused before any vendor sees it, with the
gateway's vendor key), every body is bounded by `max_body_bytes`, and
count_tokens is held to the same message and tool limits as /v1/messages."""

import http.client
import json

import pytest

from conftest import MAX_BODY_BYTES

OPENAI = {"x-model-group": "mock-openai"}
ANTHROPIC = {"x-model-group": "mock-anthropic", "anthropic-version": "2023-06-01"}
# The test gateway's limits (conftest; the defaults but for the body).
MAX_MESSAGES = 1000
MAX_TOOLS = 128


@pytest.mark.parametrize("method,suffix", [("GET", ""), ("DELETE", ""), ("GET", "/input_items"),
                                           ("POST", "/cancel")])
def test_a_body_on_a_stored_response_call_is_refused(gw, test_id, method, suffix):
    headers = {**OPENAI, "x-test-id": test_id}
    status, _, body = gw.request(method, "/v1/responses/resp_1" + suffix, raw=b'{"input": "smuggled"}',
                                 headers=headers)
    assert status == 400, body
    error = json.loads(body)["error"]
    assert (error["code"], error["param"]) == ("INVALID_REQUEST", "body")
    assert error["message"] == f"{method} /v1/responses/{{id}}{suffix} takes no request body"
    assert gw.mock_requests(test_id) == [], "no vendor was asked"


def test_a_stored_response_call_with_an_empty_body_passes(gw, test_id):
    headers = {**OPENAI, "x-test-id": test_id}
    # What the SDKs send: nothing, or an empty object to cancel.
    for method, suffix, raw in [("GET", "", b""), ("POST", "/cancel", b"{}"), ("POST", "/cancel", b" { } ")]:
        status, _, body = gw.request(method, "/v1/responses/resp_missing" + suffix, raw=raw, headers=headers)
        assert status == 404, body
    assert len(gw.mock_requests(test_id)) == 3


@pytest.mark.parametrize("method,path", [("GET", "/v1/responses/resp_1"),
                                         ("POST", "/v1/messages/count_tokens")])
def test_a_native_calls_body_is_bounded(gw, test_id, method, path):
    """Refused from its content-length, before a byte of it is read."""
    host = gw.base.split("//", 1)[1]
    conn = http.client.HTTPConnection(host, timeout=10)
    conn.putrequest(method, path)
    headers = {**gw.default_headers(), **(OPENAI if "responses" in path else ANTHROPIC), "x-test-id": test_id,
               "content-length": str(MAX_BODY_BYTES + 1)}
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    assert response.status == 413, body
    assert json.loads(body)["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert gw.mock_requests(test_id) == []


def count_tokens(gw, test_id, **request):
    body = {"model": "any", "messages": [{"role": "user", "content": "hi"}], **request}
    return gw.request("POST", "/v1/messages/count_tokens", body, {**ANTHROPIC, "x-test-id": test_id})


def test_count_tokens_is_held_to_the_message_and_tool_limits(gw, test_id):
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi"} for i in range(MAX_MESSAGES + 1)]
    status, _, body = count_tokens(gw, test_id, messages=turns)
    assert status == 400, body
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error"
    assert f"at most {MAX_MESSAGES} messages" in error["message"]
    tools = [{"name": f"t{i}", "input_schema": {"type": "object"}} for i in range(MAX_TOOLS + 1)]
    status, _, body = count_tokens(gw, test_id, tools=tools)
    assert status == 400, body
    assert f"at most {MAX_TOOLS} tools" in json.loads(body)["error"]["message"]
    assert gw.mock_requests(test_id) == []
    # Within the limits it is counted.
    status, _, body = count_tokens(gw, test_id, tools=tools[:MAX_TOOLS])
    assert status == 200 and json.loads(body)["input_tokens"] > 0, body
