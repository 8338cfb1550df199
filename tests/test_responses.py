"""The OpenAI Responses API (`POST /v1/responses`) through the official
Python SDK (`client.responses.create` / `.stream` / `.parse`), against
every mock group: OpenAI and Azure's v1 API by pass-through, the others
(and chat-only OpenAI-compatible providers) translated through the neutral
model. Stateless: what needs OpenAI's stored state is refused elsewhere."""

import json

import openai
import pydantic
import pytest

from conftest import ALL_GROUPS_KEY

# Every group a Responses client may call: (group, passes through).
GROUPS = {
    "mock-openai": False,
    "mock-anthropic": False,
    "mock-gemini": False,
    "mock-bedrock": False,
    "mock-dashscope": False,
    "mock-azure": False,
    "mock-azure-v1": False,
}
TRANSLATED = [g for g, native in GROUPS.items() if not native]

LOOKUP = {"type": "function", "name": "lookup", "description": "Look something up",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}


def client(gw, group, **headers):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0, timeout=60,
                         default_headers={"x-model-group": group, **headers})


@pytest.mark.parametrize("group", GROUPS)
def test_create(gw, group):
    resp = client(gw, group).responses.create(model="any", input="hello responses",
                                              instructions="be brief")
    assert resp.object == "response" and resp.id.startswith("resp_")
    assert resp.status == "completed"
    assert "Hello from the mock" in resp.output_text
    assert "hello responses" in resp.output_text
    message = resp.output[-1]
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "output_text" and message.content[0].annotations == []
    assert resp.usage.input_tokens > 0 and resp.usage.output_tokens > 0
    assert resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens
    # What the request said, repeated as OpenAI repeats it.
    assert resp.instructions == "be brief"
    assert resp.tools == [] and resp.tool_choice == "auto"


@pytest.mark.parametrize("group", GROUPS)
def test_stream_helper(gw, group):
    deltas = []
    with client(gw, group).responses.stream(model="any", input="hello stream") as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert final.status == "completed"
    assert "".join(deltas) == final.output_text
    assert "hello stream" in final.output_text
    assert final.usage.output_tokens > 0


@pytest.mark.parametrize("group", GROUPS)
def test_stream_events(gw, group):
    events = list(client(gw, group).responses.create(model="any", input="hi", stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1].type == "response.completed"
    added = [e for e in events if e.type == "response.output_item.added"]
    assert added and added[0].item.type == "message"
    done_text = [e for e in events if e.type == "response.output_text.done"]
    assert len(done_text) == 1
    assert done_text[0].text == "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert events[-1].response.output[0].content[0].text == done_text[0].text
    assert events[-1].response.usage.total_tokens > 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("group", GROUPS)
def test_function_call_round_trip(gw, group, stream):
    c = client(gw, group)
    args = dict(model="any", input=[{"role": "user", "content": "look it up"}], tools=[LOOKUP],
                tool_choice="required")
    if stream:
        with c.responses.stream(**args) as s:
            for _ in s:
                pass
            resp = s.get_final_response()
    else:
        resp = c.responses.create(**args)
    calls = [i for i in resp.output if i.type == "function_call"]
    assert len(calls) == 1, resp.output
    call = calls[0]
    assert call.name == "lookup" and call.call_id
    assert isinstance(json.loads(call.arguments)["q"], str)
    # The history as the SDK's users send it: the model's items, then the output.
    history = args["input"] + [item.model_dump(exclude_none=True) for item in resp.output]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "found it"})
    second = c.responses.create(model="any", input=history, tools=[LOOKUP])
    assert "Tool result received: found it" in second.output_text


class City(pydantic.BaseModel):
    city: str
    population: int


@pytest.mark.parametrize("group", GROUPS)
def test_parse_json_schema(gw, group):
    resp = client(gw, group).responses.parse(model="any", input="a city please", text_format=City)
    assert isinstance(resp.output_parsed, City)


# scenario -> (status, SDK class)
ERRORS = {
    "error-400": (400, openai.BadRequestError),
    "error-401": (401, openai.AuthenticationError),
    "error-403": (403, openai.PermissionDeniedError),
    "error-404": (404, openai.NotFoundError),
    "error-429": (429, openai.RateLimitError),
    "error-500": (502, openai.InternalServerError),
    "error-503": (503, openai.InternalServerError),
}


@pytest.mark.parametrize("scenario", ERRORS)
@pytest.mark.parametrize("group", GROUPS)
def test_errors(gw, group, scenario):
    status, cls = ERRORS[scenario]
    with pytest.raises(cls) as e:
        client(gw, group, **{"x-mock-scenario": scenario}).responses.create(model="any", input="hi")
    assert e.value.status_code == status
    assert e.value.body["code"]


def test_gateway_errors_in_openai_envelope(gw):
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=gw.base + "/v1", api_key="wrong", max_retries=0).responses.create(
            model="any", input="hi")
    with pytest.raises(openai.BadRequestError) as e:
        client(gw, "mock-anthropic").responses.create(model="any", input="hi", extra_body={"bogus": 1})
    assert e.value.body["param"] == "bogus"
    assert "Unknown parameter" in e.value.body["message"]


def test_stream_error_mid_stream(gw):
    events = []
    c = client(gw, "mock-anthropic", **{"x-mock-scenario": "stream-error"})
    for event in c.responses.create(model="any", input="hi", stream=True):
        events.append(event)
    kinds = [e.type for e in events]
    assert kinds[-2:] == ["error", "response.failed"], kinds
    assert events[-1].response.status == "failed"
    assert events[-1].response.error.message


@pytest.mark.parametrize("group", TRANSLATED)
def test_previous_response_id_is_refused_where_nothing_is_stored(gw, group):
    with pytest.raises(openai.BadRequestError) as e:
        client(gw, group).responses.create(model="any", input="again", previous_response_id="resp_1")
    assert e.value.body["param"] == "previous_response_id"
    assert "stateless" in e.value.body["message"]


@pytest.mark.parametrize("group", ["mock-anthropic", "mock-gemini"])
def test_built_in_tools_are_refused_where_openai_does_not_run_them(gw, group):
    with pytest.raises(openai.BadRequestError) as e:
        client(gw, group).responses.create(model="any", input="search", tools=[LOOKUP, {"type": "web_search"}])
    assert e.value.body["param"] == "tools[1]"
    assert "web_search" in e.value.body["message"]
