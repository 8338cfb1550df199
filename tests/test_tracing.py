"""envoy/tracing.yaml: Envoy's OpenTelemetry tracer exports a span per
request, and a child span per upstream attempt, to an OTLP/HTTP receiver
(here, a small one in this file); each carries the gen_ai attributes read
from the filter's state: the request's on the request span, each attempt's
own on its span."""

import copy
import json
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

import gateway
from conftest import ALL_GROUPS_KEY, Gateway, configure_test_gateway
from sse_client import stream

TRACING = gateway.ROOT / "envoy/tracing.yaml"
USER_HI = [{"role": "user", "content": "hi there"}]


def _hcm(bootstrap):
    return bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]


def _value(any_value):
    return getattr(any_value, any_value.WhichOneof("value"))


def _read_body(handler):
    """The request body, sized or chunked (Envoy sends OTLP chunked)."""
    if handler.headers["content-length"] is not None:
        return handler.rfile.read(int(handler.headers["content-length"]))
    assert handler.headers["transfer-encoding"] == "chunked", dict(handler.headers)
    body = b""
    while True:
        size = int(handler.rfile.readline().split(b";")[0], 16)
        chunk = handler.rfile.read(size)
        handler.rfile.readline()
        if size == 0:
            return body
        body += chunk


class OtlpReceiver:
    """OTLP/HTTP on a free loopback port: POST /v1/traces with a protobuf
    ExportTraceServiceRequest; every span lands in `spans` as a dict (name,
    attributes, trace and span ids, parent span id, content type)."""

    def __init__(self):
        self.spans = queue.Queue()
        # Spans taken from the queue by a search, kept for later searches.
        self.seen = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = _read_body(self)
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            receiver.spans.put({
                                "path": self.path,
                                "content_type": self.headers["content-type"],
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "resource": resource,
                                "attributes": {a.key: _value(a.value) for a in span.attributes},
                            })
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, what, found, timeout=15.0):
        """The first `found(spans seen so far)` that is not None, waiting for
        more spans as they arrive."""
        deadline = time.monotonic() + timeout
        while True:
            result = found(self.seen)
            if result is not None:
                return result
            try:
                self.seen.append(self.spans.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"no {what} within {timeout}s; saw {self.seen}")

    def span_for(self, request_id, timeout=15.0):
        """The span of the request with this x-request-id (Envoy tags it as guid:x-request-id)."""
        return self.wait_for(f"span for {request_id}", lambda spans: next(
            (s for s in spans if s["attributes"].get("guid:x-request-id") == request_id), None), timeout)

    def attempt_spans(self, request_span, count, timeout=15.0):
        """The request span's `count` children (one per upstream attempt), in attempt order."""
        def children(spans):
            found = [s for s in spans if s["trace_id"] == request_span["trace_id"]
                     and s["parent_span_id"] == request_span["span_id"]]
            return found if len(found) >= count else None
        found = self.wait_for(f"{count} attempt spans", children, timeout)
        return sorted(found, key=lambda s: int(s["attributes"].get("retry.count", "0")))

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_tracing_config_is_the_gateway_config_plus_tracing():
    """tracing.yaml stays the `make run` gateway: only the HCM's `tracing`
    and `request_id_extension`, the collector cluster and the filter's
    `span_attributes` differ."""
    tracing = yaml.safe_load(TRACING.read_text())
    plain = yaml.safe_load(gateway.TEMPLATE.read_text())
    del _hcm(tracing)["tracing"]
    del _hcm(tracing)["request_id_extension"]
    for role in gateway._wasm_filters(tracing)[1:]:
        config = json.loads(role["configuration"]["value"])
        assert config.pop("span_attributes") is True
        role["configuration"]["value"] = json.dumps(config)
    for role in gateway._wasm_filters(plain)[1:]:
        role["configuration"]["value"] = json.dumps(json.loads(role["configuration"]["value"]))
    clusters = tracing["static_resources"]["clusters"]
    assert clusters[-1]["name"] == "otel_collector"
    del clusters[-1]
    assert tracing == plain, "envoy/tracing.yaml drifted from envoy/gateway.yaml: run scripts/tracing_config.py"


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """The gateway as the tests run it (gateway.yaml with test keys and free
    ports), with tracing.yaml's tracing block and collector cluster."""
    workdir = tmp_path_factory.mktemp("tracing")
    shipped = yaml.safe_load(TRACING.read_text())
    receiver = OtlpReceiver()
    mock, mock_port = gateway.start_mock(log=open(workdir / "mock.log", "w"))
    def edit(config):
        configure_test_gateway(config)
        config["span_attributes"] = True

    bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={}, edit=edit)
    for key in ("tracing", "request_id_extension"):
        _hcm(bootstrap)[key] = copy.deepcopy(_hcm(shipped)[key])
    collector = copy.deepcopy(shipped["static_resources"]["clusters"][-1])
    endpoint = collector["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    endpoint["address"]["socket_address"]["port_value"] = receiver.port
    bootstrap["static_resources"]["clusters"].append(collector)
    # Export each span at once (default: batches of 5, or every 5 s).
    bootstrap["layered_runtime"] = {"layers": [{"name": "static", "static_layer": {
        "tracing.opentelemetry.min_flush_spans": 1}}]}
    envoy = None
    try:
        envoy = gateway.start_envoy(bootstrap, workdir, log_level="info")
        yield Gateway(envoy.port, envoy.admin_port, mock_port, workdir, key=ALL_GROUPS_KEY), receiver
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)
        receiver.stop()


