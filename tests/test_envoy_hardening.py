"""The Envoy side of hardening, with the SHIPPED envoy/gateway.yaml: circuit
breakers that let failover work under concurrency, buffer headroom and a
local_reply_config that keep every refusal in the unified error envelope
(without touching the filter's own errors), FAIL_RELOAD with its alerting
signal, and an access log that loses no line."""

import concurrent.futures
import json
import socket
import time
import uuid

import pytest

import gateway
from conftest import ALL_GROUPS_KEY, Gateway, complete_lines, configure_test_gateway

USER_HI = [{"role": "user", "content": "hi"}]
ENVELOPE = {"message", "type", "code", "param", "provider", "request_id"}
# The shipped filter configuration's limits.max_body_bytes (envoy/gateway.yaml).
SHIPPED_MAX_BODY = 8 << 20
WASM_FLOOR = gateway.ROOT / "target/wasm32-wasip1/release/wasm_floor.wasm"


def wait_for(condition, timeout=10.0, what="condition"):
    """Polls `condition` until it returns a truthy value (returned) or the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Shipped:
    """An Envoy of its own from the shipped envoy/gateway.yaml (via
    gateway.build_bootstrap), on free ports, with the session's mock; stopped
    by PID. `edit` changes the filter config, `edit_bootstrap` the rest."""

    def __init__(self, workdir, mock_port, wasm=gateway.WASM, edit=None, edit_bootstrap=None,
                 log_level="warn", access_log=None, extra_args=()):
        self.bootstrap = gateway.build_bootstrap(0, 0, mock_port, wasm=wasm, env={},
                                                 edit=edit, edit_bootstrap=edit_bootstrap, access_log=access_log)
        self.workdir = workdir
        self.proc = gateway.start_envoy(self.bootstrap, workdir, log_level=log_level, extra_args=extra_args)
        self.port, self.admin_port = self.proc.port, self.proc.admin_port
        self.gw = Gateway(self.port, self.admin_port, mock_port, workdir, key=None)

    def stop(self):
        gateway.stop(self.proc)


@pytest.fixture
def shipped(gw, tmp_path):
    """Starts Shipped gateways (auth off, as shipped) and stops them all."""
    started = []

    def start(name="envoy", **kwargs):
        s = Shipped(tmp_path / name, int(gw.mock.rsplit(":", 1)[1]), **kwargs)
        started.append(s)
        return s

    try:
        yield start
    finally:
        for s in started:
            s.stop()


def _answer(response):
    """(status, headers, body) once `response` holds a whole HTTP/1.1 answer, else None."""
    head, sep, rest = response.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.split(b"\r\n")
    headers = {k.strip().lower().decode(): v.strip().decode()
               for k, _, v in (line.partition(b":") for line in lines[1:])}
    status = int(lines[0].split()[1])
    if "content-length" in headers:
        length = int(headers["content-length"])
        return (status, headers, rest[:length]) if len(rest) >= length else None
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size_line, sep, rest = rest.partition(b"\r\n")
            if not sep:
                return None
            size = int(size_line, 16)
            if size == 0:
                return status, headers, body
            if len(rest) < size + 2:
                return None
            body, rest = body + rest[:size], rest[size + 2:]
    return None


def raw_http(gw, data, timeout=10.0):
    """Sends raw bytes on a new connection; returns (status, headers, body bytes)."""
    host, port = gw.base.split("//", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass  # Envoy may answer and close before it read everything.
        response = b""
        while (answer := _answer(response)) is None:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise AssertionError(f"connection closed before a whole answer: {response[:300]!r}")
            response += chunk
        return answer


def assert_envelope(status, headers, body, want_status, code, error_type):
    assert status == want_status, body
    assert headers["content-type"].startswith("application/json"), headers
    err = json.loads(body)["error"]
    assert set(err) == ENVELOPE, err
    assert (err["code"], err["type"], err["provider"]) == (code, error_type, None), err
    return err


# ---- 1. circuit breakers: failover under concurrency -----------------------

def test_50_concurrent_cross_vendor_failovers_all_succeed(shipped):
    """mock-failover's primary always answers 529: each request needs one
    retry to the other vendor. Envoy's default of 3 concurrent retries let
    3 of 20 through; the shipped breakers let all 50 through."""
    s = shipped()
    n = 50
    # Model discovery (on in the shipped configuration) reads mock-openai's
    # model list through the same cluster once it starts: counted from
    # after that read, so a slow start cannot add it to the burst's.
    def openai_requests():
        return int(s.gw.stats("cluster.mock_openai.upstream_rq_total").get("cluster.mock_openai.upstream_rq_total", 0))

    deadline = time.time() + 30
    while not openai_requests():
        assert time.time() < deadline, "discovery never read mock-openai's list"
        time.sleep(0.1)
    before = openai_requests()

    def one(i):
        return s.gw.chat({"model": "m", "messages": USER_HI},
                         **{"x-model-group": "mock-failover", "x-request-id": f"cb-{i}-{uuid.uuid4().hex}"})

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        results = list(pool.map(one, range(n)))
    assert [status for status, _, _ in results] == [200] * n, [b for st, _, b in results if st != 200][:3]
    assert {h["x-llm-provider"] for _, h, _ in results} == {"mock-openai"}
    assert {h["x-llm-attempts"] for _, h, _ in results} == {"2"}
    stats = s.gw.stats("cluster.mock_")
    # The retries count on the aggregate (the route's cluster), and none overflowed.
    assert stats["cluster.mock_failover.upstream_rq_retry"] == str(n)
    assert stats["cluster.mock_failover.upstream_rq_retry_overflow"] == "0"
    assert stats["cluster.mock_failover.upstream_rq_retry_success"] == str(n)
    assert stats["cluster.mock_anthropic_down.upstream_rq_total"] == str(n)
    assert int(stats["cluster.mock_openai.upstream_rq_total"]) - before == n


def test_the_retry_cap_holds_under_load(shipped):
    """The same failovers with the aggregate's retry limit lowered to 2:
    at most 2 retries run at once, the rest overflow and are answered with
    the primary's error (unified, naming the vendor) instead of piling on."""
    def two_retries(bootstrap):
        for cluster in bootstrap["static_resources"]["clusters"]:
            if cluster["name"] == "mock_failover":
                cluster["circuit_breakers"]["thresholds"][0]["max_retries"] = 2
    s = shipped(edit_bootstrap=two_retries)
    n = 20

    def one(i):
        return s.gw.chat({"model": "m", "messages": USER_HI},
                         **{"x-model-group": "mock-failover", "x-mock-scenario": "slow=300",
                            "x-request-id": f"rb-{i}-{uuid.uuid4().hex}"})

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        results = list(pool.map(one, range(n)))
    stats = s.gw.stats("cluster.mock_failover.")
    overflowed = int(stats["cluster.mock_failover.upstream_rq_retry_overflow"])
    retried = int(stats["cluster.mock_failover.upstream_rq_retry"])
    assert overflowed > 0 and retried + overflowed == n, stats
    answered = [h["x-llm-provider"] for status, h, _ in results if status == 200]
    refused = [b for status, _, b in results if status != 200]
    assert len(answered) == retried and set(answered) == {"mock-openai"}, results
    assert len(refused) == overflowed
    assert {b["error"]["provider"] for b in refused} == {"mock-anthropic-down"}, refused[:2]


