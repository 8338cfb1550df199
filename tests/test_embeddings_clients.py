"""Embeddings (`POST /v1/embeddings`) through the clients users embed with,
each on several vendor groups: what the client gets (one vector per input,
in order, of the vendor model's dimension, equal to what the OpenAI SDK
gets for the same input through the same group) and, where it matters,
what reached the vendor.

- LangChain's `OpenAIEmbeddings` (langchain-openai). By default it
  tokenizes with tiktoken (`check_embedding_ctx_length=True`) and sends
  TOKEN ARRAYS, which only OpenAI's own API takes: through any other vendor
  the gateway refuses them (400, "text only"), asserted as it is today. Its
  documented setting for other vendors, `check_embedding_ctx_length=False`,
  sends text and works on every group; `chunk_size` splits a large list into
  batches a vendor with a small batch limit takes (DashScope: 10), and
  without it the gateway splits them.
  tiktoken downloads its encodings at first use; there is no internet here,
  so the module points `TIKTOKEN_CACHE_DIR` at the copy of cl100k_base that
  LiteLLM (pinned in tests/requirements.txt) ships.
- LiteLLM's `litellm.embedding` with `openai/` and `api_base`: vectors,
  usage, and its error classes.
- The OpenAI Node SDK (`client.embeddings.create`, tests/node/clients.mjs
  op `embed`) and the Vercel AI SDK's `embed` / `embedMany` with
  `createOpenAI(...).embedding(model)` (tests/node/vercel_ai.mjs api
  `embedding`). `embedMany` splits values by the model's
  `maxEmbeddingsPerCall`, 2048 for OpenAI's embedding models, with no
  setting to lower it: the gateway splits a list over a small vendor limit
  (self-calls, envoy/gateway.yaml), as it does LangChain's default 1000.
- A per-key input-token limit (`limits.rate`) charged by embeddings.
"""

import json
import os
import time
from pathlib import Path

# LiteLLM fetches its model price map over the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
import openai  # noqa: E402
import pytest  # noqa: E402
import tiktoken  # noqa: E402
from langchain_openai import OpenAIEmbeddings  # noqa: E402

import gateway  # noqa: E402
from conftest import ALL_GROUPS_KEY, configure_test_gateway, log_for, own_gateway  # noqa: E402
from test_clients import address_cases, node_plan  # noqa: E402
from test_embeddings import BATCH, VENDORS  # noqa: E402

# tiktoken's cache, filled: LiteLLM ships cl100k_base (the encoding of
# OpenAI's embedding models) under tiktoken's cache name for it.
TIKTOKEN_CACHE = Path(litellm.__file__).parent / "litellm_core_utils" / "tokenizers"
os.environ["TIKTOKEN_CACHE_DIR"] = str(TIKTOKEN_CACHE)

MODEL = "text-embedding-3-small"
GROUPS = ["mock-openai", "mock-azure", "mock-gemini", "mock-bedrock", "mock-dashscope"]
TEXTS = ["the quick brown fox", "jumps over the lazy dog", "a third sentence here"]
# 25 distinct texts, more than DashScope's 10 a call.
MANY = [f"document number {i} about topic {i % 7}" for i in range(25)]


def dims(group):
    return VENDORS[group][2]


def sdk(gw, group):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0, timeout=60,
                         default_headers={"x-model-group": group})


def sdk_vectors(gw, group, inputs):
    """What the OpenAI SDK gets for `inputs`, one call per vendor batch."""
    out = []
    step = BATCH[group]
    for i in range(0, len(inputs), step):
        result = sdk(gw, group).embeddings.create(model=MODEL, input=inputs[i:i + step])
        assert [d.index for d in result.data] == list(range(len(inputs[i:i + step])))
        out.extend(d.embedding for d in result.data)
    return out


def check_vectors(got, expected, group):
    """One vector per input, in order, of the group's dimension, each equal
    to the reference's (and the inputs' vectors all differ, so a reordering
    would show)."""
    assert len(got) == len(expected)
    assert all(len(v) == dims(group) for v in got)
    for g, e in zip(got, expected):
        assert g == pytest.approx(e, abs=1e-6)
    assert len({tuple(v[:8]) for v in got}) == len(got), "distinct inputs, distinct vectors"


# ---------------------------------------------------------------- LangChain

def langchain(gw, group, test_id=None, **settings):
    headers = {"x-model-group": group}
    if test_id:
        headers["x-test-id"] = test_id
    return OpenAIEmbeddings(model=MODEL, base_url=gw.base + "/v1", api_key=ALL_GROUPS_KEY, max_retries=0,
                            default_headers=headers, **settings)


