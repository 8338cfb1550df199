"""Model discovery through a real Envoy (both hosts): every mock provider's
model list read through its own API (the mock serves each vendor's list with
its paging, members, credentials and errors), listed by each surface with
the real SDKs, routed by vendor id and alias, a model removed at run time
flagged and avoided, a failing list call keeping the last good list, a key
seeing only what its groups reach, and one read per proxy however many
workers. Every wait is a bounded poll of a condition."""

import json
import time
import urllib.parse
import urllib.request

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from conftest import (ALL_GROUPS_KEY, OPENAI_ONLY_KEY, Gateway, configure_test_gateway,
                      gateway, own_gateway)

# Every mock provider's list, as the mock serves it at start (mock/src/models/mod.rs).
DISCOVERED = {
    "mock-openai": ["gpt-4o-mini", "mock-gpt-4o", "mock-gpt-small", "gpt-5.6", "mock-gpt-4o-32k",
                    "text-embedding-3-small", "text-embedding-3-large"],
    "mock-anthropic": ["claude-haiku-4-5-20251001", "mock-claude-sonnet", "mock-claude-small",
                       "mock-claude-32k"],
    "mock-gemini": ["gemini-2.5-flash", "gemini-2.5-pro", "mock-gemini-flash", "mock-gemini-small",
                    "gemini-embedding-001"],
    "mock-azure": ["mock-gpt4o-deployment"],
    "mock-bedrock": ["anthropic.claude-3-haiku-20240307-v1:0", "us.anthropic.claude-sonnet-4-20250514-v1:0"],
    "mock-dashscope": ["qwen-plus", "qwen3-32b"],
}
HI = [{"role": "user", "content": "hi"}]


def edit(config):
    """The shipped configuration, with short intervals, retired models
    avoided, an alias, and a group of two providers."""
    configure_test_gateway(config)
    config["discovery"].update(interval_seconds=2, retry_seconds=1, timeout_ms=1500, avoid_retired=True,
                               aliases={"claude-latest": "claude-*"})
    config["model_groups"]["disc-pair"] = {"candidates": [
        {"cluster": "mock_openai", "provider": "mock-openai", "model": "gpt-4o-mini", "weight": 1000},
        {"cluster": "mock_anthropic", "provider": "mock-anthropic", "model": "mock-claude-sonnet", "weight": 1}]}


@pytest.fixture(scope="module")
def dgw(tmp_path_factory):
    with own_gateway(tmp_path_factory.mktemp("envoy-discovery"), edit=edit) as g:
        wait_for(lambda: listed(g) >= {m for ms in DISCOVERED.values() for m in ms}, "every list read")
        yield g