def internal(cluster):
    """A cluster whose endpoints are this Envoy's internal listeners."""
    groups = cluster.get("load_assignment", {}).get("endpoints", [])
    return any("envoy_internal_address" in ep["endpoint"]["address"] for g in groups for ep in g["lb_endpoints"])


def test_every_shipped_vendor_cluster_has_breakers():
    bootstrap = gateway.build_bootstrap(1, 2, 3, env={})
    for cluster in bootstrap["static_resources"]["clusters"]:
        if internal(cluster):
            continue  # the gateway's own listener (self-calls): no vendor behind it
        [thresholds] = cluster["circuit_breakers"]["thresholds"]
        if "cluster_type" in cluster:  # the failover aggregate: its retries
            assert thresholds == {"priority": "DEFAULT", "max_retries": 1024}
        else:
            assert thresholds["max_requests"] == 1024 and "retry_budget" in thresholds, cluster["name"]


# ---- 2. buffer headroom: oversized bodies get the unified 413 --------------

def chunked_request(body, chunk=65536, path="/v1/chat/completions"):
    head = (f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            "transfer-encoding: chunked\r\n\r\n").encode()
    parts = [b"%x\r\n%s\r\n" % (len(body[i:i + chunk]), body[i:i + chunk]) for i in range(0, len(body), chunk)]
    return head + b"".join(parts) + b"0\r\n\r\n"


