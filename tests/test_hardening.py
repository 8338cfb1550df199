"""Nothing a client or a vendor sends can stop the gateway, and nothing
secret or internal crosses it: every header byte over HTTP/1.1 and h2c,
in requests and in vendor responses; a vendor that quotes its key back
everywhere; client headers that must never reach a vendor."""

import base64
import json
import socket
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import h2.config
import h2.connection
import h2.events
import pytest

from conftest import ALL_GROUPS_KEY, VENDOR_KEYS, prometheus_names

USER_HI = [{"role": "user", "content": "hi"}]
CHAT = json.dumps({"model": "m", "messages": USER_HI}).encode()
STREAM = json.dumps({"model": "m", "messages": USER_HI, "stream": True}).encode()
DIALECT_GROUPS = ["mock-openai", "mock-anthropic", "mock-gemini", "mock-azure", "mock-bedrock", "mock-dashscope"]
# The key each dialect's mock provider is sent (envoy/gateway.yaml).
GROUP_KEYS = {"mock-openai": "sk-mock-openai", "mock-anthropic": "sk-mock-anthropic",
              "mock-gemini": "mock-gemini-key", "mock-azure": "mock-azure-key",
              "mock-dashscope": "sk-mock-dashscope"}
ALL_BYTES = range(256)


def http1(gw, head_lines, body=b"", path=b"/v1/chat/completions", method=b"POST"):
    """One raw HTTP/1.1 request (bytes as given); returns (status, headers, body),
    status None when Envoy closed the connection without an answer."""
    port = int(gw.base.rsplit(":", 1)[1])
    request = method + b" " + path + b" HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n"
    request += b"".join(line + b"\r\n" for line in head_lines)
    request += b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        data = b""
        # Read until the answer is complete, not until the connection
        # closes: after refusing a request Envoy closes only after a delay.
        while not response_complete(data) and (chunk := s.recv(65536)):
            data += chunk
    if not data:
        return None, {}, b""
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower().decode("latin-1")] = value.strip()
    if headers.get("transfer-encoding") == b"chunked":
        body_out = b""
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            body_out, rest = body_out + rest[:n], rest[n + 2:]
        rest = body_out
    gw.record({k: v.decode("latin-1") for k, v in headers.items()}, rest)
    return status, headers, rest


def response_complete(data):
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    lines = head.lower().split(b"\r\n")
    for line in lines[1:]:
        if line.startswith(b"content-length:"):
            return len(rest) >= int(line.split(b":", 1)[1])
        if line.startswith(b"transfer-encoding:") and b"chunked" in line:
            return rest.endswith(b"0\r\n\r\n")
    return False


def h2c(gw, headers, body=b""):
    """One HTTP/2 (prior knowledge, cleartext) request with raw header bytes;
    returns (status, body) or (None, b"") if Envoy reset the stream."""
    port = int(gw.base.rsplit(":", 1)[1])
    config = h2.config.H2Configuration(client_side=True, validate_outbound_headers=False,
                                       normalize_outbound_headers=False, validate_inbound_headers=False,
                                       header_encoding=None)
    conn = h2.connection.H2Connection(config=config)
    # Answers come in milliseconds; a refused stream gets none.
    with socket.create_connection(("127.0.0.1", port), timeout=0.25) as s:
        conn.initiate_connection()
        conn.send_headers(1, headers, end_stream=not body)
        if body:
            conn.send_data(1, body, end_stream=True)
        s.sendall(conn.data_to_send())
        status, out = None, b""
        while True:
            try:
                data = s.recv(65536)
            except TimeoutError:
                # Envoy refused the stream and closes only after a delay.
                return None, b""
            if not data:
                return status, out
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    status = int(dict(event.headers)[b":status"])
                elif isinstance(event, h2.events.DataReceived):
                    out += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, 1)
                elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset,
                                        h2.events.ConnectionTerminated)):
                    gw.record({}, out)
                    return status, out
            s.sendall(conn.data_to_send())


def requests_counted(gw):
    with urllib.request.urlopen(f"{gw.admin}/stats/prometheus", timeout=5) as r:
        lines = r.read().decode().splitlines()
    # Both hosts' series (see `Gateway.stat`).
    return sum(int(float(line.rpartition(" ")[2])) for line in lines
               if line.split("{", 1)[0] in prometheus_names("llm_gateway.requests"))


def assert_still_serving(gw):
    """A normal request succeeds and the filter's metrics still move."""
    before = requests_counted(gw)
    status, _, body = gw.chat({"model": "m", "messages": USER_HI})
    assert status == 200, body
    assert body["choices"][0]["message"]["content"]
    # The request counter is written when the request ends (on_log).
    for _ in range(200):
        if requests_counted(gw) > before:
            break
    assert requests_counted(gw) > before, "the filter's metrics stopped moving"
    wasm = gw.stats("wasm.")
    for role in ("llm_edge", "llm_upstream"):
        # Counts VMs rebuilt after dying (with FAIL_RELOAD; `vm_reload` never moves).
        assert wasm.get(f"wasm.{role}.vm_reload_success", "0") == "0", f"the {role} VM died"
    log = (gw.workdir / "envoy.log").read_text(errors="replace")
    assert "panicked" not in log and "RuntimeError" not in log


