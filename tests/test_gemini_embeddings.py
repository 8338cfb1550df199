"""Embeddings on the Gemini surface (`:embedContent`, `:batchEmbedContents`)
through a real Envoy: the google-genai SDK's `embed_content` and raw bodies,
translated to every vendor that embeds (the embeddings operation of
`POST /v1/embeddings`), Gemini's answer shapes back, Gemini's refusals, and
a batch whose requests differ in task or size sent as a vendor call per
kind (one vendor call has one task and size), answered in its order."""

import json
import math

import pytest
from google import genai
from google.genai import errors, types

from conftest import ALL_GROUPS_KEY
from test_embeddings import BATCH, MODEL, VENDORS

GROUPS = ["mock-openai", "mock-azure", "mock-gemini", "mock-bedrock", "mock-dashscope"]


def client(gw, group, test_id=None):
    headers = {"x-model-group": group, **({"x-test-id": test_id} if test_id else {})}
    return genai.Client(api_key=ALL_GROUPS_KEY, http_options={
        "base_url": gw.base, "headers": headers, "retry_options": {"attempts": 1}})


def post(gw, path, body, group="mock-openai", **headers):
    status, _, data = gw.request("POST", f"/v1beta/models/{MODEL}:{path}", body,
                                 {"x-goog-api-key": ALL_GROUPS_KEY, "authorization": None,
                                  "x-model-group": group, **headers})
    return status, json.loads(data) if data else None


@pytest.mark.parametrize("group", GROUPS)
def test_the_genai_sdk_embeds_through_every_vendor(gw, group, test_id):
    path, _, dims = VENDORS[group]
    texts = ["the quick brown fox", "jumps over the lazy dog"][:BATCH[group]]
    c = client(gw, group, test_id)  # held: the SDK closes its connections with the client
    result = c.models.embed_content(model=MODEL, contents=texts)
    assert len(result.embeddings) == len(texts)
    assert all(len(e.values) == dims for e in result.embeddings)
    assert all(abs(math.sqrt(sum(x * x for x in e.values)) - 1) < 1e-3 for e in result.embeddings)
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == path
    # The same text embeds the same through the OpenAI surface.
    status, _, data = gw.request("POST", "/v1/embeddings", {"model": MODEL, "input": texts[0]},
                                 {"x-model-group": group})
    assert status == 200, data
    assert json.loads(data)["data"][0]["embedding"] == pytest.approx(result.embeddings[0].values, abs=1e-6)


def test_task_title_and_size_reach_gemini(gw, test_id):
    config = types.EmbedContentConfig(task_type="RETRIEVAL_DOCUMENT", title="Foxes", output_dimensionality=256)
    c = client(gw, "mock-gemini", test_id)
    result = c.models.embed_content(model=MODEL, contents=["a b", "c"], config=config)
    assert [len(e.values) for e in result.embeddings] == [256, 256]
    [sent] = gw.mock_requests(test_id)
    one = {"model": "models/gemini-embedding-001", "taskType": "RETRIEVAL_DOCUMENT", "title": "Foxes",
           "outputDimensionality": 256}
    assert sent["body"] == {"requests": [{**one, "content": {"parts": [{"text": "a b"}]}},
                                         {**one, "content": {"parts": [{"text": "c"}]}}]}


def test_a_task_reaches_dashscope_as_its_text_type(gw, test_id):
    config = types.EmbedContentConfig(task_type="RETRIEVAL_QUERY")
    c = client(gw, "mock-dashscope", test_id)
    c.models.embed_content(model=MODEL, contents="a", config=config)
    [sent] = gw.mock_requests(test_id)
    assert sent["body"]["parameters"]["text_type"] == "query", sent["body"]


@pytest.mark.parametrize("group", ["mock-openai", "mock-gemini"])
def test_embed_content_answers_one_embedding(gw, group):
    status, body = post(gw, "embedContent", {"content": {"parts": [{"text": "hello"}, {"text": "world"}]}}, group)
    assert status == 200, body
    assert list(body) == ["embedding"] and len(body["embedding"]["values"]) == VENDORS[group][2]