@pytest.mark.parametrize("chunk", [16 << 10, 1 << 20, 32 << 20])
def test_oversized_chunked_body_is_the_unified_413(shipped, chunk):
    """No content-length, over the shipped max_body_bytes: whether the
    filter (while buffering) or Envoy's buffer limit (one big read past the
    headroom) refuses it, the answer is the unified 413."""
    s = shipped()
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * (SHIPPED_MAX_BODY + (1 << 20))}]})
    status, headers, data = raw_http(s.gw, chunked_request(body.encode(), chunk))
    err = assert_envelope(status, headers, data, 413, "PAYLOAD_TOO_LARGE", "invalid_request_error")
    assert err["request_id"] == headers["x-request-id"] and err["param"] is None


def test_buffer_limit_has_headroom_over_max_body_bytes():
    bootstrap = gateway.build_bootstrap(1, 2, 3, env={})
    _, edge, _ = gateway._wasm_filters(bootstrap)
    max_body = json.loads(edge["configuration"]["value"])["limits"]["max_body_bytes"]
    assert max_body == SHIPPED_MAX_BODY
    assert bootstrap["static_resources"]["listeners"][0]["per_connection_buffer_limit_bytes"] == max_body + (1 << 20)


# ---- 3. local_reply_config: Envoy's own refusals in the envelope ------------

@pytest.mark.parametrize("name,request_bytes,status,details", [
    ("headers-too-large", b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * (70 << 10) + b"\r\n\r\n",
     431, "http1.headers_too_large"),
    ("headers-too-large-chat", b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nx-big: "
     + b"a" * (70 << 10) + b"\r\n\r\n{}", 431, "http1.headers_too_large"),
    ("malformed-request-line", b"GARBAGE\r\n\r\n", 400, "http1.codec_error"),
    ("malformed-request-line-version", b"GET /v1/models HTTP/1.1 extra\r\nhost: x\r\n\r\n", 400, "http1.codec_error"),
    ("malformed-header", b"GET /v1/models HTTP/1.1\r\nhost: x\r\nbad header: v\r\n\r\n", 400, "http1.codec_error"),
    ("unknown-transfer-encoding", b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: gzip\r\n\r\n",
     501, "http1.invalid_transfer_encoding"),
    ("http-1.0", b"GET /v1/models HTTP/1.0\r\nhost: x\r\n\r\n", 426, "low_version"),
    ("missing-host", b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}", 400, "missing_host_header"),
])
def test_envoy_codec_refusals_are_unified(gw, name, request_bytes, status, details):
    """Refused by Envoy before any filter ran; Envoy's status is kept."""
    got, headers, body = raw_http(gw, request_bytes)
    err = assert_envelope(got, headers, body, status, "INVALID_REQUEST", "invalid_request_error")
    assert err["message"] == f"the gateway refused the HTTP request: {details}"
    assert err["param"] is None
    # No request id exists yet (the headers were never accepted).
    assert err["request_id"] is None


