"""Embeddings (`POST /v1/embeddings`) through a real Envoy: OpenAI's request,
translated for every vendor that embeds (the mock enforces each vendor's
rules: fields, batch sizes, dimensions, models), OpenAI's answer back in
both encodings, the vendors' errors in OpenAI's envelope, routing to the
candidates that embed, and metering under `operation=embeddings`."""

import base64
import json
import math
import struct

import openai
import pytest

from conftest import ALL_GROUPS_KEY
from test_gateway import assert_unified_error
from test_metering import prometheus, sample

MODEL = "text-embedding-3-small"

# group -> (path the vendor gets, the model the answer names, default dimension);
# Azure's answers name the deployment's model, not the deployment.
VENDORS = {
    "mock-openai": ("/v1/embeddings", "text-embedding-3-small", 1536),
    "mock-azure": ("/openai/deployments/mock-embedding-deployment/embeddings",
                   "text-embedding-3-small", 1536),
    "mock-azure-v1": ("/openai/v1/embeddings", "text-embedding-3-small", 1536),
    "mock-gemini": ("/v1beta/models/gemini-embedding-001:batchEmbedContents", "gemini-embedding-001", 3072),
    "mock-bedrock": ("/model/amazon.titan-embed-text-v2%3A0/invoke", "amazon.titan-embed-text-v2:0", 1024),
    "mock-dashscope": ("/api/v1/services/embeddings/text-embedding/text-embedding", "text-embedding-v4", 1024),
}
# How many inputs each vendor embeds per call (Titan: one).
BATCH = {"mock-openai": 2048, "mock-azure": 2048, "mock-azure-v1": 2048, "mock-gemini": 100,
         "mock-bedrock": 1, "mock-dashscope": 10}


def embed(gw, body, group, **headers):
    status, hdrs, data = gw.request("POST", "/v1/embeddings", body,
                                    {"x-model-group": group, **headers})
    return status, hdrs, json.loads(data) if data else None


def client(gw, group):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0, timeout=60,
                         default_headers={"x-model-group": group})


def norm(vector):
    return math.sqrt(sum(x * x for x in vector))


@pytest.mark.parametrize("group", list(VENDORS))
def test_the_openai_sdk_embeds_through_every_vendor(gw, group, test_id):
    path, vendor_model, dims = VENDORS[group]
    texts = ["the quick brown fox", "jumps over the lazy dog"][:BATCH[group]]
    result = client(gw, group).embeddings.create(model=MODEL, input=texts, extra_headers={"x-test-id": test_id})
    assert [d.index for d in result.data] == list(range(len(texts)))
    assert all(len(d.embedding) == dims for d in result.data)
    assert all(abs(norm(d.embedding) - 1) < 1e-3 for d in result.data)
    assert result.model == vendor_model
    assert result.usage.prompt_tokens > 0 and result.usage.total_tokens == result.usage.prompt_tokens
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == path
    # The same text embeds the same through the gateway, in float or base64.
    status, _, floats = embed(gw, {"model": MODEL, "input": texts[0], "encoding_format": "float"}, group)
    assert status == 200, floats
    assert floats["object"] == "list" and list(floats["data"][0]) == ["object", "index", "embedding"]
    assert floats["data"][0]["embedding"] == pytest.approx(result.data[0].embedding, abs=1e-6)