def wait_for(condition, what, timeout=30.0):
    """A bounded poll: `condition()` true within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def models(g, key=ALL_GROUPS_KEY, **headers):
    status, _, body = g.request("GET", "/v1/models", headers={"authorization": f"Bearer {key}", **headers})
    assert status == 200, body
    return json.loads(body)


def listed(g, key=ALL_GROUPS_KEY):
    return {m["id"] for m in models(g, key)["data"]}


def mock(g, change=None):
    """The mock's catalogs (`GET /_mock/models`), after `change` if given."""
    data = json.dumps(change).encode() if change is not None else None
    req = urllib.request.Request(f"{g.mock}/_mock/models", data=data, method="POST" if data else "GET",
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def chat(g, model, key=ALL_GROUPS_KEY, **headers):
    return g.chat({"model": model, "messages": HI}, authorization=f"Bearer {key}", **headers)


# ------------------------------------------------------------ listings

def test_the_openai_sdk_lists_groups_then_discovered_models(dgw):
    c = openai.OpenAI(api_key=ALL_GROUPS_KEY, base_url=f"{dgw.base}/v1", max_retries=0)
    data = c.models.list().data
    ids = [m.id for m in data]
    groups = [i for i in ids if i in gateway_groups(dgw)]
    assert ids[:len(groups)] == groups, "the groups first"
    for provider, names in DISCOVERED.items():
        for name in names:
            m = next(m for m in data if m.id == name)
            assert m.owned_by == provider, m
    mini = next(m for m in data if m.id == "gpt-4o-mini").model_dump()
    # OpenAI's list says no window: the shipped table does.
    assert (mini["context_window"], mini["max_output_tokens"]) == (128_000, 16_384)
    assert mini["created"] == 1_700_000_002, "the vendor's creation time"
    # The alias, as the model it names now.
    alias = next(m for m in data if m.id == "claude-latest")
    assert alias.owned_by == "mock-anthropic"
    assert c.models.retrieve("qwen3-32b").owned_by == "mock-dashscope"
    with pytest.raises(openai.NotFoundError):
        c.models.retrieve("no-such-model")


def gateway_groups(g):
    return {"mock-openai", "mock-anthropic", "mock-gemini", "mock-azure", "mock-failover", "mock-ab",
            "mock-bedrock", "mock-dashscope", "disc-pair"}


def test_the_anthropic_sdk_lists_windows_its_vendor_said(dgw):
    c = anthropic.Anthropic(api_key=ALL_GROUPS_KEY, base_url=dgw.base, max_retries=0)
    page = c.models.list(limit=1000)
    ids = [m.id for m in page.data]
    assert "mock-anthropic" in ids and "claude-haiku-4-5-20251001" in ids
    haiku = c.models.retrieve("claude-haiku-4-5-20251001")
    assert (haiku.max_input_tokens, haiku.max_tokens) == (200_000, 64_000)
    assert haiku.created_at.year == 2025
    assert haiku.display_name == "claude-haiku-4-5-20251001"
    group = c.models.retrieve("mock-anthropic")
    assert group.display_name == "mock-anthropic" and group.max_input_tokens is None


def test_the_google_genai_sdk_lists_limits_and_methods(dgw):
    c = genai.Client(api_key=ALL_GROUPS_KEY, http_options=types.HttpOptions(
        base_url=dgw.base, retry_options=types.HttpRetryOptions(attempts=1)))
    found = {m.name: m for m in c.models.list(config={"page_size": 1000})}
    flash = found["models/gemini-2.5-flash"]
    assert (flash.input_token_limit, flash.output_token_limit) == (1_048_576, 65_536)
    assert "generateContent" in flash.supported_actions
    embedder = found["models/gemini-embedding-001"]
    assert embedder.supported_actions == ["embedContent", "batchEmbedContents"]
    assert "models/mock-gemini" in found, "the groups too"
    # And one, by name.
    assert c.models.get(model="gemini-2.5-pro").input_token_limit == 1_048_576


def test_a_key_sees_and_reaches_only_what_its_groups_allow(dgw):
    mine = listed(dgw, OPENAI_ONLY_KEY)
    assert mine == {"mock-openai", *DISCOVERED["mock-openai"]}
    status, _, _ = dgw.request("GET", "/v1/models/claude-haiku-4-5-20251001",
                               headers={"authorization": f"Bearer {OPENAI_ONLY_KEY}"})
    assert status == 404, "not reachable, not revealed"
    # Its request naming a Claude model is not routed to Anthropic: it goes
    # where it went before discovery (the default group, its own mapping).
    status, headers, body = chat(dgw, "claude-haiku-4-5-20251001", key=OPENAI_ONLY_KEY)
    assert status == 200, body
    assert (headers["x-llm-provider"], headers["x-llm-model"]) == ("mock-openai", "mock-gpt-4o")


# ------------------------------------------------------------- routing

@pytest.mark.parametrize("model,provider,vendor_model", [
    ("gemini-2.5-flash", "mock-gemini", "gemini-2.5-flash"),
    ("qwen-plus", "mock-dashscope", "qwen-plus"),
    ("us.anthropic.claude-sonnet-4-20250514-v1:0", "mock-bedrock", "us.anthropic.claude-sonnet-4-20250514-v1:0"),
    ("mock-gpt4o-deployment", "mock-azure", "mock-gpt4o-deployment"),
    # The default group first when its provider lists the model.
    ("gpt-4o-mini", "mock-openai", "gpt-4o-mini"),
    # The newest match of the alias's glob.
    ("claude-latest", "mock-anthropic", "claude-haiku-4-5-20251001"),
])
def test_a_discovered_model_is_routed_to_a_provider_that_lists_it(dgw, test_id, model, provider, vendor_model):
    status, headers, body = chat(dgw, model, **{"x-test-id": test_id})
    assert status == 200, body
    assert (headers["x-llm-provider"], headers["x-llm-model"]) == (provider, vendor_model)
    [sent] = dgw.mock_requests(test_id)
    assert vendor_model in urllib.parse.unquote(sent["path"]) + json.dumps(sent["body"])


def test_a_group_named_by_the_model_still_wins(dgw):
    status, headers, _ = chat(dgw, "mock-gemini")
    assert (status, headers["x-llm-model"]) == (200, "mock-gemini-flash")


# ------------------------------------------------ retired models, failures

def retired(g, provider, model):
    models(g)  # the native host sets its gauges from a request's worker
    return g.stat(f"wasmcustom.llm_gateway.discovery_retired;provider={provider};model={model}")


def provider_of(g, user):
    return chat(g, "disc-pair", **{"x-user-id": user})[1].get("x-llm-provider")


def test_a_model_removed_at_the_vendor_is_flagged_and_avoided(dgw):
    users = [f"u{i}" for i in range(5)]
    before = [provider_of(dgw, u) for u in users]
    assert before.count("mock-openai") >= 4, before
    assert retired(dgw, "mock-openai", "gpt-4o-mini") == "0"
    mock(dgw, {"vendor": "openai", "remove": ["gpt-4o-mini"]})
    try:
        # Within a read interval (2 s) the next read lacks it: every request
        # of the group goes to the other candidate (until then the vendor
        # answers those naming it with its 404).
        wait_for(lambda: all(provider_of(dgw, u) == "mock-anthropic" for u in users),
                 "gpt-4o-mini avoided", timeout=20)
        assert retired(dgw, "mock-openai", "gpt-4o-mini") == "1"
        assert "gpt-4o-mini" not in listed(dgw)
        log = (dgw.workdir / "envoy.log").read_text()
        assert "provider mock-openai no longer lists model gpt-4o-mini (model groups: disc-pair)" in log
    finally:
        mock(dgw, {"vendor": "openai", "add": ["gpt-4o-mini"]})
    wait_for(lambda: retired(dgw, "mock-openai", "gpt-4o-mini") == "0" and provider_of(dgw, "u0") == "mock-openai",
             "gpt-4o-mini back", timeout=20)


def failures(g, provider):
    models(g)  # the native host sets its gauges from a request's worker
    return g.stat(f"wasmcustom.llm_gateway.discovery_failures;provider={provider}")


@pytest.mark.parametrize("fault", ["error-500", "error-429", "slow=2500"])
def test_a_failing_list_call_keeps_the_last_good_list(dgw, fault):
    calls = mock(dgw)["gemini"]["calls"]
    mock(dgw, {"vendor": "gemini", "fault": fault})
    try:
        wait_for(lambda: (failures(dgw, "mock-gemini") or "0") != "0", f"a failed read ({fault})", timeout=20)
        assert mock(dgw)["gemini"]["calls"] > calls
        # The last good list: still listed, still routed.
        assert set(DISCOVERED["mock-gemini"]) <= listed(dgw)
        status, headers, _ = chat(dgw, "gemini-2.5-flash")
        assert (status, headers["x-llm-provider"]) == (200, "mock-gemini")
    finally:
        mock(dgw, {"vendor": "gemini", "fault": None})
    wait_for(lambda: failures(dgw, "mock-gemini") == "0", "a good read again", timeout=20)


def test_lists_are_read_page_by_page(dgw):
    # Anthropic and Gemini in pages of one: the whole list still arrives.
    calls = mock(dgw)
    mock(dgw, {"vendor": "anthropic", "page_size": 1, "add": ["claude-paged"]})
    mock(dgw, {"vendor": "gemini", "page_size": 1, "add": ["gemini-paged"]})
    try:
        wait_for(lambda: {"claude-paged", "gemini-paged"} <= listed(dgw), "paged lists read", timeout=20)
        after = mock(dgw)
        assert after["anthropic"]["calls"] - calls["anthropic"]["calls"] >= 3
        assert set(DISCOVERED["mock-anthropic"]) <= listed(dgw)
    finally:
        mock(dgw, {"vendor": "anthropic", "page_size": None, "remove": ["claude-paged"]})
        mock(dgw, {"vendor": "gemini", "page_size": None, "remove": ["gemini-paged"]})


def test_an_idle_configured_model_is_rechecked_between_reads(tmp_path):
    """An hour between reads, a re-check after a second idle: a configured
    model removed at the vendor is flagged by its own check (`GET
    /v1/models/{id}`), long before the next read."""
    mock_proc, mock_port = gateway.start_mock()
    envoy = None
    try:
        def rechecked(config):
            edit(config)
            config["discovery"].update(interval_seconds=3600, recheck_after_seconds=1)
        bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={}, edit=rechecked)
        envoy = gateway.start_envoy(bootstrap, tmp_path)
        g = Gateway(envoy.port, envoy.admin_port, mock_port, tmp_path)
        wait_for(lambda: "gpt-4o-mini" in listed(g), "the first read")
        reads = mock(g)["openai"]["calls"]
        mock(g, {"vendor": "openai", "remove": ["gpt-4o-mini"]})
        wait_for(lambda: retired(g, "mock-openai", "gpt-4o-mini") == "1", "flagged by its check", timeout=20)
        assert "gpt-4o-mini" not in listed(g)
        # The checks are calls for one model each, not whole reads: the
        # openai catalog's other models are still listed.
        assert "mock-gpt-4o" in listed(g)
        assert mock(g)["openai"]["calls"] > reads
    finally:
        gateway.stop(envoy)
        gateway.stop(mock_proc)


