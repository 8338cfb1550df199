"""Hot reload through ECDS: envoy/hot-reload/ run as shipped (a temp copy with
ports and paths rewritten), its filter configs replaced by an atomic rename
while traffic flows."""

import http.client
import json
import os
import shutil
import threading
import time

import pytest
import yaml

import gateway
from conftest import Gateway
from sse_client import stream

HOT_DIR = gateway.ROOT / "envoy/hot-reload"
# Role file -> the ECDS stats prefix of its filter.
STATS = {
    "edge": "extension_config_discovery.http_filter.llm_edge",
    "upstream": "extension_config_discovery.upstream_http_filter.llm_upstream",
}
USER_HI = [{"role": "user", "content": "hi"}]
# The mock echoes the prompt: 60 more words, 60 more stream events.
LONG_PROMPT = [{"role": "user", "content": " ".join(f"w{i}" for i in range(60))}]




class HotGateway:
    def __init__(self, tmp_path, clusters=()):
        self.dir = tmp_path / "hot-reload"
        self.staging = tmp_path / "staging"
        self.staging.mkdir()
        shutil.copytree(HOT_DIR, self.dir)
        self.mock, mock_port = gateway.start_mock()
        bootstrap = yaml.safe_load((self.dir / "gateway.yaml").read_text())
        bootstrap["admin"]["address"]["socket_address"]["port_value"] = 0
        listener = bootstrap["static_resources"]["listeners"][0]
        listener["address"]["socket_address"]["port_value"] = 0
        for cluster in bootstrap["static_resources"]["clusters"]:
            for group in cluster["load_assignment"]["endpoints"]:
                for ep in group["lb_endpoints"]:
                    ep["endpoint"]["address"]["socket_address"]["port_value"] = mock_port
        # Clusters of a test's own (made for the mock's port).
        bootstrap["static_resources"]["clusters"] += [make(mock_port) for make in clusters]
        hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
        edge = hcm["http_filters"][0]
        upstream = hcm["http_filters"][-1]["typed_config"]["upstream_http_filters"][0]
        for role, flt in (("edge", edge), ("upstream", upstream)):
            source = flt["config_discovery"]["config_source"]["path_config_source"]
            assert source["path"] == f"envoy/hot-reload/{role}.yaml"
            assert source["watched_directory"]["path"] == "envoy/hot-reload"
            source["path"] = str(self.dir / f"{role}.yaml")
            source["watched_directory"]["path"] = str(self.dir)
            # The shipped files name the build by its path from the repo root.
            doc = self.read(role)
            assert self.code(doc)["filename"] == "target/wasm32-wasip1/release/llm_gateway.wasm"
            self.code(doc)["filename"] = str(gateway.WASM)
            (self.dir / f"{role}.yaml").write_text(yaml.safe_dump(doc))
        self.envoy = None
        try:
            self.envoy = gateway.start_envoy(bootstrap, tmp_path / "envoy", log_level="info")
        except Exception:
            gateway.stop(self.mock)
            raise
        # The example's gateway key (its SHA-256 is in the role files).
        self.gw = Gateway(self.envoy.port, self.envoy.admin_port, mock_port, tmp_path, key="example-gateway-key")

    def stop(self):
        gateway.stop(self.envoy)
        gateway.stop(self.mock)

    def read(self, role):
        return yaml.safe_load((self.dir / f"{role}.yaml").read_text())

    @staticmethod
    def plugin(doc):
        [resource] = doc["resources"]
        return resource["typed_config"]["config"]

    def code(self, doc):
        return self.plugin(doc)["vm_config"]["code"]["local"]

    def config(self, role="edge"):
        """The filter's JSON configuration now in the role's file."""
        return json.loads(self.plugin(self.read(role))["configuration"]["value"])

    def publish(self, role, version, config=None, wasm=None):
        """Writes the role's file next to the watched directory, then renames
        it into place: the atomic `mv` of envoy/hot-reload/README.md."""
        doc = self.read(role)
        doc["version_info"] = version
        if config is not None:
            self.plugin(doc)["configuration"]["value"] = json.dumps(config)
        if wasm is not None:
            self.code(doc)["filename"] = str(wasm)
        staged = self.staging / f"{role}.yaml"
        staged.write_text(yaml.safe_dump(doc))
        os.replace(staged, self.dir / f"{role}.yaml")

    def publish_wasm(self, name, data):
        staged = self.staging / name
        staged.write_bytes(data)
        os.replace(staged, self.dir / name)
        return self.dir / name

    def stat(self, role, name):
        # Generous timeout: the admin waits while Envoy compiles a new module.
        url = f"{self.gw.admin}/stats?filter=^{STATS[role]}.{name}$"
        with gateway.urllib.request.urlopen(url, timeout=30) as r:
            lines = r.read().decode().splitlines()
        return dict(line.split(": ", 1) for line in lines if ": " in line).get(f"{STATS[role]}.{name}")

    def wait_stat(self, role, name, value, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.stat(role, name) == value:
                return
            time.sleep(0.05)
        raise AssertionError(f"{STATS[role]}.{name} is {self.stat(role, name)!r}, expected {value!r}")

    def wait_requests_at_mock(self, test_id, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.gw.mock_requests(test_id):
                return
            time.sleep(0.02)
        raise AssertionError(f"the mock never saw {test_id}")


@pytest.fixture
def hot(tmp_path):
    h = HotGateway(tmp_path)
    try:
        yield h
    finally:
        h.stop()


class SlowStream(threading.Thread):
    """A long paced stream (about 70 events, `pace_ms` apart) read in the
    background, event by event. The tests never wait for its end: they wait
    (bounded) for the swap, then for events that arrived after it, and hang up."""

    def __init__(self, gw, test_id, group="mock-openai", pace_ms=200):
        super().__init__(daemon=True)
        self.gw, self.test_id, self.group, self.pace_ms = gw, test_id, group, pace_ms
        self.headers, self.events, self.ended = None, [], False
        self.lock = threading.Lock()
        self.leave = threading.Event()
        self.conn = http.client.HTTPConnection(gw.base.split("//", 1)[1], timeout=30)

    def run(self):
        self.conn.request("POST", "/v1/chat/completions",
                          body=json.dumps({"model": "m", "messages": LONG_PROMPT, "stream": True}),
                          headers=self.gw.default_headers({"x-model-group": self.group, "x-test-id": self.test_id,
                                                           "x-mock-scenario": f"slow={self.pace_ms}"}))
        resp = self.conn.getresponse()
        self.headers = {k.lower(): v for k, v in resp.getheaders()}
        buf = b""
        # Read until the end, or until told to leave (checked at each event).
        while not self.leave.is_set() and (chunk := resp.read1(65536)):
            buf += chunk
            while b"\n\n" in buf:
                raw, buf = buf.split(b"\n\n", 1)
                self.gw.record(self.headers, raw)
                data = raw.decode()[len("data: "):]
                with self.lock:
                    self.events.append(data if data == "[DONE]" else json.loads(data))
        self.conn.close()
        self.ended = True

    def count(self):
        with self.lock:
            return len(self.events)

    def wait_for_events(self, n, timeout=20.0):
        deadline = time.monotonic() + timeout
        while self.count() < n:
            assert not self.ended, f"the stream ended after {self.count()} events: nothing was tested"
            assert time.monotonic() < deadline, f"{self.count()} events after {timeout}s, waited for {n}"
            time.sleep(0.02)

    def hang_up(self):
        self.leave.set()
        self.join(timeout=10)
        assert not self.is_alive()
        with self.lock:
            return list(self.events)


def test_shipped_files_start_with_version_1(hot):
    for role in STATS:
        assert hot.stat(role, "version_text") == '"1"'
        assert hot.stat(role, "config_reload") == "1"
        assert hot.stat(role, "config_fail") == "0"
    status, headers, _ = hot.gw.chat({"model": "m", "messages": USER_HI})
    assert status == 200 and headers["x-llm-provider"] == "mock-openai"
    status, _, body = hot.gw.chat({"model": "m", "messages": USER_HI}, authorization=None)
    assert status == 401 and body["error"]["code"] == "AUTH_FAILED"


def test_stream_in_flight_survives_a_config_replacement(hot, test_id):
    gw = hot.gw
    slow = SlowStream(gw, test_id, pace_ms=200)
    slow.start()
    # The request reached the vendor and its first event came back: both
    # roles ran with the old config.
    hot.wait_requests_at_mock(test_id)
    slow.wait_for_events(1)

    new = hot.config()
    new["providers"]["mock-openai"]["models"] = {"*": "mock-gpt-4o-v2"}
    new["model_groups"]["claude"] = new["model_groups"].pop("mock-anthropic")
    new["default_model_group"] = "claude"
    # Upstream first: it must know every provider the edge may route to.
    hot.publish("upstream", "2", new)
    hot.publish("edge", "2", new)
    for role in STATS:
        hot.wait_stat(role, "version_text", '"2"', timeout=20)
        assert hot.stat(role, "config_reload") == "2"
    swapped_at = slow.count()

    # New requests follow the new config...
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI}, **{"x-model-group": "mock-openai"})
    assert status == 200 and body["model"] == "mock-gpt-4o-v2", body
    status, _, body = gw.chat({"model": "m", "messages": USER_HI}, **{"x-model-group": "mock-anthropic"})
    assert status == 404 and body["error"]["code"] == "MODEL_NOT_FOUND", body
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI})
    assert status == 200 and headers["x-llm-provider"] == "mock-anthropic", body
    status, _, body = gw.chat({"model": "m", "messages": USER_HI}, **{"x-model-group": "claude"})
    assert status == 200 and body["provider"] == "mock-anthropic"

    # ...while the stream in flight goes on with the old one: three more
    # events after the swap, still the old model mapping.
    slow.wait_for_events(swapped_at + 3)
    events = slow.hang_up()
    assert slow.headers["x-llm-model"] == "mock-gpt-4o"
    assert "[DONE]" not in events[:swapped_at + 3]
    assert {c["model"] for c in events if isinstance(c, dict)} == {"mock-gpt-4o"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in events if isinstance(c, dict) and c["choices"])
    assert text and ("Hello from the mock openai provider. You said: " + LONG_PROMPT[0]["content"]).startswith(text), text


