"""The OpenAI Responses API (`POST /v1/responses`) through the official
Python SDK (`client.responses.create` / `.stream` / `.parse`), against
every mock group: OpenAI and Azure's v1 API by pass-through, the others
(and chat-only OpenAI-compatible providers) translated through the neutral
model. Stored responses with a vendor's id are the vendor's: retrieved,
listed, cancelled and deleted at OpenAI and Azure's v1 API, refused
elsewhere; the gateway's own store (ids `resp_gw…`) is
tests/test_responses_store.py."""

import json

import openai
import pydantic
import pytest

import gateway
from conftest import ALL_GROUPS_KEY, OPENAI_ONLY_KEY, Gateway, configure_test_gateway

# Every group a Responses client may call: group -> whether it passes
# through (OpenAI, Azure's v1 API) or is translated. `chat-only` is an
# OpenAI-dialect provider with `chat_only: true` (its own Envoy, below);
# mock-azure is Azure on a dated api_version (chat only).
GROUPS = {
    "mock-openai": True,
    "mock-azure-v1": True,
    "mock-anthropic": False,
    "mock-gemini": False,
    "mock-bedrock": False,
    "mock-dashscope": False,
    "mock-azure": False,
    "chat-only": False,
    # Candidates of both kinds: Anthropic (always overloaded) then OpenAI;
    # Anthropic or OpenAI by weight.
    "mock-failover": None,
    "mock-ab": None,
}
TRANSLATED = [g for g, native in GROUPS.items() if native is False]
NATIVE = [g for g, native in GROUPS.items() if native]


@pytest.fixture(scope="module")
def chat_only_gw(gw, tmp_path_factory):
    """An Envoy of its own whose `chat-only` group's OpenAI provider has no Responses API."""
    workdir = tmp_path_factory.mktemp("envoy-chat-only")
    mock_port = int(gw.mock.rsplit(":", 1)[1])
    bootstrap = gateway.build_bootstrap(
        0, 0, mock_port, env={},
        extra_providers={"chat-only": {"dialect": "openai", "api_key": "sk-mock-openai", "chat_only": True,
                                       "models": {"*": "mock-gpt-4o"}}},
        extra_groups={"chat-only": {"cluster": "chat_only"}},
        extra_clusters=[gateway.static_cluster("chat_only", mock_port, "chat-only")],
        edit=configure_test_gateway)
    envoy = gateway.start_envoy(bootstrap, workdir, log_level="info")
    try:
        yield Gateway(envoy.port, envoy.admin_port, mock_port, workdir)
    finally:
        gateway.stop(envoy)


@pytest.fixture
def gateway_of(request, gw):
    """The gateway serving a group."""
    return lambda group: request.getfixturevalue("chat_only_gw") if group == "chat-only" else gw

LOOKUP = {"type": "function", "name": "lookup", "description": "Look something up",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}


def client(gw, group, **headers):
    """The OpenAI SDK's client for a group of `gw`."""
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0, timeout=60,
                         default_headers={"x-model-group": group, **headers})