def test_span_carries_group_and_route(traced):
    gw, receiver = traced
    status, _, body = gw.chat({"model": "any", "messages": USER_HI},
                              **{"x-model-group": "mock-failover", "x-request-id": "trace-route-1"})
    assert status == 200, body
    span = receiver.span_for("trace-route-1")
    assert span["path"] == "/v1/traces" and span["content_type"] == "application/x-protobuf"
    assert span["resource"]["service.name"] == "llm-gateway"
    attrs = span["attributes"]
    assert attrs["http.status_code"] == "200"
    assert attrs["llm.model_group"] == "mock-failover"
    # Both attempts: the Anthropic mock's 529 (the vendor's status), then OpenAI.
    assert attrs["llm.route"] == "mock-anthropic-down/mock-claude-sonnet:529,mock-openai/mock-gpt-4o:200"


def test_span_carries_gen_ai_attributes(traced):
    gw, receiver = traced
    status, headers, body = gw.chat({"model": "any", "messages": USER_HI},
                                    **{"x-model-group": "mock-anthropic", "x-request-id": "trace-json-1"})
    assert status == 200, body
    attrs = receiver.span_for("trace-json-1")["attributes"]
    assert attrs["llm.model_group"] == "mock-anthropic"
    # The vendor by the OpenTelemetry conventions; the configured provider apart.
    assert (attrs["gen_ai.provider.name"], attrs["gen_ai.system"], attrs["llm.provider"]) == (
        "anthropic", "anthropic", "mock-anthropic")
    assert attrs["gen_ai.request.model"] == "any"
    assert attrs["gen_ai.response.model"] == body["model"] == "mock-claude-sonnet"
    assert attrs["gen_ai.usage.input_tokens"] == str(body["usage"]["prompt_tokens"])
    assert attrs["gen_ai.usage.output_tokens"] == str(body["usage"]["completion_tokens"])


def test_stream_span_carries_gen_ai_attributes(traced):
    gw, receiver = traced
    status, _, events = stream(gw, {"model": "any", "messages": USER_HI, "stream": True,
                                    "stream_options": {"include_usage": True}},
                               {"x-model-group": "mock-openai", "x-request-id": "trace-stream-1"})
    assert status == 200 and events[-1][1] == "[DONE]"
    [usage] = [e["usage"] for _, e in events if isinstance(e, dict) and e.get("usage")]
    attrs = receiver.span_for("trace-stream-1")["attributes"]
    assert attrs["llm.model_group"] == "mock-openai"
    assert (attrs["gen_ai.provider.name"], attrs["gen_ai.system"], attrs["llm.provider"]) == (
        "openai", "openai", "mock-openai")
    assert attrs["gen_ai.request.model"] == "any"
    assert attrs["gen_ai.response.model"] == "mock-gpt-4o"
    assert attrs["gen_ai.usage.input_tokens"] == str(usage["prompt_tokens"])
    assert attrs["gen_ai.usage.output_tokens"] == str(usage["completion_tokens"])


