"""Integration fixtures: a real Envoy 1.40 with the built .wasm, and the mock
provider, both started on free loopback ports and stopped by PID."""

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import gateway  # noqa: E402


class Gateway:
    def __init__(self, port, admin_port, mock_port, workdir):
        self.base = f"http://127.0.0.1:{port}"
        self.admin = f"http://127.0.0.1:{admin_port}"
        self.mock = f"http://127.0.0.1:{mock_port}"
        self.workdir = workdir

    def request(self, method, path, body=None, headers=None, raw=None):
        """Returns (status, headers, body bytes)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        hdrs = {"content-type": "application/json"}
        hdrs.update(headers or {})
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()

    def chat(self, body, **headers):
        status, hdrs, data = self.request("POST", "/v1/chat/completions", body, headers)
        return status, hdrs, json.loads(data) if data else None

    def mock_requests(self, test_id):
        with urllib.request.urlopen(f"{self.mock}/_mock/requests?test_id={test_id}", timeout=5) as r:
            return json.loads(r.read())


DEAD_PORT_PROVIDER = "mock-anthropic"


def short_timeout_route(route):
    """The shipped route with a 300 ms timeout, for requests with `x-test-route: short-timeout`."""
    short = json.loads(json.dumps(route))
    short["match"]["headers"] = [{"name": "x-test-route", "string_match": {"exact": "short-timeout"}}]
    short["route"]["timeout"] = "0.3s"
    return [short]


@pytest.fixture(scope="session")
def gw(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("envoy")
    mock, mock_port = gateway.start_mock(log=open(workdir / "mock.log", "w"))
    port, admin_port, dead_port = gateway.free_port(), gateway.free_port(), gateway.free_port()
    bootstrap = gateway.build_bootstrap(
        port, admin_port, mock_port, env={},
        # A cluster where nothing listens: connection refused.
        extra_groups={"dead": {"cluster": "dead"}},
        extra_clusters=[gateway.static_cluster("dead", dead_port, DEAD_PORT_PROVIDER)],
        extra_routes=short_timeout_route,
    )
    envoy = None
    try:
        envoy = gateway.start_envoy(bootstrap, workdir, admin_port)
        yield Gateway(port, admin_port, mock_port, workdir)
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


@pytest.fixture
def test_id(request):
    """A unique id, sent as `x-test-id`, to find this test's requests at the mock."""
    return request.node.name.replace("[", "-").replace("]", "")