def test_a_group_without_embeddings_is_gemini_s_invalid_argument(gw):
    c = client(gw, "mock-anthropic")
    with pytest.raises(errors.ClientError) as info:
        c.models.embed_content(model=MODEL, contents="hi")
    assert (info.value.code, info.value.status) == (400, "INVALID_ARGUMENT")
    assert "no provider of this model group embeds" in info.value.message


@pytest.mark.parametrize("body, where", [
    ({"content": {"parts": [{"text": "a"}]}, "taskKind": "x"}, "taskKind"),
    ({"content": {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA=="}}]}}, "inlineData"),
    ({"content": {"parts": [{"text": ""}]}}, "content"),
    ({"content": {"parts": [{"text": "a"}]}, "taskType": "GUESSING"}, "taskType"),
    ({"content": {"parts": [{"text": "a"}]}, "outputDimensionality": 0}, "outputDimensionality"),
])
def test_what_gemini_refuses_is_refused(gw, body, where):
    status, answer = post(gw, "embedContent", body)
    assert status == 400, answer
    assert answer["error"]["status"] == "INVALID_ARGUMENT" and where in answer["error"]["message"], answer


@pytest.mark.parametrize("requests, message", [
    ([], "at least one request"),
    ([{"model": "models/other", "content": {"parts": [{"text": "a"}]}}], "does not match the model"),
])
def test_a_batch_the_gateway_cannot_send_as_one_call_is_refused(gw, requests, message):
    status, answer = post(gw, "batchEmbedContents", {"requests": requests})
    assert status == 400, answer
    assert message in answer["error"]["message"], answer


def test_a_batch_over_the_vendors_limit_names_it(gw):
    requests = [{"content": {"parts": [{"text": "a"}]}}] * (BATCH["mock-gemini"] + 1)
    status, answer = post(gw, "batchEmbedContents", {"requests": requests}, "mock-gemini")
    assert status == 400 and "at most 100" in answer["error"]["message"], answer


MIXED = [
    {"content": {"parts": [{"text": "doc a"}]}, "taskType": "RETRIEVAL_DOCUMENT", "title": "A"},
    {"content": {"parts": [{"text": "a query"}]}, "taskType": "RETRIEVAL_QUERY"},
    {"content": {"parts": [{"text": "doc b"}]}, "taskType": "RETRIEVAL_DOCUMENT", "title": "B"},
    {"content": {"parts": [{"text": "short"}]}, "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 256},
]


@pytest.mark.parametrize("group", ["mock-gemini", "mock-dashscope"])
def test_a_batch_of_differing_tasks_and_sizes_goes_as_a_vendor_call_per_kind(gw, group, test_id):
    """Gemini lets each request of a batch have its own task, title and size;
    a vendor call has one task and size, so the gateway sends a call per kind
    (the documents, the queries, the short query) and answers in the batch's
    order, each vector the one its request alone gets."""
    status, answer = post(gw, "batchEmbedContents", {"requests": MIXED}, group, **{"x-test-id": test_id})
    assert status == 200, answer
    dims = VENDORS[group][2]
    assert [len(e["values"]) for e in answer["embeddings"]] == [dims, dims, dims, 256]
    sent = gw.mock_requests(test_id)
    assert len(sent) == 3, "a vendor call per task and size"
    if group == "mock-gemini":
        calls = sorted(([(r["content"]["parts"][0]["text"], r["taskType"], r.get("title"),
                          r.get("outputDimensionality")) for r in s["body"]["requests"]] for s in sent),
                       key=len, reverse=True)
        assert calls[0] == [("doc a", "RETRIEVAL_DOCUMENT", "A", None), ("doc b", "RETRIEVAL_DOCUMENT", "B", None)]
        assert sorted(calls[1:]) == [[("a query", "RETRIEVAL_QUERY", None, None)],
                                     [("short", "RETRIEVAL_QUERY", None, 256)]]
    for request, embedding in zip(MIXED, answer["embeddings"]):
        status, alone = post(gw, "embedContent", request, group)
        assert status == 200, alone
        assert alone["embedding"]["values"] == pytest.approx(embedding["values"], abs=1e-6), request
