"""Embeddings batches larger than a vendor embeds at once, split by the edge
role into self-calls (the shipped config's internal listener llm_gateway_self,
`self_calls` in envoy/gateway.yaml) and answered whole: through a real Envoy,
with the clients users batch with.

- LangChain's `embed_documents` with its default `chunk_size` (1000 texts in
  one request) on every embedding group: Titan's 1 a call, DashScope's 10,
  Gemini's 100, Cohere on Bedrock's 96, OpenAI's and Azure's 2048.
- LlamaIndex's `OpenAIEmbedding`, which batches by its `embed_batch_size`
  (200 here: over Titan's, DashScope's, Cohere's and Gemini's limits), on
  every embedding group.
- The google-genai SDK's batch `embed_content` (Gemini's own
  `:batchEmbedContents`, at most 100 contents) on every embedding group.
- A candidate that names its provider: parts of its limit at once, no
  whole-batch probe.
- A part that fails fails the batch with its own error; a part that fails
  over to the same model elsewhere keeps the batch whole; one that fails
  over to another model fails it (503), vectors never mixed.
- The parent's access-log line: every part's attempts, the usage summed.
- A client's 400 never carries the vendor's batch limit (an internal header
  for the request that splits).

One gateway of this module's own (extra providers, clusters and groups),
shared by its tests."""

import json
import math
import os

import openai
import pytest
from google import genai

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from langchain_openai import OpenAIEmbeddings  # noqa: E402
from llama_index.embeddings.openai import OpenAIEmbedding  # noqa: E402

import gateway  # noqa: E402
from conftest import ALL_GROUPS_KEY, configure_test_gateway, log_for, own_gateway  # noqa: E402

MODEL = "text-embedding-3-small"
# group -> (per-call limit, vendor model, dimension)
GROUPS = {
    "mock-openai": (2048, "text-embedding-3-small", 1536),
    "mock-azure": (2048, "mock-embedding-deployment", 1536),
    "mock-gemini": (100, "gemini-embedding-001", 3072),
    "mock-bedrock": (1, "amazon.titan-embed-text-v2:0", 1024),
    "cohere": (96, "cohere.embed-v4:0", 1536),
    "mock-dashscope": (10, "text-embedding-v4", 1024),
}
TEXTS = [f"document {i} on topic {i % 13}" for i in range(1000)]
POISON = "poison"


def aggregate(name, clusters):
    return {"name": name, "connect_timeout": "1s", "lb_policy": "CLUSTER_PROVIDED",
            "cluster_type": {"name": "envoy.clusters.aggregate", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig",
                "clusters": clusters}}}


def edit(config):
    configure_test_gateway(config)
    # DashScope behind a base path that fails any request carrying POISON.
    config["providers"]["ds-flaky"] = {"dialect": "dashscope", "api_key": "sk-mock-dashscope",
                                       "base_path": f"/scenario/fail-input={POISON}",
                                       "models": {"*": "text-embedding-v4"}}
    # Gemini, always busy.
    config["providers"]["gemini-down"] = {"dialect": "gemini", "api_key": "mock-gemini-key",
                                          "base_path": "/scenario/error-503",
                                          "models": {"*": "gemini-embedding-001"}}
    config["model_groups"].update({
        # Cohere Embed on Bedrock (96 texts a call).
        "cohere": {"candidates": [{"cluster": "mock_bedrock", "provider": "mock-bedrock",
                                   "model": "cohere.embed-v4:0"}]},
        # A failing DashScope failing over to a healthy one (the same model)...
        "ds-failover": {"candidates": [{"cluster": "ds_failover", "provider": "ds-flaky"}]},
        # ...or to Gemini (another model).
        "ds-to-gemini": {"candidates": [{"cluster": "ds_to_gemini", "provider": "ds-flaky"}]},
        # Gemini (100 a call) failing over to DashScope (10 a call).
        "gemini-to-ds": {"candidates": [{"cluster": "gemini_to_ds", "provider": "gemini-down"}]},
    })


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("envoy-batches")
    clusters = [aggregate("ds_failover", ["ds_flaky", "mock_dashscope"]),
                aggregate("ds_to_gemini", ["ds_flaky", "mock_gemini"]),
                aggregate("gemini_to_ds", ["gemini_down", "mock_dashscope"])]
    with own_gateway(workdir, edit=edit, extra_clusters=lambda port: clusters + [
            gateway.static_cluster("ds_flaky", port, "ds-flaky"),
            gateway.static_cluster("gemini_down", port, "gemini-down")]) as g:
        yield g


