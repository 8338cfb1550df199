"""The shared store for the tests: Debian's redis-server on a unix socket of a
fresh directory (no port to race for) and the project's state service
(target/release/llm-state, over that Redis) on a loopback port it picks
itself, both started as `make run REDIS=1` starts them (scripts/gateway.py).
`raw` asks the service the way the gateway does (its protocol:
docs/src/architecture/state-service.md); `move_clock` moves the service's
clock ahead (it runs with `--test-clock`), so a time to live is tested
without waiting for it."""

import http.client
import shutil
import socket
import tempfile
from pathlib import Path

import gateway


class StateStore:
    """Redis and any number of state services sharing it."""

    def __init__(self, maxmemory=None):
        # Short: a unix socket path has at most 107 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="llm-st-"))
        self.socket = self.dir / "redis.sock"
        self.maxmemory = maxmemory
        self.redis = None
        self.services = []

    def start_redis(self):
        """Redis with an append-only file (what it holds survives its restart),
        and when asked a memory bound with least-recently-used eviction."""
        self.redis = gateway.start_redis(self.dir, self.maxmemory)

    def redis_says(self, command):
        """Redis's answer to one inline command (b"" when it does not answer)."""
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(2)
                s.connect(str(self.socket))
                s.sendall(command + b"\r\n")
                return s.recv(65536)
        except OSError:
            return b""

    def stop_redis(self):
        gateway.stop(self.redis)
        self.redis = None

    def start_service(self, *args):
        """A service with the test clock; returns its process (`.port`)."""
        with open(self.dir / "service.log", "ab") as log:
            proc = gateway.start_state_service(self.socket, log, "--test-clock", "--redis-timeout-ms", "1000", *args)
        self.services.append(proc)
        return proc

    def port(self):
        return next(p.port for p in self.services if p.poll() is None)

    def raw(self, method, path, body=None, headers=None, port=None):
        """(status, headers, body) of one request to a service."""
        conn = http.client.HTTPConnection("127.0.0.1", port or self.port(), timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()

    def move_clock(self, seconds):
        """Every service's clock `seconds` ahead of the real one."""
        for proc in self.services:
            if proc.poll() is None:
                status, _, _ = self.raw("PUT", "/_test/clock", body=str(seconds), port=proc.port)
                assert status == 204, status

    def entries(self):
        """How many entries Redis holds."""
        answer = self.redis_says(b"DBSIZE")
        return int(answer[1:].strip()) if answer.startswith(b":") else 0

    def stop(self):
        for proc in self.services:
            gateway.stop(proc)
        self.stop_redis()
        shutil.rmtree(self.dir, ignore_errors=True)


class Fleet:
    """Redis, a state service, the mock, and gateways by name (restartable),
    each gateway's configuration as `edit` leaves it (it joins the service)."""

    def __init__(self, tmp_path, edit, maxmemory=None):
        self.tmp_path = tmp_path
        self.edit = edit
        self.state = StateStore(maxmemory=maxmemory)
        self.state.start_redis()
        self.service = self.state.start_service()
        self.mock, self.mock_port = gateway.start_mock()
        self.envoys = {}
        self.starts = 0

    def start(self, name):
        """Gateway `name`, started (again) on a fresh Envoy process."""
        from conftest import Gateway
        gateway.stop(self.envoys.get(name))
        self.starts += 1
        workdir = self.tmp_path / f"{name}-{self.starts}"
        workdir.mkdir()
        bootstrap = gateway.build_bootstrap(0, 0, self.mock_port, env={}, edit=self.edit,
                                            extra_clusters=[gateway.state_cluster(self.service.port)],
                                            access_log=workdir / "access.log")
        envoy = gateway.start_envoy(bootstrap, workdir, concurrency=2)
        self.envoys[name] = envoy
        return Gateway(envoy.port, envoy.admin_port, self.mock_port, workdir)

    def stop(self):
        for envoy in self.envoys.values():
            gateway.stop(envoy)
        gateway.stop(self.mock)
        self.state.stop()
