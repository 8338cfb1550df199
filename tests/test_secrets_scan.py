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