def test_a_broken_config_is_rejected_and_the_old_one_kept(hot):
    gw = hot.gw
    broken = hot.config()
    broken["model_groups"]["mock-anthropic"]["cluster"] = ""
    broken["model_groups"]["extra"] = {"cluster": "mock_openai"}
    hot.publish("upstream", "2", broken)
    hot.publish("edge", "2", broken)
    for role in STATS:
        hot.wait_stat(role, "config_fail", "1")
        assert hot.stat(role, "update_rejected") == "1"
        # (version_text is no witness: the next rename into the directory
        # re-reads the same rejected file, which Envoy skips as unchanged and
        # counts as a success; see envoy/hot-reload/README.md.)
    log = (hot.dir.parent / "envoy/envoy.log").read_text()
    assert "model_groups.mock-anthropic.candidates[0].cluster: must not be empty" in log

    # Traffic keeps flowing on the old config.
    status, _, body = gw.chat({"model": "m", "messages": USER_HI}, **{"x-model-group": "mock-anthropic"})
    assert status == 200 and body["provider"] == "mock-anthropic", body
    _, _, events = stream(gw, {"model": "m", "messages": USER_HI, "stream": True}, {"x-model-group": "mock-anthropic"})
    assert events[-1][1] == "[DONE]"
    status, _, body = gw.chat({"model": "m", "messages": USER_HI}, **{"x-model-group": "extra"})
    assert status == 404 and body["error"]["code"] == "MODEL_NOT_FOUND"

    # The corrected config is taken.
    broken["model_groups"]["mock-anthropic"]["cluster"] = "mock_anthropic"
    hot.publish("upstream", "3", broken)
    hot.publish("edge", "3", broken)
    for role in STATS:
        hot.wait_stat(role, "version_text", '"3"')
        assert hot.stat(role, "config_fail") == "1"
    status, headers, _ = gw.chat({"model": "m", "messages": USER_HI}, **{"x-model-group": "extra"})
    assert status == 200 and headers["x-llm-provider"] == "mock-openai"


