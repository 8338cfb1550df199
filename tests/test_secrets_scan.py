"""The end-of-run secrets scan (conftest's `secrets_scan`, torn down last,
whatever order the tests ran in) can fail: it finds a key in a response
header, a response body, an Envoy log and an access log, and a panic."""

import gateway
from conftest import SEEN, VENDOR_KEYS, envoy_logs, filter_panics, leaks


def test_the_scan_finds_a_key_anywhere():
    key = VENDOR_KEYS[0]
    assert leaks([("{}", b"fine")], {"envoy.log": "fine", "access.log": "{}"}) == []
    assert len(leaks([('{"x": "%s"}' % key, b"")], {})) == 1
    assert len(leaks([("{}", b"..." + key.encode() + b"...")], {})) == 1
    assert [where for where, _ in leaks([], {"a/envoy.log": "x " + key, "a/access.log": key})] == \
        ["a/envoy.log", "a/access.log"]
    # Only Envoy's echo of its own config at debug level is not a leak.
    config_echo = "[2026-01-01 00:00:00.000][1][debug][config] [source/x.cc:1]   config: {\"api_key\":\"%s\"}" % key
    assert leaks([], {"envoy.log": config_echo}) == []
    assert len(leaks([], {"envoy.log": config_echo + "\n[2026][1][debug][router] authorization: " + key})) == 1


def dump(path, key, internal=True):
    """Envoy's router's debug dump of a request's headers."""
    lines = ["[2026][1][debug][router] [router.cc:894] router decoding headers:",
             "':method', 'GET'", f"':path', '{path}'", f"'authorization', 'Bearer {key}'"]
    return "\n".join(lines + (["'x-envoy-internal', 'true'"] if internal else []) + ["", "[2026][1][debug][pool] next"])


def test_only_model_discovery_list_calls_dumped_at_debug_level_are_not_leaks():
    """Documented (model-discovery.md): a list call carries its provider's
    credentials, and Envoy's router prints a callout's headers at debug
    level. Any other dump with a key is a leak."""
    key = VENDOR_KEYS[0]
    for path in ("/v1/models", "/v1/models?limit=1000&after_id=x", "/v1beta/models?pageSize=1000",
                 "/openai/deployments?api-version=2022-12-01", "/compatible-mode/v1/models",
                 "/v1beta1/publishers/google/models?pageSize=1000", "/v1/models/claude-x"):
        assert leaks([], {"envoy.log": dump(path, key)}) == [], path
    for path in ("/v1/chat/completions", "/v1/models/x/y", "/v1/messages?x=/v1/models"):
        assert len(leaks([], {"envoy.log": dump(path, key)})) == 1, path
    # A client's request (not a callout) is scanned whatever its path.
    assert len(leaks([], {"envoy.log": dump("/v1/models", key, internal=False)})) == 1
    # What follows a dump is scanned again.
    assert len(leaks([], {"envoy.log": dump("/v1/models", key) + " " + key})) == 1


def test_the_scan_finds_a_panic_but_not_the_deliberate_one():
    ours = "[wasm log llm_gateway] panicked at src/session/edge.rs:12:5"
    trap = "Function: proxy_on_request_headers failed: Uncaught RuntimeError: unreachable"
    floor = "[wasm log] panicked at benches/wasm-floor/src/lib.rs:9:9"
    assert filter_panics({"envoy.log": "ok\n" + ours}) == [("envoy.log", ours)]
    assert filter_panics({"envoy.log": trap}) == [("envoy.log", trap)]
    assert filter_panics({"envoy.log": floor + "\n" + trap}) == []


def test_the_scan_covers_every_envoy_and_every_gateway(gw):
    """The session gateway's Envoy is among those scanned, and its responses
    are in the shared list (other fixtures' Gateways append to the same)."""
    gw.chat({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert gw.seen is SEEN and SEEN
    assert gw.workdir in gateway.STARTED_WORKDIRS
    logs = envoy_logs()
    assert str(gw.workdir / "envoy.log") in logs and str(gw.workdir / "access.log") in logs