def test_unknown_path_outside_the_api_is_unified(gw):
    status, headers, body = raw_http(gw, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
    err = assert_envelope(status, headers, body, 404, "MODEL_NOT_FOUND", "invalid_request_error")
    assert err["message"] == "unknown path: the API is under /v1/" and err["param"] == "path"
    assert err["request_id"] == headers["x-request-id"]


def test_a_codec_error_after_the_headers_is_wrapped_once(gw):
    """A broken chunk after a /v1/ request's headers reaches the edge role,
    which rewrites Envoy's 400 itself; no mapper wraps it first."""
    status, headers, body = raw_http(gw, (
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer {ALL_GROUPS_KEY}\r\ntransfer-encoding: chunked\r\n\r\n"
        "5\r\n{\"mod\r\nZZZ\r\n").encode())
    err = assert_envelope(status, headers, body, 400, "INVALID_REQUEST", "invalid_request_error")
    assert "{" not in err["message"], err  # one envelope, not a mapper's JSON inside the edge role's
    assert err["request_id"] == headers["x-request-id"]


def without_local_reply_config(bootstrap):
    hcm, _, _ = gateway._wasm_filters(bootstrap)
    del hcm["local_reply_config"]


# (name, method, path, body bytes, headers): requests the FILTER refuses itself.
FILTER_ERRORS = [
    ("bad-json", "POST", "/v1/chat/completions", b"{bad json", {}),
    ("wrong-field-type", "POST", "/v1/chat/completions", b'{"model":"m","messages":"hi"}', {}),
    ("missing-key", "POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": USER_HI}).encode(),
     {"authorization": None}),
    ("wrong-key", "GET", "/v1/models", None, {"authorization": "Bearer not-a-key"}),
    ("unknown-api-path", "POST", "/v1/embeddings", b"{}", {}),
    ("unknown-group", "POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": USER_HI}).encode(),
     {"x-model-group": "no-such-group"}),
    ("models-wrong-method", "POST", "/v1/models", b"{}", {}),
]


def test_the_filters_own_errors_pass_byte_for_byte(gw, shipped):
    """The local_reply_config mappers also see the filter's own local replies
    (send_http_response); none may touch them: the same request gets the same
    bytes from the test gateway as from a twin without local_reply_config."""
    twin = shipped("twin", edit=configure_test_gateway, edit_bootstrap=without_local_reply_config)
    twin.gw.key = gw.key
    for name, method, path, body, headers in FILTER_ERRORS:
        headers = dict(headers, **{"x-request-id": f"own-{name}"})
        with_mappers = gw.request(method, path, raw=body, headers=headers)
        without = twin.gw.request(method, path, raw=body, headers=headers)
        status, hdrs, data = with_mappers
        assert status >= 400 and data.startswith(b'{"error":{"message":'), (name, data)
        assert (status, hdrs["content-type"], hdrs["x-request-id"], data) == \
            (without[0], without[1]["content-type"], without[1]["x-request-id"], without[2]), name
        assert json.loads(data)["error"]["request_id"] == f"own-{name}"


def test_the_filters_own_413_passes_byte_for_byte(gw, shipped):
    """The filter's own 413 (declared content-length over max_body_bytes)
    is not the Envoy 413 the CEL mapper matches."""
    twin = shipped("twin", edit=configure_test_gateway, edit_bootstrap=without_local_reply_config)
    from conftest import MAX_BODY_BYTES
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
               f"authorization: Bearer {ALL_GROUPS_KEY}\r\nx-request-id: own-413\r\n"
               f"content-length: {MAX_BODY_BYTES + 1}\r\n\r\n{{").encode()
    ours = raw_http(gw, request)
    plain = raw_http(twin.gw, request)
    assert ours[0] == plain[0] == 413
    assert ours[2] == plain[2]
    assert json.loads(ours[2])["error"]["message"] == f"request body is larger than {MAX_BODY_BYTES} bytes"


# ---- 4. FAIL_RELOAD: a dead VM is reloaded, and it shows --------------------

