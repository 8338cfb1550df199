"""Configuration fields a default config never exercises, each against the
shipped configuration as the control: one Envoy, one listener per variant of
the filter configuration (same VM, its own plugin config), on ports Envoy
chose (read back from its admin API)."""

import json

import pytest

import gateway
from conftest import Gateway
from sse_client import stream

OK_MSG = [{"role": "user", "content": "hi"}]


def nohold(config):
    config["streaming"] = {"hold_until_first_content": False}


def hold_ms(config):
    config["streaming"] = {"max_hold_ms": 100}


def hold_bytes(config):
    config["streaming"] = {"max_hold_bytes": 1}


def misc(config):
    config["allow_provider_pin"] = True
    config["limits"].update(max_messages=3, max_tools=2)
    del config["default_model_group"]


# Listener name -> the edit of the shipped filter config it runs.
VARIANTS = {"shipped": None, "nohold": nohold, "hold-ms": hold_ms, "hold-bytes": hold_bytes, "misc": misc}


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("envoy-variants")
    mock, mock_port = gateway.start_mock()
    bootstrap = None
    for name, edit in VARIANTS.items():
        b = gateway.build_bootstrap(0, 0, mock_port, env={}, edit=edit)
        # The first: the shipped one (the second, its self-call listener, once).
        listener = b["static_resources"]["listeners"][0]
        listener["name"] = name
        if bootstrap is None:
            bootstrap = b
        else:
            bootstrap["static_resources"]["listeners"].append(listener)
    envoy = None
    try:
        envoy = gateway.start_envoy(bootstrap, workdir)
        assert set(envoy.ports) == set(VARIANTS)
        yield {name: Gateway(port, envoy.admin_port, mock_port, workdir, key=None)
               for name, port in envoy.ports.items()}
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


def stream_request(gw, scenario, group="mock-anthropic"):
    """A stream request answered with an error somewhere: (status, headers, body bytes)."""
    return gw.request("POST", "/v1/chat/completions", {"model": "m", "messages": OK_MSG, "stream": True},
                      {"x-model-group": group, "x-mock-scenario": scenario})


def error_event(data):
    """The error event that ends an SSE body (a failed stream never sends [DONE])."""
    events = [e[len(b"data: "):] for e in data.split(b"\n\n") if e.startswith(b"data: ")]
    assert b"[DONE]" not in events, data
    return json.loads(events[-1])["error"]


# --- streaming.hold_until_first_content, max_hold_ms, max_hold_bytes -------------

