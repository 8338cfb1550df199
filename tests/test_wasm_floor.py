"""benches/wasm-floor's `replay` mode, the benchmark's host-call floor, in
the Envoy `make bench` runs it in: the host calls the gateway's sessions
recorded (benches/wasm-floor/src/replay.calls, kept in step with them by
the gateway's `cargo test`) are made for real. The client sends the vendor
request without the vendor's headers and without a route; what the mock
receives and the client gets shows the replay set them as the gateway does."""

import json
import uuid

import pytest

import bench
import gateway
from conftest import Gateway

ANTHROPIC_BODY = {"model": "mock-claude-sonnet", "max_tokens": 64,
                  "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def floor(gw, tmp_path_factory):
    assert bench.WASM_FLOOR.exists(), "make build builds benches/wasm-floor"
    workdir = tmp_path_factory.mktemp("host-call-floor")
    mock_port = int(gw.mock.rsplit(":", 1)[1])
    envoy = gateway.start_envoy(bench.wasm_floor_bootstrap(0, 0, mock_port, mode="replay"), workdir)
    try:
        yield Gateway(envoy.port, envoy.admin_port, mock_port, workdir, key=None)
    finally:
        gateway.stop(envoy)


def requests_counted(floor):
    return sum(int(v) for k, v in floor.stats("llm_gateway.requests").items())


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_replay_makes_the_gateways_calls_for_the_vendor_request(gw, floor, stream):
    test_id = uuid.uuid4().hex
    before = requests_counted(floor)
    body = dict(ANTHROPIC_BODY, stream=stream)
    # Compact, as the gateway writes it (the replay finds `"stream":true`).
    raw = json.dumps(body, separators=(",", ":")).encode()
    status, headers, data = floor.request("POST", "/v1/messages", raw=raw, headers={"x-test-id": test_id})
    assert status == 200, data
    # The vendor request as the gateway's attempt leaves it: its route
    # (x-llm-cluster, set by the edge role's replay), key, version and length.
    [sent] = gw.mock_requests(test_id)
    assert sent["path"] == "/v1/messages"
    assert sent["headers"]["x-api-key"] == "sk-mock-anthropic"
    assert sent["headers"]["anthropic-version"] == "2023-06-01"
    assert sent["body"] == body
    assert not any(name.startswith(("x-llm-", "x-forwarded-", "x-envoy-")) for name in sent["headers"])
    # The answer as the attempt and the edge role mark it; its body is the
    # vendor's, written back.
    assert headers["x-llm-provider"] == "mock-anthropic"
    assert headers["x-llm-attempts"] == "1"
    assert headers["x-request-id"]
    if stream:
        assert headers["content-type"] == "text/event-stream"
        kinds = [json.loads(line[6:])["type"] for line in data.decode().splitlines() if line.startswith("data: ")]
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    else:
        assert json.loads(data)["type"] == "message"
    # The edge role's metrics at the end of the request.
    assert requests_counted(floor) == before + 1