def each_byte(fn):
    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(fn, ALL_BYTES))


@pytest.mark.parametrize("path", [b"/v1/chat/completions", b"/v1/models", b"/v1/nope", b"/elsewhere"])
@pytest.mark.parametrize("with_key", [True, False])
def test_every_byte_in_request_headers_over_http1(gw, path, with_key):
    key = [b"authorization: Bearer " + ALL_GROUPS_KEY.encode()] if with_key else []
    method = b"GET" if path == b"/v1/models" else b"POST"
    for header in [b"x-note", b"authorization", b"x-api-key", b"x-request-id", b"x-model-group",
                   b"x-user-id", b"content-type"]:
        def send(b, header=header):
            lines = [line for line in key if not line.startswith(header + b":")]
            return http1(gw, lines + [header + b": caf" + bytes([b]) + b"x"], CHAT, path, method)[0]
        statuses = each_byte(send)
        assert all(s is None or 200 <= s < 600 for s in statuses), statuses
    # Header names too: Envoy refuses what is not a token; nothing reaches us broken.
    names = each_byte(lambda b: http1(gw, key + [b"x-" + bytes([b]) + b"n: v"], CHAT, path, method)[0])
    assert all(s is None or 200 <= s < 600 for s in names)
    assert_still_serving(gw)


@pytest.mark.parametrize("path,with_key", [(b"/v1/chat/completions", True), (b"/v1/chat/completions", False),
                                           (b"/v1/models", True), (b"/v1/nope", False)])
def test_every_byte_in_request_headers_over_h2c(gw, path, with_key):
    method = b"GET" if path == b"/v1/models" else b"POST"
    base = [(b":method", method), (b":scheme", b"http"), (b":authority", b"gw"), (b":path", path),
            (b"content-type", b"application/json")]
    if with_key:
        base.append((b"authorization", b"Bearer " + ALL_GROUPS_KEY.encode()))
    for name in [b"x-note", b"authorization", b"x-model-group"]:
        def send(b, name=name):
            headers = [h for h in base if h[0] != name] + [(name, b"caf" + bytes([b]) + b"x")]
            return h2c(gw, headers, CHAT if method == b"POST" else b"")[0]
        statuses = each_byte(send)
        assert all(s is None or 200 <= s < 600 for s in statuses), statuses
    # A raw byte in :path (HTTP/2 lets more through than HTTP/1.1).
    paths = each_byte(lambda b: h2c(gw, [h for h in base if h[0] != b":path"]
                                    + [(b":path", path + bytes([b]))], CHAT)[0])
    assert all(s is None or 200 <= s < 600 for s in paths)
    assert_still_serving(gw)


def test_latin1_header_values_pass_and_text_headers_are_refused_by_name(gw, test_id):
    key = b"authorization: Bearer " + ALL_GROUPS_KEY.encode()
    status, _, body = http1(gw, [key, b"x-note: caf\xe9", b"x-test-id: " + test_id.encode()], CHAT)
    assert status == 200, body
    [seen] = gw.mock_requests(test_id)
    assert seen["headers"]["x-note"] == "caf\ufffd", "passed on as it came (the mock shows it lossily)"
    for header, want_status, code in [(b"x-model-group", 400, "INVALID_REQUEST"),
                                      (b"x-request-id", 400, "INVALID_REQUEST"),
                                      (b"content-type", 400, "INVALID_REQUEST"),
                                      (b"x-api-key", 401, "AUTH_FAILED")]:
        status, headers, body = http1(gw, [key, header + b": caf\xe9"], CHAT)
        err = json.loads(body)["error"]
        assert (status, err["code"], err["param"]) == (want_status, code, header.decode()), body
        assert "UTF-8" in err["message"]
    status, _, body = http1(gw, [b"authorization: Bearer caf\xe9"], CHAT)
    err = json.loads(body)["error"]
    assert (status, err["code"], err["param"]) == (401, "AUTH_FAILED", "authorization")