# Our build with one header name changed: the upstream role sets
# `x-llm-build-v2` where the build sets `x-llm-attempts` (the same length,
# the one place the name occurs: src/session/attempt.rs). A second cargo build
# with a changed constant would overwrite target/ (or, in a target dir of its
# own, rebuild every dependency: minutes); patching the constant in the
# module's data segment gives that build in no time, and Envoy compiles it
# as the new module it is.
OLD_HEADER, NEW_HEADER = b"x-llm-attempts", b"x-llm-build-v2"


def v2_build():
    data = gateway.WASM.read_bytes()
    assert data.count(OLD_HEADER) == 1 and NEW_HEADER not in data
    return data.replace(OLD_HEADER, NEW_HEADER)


def test_a_new_wasm_is_picked_up_without_dropping_traffic(hot, test_id):
    gw = hot.gw
    answers = []
    stop = threading.Event()

    def traffic():
        while not stop.is_set():
            status, headers, _ = gw.chat({"model": "m", "messages": USER_HI},
                                         **{"x-model-group": "mock-anthropic" if len(answers) % 2 else "mock-openai"})
            answers.append((status, NEW_HEADER.decode() in headers, "x-llm-attempts" in headers))

    background = threading.Thread(target=traffic, daemon=True)
    background.start()
    slow = SlowStream(gw, test_id, group="mock-anthropic", pace_ms=200)
    try:
        # A module that does not load is rejected; the old one keeps serving.
        bad = hot.publish_wasm("llm_gateway-bad.wasm", b"\x00asm\x01\x00\x00\x00not a module")
        hot.publish("upstream", "2", wasm=bad)
        hot.publish("edge", "2", wasm=bad)
        for role in STATS:
            hot.wait_stat(role, "config_fail", "1", timeout=20)

        # The new build under a new name, then the configs naming it, while a stream is in flight.
        new = hot.publish_wasm("llm_gateway-v2.wasm", v2_build())
        slow.start()
        hot.wait_requests_at_mock(test_id)
        slow.wait_for_events(1)
        hot.publish("upstream", "3", wasm=new)
        hot.publish("edge", "3", wasm=new)
        # Envoy compiles the new module before it swaps: seconds on a busy machine.
        for role in STATS:
            hot.wait_stat(role, "version_text", '"3"', timeout=30)
            assert hot.stat(role, "config_fail") == "1"
        swapped_at = slow.count()
        # Envoy now runs both roles from the new file...
        with gateway.urllib.request.urlopen(f"{gw.admin}/config_dump?resource=ecds_filters", timeout=5) as r:
            dump = json.loads(r.read())
        filenames = {c["ecds_filter"]["typed_config"]["config"]["vm_config"]["code"]["local"]["filename"]
                     for c in dump["configs"]}
        assert filenames == {str(new)}
        # ...and new requests get the new module's answer.
        served_before = len(answers)
        deadline = time.monotonic() + 20
        while sum(new for _, new, _ in answers[served_before:]) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        # The stream in flight goes on, on the old module.
        slow.wait_for_events(swapped_at + 3)
    finally:
        stop.set()
        background.join(timeout=30)
    events = slow.hang_up()

    assert {status for status, _, _ in answers} == {200}, answers
    assert sum(new for _, new, _ in answers[served_before:]) >= 4, "no answer from the new module after the swap"
    # Every answer came from one module or the other, the old ones first.
    assert all(new != old for _, new, old in answers), answers
    flags = [new for _, new, _ in answers]
    assert flags == sorted(flags), "once the new module answered, the old one never did again"
    assert not flags[0], "the old module answered first"
    assert slow.headers["x-llm-attempts"] == "1" and NEW_HEADER.decode() not in slow.headers
    assert {c["model"] for c in events if isinstance(c, dict)} == {"mock-claude-sonnet"}
    assert "[DONE]" not in events[:swapped_at + 3]


