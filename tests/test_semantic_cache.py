"""The semantic cache (docs/src/features/cache.md, "Semantic cache") through
a real Envoy, with the openai SDK: a prompt the exact cache misses is
embedded by the group's embedding group (the mock's embeddings are bags of
words: texts that share words are close, others far), and a paraphrase of
a cached prompt is answered from its entry (`x-llm-cache: semantic-hit`),
whole or streamed, with no generation call at the mock. An unrelated
prompt, another model, other tools, or another key do not hit; an
embedding group that is down leaves the request uncached and answered.

One gateway for the whole file; every prompt carries its test's tag (one
word), so no test finds another's entries."""

import hashlib

import openai
import pytest

import gateway
from conftest import ALL_GROUPS_KEY, configure_test_gateway, log_for, own_gateway

OTHER_KEY = "gw-test-key-semantic-other"
# A group with a semantic cache, one whose embedding group is down.
SEMANTIC, DOWN = "semantic", "semantic-down"
EMBED, EMBED_DOWN = "semantic-embed", "semantic-embed-down"
# The mock's bag-of-words vectors: a paraphrase below scores about 0.8,
# an unrelated prompt about 0.1.
THRESHOLD = 0.7


def edit(config):
    configure_test_gateway(config)
    config["auth"]["keys"].append(
        {"name": "semantic-other", "sha256": gateway.key_hash(OTHER_KEY), "groups": ["*"]})
    config["providers"]["embed-down"] = {"dialect": "openai", "api_key": "sk-mock-openai",
                                         "base_path": "/scenario/error-503",
                                         "models": {"*": "text-embedding-3-small"}}
    semantic = {"embedding_group": EMBED, "embedding_model": "text-embedding-3-small", "threshold": THRESHOLD}
    config["model_groups"].update({
        EMBED: {"candidates": [{"cluster": "mock_openai", "provider": "mock-openai"}]},
        EMBED_DOWN: {"candidates": [{"cluster": "embed_down", "provider": "embed-down"}]},
        SEMANTIC: {"cluster": "mock_openai", "cache": {"semantic": semantic}},
        DOWN: {"cluster": "mock_openai", "cache": {"semantic": dict(semantic, embedding_group=EMBED_DOWN)}},
    })


@pytest.fixture(scope="module")
def sgw(tmp_path_factory):
    with own_gateway(tmp_path_factory.mktemp("envoy-semantic"), edit=edit,
                     extra_clusters=lambda port: [gateway.static_cluster("embed_down", port, "embed-down")]) as g:
        yield g


def tag(test_id):
    return "t" + hashlib.sha256(test_id.encode()).hexdigest()[:12]


def client(gw, test_id, key=ALL_GROUPS_KEY, group=SEMANTIC):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=key, max_retries=0, timeout=30,
                         default_headers={"x-model-group": group, "x-test-id": test_id})


def ask(c, text, **extra):
    """(headers, answer text) of a Chat Completions request."""
    raw = c.chat.completions.with_raw_response.create(
        model=extra.pop("model", "any"), max_tokens=64, messages=[{"role": "user", "content": text}], **extra)
    answer = raw.parse()
    assert answer.choices[0].finish_reason in ("stop", "tool_calls")
    return raw.headers, answer.choices[0].message.content


def calls(gw, test_id):
    """The mock's (generation, embedding) calls of this test."""
    paths = [r["path"] for r in gw.mock_requests(test_id)]
    return (sum(p.endswith("/chat/completions") for p in paths), sum(p.endswith("/embeddings") for p in paths))


def semantic_count(gw, group, outcome):
    return int(gw.stat(f"wasmcustom.llm_gateway.cache_semantic;group={group};outcome={outcome}") or 0)


def test_a_paraphrase_is_a_semantic_hit_and_an_unrelated_prompt_misses(sgw, test_id):
    c, t = client(sgw, test_id), tag(test_id)
    headers, first = ask(c, f"{t} What is the capital city of France?")
    assert headers["x-llm-cache"] == "miss"
    assert calls(sgw, test_id) == (1, 1)
    headers, again = ask(c, f"{t}: tell me what the capital of France is")
    assert headers["x-llm-cache"] == "semantic-hit", dict(headers)
    assert again == first and "age" in headers and headers["x-llm-attempts"] == "0"
    # Embedded, not generated: no second generation call reached the vendor.
    assert calls(sgw, test_id) == (1, 2)
    line = log_for(sgw, headers["x-request-id"])
    assert line["cache"] == "semantic-hit" and line["attempts"] == 0 and line["completion_tokens"] == 0
    headers, _ = ask(c, f"{t} Write a haiku about autumn leaves")
    assert headers["x-llm-cache"] == "miss"
    assert calls(sgw, test_id) == (2, 3)
    assert semantic_count(sgw, SEMANTIC, "hit") >= 1


def test_a_semantic_hit_streams_a_well_formed_stream(sgw, test_id):
    c, t = client(sgw, test_id), tag(test_id)
    _, first = ask(c, f"{t} How many legs does a spider have?")
    raw = c.chat.completions.with_raw_response.create(
        model="any", max_tokens=64, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": f"{t} how many legs has a spider"}])
    assert raw.headers["x-llm-cache"] == "semantic-hit"
    assert raw.headers["content-type"].startswith("text/event-stream")
    chunks = list(raw.parse())
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == first
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "stop"
    assert chunks[-1].usage is not None and not chunks[-1].choices
    assert len({ch.id for ch in chunks}) == 1
    assert calls(sgw, test_id)[0] == 1


def test_other_parameters_or_another_key_never_hit(sgw, test_id):
    c, t = client(sgw, test_id), tag(test_id)
    ask(c, f"{t} Which planet is the largest in the solar system?")
    paraphrase = f"{t} which is the largest planet of the solar system"
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    for extra in [{"model": "another-model"}, {"tools": tools}, {"temperature": 0.2}]:
        headers, _ = ask(c, paraphrase, **extra)
        assert headers["x-llm-cache"] == "miss", extra
    headers, _ = ask(client(sgw, test_id, key=OTHER_KEY), paraphrase)
    assert headers["x-llm-cache"] == "miss"
    assert calls(sgw, test_id)[0] == 5
    # The same paraphrase with the first request's parameters and key: a hit.
    headers, _ = ask(c, paraphrase)
    assert headers["x-llm-cache"] == "semantic-hit"


def test_an_embedding_group_that_is_down_leaves_the_request_uncached(sgw, test_id):
    c, t = client(sgw, test_id, group=DOWN), tag(test_id)
    before = semantic_count(sgw, DOWN, "unavailable")
    headers, first = ask(c, f"{t} Name the longest river in Africa")
    assert headers["x-llm-cache"] == "miss" and first
    headers, _ = ask(c, f"{t} name the longest African river")
    assert headers["x-llm-cache"] == "miss"
    # The exact repeat is still a hit: only the semantic lookup is lost.
    headers, again = ask(c, f"{t} Name the longest river in Africa")
    assert headers["x-llm-cache"] == "hit" and again == first
    generations, embeddings = calls(sgw, test_id)
    assert generations == 2 and embeddings >= 2
    assert semantic_count(sgw, DOWN, "unavailable") >= before + 2