@pytest.mark.parametrize("group", GROUPS)
def test_create(gateway_of, group):
    resp = client(gateway_of(group), group).responses.create(model="any", input="hello responses",
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
def test_stream_helper(gateway_of, group):
    deltas = []
    with client(gateway_of(group), group).responses.stream(model="any", input="hello stream") as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert final.status == "completed"
    assert "".join(deltas) == final.output_text
    assert "hello stream" in final.output_text
    assert final.usage.output_tokens > 0


@pytest.mark.parametrize("group", GROUPS)
def test_stream_events(gateway_of, group):
    events = list(client(gateway_of(group), group).responses.create(model="any", input="hi", stream=True))
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
def test_function_call_round_trip(gateway_of, group, stream):
    c = client(gateway_of(group), group)
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
def test_parse_json_schema(gateway_of, group):
    resp = client(gateway_of(group), group).responses.parse(model="any", input="a city please", text_format=City)
    assert isinstance(resp.output_parsed, City)


# scenario -> (status, SDK class)
ERRORS = {
    "error-400": (400, openai.BadRequestError),
    "error-400-context": (400, openai.BadRequestError),
    "error-413": (413, openai.APIStatusError),
    "error-529": (503, openai.InternalServerError),
    "error-401": (401, openai.AuthenticationError),
    "error-403": (403, openai.PermissionDeniedError),
    "error-404": (404, openai.NotFoundError),
    "error-429": (429, openai.RateLimitError),
    "error-500": (502, openai.InternalServerError),
    "error-503": (503, openai.InternalServerError),
}


@pytest.mark.parametrize("scenario", ERRORS)
@pytest.mark.parametrize("group", GROUPS)
def test_errors(gateway_of, group, scenario):
    status, cls = ERRORS[scenario]
    with pytest.raises(cls) as e:
        client(gateway_of(group), group, **{"x-mock-scenario": scenario}).responses.create(model="any", input="hi")
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


@pytest.mark.parametrize("group", GROUPS)
def test_stream_error_mid_stream(gateway_of, group):
    c = client(gateway_of(group), group, **{"x-mock-scenario": "stream-error"})
    events = list(c.responses.create(model="any", input="hello there friend", stream=True))
    kinds = [e.type for e in events]
    assert "response.output_text.delta" in kinds, "the answer had started"
    assert kinds[-2:] == ["error", "response.failed"], kinds
    assert events[-1].response.status == "failed"
    assert events[-1].response.error.message
    assert [e.sequence_number for e in events] == list(range(len(events)))


@pytest.mark.parametrize("group", GROUPS)
def test_stream_error_before_content_is_an_http_error(gateway_of, group):
    """Held until its first content, a stream that fails first is an error
    answer with the error's status (and Envoy may retry it elsewhere)."""
    c = client(gateway_of(group), group, **{"x-mock-scenario": "stream-error-first"})
    with pytest.raises(openai.APIStatusError) as e:
        list(c.responses.create(model="any", input="hi", stream=True))
    assert e.value.status_code >= 500


@pytest.mark.parametrize("group", TRANSLATED)
def test_previous_response_id_is_refused_where_nothing_is_stored(gateway_of, group):
    with pytest.raises(openai.BadRequestError) as e:
        client(gateway_of(group), group).responses.create(model="any", input="again", previous_response_id="resp_1")
    assert e.value.body["param"] == "previous_response_id"
    assert "resp_gw" in e.value.body["message"]


@pytest.mark.parametrize("group", ["mock-anthropic", "mock-gemini"])
def test_built_in_tools_are_refused_where_openai_does_not_run_them(gw, group):
    with pytest.raises(openai.BadRequestError) as e:
        client(gw, group).responses.create(model="any", input="search", tools=[
            LOOKUP, {"type": "file_search", "vector_store_ids": ["vs_1"]}])
    assert e.value.body["param"] == "tools[1]"
    assert "file_search" in e.value.body["message"]


# What each translated vendor gets for the hosted web search, beside a
# function tool and alone: its own search tool (where found), or nothing
# and `x-llm-dropped-tools: web_search` on the answer.
def anthropic_search(body):
    return [t for t in body.get("tools", []) if t.get("type") == "web_search_20250305"]


def gemini_search(body):
    return [t for t in body.get("tools", []) if "googleSearch" in t]


def qwen_search(body):
    return [True] if body["parameters"].get("enable_search") is True else []


def chat_search(body):
    return [t for t in body.get("tools", []) if t.get("type") != "function"] + \
        [k for k in ("web_search_options", "web_search") if k in body]


def bedrock_search(body):
    return [t for t in body.get("toolConfig", {}).get("tools", []) if "toolSpec" not in t]


WEB_SEARCH = {
    # group: (what finds the search in the vendor's body, searched with a function tool, alone)
    "mock-anthropic": (anthropic_search, True, True),
    "mock-gemini": (gemini_search, False, True),
    "mock-dashscope": (qwen_search, True, True),
    "mock-bedrock": (bedrock_search, False, False),
    "mock-azure": (chat_search, False, False),
    "chat-only": (chat_search, False, False),
}


@pytest.mark.parametrize("with_function", [True, False], ids=["with-function", "alone"])
@pytest.mark.parametrize("group", WEB_SEARCH)
def test_web_search_is_the_vendors_own_or_dropped_and_said(gateway_of, group, with_function, test_id):
    gw = gateway_of(group)
    found, with_fn, alone = WEB_SEARCH[group]
    searched = with_fn if with_function else alone
    tools = ([LOOKUP] if with_function else []) + [{"type": "web_search", "external_web_access": True}]
    raw = client(gw, group, **{"x-test-id": test_id}).responses.with_raw_response.create(
        model="any", input="any news?", tools=tools)
    resp = raw.parse()
    assert resp.status == "completed"
    assert resp.tools[-1].type == "web_search", "the request's tools echoed as sent"
    [sent] = gw.mock_requests(test_id)
    assert bool(found(sent["body"])) == searched, sent["body"]
    assert raw.headers.get("x-llm-dropped-tools") == (None if searched else "web_search")


def test_web_search_filters_reach_anthropic(gw, test_id):
    client(gw, "mock-anthropic", **{"x-test-id": test_id}).responses.create(
        model="any", input="news?", tools=[{"type": "web_search", "filters": {"allowed_domains": ["envoyproxy.io"]},
                                            "user_location": {"type": "approximate", "country": "FR"}}])
    [sent] = gw.mock_requests(test_id)
    assert anthropic_search(sent["body"]) == [{
        "type": "web_search_20250305", "name": "web_search", "allowed_domains": ["envoyproxy.io"],
        "user_location": {"type": "approximate", "country": "FR"}}]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_gemini_3_searches_beside_function_tools(gw, test_id, stream):
    """Codex's default tools (a function tool and web_search) on Gemini 3:
    both go, with `toolConfig.includeServerSideToolInvocations` (the mock,
    as Gemini 3, refuses the mix without it with a 400; Gemini 2.x refuses
    it either way, so there the search is dropped and said, above). The
    search Gemini ran itself comes back as `toolCall`/`toolResponse` parts:
    not the client's to run, so only the client's function call is an
    output item, and its output in the next turn is answered."""
    c = client(gw, "mock-gemini", **{"x-test-id": test_id, "x-mock-scenario": "tool"})
    # mock-gemini maps gemini-3-pro to gemini-3-pro-preview.
    ask = {"model": "gemini-3-pro", "input": "any news?", "tools": [LOOKUP, {"type": "web_search"}]}
    if stream:
        with c.responses.stream(**ask) as s:
            events = list(s)
            resp = s.get_final_response()
        added = [e.item.type for e in events if e.type == "response.output_item.added"]
        assert added.count("function_call") == 1, added
    else:
        raw = c.responses.with_raw_response.create(**ask)
        assert raw.headers.get("x-llm-dropped-tools") is None, "searched, not dropped"
        resp = raw.parse()
    assert resp.status == "completed"
    [call] = [o for o in resp.output if o.type == "function_call"]
    assert call.name == "lookup"
    [sent] = gw.mock_requests(test_id)
    assert sent["path"].startswith("/v1beta/models/gemini-3-pro-preview:")
    assert gemini_search(sent["body"]) == [{"googleSearch": {}}]
    assert sent["body"]["tools"][0]["functionDeclarations"][0]["name"] == "lookup"
    assert sent["body"]["toolConfig"] == {"includeServerSideToolInvocations": True}
    # The next turn: the call (its signature in its id) and its output; the
    # search's invocation parts are not in the client's history to send.
    again = c.responses.create(model="gemini-3-pro", tools=ask["tools"], input=[
        {"role": "user", "content": "any news?"},
        {"type": "function_call", "call_id": call.call_id, "name": "lookup", "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "nothing new"}])
    assert again.status == "completed"
    assert "Tool result received: nothing new" in again.output_text
    model_turn = gw.mock_requests(test_id)[-1]["body"]["contents"][1]
    assert [list(p) for p in model_turn["parts"]] == [["functionCall", "thoughtSignature"]]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_an_anthropic_pause_turn_is_an_incomplete_response(gw, test_id, stream):
    """Anthropic pauses a long server-tool turn (`stop_reason: pause_turn`,
    the mock when its web search tool is offered): a Responses client gets
    `status: incomplete` with `incomplete_details.reason: pause_turn` (the
    stream ends with `response.incomplete`), the text so far in its message;
    the paused search itself is not carried (see docs/src/apis/responses.md)."""
    c = client(gw, "mock-anthropic", **{"x-test-id": test_id, "x-mock-scenario": "pause-turn"})
    ask = {"model": "any", "input": "any news?", "tools": [{"type": "web_search"}]}
    if stream:
        # The SDK's stream helper wants `response.completed`: read the events.
        events = list(c.responses.create(stream=True, **ask))
        assert events[-1].type == "response.incomplete"
        resp = events[-1].response
    else:
        resp = c.responses.create(**ask)
    assert resp.status == "incomplete"
    assert resp.incomplete_details.reason == "pause_turn"
    assert resp.output_text == "Let me search the web."
    assert all(o.type == "message" for o in resp.output)
    [sent] = gw.mock_requests(test_id)
    assert anthropic_search(sent["body"]), "paused only with its search tool"


NAMESPACE = {"type": "namespace", "name": "crm", "description": "Customer records.",
             "tools": [{"type": "function", "name": "lookup", "description": "Look a customer up",
                        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}]}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("group", TRANSLATED)
def test_a_namespaced_tool_is_called_in_its_namespace(gateway_of, group, stream, test_id):
    gw = gateway_of(group)
    c = client(gw, group, **{"x-test-id": test_id, "x-mock-scenario": "call=crm__lookup"})
    ask = {"model": "any", "input": "find Ada", "tools": [LOOKUP, NAMESPACE]}
    if stream:
        with c.responses.stream(**ask) as s:
            events = list(s)
            resp = s.get_final_response()
        added = [e.item for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
        assert [(i.namespace, i.name) for i in added] == [("crm", "lookup")]
    else:
        resp = c.responses.create(**ask)
    [call] = [o for o in resp.output if o.type == "function_call"]
    assert (call.namespace, call.name) == ("crm", "lookup"), "as the client declared it"
    # The call goes back in history as the client has it; the vendor sees its flat name again.
    again = c.responses.create(model="any", tools=[LOOKUP, NAMESPACE], input=[
        {"role": "user", "content": "find Ada"},
        {"type": "function_call", "call_id": call.call_id, "namespace": "crm", "name": "lookup",
         "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "Ada Lovelace"}])
    assert again.status == "completed"
    sent = gw.mock_requests(test_id)
    assert "crm__lookup" in json.dumps(sent[-1]["body"])
    assert '"crm"' not in json.dumps(sent[-1]["body"]), "no namespace reaches the vendor"


def test_namespaced_tools_reach_openai_as_sent(gw, test_id):
    resp = client(gw, "mock-openai", **{"x-test-id": test_id}).responses.create(
        model="any", input="hi", tools=[LOOKUP, NAMESPACE])
    assert resp.status == "completed"
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["tools"][1] == NAMESPACE


@pytest.mark.parametrize("group", ["mock-openai", "mock-azure-v1"])
def test_reasoning_is_taken_out_for_a_model_without_it(gw, group, test_id):
    # The groups' vendor model is GPT-4o, which refuses `reasoning` (summaries
    # too) and encrypted reasoning in `include`: what Codex asks by default.
    resp = client(gw, group, **{"x-test-id": test_id}).responses.create(
        model="any", input="hi", reasoning={"effort": "low", "summary": "auto"},
        include=["reasoning.encrypted_content", "message.output_text.logprobs"])
    assert resp.status == "completed"
    [sent] = gw.mock_requests(test_id)
    assert "reasoning" not in sent["body"]
    assert sent["body"]["include"] == ["message.output_text.logprobs"], "the rest kept"
    client(gw, group, **{"x-test-id": test_id + "-only"}).responses.create(
        model="any", input="hi", include=["reasoning.encrypted_content"])
    [sent] = gw.mock_requests(test_id + "-only")
    assert "include" not in sent["body"]


@pytest.mark.parametrize("group", NATIVE)
def test_pass_through_keeps_what_the_gateway_does_not_model(gw, group, test_id):
    raw = client(gw, group, **{"x-test-id": test_id}).responses.with_raw_response.create(
        model="any", input="hi", store=True, truncation="auto", prompt_cache_key="k-1",
        safety_identifier="user-7", include=["message.output_text.logprobs"],
        metadata={"team": "x", "task_type": "chat"}, extra_body={"request_id": "keep-out"})
    resp = raw.parse()
    assert resp.status == "completed"
    [sent] = gw.mock_requests(test_id)
    assert sent["path"].endswith("/v1/responses")
    body = sent["body"]
    assert body["model"] != "any", "the vendor model"
    for field, value in [("store", True), ("truncation", "auto"), ("prompt_cache_key", "k-1"),
                         ("safety_identifier", "user-7"), ("include", ["message.output_text.logprobs"])]:
        assert body[field] == value, field
    assert body["metadata"] == {"team": "x"}, "the gateway's own metadata stays behind"
    assert "request_id" not in body
    # The vendor's answer as it sent it: who answered is a header, not a member.
    assert raw.headers["x-llm-provider"].startswith("mock-")
    assert "provider" not in json.loads(raw.content)


@pytest.mark.parametrize("group", NATIVE)
def test_pass_through_stream_events_are_the_vendors(gw, group):
    """Streamed, each event is the vendor's: no member added to it or to
    its `response`; who answered is the header."""
    with client(gw, group).responses.with_streaming_response.create(model="any", input="hi", stream=True) as r:
        provider = r.headers["x-llm-provider"]
        text = r.read().decode()
    events = [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]
    assert events and events[-1]["type"] == "response.completed" and provider.startswith("mock-")
    for e in events:
        assert "provider" not in e and "provider" not in e.get("response", {}), e


@pytest.mark.parametrize("group", NATIVE)
def test_pass_through_is_stateful_as_openai(gw, group):
    c = client(gw, group)
    first = c.responses.create(model="any", input="remember me")
    again = c.responses.create(model="any", input="and again", previous_response_id=first.id)
    assert again.status == "completed"
    # One the vendor never made: its own 400.
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.create(model="any", input="x", previous_response_id="resp_never_made")
    assert e.value.body["param"] == "previous_response_id"
    assert "not found" in e.value.body["message"]


# What OpenAI refuses, refused by the mock behind a pass-through: (kwargs, param).
VENDOR_RULES = [
    ({"max_output_tokens": 5}, "max_output_tokens"),
    ({"text": {"format": {"type": "json_schema", "name": "s", "strict": True,
                          "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}},
     "text.format.schema"),
    ({"include": ["everything"]}, "include"),
    ({"input": [{"type": "function_call_output", "call_id": "call_x", "output": "?"}]}, "input"),
]


@pytest.mark.parametrize("kwargs,param", VENDOR_RULES, ids=[p for _, p in VENDOR_RULES])
def test_the_mock_refuses_what_openai_refuses(gw, kwargs, param):
    args = {"model": "any", "input": "hi", **kwargs}
    with pytest.raises(openai.BadRequestError) as e:
        client(gw, "mock-openai").responses.create(**args)
    assert e.value.body["param"] == param, e.value.body


def test_built_in_tools_reach_openai(gw, test_id):
    resp = client(gw, "mock-openai", **{"x-test-id": test_id}).responses.create(
        model="any", input="search", tools=[LOOKUP, {"type": "web_search"}])
    assert resp.status == "completed"
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["tools"][1] == {"type": "web_search"}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_reasoning_items_from_a_reasoning_model(gw, stream):
    c = client(gw, "reasoning")
    args = dict(model="any", input="think", reasoning={"effort": "low", "summary": "auto"})
    if stream:
        with c.responses.stream(**args) as s:
            summary = "".join(e.delta for e in s if e.type == "response.reasoning_summary_text.delta")
            resp = s.get_final_response()
        assert summary
    else:
        resp = c.responses.create(**args)
    assert [i.type for i in resp.output] == ["reasoning", "message"]
    assert resp.output[0].summary[0].text


# The stored-response calls: OpenAI's and Azure's v1 API's own, passed to them.
STORED_PATH = {"mock-openai": "/v1/responses/", "mock-azure-v1": "/openai/v1/responses/"}


@pytest.mark.parametrize("group", NATIVE)
def test_stored_responses_are_the_vendors(gw, group, test_id):
    c = client(gw, group, **{"x-test-id": test_id})
    made = c.responses.create(model="any", input="remember me", store=True)
    got = c.responses.retrieve(made.id)
    assert got.id == made.id and got.output_text == made.output_text
    items = c.responses.input_items.list(made.id)
    assert [(i.type, i.role, i.content[0].text) for i in items.data] == [("message", "user", "remember me")]
    # A completed response made without `background` cannot be cancelled: the vendor's 400.
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.cancel(made.id)
    assert "synchronous" in e.value.body["message"]
    c.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError) as e:
        c.responses.retrieve(made.id)
    assert "not found" in e.value.body["message"]
    sent = gw.mock_requests(test_id)
    assert [(r["method"], r["path"]) for r in sent[1:]] == [
        ("GET", STORED_PATH[group] + made.id), ("GET", STORED_PATH[group] + made.id + "/input_items"),
        ("POST", STORED_PATH[group] + made.id + "/cancel"), ("DELETE", STORED_PATH[group] + made.id),
        ("GET", STORED_PATH[group] + made.id)]
    assert all(ALL_GROUPS_KEY not in json.dumps(r["headers"]) for r in sent), "the gateway key stays behind"


def test_a_response_not_stored_or_never_made_is_not_found(gw):
    c = client(gw, "mock-openai")
    unstored = c.responses.create(model="any", input="forget me", store=False)
    for response_id in (unstored.id, "resp_never_made"):
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(response_id)
    # Each vendor holds its own: OpenAI's response is not Azure's.
    made = c.responses.create(model="any", input="mine")
    with pytest.raises(openai.NotFoundError):
        client(gw, "mock-azure-v1").responses.retrieve(made.id)


def test_input_items_pages_as_openai(gw):
    c = client(gw, "mock-openai")
    made = c.responses.create(model="any", input=[
        {"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"}])
    newest = c.responses.input_items.list(made.id, limit=2)
    assert [i.content[0].text for i in newest.data] == ["three", "two"] and newest.has_more
    oldest = c.responses.input_items.list(made.id, order="asc")
    assert [i.content[0].text for i in oldest.data] == ["one", "two", "three"]
    assert oldest.data[1].content[0].type == "output_text"


def test_stored_response_calls_default_to_the_default_group(gw):
    """No x-model-group: the configuration's default group (mock-openai)."""
    c = openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0)
    made = c.responses.create(model="mock-openai", input="hi")
    assert c.responses.retrieve(made.id).id == made.id


@pytest.mark.parametrize("group", TRANSLATED)
def test_stored_response_calls_are_refused_where_no_vendor_stores(gateway_of, group, test_id):
    c = client(gateway_of(group), group, **{"x-test-id": test_id})
    for call in (lambda: c.responses.retrieve("resp_1"), lambda: c.responses.delete("resp_1"),
                 lambda: c.responses.cancel("resp_1"), lambda: c.responses.input_items.list("resp_1")):
        with pytest.raises(openai.BadRequestError) as e:
            call()
        assert e.value.body["param"] == "response_id"
        assert "resp_gw" in e.value.body["message"]
    assert gateway_of(group).mock_requests(test_id) == [], "no vendor was asked"


def test_stored_response_calls_are_checked_as_generations(gw):
    # A key without the group.
    c = openai.OpenAI(base_url=gw.base + "/v1", api_key=OPENAI_ONLY_KEY, max_retries=0,
                      default_headers={"x-model-group": "mock-azure-v1"})
    with pytest.raises(openai.PermissionDeniedError):
        c.responses.retrieve("resp_1")
    with pytest.raises(openai.NotFoundError) as e:
        client(gw, "no-such-group").responses.retrieve("resp_1")
    assert e.value.body["param"] == "x-model-group"
    # What the gateway does not relay: a stored response as a stream.
    with pytest.raises(openai.BadRequestError) as e:
        client(gw, "mock-openai").responses.retrieve("resp_1", stream=True)
    assert e.value.body["param"] == "stream"
    headers = {"x-model-group": "mock-openai"}
    status, _, body = gw.request("PUT", "/v1/responses/resp_1", headers=headers)
    assert status == 405, body
    status, _, body = gw.request("GET", "/v1/responses/resp_1/other", headers=headers)
    assert status == 404, body
    status, _, body = gw.request("GET", "/v1/responses/not..an-id", headers=headers)
    assert status == 400 and json.loads(body)["error"]["param"] == "response_id", body


def test_a_chat_only_provider_gets_chat_completions(chat_only_gw, test_id):
    resp = client(chat_only_gw, "chat-only", **{"x-test-id": test_id}).responses.create(
        model="any", input="hi", instructions="be brief", store=True, truncation="auto")
    assert resp.status == "completed" and resp.id.startswith("resp_")
    [sent] = chat_only_gw.mock_requests(test_id)
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["messages"][0] == {"role": "system", "content": "be brief"}
    assert "store" not in sent["body"] and "truncation" not in sent["body"]


def test_azure_v1_gets_its_own_path_and_key(gw, test_id):
    client(gw, "mock-azure-v1", **{"x-test-id": test_id}).responses.create(model="any", input="hi")
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == "/openai/v1/responses"
    headers = {k.lower() for k in sent["headers"]}
    assert "api-key" in headers and "authorization" not in headers
    assert sent["body"]["model"] == "mock-gpt4o-deployment"