def test_tiktoken_works_offline_from_litellms_copy():
    """What the default LangChain cases rely on: no download needed."""
    assert (TIKTOKEN_CACHE / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").exists()
    assert tiktoken.encoding_for_model(MODEL).encode("hello world") == [15339, 1917]


@pytest.mark.parametrize("group", GROUPS)
def test_langchain_sending_text_works_on_every_group(gw, group, test_id):
    """`check_embedding_ctx_length=False` (LangChain's setting for
    non-OpenAI APIs), batches sized to the vendor's limit (Titan: 1)."""
    emb = langchain(gw, group, test_id, check_embedding_ctx_length=False, chunk_size=min(BATCH[group], 1000))
    docs = emb.embed_documents(TEXTS)
    check_vectors(docs, sdk_vectors(gw, group, TEXTS), group)
    query = emb.embed_query(TEXTS[1])
    assert query == pytest.approx(docs[1], abs=1e-6)
    sent = gw.mock_requests(test_id)
    assert len(sent) == -(-len(TEXTS) // BATCH[group]) + 1, "the documents' batches, then the query"


def test_langchain_default_sends_tiktoken_tokens_to_openai(gw, test_id):
    """The default: each text tokenized with cl100k_base and sent as a token
    array, which OpenAI takes; the vectors are what the SDK gets for those
    same token arrays (one chunk each: LangChain's weighted average of one
    unit vector is that vector)."""
    emb = langchain(gw, "mock-openai", test_id)
    assert emb.check_embedding_ctx_length is True
    docs = emb.embed_documents(TEXTS)
    query = emb.embed_query(TEXTS[0])
    enc = tiktoken.encoding_for_model(MODEL)
    tokens = [enc.encode(t) for t in TEXTS]
    first, second = gw.mock_requests(test_id)
    assert first["body"]["input"] == tokens
    assert second["body"]["input"] == tokens[:1]
    check_vectors(docs, sdk_vectors(gw, "mock-openai", tokens), "mock-openai")
    assert query == pytest.approx(docs[0], abs=1e-6)


@pytest.mark.parametrize("group", ["mock-gemini", "mock-dashscope"])
def test_langchain_default_token_arrays_are_refused_by_a_text_only_vendor(gw, group, test_id):
    """Known limit, as today: the gateway does not detokenize. A clear 400
    before any vendor call, raised by the SDK under LangChain."""
    with pytest.raises(openai.BadRequestError) as e:
        langchain(gw, group, test_id).embed_documents(TEXTS[:2])
    assert e.value.status_code == 400
    assert e.value.body["code"] == "INVALID_REQUEST" and "text only" in e.value.body["message"]
    assert gw.mock_requests(test_id) == []


def test_langchain_chunk_size_fits_a_small_batch_limit(gw, test_id):
    """25 texts to DashScope (10 a call) with `chunk_size=10`: three vendor
    calls of 10, 10 and 5, in order, and the 25 vectors in the texts' order."""
    emb = langchain(gw, "mock-dashscope", test_id, check_embedding_ctx_length=False, chunk_size=10)
    docs = emb.embed_documents(MANY)
    sent = gw.mock_requests(test_id)
    assert [r["body"]["input"]["texts"] for r in sent] == [MANY[:10], MANY[10:20], MANY[20:]]
    check_vectors(docs, sdk_vectors(gw, "mock-dashscope", MANY), "mock-dashscope")


def test_langchain_without_chunk_size_is_split_by_the_gateway(gw, test_id):
    """LangChain's default chunk_size (1000) is over DashScope's 10: the
    gateway splits the batch into vendor calls of 10, 10 and 5 (self-calls,
    envoy/gateway.yaml) and answers in the texts' order."""
    emb = langchain(gw, "mock-dashscope", test_id, check_embedding_ctx_length=False)
    docs = emb.embed_documents(MANY)
    sent = sorted((r["body"]["input"]["texts"] for r in gw.mock_requests(test_id)), key=lambda texts: MANY.index(texts[0]))
    assert sent == [MANY[:10], MANY[10:20], MANY[20:]]
    check_vectors(docs, sdk_vectors(gw, "mock-dashscope", MANY), "mock-dashscope")


# ---------------------------------------------------------------- LiteLLM

def litellm_embedding(gw, group, inputs, **headers):
    return litellm.embedding(model=f"openai/{MODEL}", api_base=gw.base + "/v1", api_key=ALL_GROUPS_KEY,
                             extra_headers={"x-model-group": group, **headers}, input=inputs, max_retries=0)


@pytest.mark.parametrize("group", ["mock-openai", "mock-gemini", "mock-dashscope", "mock-bedrock"])
def test_litellm_embeds_with_usage(gw, group, test_id):
    inputs = TEXTS[:min(BATCH[group], len(TEXTS))]
    r = litellm_embedding(gw, group, inputs, **{"x-test-id": test_id})
    assert [d["index"] for d in r.data] == list(range(len(inputs)))
    check_vectors([d["embedding"] for d in r.data], sdk_vectors(gw, group, inputs), group)
    assert r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens
    if group in ("mock-dashscope", "mock-bedrock"):
        # The vendor's own count (the mock's: a token per word).
        assert r.usage.prompt_tokens == sum(len(t.split()) for t in inputs)
    assert len(gw.mock_requests(test_id)) == 1


@pytest.mark.parametrize("group", ["mock-gemini", "mock-dashscope"])
def test_litellm_error_classes(gw, group, test_id):
    with pytest.raises(litellm.BadRequestError) as e:
        litellm_embedding(gw, group, [[1, 2], [3]])
    assert "text only" in str(e.value)
    with pytest.raises(litellm.RateLimitError) as e:
        litellm_embedding(gw, group, ["x"], **{"x-mock-scenario": "error-429"})
    assert e.value.status_code == 429
    with pytest.raises(litellm.ContextWindowExceededError) as e:
        litellm_embedding(gw, group, ["x"], **{"x-mock-scenario": "error-400-context"})
    assert e.value.status_code == 400


# ---------------------------------------------------------------- Node: the OpenAI SDK and the Vercel AI SDK

def node_embedding_plan():
    """(script, cases): the OpenAI Node SDK's cases (clients.mjs) and the
    Vercel AI SDK's (vercel_ai.mjs), case ids `<client>:<group>:<what>`."""
    openai_node, vercel = {}, {}
    for group in GROUPS:
        texts = TEXTS[:min(BATCH[group], len(TEXTS))]
        openai_node[f"openai-node:{group}:texts"] = {"op": "embed", "body": {"model": MODEL, "input": texts}}
        vercel[f"vercel:{group}:embed"] = {"op": "embed", "values": TEXTS[1:2]}
        vercel[f"vercel:{group}:many"] = {"op": "embed_many", "values": texts}
    openai_node["openai-node:mock-gemini:dimensions"] = {
        "op": "embed", "body": {"model": MODEL, "input": TEXTS, "dimensions": 256, "encoding_format": "float"}}
    openai_node["openai-node:mock-dashscope:split"] = {"op": "embed", "body": {"model": MODEL, "input": MANY}}
    openai_node["openai-node:mock-dashscope:tokens"] = {"op": "embed", "body": {"model": MODEL, "input": [[1, 2]]}}
    openai_node["openai-node:mock-gemini:error-429"] = {"op": "embed", "body": {"model": MODEL, "input": "x"},
                                                        "scenario": "error-429"}
    vercel["vercel:mock-gemini:dimensions"] = {"op": "embed", "values": TEXTS[:1], "dimensions": 256}
    vercel["vercel:mock-dashscope:split"] = {"op": "embed_many", "values": MANY}
    vercel["vercel:mock-bedrock:split"] = {"op": "embed_many", "values": TEXTS[:2]}
    vercel["vercel:mock-openai:error-429"] = {"op": "embed", "values": ["x"], "scenario": "error-429"}
    for case in vercel.values():
        case.update(api="embedding", model=MODEL)
    for cases in (openai_node, vercel):
        for cid, case in cases.items():
            case["group"] = cid.split(":")[1]
    return address_cases(openai_node, "emb-"), address_cases(vercel, "emb-")


@pytest.fixture(scope="module")
def node_seen(gw):
    """case id -> what the Node client saw; each driver runs once, in one process."""
    openai_node, vercel = node_embedding_plan()
    out = {**node_plan(gw, "clients.mjs", gw.base + "/v1", openai_node),
           **node_plan(gw, "vercel_ai.mjs", gw.base + "/v1", vercel)}
    for obs in out.values():
        gw.record({}, json.dumps(obs))
    return out


def node_ok(node_seen, cid):
    obs = node_seen[cid]
    assert obs["ok"], f"{cid}: {obs.get('error')}"
    return obs["result"]


def sent_for(gw, cid):
    return gw.mock_requests("emb-" + cid.replace(":", "-"))


@pytest.mark.parametrize("group", GROUPS)
def test_openai_node_sdk_embeds(gw, node_seen, group):
    cid = f"openai-node:{group}:texts"
    r = node_ok(node_seen, cid)
    texts = TEXTS[:min(BATCH[group], len(TEXTS))]
    assert r["object"] == "list" and r["model"] == VENDORS[group][1]
    assert [d["index"] for d in r["data"]] == list(range(len(texts)))
    # The SDK asked for base64 (its default) and decoded it: the same floats as Python's.
    check_vectors([d["embedding"] for d in r["data"]], sdk_vectors(gw, group, texts), group)
    assert r["usage"]["prompt_tokens"] > 0 and r["usage"]["total_tokens"] == r["usage"]["prompt_tokens"]
    [sent] = sent_for(gw, cid)
    assert sent["path"] == VENDORS[group][0]


def test_openai_node_sdk_dimensions_reach_gemini(gw, node_seen):
    cid = "openai-node:mock-gemini:dimensions"
    r = node_ok(node_seen, cid)
    assert [len(d["embedding"]) for d in r["data"]] == [256] * len(TEXTS)
    [sent] = sent_for(gw, cid)
    assert [q["outputDimensionality"] for q in sent["body"]["requests"]] == [256] * len(TEXTS)
    assert [q["content"]["parts"][0]["text"] for q in sent["body"]["requests"]] == TEXTS


def test_openai_node_sdk_batch_over_the_vendors_limit_is_split(gw, node_seen):
    cid = "openai-node:mock-dashscope:split"
    r = node_ok(node_seen, cid)
    check_vectors([d["embedding"] for d in r["data"]], sdk_vectors(gw, "mock-dashscope", MANY), "mock-dashscope")
    assert len(sent_for(gw, cid)) == 3


def test_openai_node_sdk_errors(node_seen):
    e = node_seen["openai-node:mock-dashscope:tokens"]["error"]
    assert (e["class"], e["status"]) == ("BadRequestError", 400), e
    assert e["body"]["param"] == "input" and "text only" in e["body"]["message"], e
    e = node_seen["openai-node:mock-gemini:error-429"]["error"]
    assert (e["class"], e["status"]) == ("RateLimitError", 429), e
    assert e["body"]["code"] == "UPSTREAM_RATE_LIMIT", e


@pytest.mark.parametrize("group", GROUPS)
def test_vercel_ai_embed_and_embed_many(gw, node_seen, group):
    texts = TEXTS[:min(BATCH[group], len(TEXTS))]
    one = node_ok(node_seen, f"vercel:{group}:embed")
    [vector] = one["embeddings"]
    assert vector == pytest.approx(sdk_vectors(gw, group, TEXTS[1:2])[0], abs=1e-6)
    assert len(vector) == dims(group)
    assert one["usage"]["tokens"] > 0
    many = node_ok(node_seen, f"vercel:{group}:many")
    check_vectors(many["embeddings"], sdk_vectors(gw, group, texts), group)
    if group in ("mock-dashscope", "mock-bedrock"):
        # The vendor's count (a token per word at the mock), as the SDK's usage.
        assert many["usage"]["tokens"] == sum(len(t.split()) for t in texts)
    assert len(sent_for(gw, f"vercel:{group}:many")) == 1


def test_vercel_ai_dimensions(gw, node_seen):
    [vector] = node_ok(node_seen, "vercel:mock-gemini:dimensions")["embeddings"]
    assert len(vector) == 256
    [sent] = sent_for(gw, "vercel:mock-gemini:dimensions")
    assert sent["body"]["requests"][0]["outputDimensionality"] == 256


@pytest.mark.parametrize("cid,texts,limit", [("vercel:mock-dashscope:split", MANY, 10),
                                             ("vercel:mock-bedrock:split", TEXTS[:2], 1)])
def test_vercel_ai_embed_many_over_a_small_vendor_limit_is_split(gw, node_seen, cid, texts, limit):
    """embedMany batches by the OpenAI model's 2048; the gateway splits that
    by the vendor's limit."""
    group = cid.split(":")[1]
    many = node_ok(node_seen, cid)
    check_vectors(many["embeddings"], sdk_vectors(gw, group, texts), group)
    assert len(sent_for(gw, cid)) == -(-len(texts) // limit)


def test_vercel_ai_rate_limit_is_retryable(node_seen):
    obs = node_seen["vercel:mock-openai:error-429"]
    assert not obs["ok"], obs
    e = obs["error"]
    assert e["api_call_error"] and e["statusCode"] == 429 and e["isRetryable"] is True, e


# ---------------------------------------------------------------- rate limits

INPUT_LIMITED_KEY = "gw-test-key-embeddings-input-limit"
TOTAL_LIMITED_KEY = "gw-test-key-embeddings-total-limit"
INPUT_LIMIT = 30


def limited_config(config):
    """Two keys of their own: 30 input tokens a minute, and 100 tokens
    (input and output) a minute with the default output reservation (4096,
    more than that limit); refuse_on_estimate on, so a request whose
    estimate does not fit is refused at admission."""
    configure_test_gateway(config)
    config["auth"]["keys"] += [
        {"name": "emb-input", "sha256": gateway.key_hash(INPUT_LIMITED_KEY), "groups": ["*"]},
        {"name": "emb-total", "sha256": gateway.key_hash(TOTAL_LIMITED_KEY), "groups": ["*"]},
    ]
    config["limits"]["rate"] = [
        {"key": "emb-input", "tokens_per_minute": INPUT_LIMIT, "tokens": "input"},
        {"key": "emb-total", "tokens_per_minute": 100},
    ]
    config["limits"]["refuse_on_estimate"] = True


def fresh_minute(need=15):
    """The next minute's window when fewer than `need` seconds are left in
    this one, so the test's requests all fall in one window."""
    left = 60 - time.time() % 60
    if left < need:
        time.sleep(left + 0.01)


def test_embeddings_count_against_an_input_token_limit(tmp_path, test_id):
    """Embeddings are charged their input tokens (DashScope's own count: a
    token per word at the mock): two calls of 10 words use 20 of 30; a
    call of 40 words would exceed the limit and is the gateway's 429
    RATE_LIMITED before any vendor call, through the OpenAI SDK as its
    RateLimitError; a short one still fits. An embedding has no output, so
    no output tokens are reserved for it: a 3-word embedding fits in a
    100-token total limit that the default 4096-token output reservation
    would exceed."""
    ten_words = [" ".join(f"{w}{i}" for i in range(10)) for w in "ab"]
    forty_words = " ".join(f"w{i}" for i in range(40))
    with own_gateway(tmp_path, edit=limited_config) as limited:
        fresh_minute()
        client = openai.OpenAI(base_url=limited.base + "/v1", api_key=INPUT_LIMITED_KEY, max_retries=0,
                               default_headers={"x-model-group": "mock-dashscope", "x-test-id": test_id})
        for i, text in enumerate(ten_words):
            r = client.embeddings.create(model=MODEL, input=text, extra_headers={"x-request-id": f"emb-ok-{i}"})
            assert r.usage.prompt_tokens == 10
        assert len(limited.mock_requests(test_id)) == 2
        with pytest.raises(openai.RateLimitError) as e:
            client.embeddings.create(model=MODEL, input=forty_words, extra_headers={"x-request-id": "emb-refused"})
        err = e.value.body
        assert err["code"] == "RATE_LIMITED" and err["type"] == "tokens", err
        assert f"input tokens per minute (this key): Limit {INPUT_LIMIT}, Used 20," in err["message"], err
        assert e.value.response.headers["x-ratelimit-limit-tokens"] == str(INPUT_LIMIT)
        assert e.value.response.headers["x-ratelimit-remaining-tokens"] == str(INPUT_LIMIT - 20)
        assert len(limited.mock_requests(test_id)) == 2, "refused before any vendor call"
        assert client.embeddings.create(model=MODEL, input="hi").usage.prompt_tokens == 1
        # The access log: both metered as embeddings under the key, the refusal with no vendor attempt.
        ok, refused = log_for(limited, "emb-ok-0"), log_for(limited, "emb-refused")
        assert (ok["operation"], ok["key"], ok["status"], ok["prompt_tokens"]) == \
            ("embeddings", "emb-input", 200, 10), ok
        assert (refused["operation"], refused["key"], refused["status"], refused["code"], refused["attempts"]) == \
            ("embeddings", "emb-input", 429, "RATE_LIMITED", 0), refused

        total = openai.OpenAI(base_url=limited.base + "/v1", api_key=TOTAL_LIMITED_KEY, max_retries=0,
                              default_headers={"x-model-group": "mock-dashscope"})
        remaining = []
        for _ in range(2):
            r = total.embeddings.with_raw_response.create(model=MODEL, input="one two three")
            assert r.parse().usage.prompt_tokens == 3
            assert r.headers["x-ratelimit-limit-tokens"] == "100"
            remaining.append(int(r.headers["x-ratelimit-remaining-tokens"]))
        # Each admission reserves the input's estimate alone; the first was charged its 3 input tokens.
        assert 100 - remaining[0] <= 10 and remaining[1] == remaining[0] - 3, remaining