def test_what_each_vendor_is_sent(gw, test_id):
    """The bodies, as each vendor's API takes them (the mock refuses others)."""
    ask = {"model": MODEL, "input": ["a b", "c"], "dimensions": 256, "task_type": "retrieval_query"}
    sent = {}
    for group in ["mock-openai", "mock-azure", "mock-gemini", "mock-dashscope"]:
        status, _, body = embed(gw, ask, group, **{"x-test-id": f"{test_id}-{group}"})
        assert status == 200, (group, body)
        assert [len(d["embedding"]) for d in body["data"]] == [256, 256]
        [sent[group]] = gw.mock_requests(f"{test_id}-{group}")
    assert sent["mock-openai"]["body"] == {"input": ["a b", "c"], "model": "text-embedding-3-small",
                                          "dimensions": 256, "encoding_format": "base64"}
    # Azure's deployment path names the model: the body does not.
    assert sent["mock-azure"]["body"] == {"input": ["a b", "c"], "dimensions": 256, "encoding_format": "base64"}
    assert sent["mock-azure"]["headers"]["api-key"] == "mock-azure-key"
    assert sent["mock-gemini"]["body"] == {"requests": [
        {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": t}]},
         "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 256} for t in ["a b", "c"]]}
    assert sent["mock-dashscope"]["body"] == {"model": "text-embedding-v4", "input": {"texts": ["a b", "c"]},
                                             "parameters": {"dimension": 256, "text_type": "query"}}
    status, _, body = embed(gw, {"model": MODEL, "input": "a b", "dimensions": 256}, "mock-bedrock",
                            **{"x-test-id": f"{test_id}-titan"})
    assert status == 200, body
    [titan] = gw.mock_requests(f"{test_id}-titan")
    assert titan["body"] == {"inputText": "a b", "dimensions": 256}
    assert titan["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 ")
    assert body["usage"]["prompt_tokens"] == 2, "Titan counts tokens: its count is the usage"
    status, _, body = embed(gw, {"model": "embed-v4", "input": ["a", "b"], "task_type": "clustering"},
                            "mock-bedrock", **{"x-test-id": f"{test_id}-cohere"})
    assert status == 200, body
    assert [len(d["embedding"]) for d in body["data"]] == [1536, 1536]
    [cohere] = gw.mock_requests(f"{test_id}-cohere")
    assert cohere["path"] == "/model/cohere.embed-v4%3A0/invoke"
    assert cohere["body"] == {"texts": ["a", "b"], "input_type": "clustering"}


def test_a_fixed_size_models_own_size_is_no_refusal(gw, test_id):
    """Cohere Embed v3 embeds in 1024 dimensions and takes no
    `output_dimension` (the mock refuses it, as Bedrock does): asking for
    1024 is asking for what it does, sent without the member; another
    size is the gateway's 400 naming `dimensions`."""
    ask = {"model": "embed-english-v3", "input": ["a", "b"], "dimensions": 1024}
    status, _, body = embed(gw, ask, "mock-bedrock", **{"x-test-id": test_id})
    assert status == 200, body
    assert [len(d["embedding"]) for d in body["data"]] == [1024, 1024]
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == "/model/cohere.embed-english-v3/invoke"
    assert sent["body"] == {"texts": ["a", "b"], "input_type": "search_document"}
    status, _, body = embed(gw, dict(ask, dimensions=512), "mock-bedrock")
    assert status == 400 and body["error"]["param"] == "dimensions", body


def test_an_answer_without_indexes_is_in_the_order_listed(gw):
    """Some OpenAI-compatible servers leave each item's `index` out (the
    mock's `unindexed`): the vectors are taken as listed, not a 502."""
    ask = {"model": MODEL, "input": ["one", "two", "three"], "encoding_format": "float"}
    status, _, indexed = embed(gw, ask, "mock-openai")
    assert status == 200, indexed
    status, _, unindexed = embed(gw, ask, "mock-openai", **{"x-mock-scenario": "unindexed"})
    assert status == 200, unindexed
    assert [d["index"] for d in unindexed["data"]] == [0, 1, 2]
    assert [d["embedding"] for d in unindexed["data"]] == [d["embedding"] for d in indexed["data"]]


def test_base64_is_the_little_endian_floats_of_the_float_answer(gw):
    status, _, floats = embed(gw, {"model": MODEL, "input": ["x y"]}, "mock-gemini")
    assert status == 200
    status, _, b64 = embed(gw, {"model": MODEL, "input": ["x y"], "encoding_format": "base64"}, "mock-gemini")
    assert status == 200
    raw = base64.b64decode(b64["data"][0]["embedding"])
    decoded = struct.unpack(f"<{len(raw) // 4}f", raw)
    assert decoded == pytest.approx(floats["data"][0]["embedding"], abs=1e-7)


@pytest.mark.parametrize("group", ["mock-gemini", "mock-bedrock", "mock-dashscope"])
def test_over_a_vendors_batch_limit_is_split_into_calls_of_its_size(gw, group, test_id):
    """The shipped config has self-calls (envoy/gateway.yaml): the batch is
    sent whole once (its group names no provider), the attempt answers the
    vendor's limit without calling it, and the parts of that size go on."""
    n = BATCH[group] + 1
    texts = [f"text {i}" for i in range(n)]
    status, headers, body = embed(gw, {"model": MODEL, "input": texts}, group, **{"x-test-id": test_id})
    assert status == 200, body
    assert [d["index"] for d in body["data"]] == list(range(n))
    parts = -(-n // BATCH[group])
    assert headers["x-llm-parts"] == str(parts)
    sent = gw.mock_requests(test_id)
    assert len(sent) == parts, "no vendor call for the whole batch"
    # Each text embedded once, by exactly one part.
    one, _, single = embed(gw, {"model": MODEL, "input": texts[-1]}, group)
    assert one == 200
    assert body["data"][-1]["embedding"] == pytest.approx(single["data"][0]["embedding"], abs=1e-6)


@pytest.mark.parametrize("group,accepted", [("mock-openai", True), ("mock-gemini", False)])
def test_token_arrays_reach_only_the_vendor_that_takes_them(gw, group, accepted):
    status, headers, body = embed(gw, {"model": MODEL, "input": [[1, 2, 3], [4]]}, group)
    if accepted:
        assert status == 200, body
        assert len(body["data"]) == 2
    else:
        err = assert_unified_error(status, headers, body, 400, "INVALID_REQUEST")
        assert "text only" in err["message"]


@pytest.mark.parametrize("body,param", [
    ({"model": MODEL}, "input"),
    ({"input": "x"}, "model"),
    ({"model": MODEL, "input": ""}, "input"),
    ({"model": MODEL, "input": []}, "input"),
    ({"model": MODEL, "input": "x", "encoding_format": "int8"}, "encoding_format"),
    ({"model": MODEL, "input": "x", "dimensions": -1}, "dimensions"),
    ({"model": MODEL, "input": "x", "stream": True}, "stream"),
])
def test_what_openai_refuses_is_refused_before_any_vendor(gw, body, param, test_id):
    status, headers, answer = embed(gw, body, "mock-openai", **{"x-test-id": test_id})
    err = assert_unified_error(status, headers, answer, 400, "INVALID_REQUEST")
    assert err["param"] == param
    assert gw.mock_requests(test_id) == []


def test_dimensions_a_model_has_not_are_refused(gw):
    # Titan v2 embeds in 256, 512 or 1024 dimensions only.
    status, headers, body = embed(gw, {"model": MODEL, "input": "x", "dimensions": 300}, "mock-bedrock")
    err = assert_unified_error(status, headers, body, 400, "INVALID_REQUEST")
    assert err["param"] == "dimensions" and "256, 512 or 1024" in err["message"]
    # Gemini's own refusal (past gemini-embedding-001's 3072), in OpenAI's envelope.
    status, headers, body = embed(gw, {"model": MODEL, "input": "x", "dimensions": 4000}, "mock-gemini")
    assert_unified_error(status, headers, body, 400, "INVALID_REQUEST")


def test_a_group_with_no_vendor_that_embeds_is_a_clear_400(gw, test_id):
    status, headers, body = embed(gw, {"model": MODEL, "input": "x"}, "mock-anthropic", **{"x-test-id": test_id})
    err = assert_unified_error(status, headers, body, 400, "INVALID_REQUEST")
    assert "embeds" in err["message"]
    assert gw.mock_requests(test_id) == []


def test_a_mixed_group_embeds_on_the_candidates_that_can(gw):
    # mock-ab is half OpenAI, half Anthropic: every embedding goes to OpenAI.
    for i in range(8):
        status, headers, body = embed(gw, {"model": MODEL, "input": f"x {i}"}, "mock-ab")
        assert status == 200, body
        assert headers["x-llm-provider"] == "mock-openai"


def test_a_chat_model_is_the_vendors_404_in_openais_envelope(gw):
    # mock-gemini maps every other model to its chat model, which Gemini does not embed with.
    status, headers, body = embed(gw, {"model": "some-chat-model", "input": "x"}, "mock-gemini")
    err = assert_unified_error(status, headers, body, 404, "MODEL_NOT_FOUND")
    assert err["provider"] == "mock-gemini"


@pytest.mark.parametrize("group", ["mock-openai", "mock-gemini", "mock-bedrock", "mock-dashscope"])
@pytest.mark.parametrize("scenario,status,code", [
    ("error-400-context", 400, "CONTEXT_LENGTH_EXCEEDED"),
    ("error-429", 429, "UPSTREAM_RATE_LIMIT"),
    ("error-401", 401, "AUTH_FAILED"),
])
def test_vendor_errors_are_openais_envelope(gw, group, scenario, status, code):
    got, headers, body = embed(gw, {"model": MODEL, "input": "x"}, group, **{"x-mock-scenario": scenario})
    err = assert_unified_error(got, headers, body, status, code)
    assert err["provider"] == group


def test_the_sdk_raises_its_own_classes(gw):
    c = client(gw, "mock-bedrock")
    with pytest.raises(openai.BadRequestError) as e:
        c.embeddings.create(model=MODEL, input=[[1, 2], [3]])
    assert e.value.body["param"] == "input"
    with pytest.raises(openai.RateLimitError):
        c.embeddings.create(model=MODEL, input="a", extra_headers={"x-mock-scenario": "error-429"})


def test_embeddings_are_metered_as_their_own_operation(gw):
    dashscope = {"group": "mock-dashscope", "provider": "mock-dashscope", "model": "text-embedding-v4",
                 "operation": "embeddings"}
    before = prometheus(gw)
    status, _, body = embed(gw, {"model": MODEL, "input": ["one two three", "four"]}, "mock-dashscope")
    assert status == 200, body
    # DashScope's own count (the mock's: a token per word).
    assert body["usage"] == {"prompt_tokens": 4, "total_tokens": 4}
    after = prometheus(gw)

    def delta(metric, **labels):
        return sample(after, metric, **labels) - sample(before, metric, **labels)

    assert delta("llm_gateway_requests", status="200", surface="openai_chat", **dashscope) == 1
    assert delta("gen_ai_client_token_usage", token_type="input", **dashscope) == 4
    assert delta("gen_ai_client_token_usage", token_type="output", **dashscope) == 0
    # No generation was counted for it.
    assert delta("llm_gateway_requests", operation="chat", group="mock-dashscope") == 0


@pytest.mark.parametrize("group", ["mock-openai", "mock-azure", "mock-gemini", "mock-dashscope"])
def test_a_vendor_error_quoting_its_key_reaches_no_client(gw, group):
    from conftest import VENDOR_KEYS
    status, headers, body = embed(gw, {"model": MODEL, "input": "x"}, group, **{"x-mock-scenario": "echo-key"})
    # Gemini refuses a key it does not know with 403 PERMISSION_DENIED, the others with 401.
    want = (403, "PERMISSION_DENIED") if group == "mock-gemini" else (401, "AUTH_FAILED")
    err = assert_unified_error(status, headers, body, *want)
    assert "[REDACTED]" in err["message"]
    for key in VENDOR_KEYS:
        assert key not in json.dumps(body)
