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


def chunks(events):
    """The JSON events of a stream (without `[DONE]`)."""
    return [e for _, e in events if isinstance(e, dict)]


def content_of(events):
    """The answer text a stream carried."""
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks(events) if c.get("choices"))


def finishes(events):
    return [c["choices"][0]["finish_reason"] for c in chunks(events)
            if c["choices"] and c["choices"][0]["finish_reason"]]


def tool_calls_of(events):
    """Tool calls reassembled from their deltas: {index: {id, name, args}}."""
    calls = {}
    for c in chunks(events):
        for tc in c["choices"][0]["delta"].get("tool_calls", []) if c["choices"] else []:
            slot = calls.setdefault(tc["index"], {"id": None, "name": None, "args": ""})
            slot["id"] = tc.get("id") or slot["id"]
            slot["name"] = tc.get("function", {}).get("name") or slot["name"]
            slot["args"] += tc.get("function", {}).get("arguments", "")
    return calls