def sdk(gw, group, test_id):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0, timeout=120,
                         default_headers={"x-model-group": group, "x-test-id": test_id})


def one_by_one(gw, group, texts):
    """Each text's vector from a request of its own (no split)."""
    c = sdk(gw, group, "reference")
    return [c.embeddings.create(model=MODEL, input=t).data[0].embedding for t in texts]


def check(vectors, gw, group, texts, sample=(0, 1, -1)):
    """One vector per text, of the vendor's dimension, unit length, and at
    each sampled place the very vector of that text alone."""
    dims = GROUPS[group][2] if group in GROUPS else 1024
    assert len(vectors) == len(texts)
    assert all(len(v) == dims for v in vectors)
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-3 for v in vectors)
    alone = one_by_one(gw, group, [texts[i] for i in sample])
    for i, expected in zip(sample, alone):
        assert vectors[i] == pytest.approx(expected, abs=1e-6), i
    assert len({tuple(v[:4]) for v in vectors}) == len(vectors), "distinct texts, distinct vectors"


@pytest.mark.parametrize("group", list(GROUPS))
def test_langchain_embeds_1000_documents_on_every_group(gw, group, test_id):
    limit = GROUPS[group][0]
    emb = OpenAIEmbeddings(model=MODEL, base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0,
                           check_embedding_ctx_length=False, request_timeout=300,
                           default_headers={"x-model-group": group, "x-test-id": test_id})
    assert emb.chunk_size == 1000, "one request for all 1000"
    vectors = emb.embed_documents(TEXTS)
    check(vectors, gw, group, TEXTS)
    sent = gw.mock_requests(test_id)
    assert len(sent) == -(-len(TEXTS) // limit), "vendor calls of the vendor's limit, none for the whole"


@pytest.mark.parametrize("group", list(GROUPS))
def test_llamaindex_embeds_in_batches_of_its_embed_batch_size_on_every_group(gw, group, test_id):
    """LlamaIndex sends 250 texts as requests of 200 and 50 (its
    `embed_batch_size`), each split into vendor calls of the vendor's limit."""
    texts = TEXTS[:250]
    emb = OpenAIEmbedding(model=MODEL, api_base=gw.base + "/v1", api_key=ALL_GROUPS_KEY, embed_batch_size=200,
                          max_retries=0, timeout=300,
                          default_headers={"x-model-group": group, "x-test-id": test_id})
    vectors = emb.get_text_embedding_batch(texts)
    check(vectors, gw, group, texts, sample=(0, 199, 200, -1))
    limit = GROUPS[group][0]
    sent = gw.mock_requests(test_id)
    assert len(sent) == -(-200 // limit) + -(-50 // limit), "each request in vendor calls of the vendor's limit"


@pytest.mark.parametrize("group", list(GROUPS))
def test_the_genai_sdk_batch_embeds_on_every_group(gw, group, test_id):
    texts = TEXTS[:100]
    c = genai.Client(api_key=ALL_GROUPS_KEY, http_options={
        "base_url": gw.base, "headers": {"x-model-group": group, "x-test-id": test_id},
        "retry_options": {"attempts": 1}, "timeout": 120_000})
    result = c.models.embed_content(model=MODEL, contents=texts)
    check([e.values for e in result.embeddings], gw, group, texts)
    assert len(gw.mock_requests(test_id)) == -(-len(texts) // GROUPS[group][0])


def test_a_candidate_naming_its_provider_sends_parts_of_its_limit_at_once(gw, test_id):
    """`cohere` names mock-bedrock and Cohere's model: 200 texts go as
    parts of 96, 96 and 8, with no whole-batch call first."""
    r = gw.request("POST", "/v1/embeddings", {"model": MODEL, "input": TEXTS[:200]},
                   {"x-model-group": "cohere", "x-test-id": test_id})
    status, headers, body = r
    assert status == 200, body
    assert headers["x-llm-parts"] == "3" and headers["x-llm-model"] == "cohere.embed-v4:0"
    sizes = sorted(len(s["body"]["texts"]) for s in gw.mock_requests(test_id))
    assert sizes == [8, 96, 96]
    log = log_for(gw, headers["x-request-id"])
    assert log["attempts"] == 3 and log["status"] == 200
    assert log["operation"] == "embeddings" and log["group"] == "cohere"


def test_a_failing_part_fails_the_batch_with_its_own_error(gw, test_id):
    """The part carrying POISON fails on every try (DashScope's 503, retried
    by Envoy): the client gets that 503 in OpenAI's envelope, no vectors."""
    texts = TEXTS[:25]
    texts[14] = f"a {POISON} document"
    status, headers, body = gw.request(
        "POST", "/v1/embeddings", {"model": MODEL, "input": texts},
        {"x-model-group": "mock-dashscope", "x-test-id": test_id, "x-mock-scenario": f"fail-input={POISON}"})
    error = json.loads(body)["error"]
    assert status == 503 and error["code"] == "UPSTREAM_BUSY", body
    assert "data" not in json.loads(body)
    assert headers["x-llm-provider"] == "mock-dashscope"
    failed = [s for s in gw.mock_requests(test_id) if POISON in json.dumps(s["body"])]
    assert len(failed) == 3, "the part's attempt and Envoy's two retries"
    log = log_for(gw, headers["x-request-id"])
    assert log["status"] == 503


def test_a_part_failing_over_to_the_same_model_keeps_the_batch_whole(gw, test_id):
    texts = TEXTS[:25]
    texts[14] = f"a {POISON} document"
    status, headers, body = gw.request("POST", "/v1/embeddings", {"model": MODEL, "input": texts},
                                       {"x-model-group": "ds-failover", "x-test-id": test_id})
    assert status == 200, body
    vectors = [d["embedding"] for d in json.loads(body)["data"]]
    check(vectors, gw, "mock-dashscope", texts, sample=(0, 14, 24))
    log = log_for(gw, headers["x-request-id"])
    route = log["route"]
    assert len(route) == 4 and route.count("ds-flaky/text-embedding-v4:503") == 1, route
    assert log["attempts"] == 4 and log["status"] == 200
    assert log["prompt_tokens"] == sum(len(t.split()) for t in texts), "every part's usage, the failed one's none"


def test_a_part_failing_over_to_another_model_fails_the_batch(gw, test_id):
    texts = TEXTS[:25]
    texts[3] = f"a {POISON} document"
    status, headers, body = gw.request("POST", "/v1/embeddings", {"model": MODEL, "input": texts},
                                       {"x-model-group": "ds-to-gemini", "x-test-id": test_id})
    error = json.loads(body)["error"]
    assert status == 503 and error["code"] == "UPSTREAM_BUSY", body
    assert "different models" in error["message"] and headers["retry-after"] == "1"


def test_a_clients_400_never_carries_the_batch_limit(gw, test_id):
    """A batch sent whole to Gemini (it takes 100) that fails over to
    DashScope (10 a call) meets DashScope's limit: the client gets the 400
    naming it in its message, without the internal header that the request
    splitting a batch reads."""
    texts = TEXTS[:30]
    status, headers, body = gw.request("POST", "/v1/embeddings", {"model": MODEL, "input": texts},
                                       {"x-model-group": "gemini-to-ds", "x-test-id": test_id})
    error = json.loads(body)["error"]
    assert status == 400 and error["param"] == "input", body
    assert "at most 10 inputs" in error["message"]
    assert "x-llm-batch-limit" not in headers
    assert headers["x-llm-provider"] == "mock-dashscope"
    assert "x-llm-part" not in headers and "x-llm-parts" not in headers
