"""The response cache (docs/src/features/cache.md) through a real Envoy,
in-process: with the real clients (openai's Chat Completions and
Responses, anthropic, google-genai), each streamed and not, a repeated
prompt is answered from the cache (`x-llm-cache: hit`, `age`) in the
asker's own shape and the mock is not called again; the same prompt asked
through another API hits the same entry; keys are isolated unless the
group shares its entries; `cache-control` skips the lookup or the cache;
a small group evicts its least recently used; an entry expires after its
time to live; a hit counts against the request limits and is metered as
a hit (access log, metrics).

One gateway for the whole file; every test asks its own prompt (its test
id is in it), so no test finds another's entries."""

import json
import time
import urllib.request

import anthropic
import httpx2
import openai
import pytest
from google import genai
from google.genai import types

import gateway
from conftest import ALL_GROUPS_KEY, configure_test_gateway, log_for, own_gateway

OTHER_KEY = "gw-test-key-cache-other"
LIMITED_KEY = "gw-test-key-cache-limited"
# The mock groups cached in this file's gateway, and the API each one's vendor speaks.
CACHED = ["mock-openai", "mock-anthropic", "mock-gemini", "mock-bedrock"]
# A group whose entries every key shares, one small enough to evict, one
# whose entries live two seconds, one that caches deterministic requests only.
SHARED, SMALL, BRIEF, DETERMINISTIC = "cache-shared", "cache-small", "cache-brief", "cache-deterministic"
# The small group's bound: a handful of the mock's short answers.
SMALL_BYTES = 1500
MAX_TOKENS = 64


def with_cache(config):
    configure_test_gateway(config)
    config["auth"]["keys"] += [
        {"name": "cache-other", "sha256": gateway.key_hash(OTHER_KEY), "groups": ["*"]},
        {"name": "cache-limited", "sha256": gateway.key_hash(LIMITED_KEY), "groups": ["*"]},
    ]
    config["limits"]["rate"] = [{"key": "cache-limited", "requests_per_minute": 3}]
    # USD per million tokens: what a hit saves is priced.
    config["providers"]["mock-openai"]["prices"] = {"*": {"input": 1000, "output": 2000}}
    for group in CACHED:
        config["model_groups"][group]["cache"] = {}
    groups = config["model_groups"]
    groups[SHARED] = {"cluster": "mock_openai", "cache": {"scope": "group"}}
    groups[SMALL] = {"cluster": "mock_openai", "cache": {"max_bytes": SMALL_BYTES, "max_entry_bytes": 1000}}
    groups[BRIEF] = {"cluster": "mock_openai", "cache": {"ttl_seconds": 2}}
    groups[DETERMINISTIC] = {"cluster": "mock_openai", "cache": {"when": "deterministic"}}


@pytest.fixture(scope="module")
def cgw(tmp_path_factory):
    with own_gateway(tmp_path_factory.mktemp("envoy-cache"), edit=with_cache) as gw:
        yield gw


def seen(gw):
    """An httpx hook: every response body goes to the secrets scan."""
    def hook(response):
        response.read()
        gw.record(dict(response.headers), response.content)
    return hook


def oai(gw, group, test_id, key=ALL_GROUPS_KEY, **headers):
    return openai.OpenAI(base_url=gw.base + "/v1", api_key=key, max_retries=0, timeout=30,
                         default_headers={"x-model-group": group, "x-test-id": test_id, **headers})


def claude(gw, group, test_id, key=ALL_GROUPS_KEY):
    http = httpx2.Client(event_hooks={"response": [seen(gw)]})
    return anthropic.Anthropic(api_key=key, base_url=gw.base, max_retries=0, http_client=http,
                               default_headers={"x-model-group": group, "x-test-id": test_id})


def gemini(gw, test_id, key=ALL_GROUPS_KEY):
    return genai.Client(api_key=key, http_options=types.HttpOptions(
        base_url=gw.base, headers={"x-test-id": test_id}, retry_options=types.HttpRetryOptions(attempts=1)))


def vendor_calls(gw, test_id):
    return len(gw.mock_requests(test_id))


def chat_raw(gw, group, test_id, prompt, stream=False, key=ALL_GROUPS_KEY, **headers):
    """A Chat Completions request without an SDK: (status, headers, body)."""
    body = {"model": "any", "max_tokens": MAX_TOKENS, "messages": [{"role": "user", "content": prompt}]}
    if stream:
        body["stream"] = True
    return gw.request("POST", "/v1/chat/completions", body,
                      {"x-model-group": group, "x-test-id": test_id, "authorization": f"Bearer {key}", **headers})


def chat_text(body):
    return json.loads(body)["choices"][0]["message"]["content"]