def test_shipped_roles_carry_one_configuration():
    edge, upstream = (yaml.safe_load((HOT_DIR / f"{role}.yaml").read_text()) for role in ("edge", "upstream"))
    edge, upstream = HotGateway.plugin(edge), HotGateway.plugin(upstream)
    assert json.loads(edge["configuration"]["value"]) == json.loads(upstream["configuration"]["value"])
    assert edge["vm_config"] == upstream["vm_config"]
    assert (edge["name"], edge["root_id"], upstream["name"], upstream["root_id"]) == \
        ("llm_edge", "llm_edge", "llm_upstream", "llm_upstream")


def test_a_reload_keeps_the_response_store_unless_its_bounds_change(hot):
    """The response store lives in Envoy's shared data (by `vm_id`), not in
    the configuration: a new configuration keeps it; new
    `response_store.max_entries` clear it (docs/src/features/responses-store.md)."""
    import openai
    c = openai.OpenAI(base_url=hot.gw.base + "/v1", api_key=hot.gw.key, max_retries=0,
                      default_headers={"x-model-group": "mock-anthropic"})
    made = c.responses.create(model="any", input="remember me")
    assert made.id.startswith("resp_gw")
    new = hot.config()
    new["providers"]["mock-anthropic"]["models"] = {"*": "mock-claude-v2"}
    hot.publish("upstream", "2", new)
    hot.publish("edge", "2", new)
    for role in STATS:
        hot.wait_stat(role, "version_text", '"2"', timeout=20)
    assert c.responses.retrieve(made.id).output_text == made.output_text
    again = c.responses.create(model="any", input="and then?", previous_response_id=made.id)
    assert again.model == "mock-claude-v2" and again.previous_response_id == made.id

    new["response_store"] = {"max_entries": 16}
    hot.publish("upstream", "3", new)
    hot.publish("edge", "3", new)
    for role in STATS:
        hot.wait_stat(role, "version_text", '"3"', timeout=20)
    for gone in (made.id, again.id):
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(gone)


