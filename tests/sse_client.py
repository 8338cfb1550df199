"""A minimal SSE reader for the tests: events with their arrival times."""

import http.client
import json
import time


def stream(gw, body, headers=None, timeout=30):
    """POSTs a streaming chat request through the gateway `gw`; returns
    (status, headers, [(t, event)]) where event is the parsed JSON or "[DONE]"."""
    host = gw.base.split("//", 1)[1]
    conn = http.client.HTTPConnection(host, timeout=timeout)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=gw.default_headers(headers))
    resp = conn.getresponse()
    status = resp.status
    resp_headers = {k.lower(): v for k, v in resp.getheaders()}
    events = []
    buf = b""
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            raw, buf = buf.split(b"\n\n", 1)
            text = raw.decode("utf-8")
            assert text.startswith("data: "), text
            data = text[len("data: "):]
            events.append((time.monotonic(), data if data == "[DONE]" else json.loads(data)))
            gw.record(resp_headers, raw)
    conn.close()
    assert buf == b"", f"unterminated event at end of stream: {buf!r}"
    return status, resp_headers, events