# --- The real clients, streamed and not -------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("group", ["mock-openai", "mock-anthropic"])
def test_openai_chat_repeats_are_hits(cgw, group, stream, test_id):
    c = oai(cgw, group, test_id)
    ask = dict(model="any", max_tokens=MAX_TOKENS, messages=[{"role": "user", "content": f"{test_id}: hello"}])

    def once():
        if stream:
            raw = c.chat.completions.with_raw_response.create(stream=True, stream_options={"include_usage": True}, **ask)
            chunks = list(raw.parse())
            text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
            usage = chunks[-1].usage
            assert chunks[-2].choices[0].finish_reason == "stop"
            return raw.headers, text, usage
        raw = c.chat.completions.with_raw_response.create(**ask)
        answer = raw.parse()
        assert answer.choices[0].finish_reason == "stop"
        return raw.headers, answer.choices[0].message.content, answer.usage

    first_headers, first, first_usage = once()
    assert first_headers["x-llm-cache"] == "miss" and "age" not in first_headers
    headers, again, usage = once()
    assert headers["x-llm-cache"] == "hit", dict(headers)
    assert int(headers["age"]) >= 0
    assert again == first and test_id in again
    assert (usage.prompt_tokens, usage.completion_tokens) == (first_usage.prompt_tokens, first_usage.completion_tokens)
    assert vendor_calls(cgw, test_id) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_openai_responses_repeats_are_hits(cgw, stream, test_id):
    c = oai(cgw, "mock-anthropic", test_id)
    ask = dict(model="any", max_output_tokens=MAX_TOKENS, input=f"{test_id}: hello", store=False)

    def once():
        if stream:
            raw = c.responses.with_raw_response.create(stream=True, **ask)
            events = list(raw.parse())
            assert events[-1].type == "response.completed", [e.type for e in events]
            return raw.headers, events[-1].response.output_text
        raw = c.responses.with_raw_response.create(**ask)
        return raw.headers, raw.parse().output_text

    first_headers, first = once()
    assert first_headers["x-llm-cache"] == "miss"
    headers, again = once()
    assert headers["x-llm-cache"] == "hit"
    assert again == first and test_id in again
    assert vendor_calls(cgw, test_id) == 1


def test_a_responses_request_the_gateway_stores_is_not_answered_from_the_cache(cgw, test_id):
    """A stored response gets the gateway's id and input items as it passes
    (the response store): its answer is cached, never given from the cache."""
    c = oai(cgw, "mock-anthropic", test_id)
    first = c.responses.with_raw_response.create(model="any", input=f"{test_id}: hi", max_output_tokens=MAX_TOKENS)
    again = c.responses.with_raw_response.create(model="any", input=f"{test_id}: hi", max_output_tokens=MAX_TOKENS)
    assert first.headers["x-llm-cache"] == again.headers["x-llm-cache"] == "miss"
    assert again.parse().id.startswith("resp_gw")
    # Asked with store: false, it is the entry the stored one left.
    hit = c.responses.with_raw_response.create(model="any", input=f"{test_id}: hi", max_output_tokens=MAX_TOKENS,
                                               store=False)
    assert hit.headers["x-llm-cache"] == "hit"
    assert vendor_calls(cgw, test_id) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("group", ["mock-anthropic", "mock-bedrock"])
def test_anthropic_repeats_are_hits(cgw, group, stream, test_id):
    c = claude(cgw, group, test_id)
    ask = dict(model="any", max_tokens=MAX_TOKENS, messages=[{"role": "user", "content": f"{test_id}: hello"}])

    def once():
        if stream:
            with c.messages.with_streaming_response.create(stream=True, **ask) as raw:
                headers = raw.headers
                events = [json.loads(line[6:]) for line in raw.iter_lines() if line.startswith("data: ")]
            assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
            text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
            stop = [e for e in events if e["type"] == "message_delta"][0]
            assert stop["delta"]["stop_reason"] == "end_turn"
            return headers, text, stop["usage"]["output_tokens"]
        raw = c.messages.with_raw_response.create(**ask)
        message = raw.parse()
        assert message.stop_reason == "end_turn"
        return raw.headers, message.content[0].text, message.usage.output_tokens

    first_headers, first, first_out = once()
    assert first_headers["x-llm-cache"] == "miss"
    headers, again, out = once()
    assert headers["x-llm-cache"] == "hit"
    assert again == first and test_id in again and out == first_out
    assert vendor_calls(cgw, test_id) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_google_genai_repeats_are_hits(cgw, stream, test_id):
    c = gemini(cgw, test_id)
    contents = f"{test_id}: hello"
    config = types.GenerateContentConfig(max_output_tokens=MAX_TOKENS)

    def once(request_id):
        g = genai.Client(api_key=ALL_GROUPS_KEY, http_options=types.HttpOptions(
            base_url=cgw.base, headers={"x-test-id": test_id, "x-request-id": request_id},
            retry_options=types.HttpRetryOptions(attempts=1)))
        if stream:
            chunks = list(g.models.generate_content_stream(model="mock-gemini", contents=contents, config=config))
            assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
            return "".join(ch.text or "" for ch in chunks), chunks[-1].usage_metadata.candidates_token_count
        answer = g.models.generate_content(model="mock-gemini", contents=contents, config=config)
        return answer.text, answer.usage_metadata.candidates_token_count

    first, first_out = once(f"{test_id}-1")
    again, out = once(f"{test_id}-2")
    assert log_for(cgw, f"{test_id}-1")["cache"] == "miss"
    assert log_for(cgw, f"{test_id}-2")["cache"] == "hit"
    assert again == first and test_id in again and out == first_out
    assert vendor_calls(cgw, test_id) == 1
    del c


