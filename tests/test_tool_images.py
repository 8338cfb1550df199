"""Images in tool results, and images typed `image/jpg`, through a real
Envoy with the OpenAI and Anthropic SDKs: each vendor gets them where its
API takes them (the mock refuses what each vendor refuses: an image in an
OpenAI `tool` message, `image/jpg` at Anthropic and Gemini, a multimodal
function response before Gemini 3, a malformed Bedrock tool result block)."""

import anthropic
import openai
import pytest

from conftest import ALL_GROUPS_KEY

PNG = "data:image/png;base64,QUJD"
SCREENSHOT_TOOL = {"type": "function", "function": {
    "name": "screenshot", "description": "A screenshot of the page",
    "parameters": {"type": "object", "properties": {}}}}


def conversation(image_url=PNG):
    """A tool loop whose result holds text, an image, more text."""
    return [
        {"role": "user", "content": "what is on the page?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": [
            {"type": "text", "text": "the page:"},
            {"type": "image_url", "image_url": {"url": image_url}},
            {"type": "text", "text": "end of page"}]},
    ]


@pytest.fixture
def client(gw):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0, timeout=60)


def ask(client, group, test_id, model="any", messages=None):
    return client.chat.completions.create(
        model=model, messages=messages or conversation(), tools=[SCREENSHOT_TOOL],
        extra_headers={"x-model-group": group, "x-test-id": test_id})


def test_openai_gets_the_images_in_a_user_message_after_the_results(gw, client, test_id):
    ask(client, "mock-openai", test_id)
    [sent] = gw.mock_requests(test_id)
    tool, images = sent["body"]["messages"][2:]
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": [
        {"type": "text", "text": "the page:"}, {"type": "text", "text": "end of page"}]}
    assert images == {"role": "user", "content": [
        {"type": "text", "text": "Images returned by tool call call_1:"},
        {"type": "image_url", "image_url": {"url": PNG}}]}


def test_bedrock_gets_the_image_in_the_tool_result(gw, client, test_id):
    ask(client, "mock-bedrock", test_id, model="claude-sonnet-4")
    [sent] = gw.mock_requests(test_id)
    result = sent["body"]["messages"][2]["content"][0]["toolResult"]
    assert result["content"] == [{"text": "the page:"},
                                 {"image": {"format": "png", "source": {"bytes": "QUJD"}}},
                                 {"text": "end of page"}]


@pytest.mark.parametrize("model,inside", [("m", False), ("gemini-3-pro", True)])
def test_gemini_gets_the_image_with_the_function_response(gw, client, test_id, model, inside):
    """Gemini 3 takes media inside the function response; earlier models
    refuse that (the mock does) and get it beside the response."""
    ask(client, "mock-gemini", test_id, model=model)
    [sent] = gw.mock_requests(test_id)
    parts = sent["body"]["contents"][2]["parts"]
    response = parts[0]["functionResponse"]
    assert response["response"] == {"result": "the page:\nend of page"}
    image = {"inlineData": {"mimeType": "image/png", "data": "QUJD"}}
    if inside:
        assert response["parts"] == [image] and len(parts) == 1
    else:
        assert "parts" not in response and parts[1:] == [image]


def test_anthropic_gets_the_image_in_the_tool_result(gw, client, test_id):
    ask(client, "mock-anthropic", test_id, model="claude-sonnet-4")
    [sent] = gw.mock_requests(test_id)
    [result] = sent["body"]["messages"][2]["content"]
    assert result["type"] == "tool_result"
    assert [b["type"] for b in result["content"]] == ["text", "image", "text"]


@pytest.mark.parametrize("group,model", [("mock-anthropic", "claude-sonnet-4"), ("mock-gemini", "m"),
                                         ("mock-bedrock", "claude-sonnet-4")])
def test_a_jpg_image_is_sent_as_a_jpeg(gw, client, test_id, group, model):
    """`image/jpg` is no registered type: Anthropic and Gemini refuse it
    (the mock does too); every vendor gets JPEG's."""
    jpg = "data:image/jpg;base64,QUJD"
    client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": jpg}}]}],
        extra_headers={"x-model-group": group, "x-test-id": test_id})
    [sent] = gw.mock_requests(test_id)
    body = str(sent["body"])
    assert "image/jpg'" not in body and "image/jpg\"" not in body
    if group == "mock-bedrock":
        assert sent["body"]["messages"][0]["content"][1]["image"]["format"] == "jpeg"
    else:
        assert "image/jpeg" in body


def test_a_messages_clients_tool_result_image_reaches_openai(gw, test_id):
    """Claude Code's screenshots: an Anthropic client's `tool_result` with
    an image, to an OpenAI model."""
    client = anthropic.Anthropic(api_key=ALL_GROUPS_KEY, base_url=gw.base, max_retries=0,
                                 default_headers={"x-model-group": "mock-openai", "x-test-id": test_id})
    client.messages.create(model="any", max_tokens=64, tools=[
        {"name": "screenshot", "input_schema": {"type": "object", "properties": {}}}], messages=[
        {"role": "user", "content": "what is on the page?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "text", "text": "the page:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}}]}]}])
    [sent] = gw.mock_requests(test_id)
    messages = sent["body"]["messages"]
    assert messages[2]["role"] == "tool" and messages[2]["content"] == [{"type": "text", "text": "the page:"}]
    assert messages[3]["role"] == "user" and messages[3]["content"][1] == {
        "type": "image_url", "image_url": {"url": PNG}}