# Anthropic's overload as the first event, or after message_start and ping
# (each event 150 ms after the one before).
SCENARIOS = ["stream-error-first", "stream-error-after-start,slow=150"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_held_stream_error_before_content_is_an_http_error(variants, scenario):
    """Control: gating holds the headers, so an error before any content
    becomes the status (and Envoy could retry it)."""
    status, headers, data = stream_request(variants["shipped"], scenario)
    assert status == 503 and headers["content-type"] == "application/json", (status, data)
    assert json.loads(data)["error"]["code"] == "UPSTREAM_BUSY"


@pytest.mark.parametrize("variant,scenario", [
    ("nohold", SCENARIOS[0]),
    ("nohold", SCENARIOS[1]),
    # Released by the second event, 150 ms after the first (limit 100 ms)...
    ("hold-ms", SCENARIOS[1]),
    # ...or by the first translated output waiting (message_start's role
    # chunk; limit 1 byte).
    ("hold-bytes", SCENARIOS[1]),
])
def test_released_stream_reports_the_error_in_stream(variants, variant, scenario):
    status, headers, data = stream_request(variants[variant], scenario)
    assert status == 200, (status, data)
    assert headers["content-type"] == "text/event-stream"
    error = error_event(data)
    assert (error["code"], error["provider"]) == ("UPSTREAM_BUSY", "mock-anthropic"), data


def test_hold_limits_do_not_release_a_stream_error_first(variants):
    """The limits count from the first event: an error that IS the first
    event is still the status under both (the limits changed nothing else)."""
    for variant in ("hold-ms", "hold-bytes"):
        status, _, data = stream_request(variants[variant], SCENARIOS[0])
        assert status == 503 and json.loads(data)["error"]["code"] == "UPSTREAM_BUSY", (variant, data)


# --- allow_provider_pin ----------------------------------------------------------------

def test_provider_pin_when_allowed(variants):
    gw, shipped = variants["misc"], variants["shipped"]
    for user in ("pin-a", "pin-b", "pin-c", "pin-d"):
        for provider in ("mock-openai", "mock-anthropic"):
            headers = {"x-model-group": "mock-ab", "x-user-id": user, "x-llm-provider": provider}
            status, got, body = gw.chat({"model": "m", "messages": OK_MSG}, **headers)
            assert status == 200 and got["x-llm-provider"] == provider, body
    # Control: the shipped config drops the header; the user's candidate serves.
    served = {shipped.chat({"model": "m", "messages": OK_MSG},
                           **{"x-model-group": "mock-ab", "x-user-id": "pin-a", "x-llm-provider": p})[1]["x-llm-provider"]
              for p in ("mock-openai", "mock-anthropic")}
    assert len(served) == 1
    status, _, body = gw.chat({"model": "m", "messages": OK_MSG},
                              **{"x-model-group": "mock-ab", "x-llm-provider": "mock-gemini"})
    assert status == 400 and body["error"]["code"] == "INVALID_REQUEST", body
    assert body["error"]["param"] == "x-llm-provider"
    assert body["error"]["message"] == "no candidate of group 'mock-ab' is on provider 'mock-gemini'"


# --- limits.max_messages, limits.max_tools -------------------------------------------

def test_non_default_message_and_tool_limits(variants):
    gw = variants["misc"]
    three = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    four = three + [{"role": "user", "content": "d"}]
    assert gw.chat({"model": "mock-openai", "messages": three})[0] == 200
    status, _, body = gw.chat({"model": "mock-openai", "messages": four})
    assert status == 400 and body["error"]["code"] == "INVALID_REQUEST", body
    assert body["error"]["param"] == "messages"
    tools = [{"type": "function", "function": {"name": f"f{i}", "parameters": {"type": "object"}}} for i in range(3)]
    assert gw.chat({"model": "mock-openai", "messages": OK_MSG, "tools": tools[:2]})[0] == 200
    status, _, body = gw.chat({"model": "mock-openai", "messages": OK_MSG, "tools": tools})
    assert status == 400 and body["error"]["code"] == "INVALID_REQUEST", body
    assert body["error"]["param"] == "tools"
    # Control: the shipped limits (1000 messages, 128 tools) take both.
    shipped = variants["shipped"]
    assert shipped.chat({"model": "mock-openai", "messages": four})[0] == 200
    assert shipped.chat({"model": "mock-openai", "messages": OK_MSG, "tools": tools})[0] == 200


# --- default_model_group ------------------------------------------------------------

def test_without_a_default_group_an_unknown_model_is_404(variants):
    body = {"model": "no-such-model", "messages": OK_MSG}
    status, _, resp = variants["misc"].chat(body)
    assert status == 404 and resp["error"]["code"] == "MODEL_NOT_FOUND", resp
    # A group named by header or model still routes.
    assert variants["misc"].chat(body, **{"x-model-group": "mock-openai"})[0] == 200
    assert variants["misc"].chat(dict(body, model="mock-anthropic"))[1]["x-llm-provider"] == "mock-anthropic"
    # Control: the shipped default (mock-openai) serves it.
    status, headers, _ = variants["shipped"].chat(body)
    assert status == 200 and headers["x-llm-provider"] == "mock-openai"


# --- diagnostics: off unless configured ---------------------------------------

def test_the_shipped_config_has_no_diagnostics_view_and_routes_nothing_under_it(variants):
    gw = variants["shipped"]
    for method, path in (("GET", "/llm-gateway/"), ("GET", "/llm-gateway/api/view"),
                         ("POST", "/llm-gateway/v1/chat/completions")):
        body = {"model": "mock-openai", "messages": OK_MSG} if method == "POST" else None
        status, _, data = gw.request(method, path, body, {"x-test-id": "variants-diagnostics-off"})
        assert status == 404, data
        assert json.loads(data)["error"]["code"] == "MODEL_NOT_FOUND"
    assert gw.mock_requests("variants-diagnostics-off") == []