def crash_mode(bootstrap):
    """benches/wasm-floor's test-only `crash` mode in both roles (the shipped
    failure_policy left as it is)."""
    _, edge, upstream = gateway._wasm_filters(bootstrap)
    for role in (edge, upstream):
        assert role["failure_policy"] == "FAIL_RELOAD"
        role["configuration"] = {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": "crash"}


def test_a_dead_vm_is_reloaded_and_the_signal_appears(shipped):
    assert WASM_FLOOR.exists(), "make build builds benches/wasm-floor"
    s = shipped(wasm=WASM_FLOOR, edit_bootstrap=crash_mode)
    # The floor module sets no cluster and no vendor key: the request does.
    plain = {"x-llm-cluster": "mock_openai", "authorization": "Bearer sk-mock-openai"}
    request = {"model": "m", "messages": USER_HI}

    assert s.gw.chat(request, **plain)[0] == 200
    before = s.gw.stats("wasm.")
    assert before["wasm.llm_edge.vm_reload_success"] == "0"
    assert before["wasm.llm_upstream.vm_reload_success"] == "0"

    status, headers, body = s.gw.chat(request, **plain, **{"x-crash-test": "1", "x-request-id": "crash-1"})
    # The VM died mid-request: Envoy's own 503 (wasm_fail_stream), unified.
    assert status == 503
    assert body["error"]["code"] == "UPSTREAM_BUSY" and body["error"]["request_id"] == "crash-1"
    assert headers["retry-after"] == "1"

    refused = []

    def recovered():
        status, headers, body = s.gw.chat(request, **plain)
        if status != 200:
            refused.append((status, body["error"]["code"], headers["retry-after"]))
        return status == 200

    # Reloaded after Envoy's 1 s backoff; until then requests are refused, unified.
    wait_for(recovered, timeout=5.0, what="the VM to be reloaded")
    assert set(refused) <= {(503, "UPSTREAM_BUSY", "1")}
    after = s.gw.stats("wasm.")
    assert after["wasm.llm_edge.vm_reload_success"] == "1"
    assert after["wasm.llm_upstream.vm_reload_success"] == "1"
    assert after["wasm.llm_edge.vm_reload_failure"] == "0"
    assert int(after["wasm.envoy.wasm.runtime.v8.created"]) == int(before["wasm.envoy.wasm.runtime.v8.created"]) + 1
    if refused:
        assert int(after["wasm.llm_edge.vm_reload_backoff"]) >= 1
    log = (s.workdir / "envoy.log").read_text()
    assert "Function: proxy_on_request_headers failed: Uncaught RuntimeError: unreachable" in log
    assert "panicked at benches/wasm-floor/src/lib.rs" in log
    # And it keeps working.
    assert s.gw.chat(request, **plain)[0] == 200


# ---- 5. the access log loses no line ---------------------------------------

def test_n_requests_give_exactly_n_access_log_lines(shipped):
    """The access log (path /dev/stdout in the shipped config) gets a file of
    its own from gateway.start_envoy, apart from Envoy's own log (debug here:
    lots of it, written at the same time): every line arrives, whole."""
    # Flushed every 50 ms instead of Envoy's default 10 s, to keep the test short.
    s = shipped(log_level="debug", extra_args=("--file-flush-interval-msec", "50"))
    n = 200

    def one(i):
        return s.gw.chat({"model": "m", "messages": USER_HI}, **{"x-request-id": f"log-{i}"})[0]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert list(pool.map(one, range(n))) == [200] * n

    def access_lines():
        lines = complete_lines(s.workdir / "access.log")
        return lines if len(lines) >= n else None

    lines = wait_for(access_lines, timeout=10.0, what=f"{n} access-log lines")
    assert len(lines) == n
    assert sorted(json.loads(line)["request_id"] for line in lines) == sorted(f"log-{i}" for i in range(n))
    log = (s.workdir / "envoy.log").read_text()
    assert "request headers complete" in log, "Envoy's own debug log was written meanwhile"
    assert '{"request_id"' not in log