@pytest.mark.parametrize("group", DIALECT_GROUPS)
@pytest.mark.parametrize("body", [CHAT, STREAM], ids=["json", "stream"])
def test_every_byte_in_vendor_response_headers(gw, group, body):
    key = b"authorization: Bearer " + ALL_GROUPS_KEY.encode()
    scenario = b"x-mock-scenario: header-bytes=80-ff"
    status, headers, data = http1(gw, [key, b"x-model-group: " + group.encode(), scenario], body)
    assert status == 200, data
    # Rate-limit headers reach the client byte for byte; the others not at all.
    assert headers["x-ratelimit-mock-bytes"] == b"a" + bytes(range(0x80, 0x100)) + b"b"
    assert "x-mock-bytes" not in headers
    assert (b"[DONE]" in data) if body is STREAM else json.loads(data)["choices"]

    def one(b):
        line = b"x-mock-scenario: header-bytes=%02x-%02x" % (b, b)
        return http1(gw, [key, b"x-model-group: " + group.encode(), line], body)[0]
    # Every byte alone for one dialect; for the others, the control bytes
    # (0x80-0xFF are all in the header above; printable ASCII is in every answer).
    if group == "mock-openai":
        statuses = each_byte(one)
    else:
        with ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(one, [*range(0x20), 0x7f]))
    assert all(s is None or 200 <= s < 600 for s in statuses), statuses
    assert_still_serving(gw)


def key_forms(key):
    forms = {key, base64.b64encode(key.encode()).decode().rstrip("="),
             base64.b64encode(f"Bearer {key}".encode()).decode().rstrip("=")}
    return forms


@pytest.mark.parametrize("group", [g for g in DIALECT_GROUPS if g in GROUP_KEYS])
@pytest.mark.parametrize("scenario", ["quote-key", "quote-key,stream-error", "quote-key,stream-error-first",
                                      "quote-key,error-401", "quote-key,error-400", "quote-key,echo-key",
                                      "quote-key,error-429", "quote-key,tool"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_vendor_quoting_its_key_everywhere_leaks_nothing(gw, group, scenario, stream):
    body = {"model": "m", "messages": USER_HI, "stream": stream,
            "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]}
    status, headers, data = http1(gw, [b"authorization: Bearer " + ALL_GROUPS_KEY.encode(),
                                       b"x-model-group: " + group.encode(),
                                       b"x-mock-scenario: " + scenario.encode()], json.dumps(body).encode())
    assert status is not None
    seen = data + b"".join(k.encode() + b": " + v for k, v in headers.items())
    for form in key_forms(GROUP_KEYS[group]):
        assert form.encode() not in seen, (form, seen[:600])
    assert b"[REDACTED]" in seen, "the vendor's quotes arrive masked"
    assert "x-debug-received-auth" not in headers, "a vendor's debug header is dropped"
    if ",error-" in scenario:
        assert json.loads(data)["error"]["provider"] == group
    log = (gw.workdir / "envoy.log").read_text(errors="replace")
    for key in VENDOR_KEYS:
        assert key not in log


WITHHELD = {
    "openai-organization": "org-client", "openai-project": "proj-client",
    "x-goog-user-project": "client-project", "cookie": "session=1",
    "x-forwarded-for": "203.0.113.9", "x-llm-anything": "x", "x-amz-security-token": "client",
    "x-dashscope-workspace": "ws-client", "anthropic-beta": "client-beta", "proxy-authorization": "Basic x",
}


@pytest.mark.parametrize("group", DIALECT_GROUPS)
def test_client_headers_that_choose_accounts_or_reveal_internals_never_reach_vendors(gw, test_id, group):
    status, _, body = gw.chat({"model": "m", "messages": USER_HI},
                              **{"x-model-group": group, "x-test-id": test_id, "user-agent": "sdk/1", **WITHHELD})
    assert status == 200, body
    [seen] = gw.mock_requests(test_id)
    received = seen["headers"]
    for name in WITHHELD:
        assert name not in received, (name, received)
    leaked = [n for n in received if n.startswith(("x-envoy-", "x-llm-"))]
    assert not leaked, leaked
    assert received["user-agent"] == "sdk/1", "ordinary headers still pass"
    if group == "mock-bedrock":
        signed = received["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
        assert not [h for h in signed if h.startswith(("x-envoy-", "x-llm-"))], signed


def test_forward_headers_lets_named_ones_through(gw, test_id):
    status, _, body = gw.chat({"model": "m", "messages": USER_HI},
                              **{"x-model-group": "forwarding", "x-test-id": test_id, **WITHHELD})
    assert status == 200, body
    [seen] = gw.mock_requests(test_id)
    assert seen["headers"]["openai-organization"] == "org-client"
    assert "openai-project" not in seen["headers"] and "cookie" not in seen["headers"]


def test_duplicate_keys_in_tool_schemas_are_refused(gw):
    raw = (b'{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",'
           b'"function":{"name":"f","parameters":{"type":"object","type":"array"}}}]}')
    status, _, body = gw.request("POST", "/v1/chat/completions", raw=raw)
    err = json.loads(body)["error"]
    assert (status, err["param"]) == (400, "tools[0].function.parameters.type"), err
    assert "duplicate" in err["message"]
    status, _, body = gw.chat({"model": "m", "messages": USER_HI,
                               "tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]})
    assert (status, body["error"]["param"]) == (400, "tools[0].function.parameters")