@pytest.mark.parametrize("group,provider_name,system", [
    ("mock-azure", "azure.ai.openai", "az.ai.openai"),
    ("mock-gemini", "gcp.gemini", "gcp.gemini"),
    ("mock-dashscope", "alibaba_cloud.dashscope", "alibaba_cloud.dashscope"),
])
def test_the_vendor_is_named_by_the_semantic_conventions(traced, group, provider_name, system):
    """`gen_ai.provider.name` (current conventions) and `gen_ai.system` (the
    attribute it replaced; Azure's value changed) name the vendor; the
    configured provider is `llm.provider`."""
    gw, receiver = traced
    request_id = f"trace-semconv-{group}"
    status, _, body = gw.chat({"model": "any", "messages": USER_HI},
                              **{"x-model-group": group, "x-request-id": request_id})
    assert status == 200, body
    request = receiver.span_for(request_id)
    [attempt] = receiver.attempt_spans(request, 1)
    for attrs in (request["attributes"], attempt["attributes"]):
        assert (attrs["gen_ai.provider.name"], attrs["gen_ai.system"], attrs["llm.provider"]) == (
            provider_name, system, group), attrs


def test_rejected_request_has_no_gen_ai_attributes(traced):
    gw, receiver = traced
    status, _, _ = gw.chat({"model": "any", "messages": "not a list"}, **{"x-request-id": "trace-bad-1"})
    assert status == 400
    attrs = receiver.span_for("trace-bad-1")["attributes"]
    assert attrs["http.status_code"] == "400"
    assert not [k for k in attrs if k.startswith(("gen_ai.", "llm."))], attrs


GEN_AI = ("llm.provider", "gen_ai.request.model", "gen_ai.response.model",
          "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_every_attempt_has_its_own_span(traced, streaming):
    """mock-failover: the Anthropic mock's 529, then the OpenAI mock. Two
    upstream spans under the request's, each with its own attempt's values."""
    gw, receiver = traced
    request_id = f"trace-attempts-{streaming}"
    body = {"model": "any", "messages": USER_HI, "stream": streaming, "stream_options": {"include_usage": True}}
    headers = {"x-model-group": "mock-failover", "x-request-id": request_id}
    if streaming:
        status, _, events = stream(gw, body, headers)
        [usage] = [e["usage"] for _, e in events if isinstance(e, dict) and e.get("usage")]
    else:
        del body["stream_options"]
        status, _, answer = gw.chat(body, **headers)
        usage = answer["usage"]
    assert status == 200
    request = receiver.span_for(request_id)
    first, second = receiver.attempt_spans(request, 2)
    assert first["name"] == second["name"] == "router mock_failover egress"
    assert "retry.count" not in first["attributes"] and second["attributes"]["retry.count"] == "1"
    # The failed attempt: who was asked for what, and no answer to speak of.
    a = first["attributes"]
    assert a["http.status_code"] == "503" and a["error"] == "true"
    assert (a["llm.provider"], a["gen_ai.provider.name"], a["gen_ai.request.model"]) == (
        "mock-anthropic-down", "anthropic", "mock-claude-sonnet"), a
    assert not [k for k in ("gen_ai.response.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
                if a.get(k)], a
    # The attempt that answered: its vendor, its model, its tokens.
    b = second["attributes"]
    assert b["http.status_code"] == "200"
    assert [b[k] for k in GEN_AI] == ["mock-openai", "mock-gpt-4o", "mock-gpt-4o",
                                      str(usage["prompt_tokens"]), str(usage["completion_tokens"])], b
    assert b["gen_ai.provider.name"] == b["gen_ai.system"] == "openai", b
    # The request's span keeps the request's values (the client asked for "any").
    r = request["attributes"]
    assert [r[k] for k in GEN_AI] == ["mock-openai", "any", "mock-gpt-4o",
                                      str(usage["prompt_tokens"]), str(usage["completion_tokens"])], r
    assert r["llm.route"] == "mock-anthropic-down/mock-claude-sonnet:529,mock-openai/mock-gpt-4o:200"


def test_a_single_attempt_has_one_span(traced):
    gw, receiver = traced
    status, _, body = gw.chat({"model": "any", "messages": USER_HI},
                              **{"x-model-group": "mock-anthropic", "x-request-id": "trace-one-attempt"})
    assert status == 200
    request = receiver.span_for("trace-one-attempt")
    [attempt] = receiver.attempt_spans(request, 1)
    assert attempt["name"] == "router mock_anthropic egress"
    a = attempt["attributes"]
    assert [a[k] for k in GEN_AI] == ["mock-anthropic", "mock-claude-sonnet", "mock-claude-sonnet",
                                      str(body["usage"]["prompt_tokens"]), str(body["usage"]["completion_tokens"])]