# --- One entry, every client API --------------------------------------------

def test_the_same_prompt_through_another_api_hits_the_same_entry(cgw, test_id):
    # The model the client names is part of the key: each names the group.
    prompt = f"{test_id}: one prompt, four APIs"
    system = "answer briefly"
    chat = oai(cgw, "mock-anthropic", test_id).chat.completions.with_raw_response.create(
        model="mock-anthropic", max_tokens=MAX_TOKENS,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}])
    assert chat.headers["x-llm-cache"] == "miss"
    text = chat.parse().choices[0].message.content

    messages = claude(cgw, "mock-anthropic", test_id).messages.with_raw_response.create(
        model="mock-anthropic", max_tokens=MAX_TOKENS, system=system, messages=[{"role": "user", "content": prompt}])
    assert messages.headers["x-llm-cache"] == "hit"
    assert messages.parse().content[0].text == text

    responses = oai(cgw, "mock-anthropic", test_id).responses.with_raw_response.create(
        model="mock-anthropic", max_output_tokens=MAX_TOKENS, instructions=system, input=prompt, store=False)
    assert responses.headers["x-llm-cache"] == "hit"
    assert responses.parse().output_text == text

    g = genai.Client(api_key=ALL_GROUPS_KEY, http_options=types.HttpOptions(
        base_url=cgw.base, headers={"x-test-id": test_id, "x-request-id": f"{test_id}-gemini"},
        retry_options=types.HttpRetryOptions(attempts=1)))
    answer = g.models.generate_content(model="mock-anthropic", contents=prompt, config=types.GenerateContentConfig(
        system_instruction=system, max_output_tokens=MAX_TOKENS))
    assert answer.text == text
    assert log_for(cgw, f"{test_id}-gemini")["cache"] == "hit"
    assert vendor_calls(cgw, test_id) == 1


# --- Isolation, control, bounds, time ---------------------------------------

def test_a_key_never_gets_another_keys_entry_unless_the_group_shares_them(cgw, test_id):
    prompt = f"{test_id}: mine"
    assert chat_raw(cgw, "mock-openai", test_id, prompt)[1]["x-llm-cache"] == "miss"
    status, headers, _ = chat_raw(cgw, "mock-openai", test_id, prompt, key=OTHER_KEY)
    assert (status, headers["x-llm-cache"]) == (200, "miss")
    # Nor does another group's request, the same prompt.
    assert chat_raw(cgw, SHARED, test_id, prompt)[1]["x-llm-cache"] == "miss"
    # A shared group: every key gets what any key stored.
    status, headers, _ = chat_raw(cgw, SHARED, test_id, prompt, key=OTHER_KEY)
    assert (status, headers["x-llm-cache"]) == (200, "hit")
    assert vendor_calls(cgw, test_id) == 3


def test_cache_control_skips_the_lookup_or_the_whole_cache(cgw, test_id):
    prompt = f"{test_id}: control"
    _, h, first = chat_raw(cgw, "mock-openai", test_id, prompt, **{"cache-control": "no-store"})
    assert h["x-llm-cache"] == "bypass"
    assert chat_raw(cgw, "mock-openai", test_id, prompt)[1]["x-llm-cache"] == "miss", "no-store kept nothing"
    _, h, _ = chat_raw(cgw, "mock-openai", test_id, prompt, **{"cache-control": "no-cache"})
    assert h["x-llm-cache"] == "miss"
    _, h, again = chat_raw(cgw, "mock-openai", test_id, prompt)
    assert h["x-llm-cache"] == "hit" and chat_text(again) == chat_text(first)
    assert vendor_calls(cgw, test_id) == 3