# ------------------------------------------------------ one read a proxy

def test_one_read_per_proxy_whatever_its_workers(tmp_path):
    """Four workers, both roles in each, every one ticking: each list is
    read once an interval (2 s), not once per worker."""
    mock_proc, mock_port = gateway.start_mock()
    envoy = None
    try:
        def every_2s(config):
            configure_test_gateway(config)
            config["discovery"]["interval_seconds"] = 2
        bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={}, edit=every_2s)
        envoy = gateway.start_envoy(bootstrap, tmp_path, concurrency=4)
        g = Gateway(envoy.port, envoy.admin_port, mock_port, tmp_path)
        wait_for(lambda: {m for ms in DISCOVERED.values() for m in ms} <= listed(g), "every list read")
        vendors = ("openai", "anthropic", "gemini", "azure-deployments", "dashscope", "bedrock", "bedrock-profiles")
        before, started = {v: c["calls"] for v, c in mock(g).items()}, time.monotonic()
        # Until every list was read at least three more times.
        wait_for(lambda: all(mock(g)[v]["calls"] - before[v] >= 3 for v in vendors), "three intervals' reads")
        elapsed = time.monotonic() - started
        after = mock(g)
        for v in vendors:
            # At most one read an interval (and one begun as the window
            # opened): four uncoordinated workers would make four times that.
            assert after[v]["calls"] - before[v] <= elapsed / 2 + 2, (v, elapsed, before[v], after[v])
    finally:
        gateway.stop(envoy)
        gateway.stop(mock_proc)


# ------------------------------------------------------- the shipped config

def test_the_shipped_config_discovers_every_mock_provider(gw):
    """What `make run` serves (envoy/gateway.yaml): each mock provider's
    models listed beside the groups."""
    wait_for(lambda: {m for ms in DISCOVERED.values() for m in ms} <= listed(gw), "every mock list read")
    data = models(gw)["data"]
    assert all(m["owned_by"] == "llm-gateway" for m in data if m["id"].startswith("mock-") and
               m["id"] in {"mock-openai", "mock-anthropic", "mock-gemini"})