def test_a_reload_that_changes_vertex_credentials_uses_a_fresh_token(tmp_path):
    """Vertex AI tokens are shared under a fingerprint of the credentials:
    a configuration whose service-account key changed gets a token of the
    new key at once (never the old key's), and the old key's token is
    dropped (going back to that key fetches a new one); one that keeps the
    key keeps the token, and another provider's token is kept throughout
    (docs/src/vendors/vertex.md, docs/src/features/vertex-tokens.md)."""
    key = (gateway.ROOT / "tests/fixtures/TEST-ONLY-vertex-service-account.json").read_text()
    hot = HotGateway(tmp_path, clusters=(
        lambda port: gateway.static_cluster("vertex_hot", port, "vertex-hot"),
        lambda port: gateway.static_cluster("vertex_md_hot", port, "vertex-md-hot"),
        lambda port: gateway.static_cluster("google_oauth", port, "none"),
        lambda port: gateway.static_cluster("gce_metadata", port, "none")))
    try:
        def publish(version, account_key, model="claude-sonnet-4-5@20250929"):
            new = hot.config()
            new["providers"]["vertex-hot"] = {
                "dialect": "vertex_anthropic", "api_key": account_key, "project": "mock-project",
                "location": "us-east5", "credentials": "service_account", "token_cluster": "google_oauth",
                "models": {"*": model}}
            new["providers"]["vertex-md-hot"] = {
                "dialect": "vertex_gemini", "project": "mock-project", "location": "global",
                "credentials": "metadata_server", "token_cluster": "gce_metadata",
                "models": {"*": "gemini-2.5-flash"}}
            new["model_groups"]["vertex-hot"] = {"cluster": "vertex_hot"}
            new["model_groups"]["vertex-md-hot"] = {"cluster": "vertex_md_hot"}
            hot.publish("upstream", version, new)
            hot.publish("edge", version, new)
            for role in STATS:
                hot.wait_stat(role, "version_text", f'"{version}"', timeout=20)

        def token(test_id, group="vertex-hot"):
            status, _, data = hot.gw.chat({"model": "m", "messages": USER_HI},
                                          **{"x-model-group": group, "x-test-id": test_id})
            assert status == 200, data
            return hot.gw.mock_requests(test_id)[-1]["headers"]["authorization"]

        other_key = key.replace("gateway-test@", "gateway-other@")
        publish("2", key)
        first = token("vertex-hot-1")
        assert first.startswith("Bearer ya29.mock-sa-")
        metadata = token("vertex-hot-md-1", "vertex-md-hot")
        assert metadata.startswith("Bearer ya29.mock-md-")
        # Another key (another account of the same project): a new token;
        # the metadata server's provider keeps its own.
        publish("3", other_key)
        second = token("vertex-hot-2")
        assert second != first, "the old credentials' token was not sent"
        assert token("vertex-hot-md-2", "vertex-md-hot") == metadata
        # The same key again, something else changed: the token is kept.
        publish("4", other_key, model="claude-opus-4-1@20250805")
        assert token("vertex-hot-3") == second
        # The first key back: its token was dropped at the reload away from
        # it (it has most of its hour left), so a new one is fetched.
        publish("5", key)
        third = token("vertex-hot-4")
        assert third not in (first, second)
        assert token("vertex-hot-md-3", "vertex-md-hot") == metadata
        log = (tmp_path / "envoy" / "envoy.log").read_text(errors="replace")
        assert "provider vertex-hot: its credentials changed" in log
        assert "provider vertex-md-hot: its credentials changed" not in log
    finally:
        hot.stop()