def test_a_deterministic_group_caches_only_requests_for_the_same_answer(cgw, test_id):
    def ask(**extra):
        body = {"model": "any", "messages": [{"role": "user", "content": f"{test_id}: roll"}], **extra}
        return cgw.request("POST", "/v1/chat/completions", body, {"x-model-group": DETERMINISTIC, "x-test-id": test_id})
    assert ask()[1]["x-llm-cache"] == "bypass"
    assert ask()[1]["x-llm-cache"] == "bypass"
    assert ask(temperature=0)[1]["x-llm-cache"] == "miss"
    assert ask(temperature=0)[1]["x-llm-cache"] == "hit"
    assert ask(seed=7, temperature=0.9)[1]["x-llm-cache"] == "miss"
    assert ask(seed=7, temperature=0.9)[1]["x-llm-cache"] == "hit"


def test_only_a_normal_answer_is_stored(cgw, test_id):
    """A vendor error, a filtered answer and one cut short by a stream error are never given again."""
    for scenario in ["error-500", "filtered-answer", "stream-error"]:
        prompt = f"{test_id}: {scenario}"
        stream = scenario == "stream-error"
        for _ in range(2):
            status, headers, _ = chat_raw(cgw, "mock-openai", test_id, prompt, stream=stream,
                                          **{"x-mock-scenario": scenario})
            assert headers.get("x-llm-cache") == "miss", (scenario, status, headers)


def test_a_small_group_evicts_its_least_recently_used(cgw, test_id):
    prompts = [f"{test_id}: number {i}" for i in range(12)]
    for prompt in prompts:
        assert chat_raw(cgw, SMALL, test_id, prompt)[1]["x-llm-cache"] == "miss"
    held = int(cgw.stat(f"wasmcustom.llm_gateway.cache_bytes;group={SMALL}"))
    assert 0 < held <= SMALL_BYTES
    # The newest is still there; the oldest went for the newer ones.
    assert chat_raw(cgw, SMALL, test_id, prompts[-1])[1]["x-llm-cache"] == "hit"
    assert chat_raw(cgw, SMALL, test_id, prompts[0])[1]["x-llm-cache"] == "miss"
    entries = int(cgw.stat(f"wasmcustom.llm_gateway.cache_entries;group={SMALL}"))
    assert 1 < entries < len(prompts)


def test_an_entry_is_given_until_its_time_to_live(cgw, test_id):
    """Envoy's clock cannot be moved (the state service's can: the fleet's
    test): every answer until the entry is gone is a hit younger than the
    group's two seconds, and a miss comes within a bounded wait."""
    prompt = f"{test_id}: brief"
    assert chat_raw(cgw, BRIEF, test_id, prompt)[1]["x-llm-cache"] == "miss"
    deadline = time.monotonic() + 15
    while True:
        _, headers, _ = chat_raw(cgw, BRIEF, test_id, prompt)
        if headers["x-llm-cache"] == "miss":
            break
        assert headers["x-llm-cache"] == "hit" and int(headers["age"]) < 2, dict(headers)
        assert time.monotonic() < deadline, "the entry outlived its time to live"
        time.sleep(0.1)


# --- Accounting --------------------------------------------------------------

def test_a_hit_counts_against_request_limits_and_is_metered_as_a_hit(cgw, test_id):
    prompt = f"{test_id}: limits"
    rid = lambda n: f"{test_id}-{n}"  # noqa: E731
    statuses = []
    for n in range(4):
        status, headers, _ = chat_raw(cgw, "mock-openai", test_id, prompt, key=LIMITED_KEY, **{"x-request-id": rid(n)})
        statuses.append((status, headers.get("x-llm-cache")))
    # A miss, two hits, then the key's three requests a minute are spent.
    assert statuses[:3] == [(200, "miss"), (200, "hit"), (200, "hit")], statuses
    assert statuses[3][0] == 429
    miss, hit = log_for(cgw, rid(0)), log_for(cgw, rid(1))
    assert miss["cache"] == "miss" and miss["prompt_tokens"] > 0 and "cache_saved_usd" not in miss
    assert hit["cache"] == "hit" and hit["prompt_tokens"] == 0 and hit["completion_tokens"] == 0
    assert hit["attempts"] == 0 and hit["cost_usd"] is None
    # A hit saved what the miss cost.
    assert hit["cache_saved_usd"] == pytest.approx(miss["cost_usd"])
    assert int(cgw.stat("wasmcustom.llm_gateway.cache_requests;group=mock-openai;status=hit")) >= 2
    assert int(cgw.stat("wasmcustom.llm_gateway.cache_saved_micro_usd;group=mock-openai")) > 0
    ratio = int(cgw.stat("wasmcustom.llm_gateway.cache_hit_ratio_permille;group=mock-openai"))
    assert 0 < ratio < 1000
