"""Runs last (file order): across everything the integration run did, no
response and no Envoy log line carries a vendor key, and the wasm VM never
panicked (a panic kills the VM and every later request fails)."""

import gateway
from conftest import VENDOR_KEYS


def test_no_vendor_key_in_any_response_or_log(gw):
    assert len(gw.seen) > 50, "the scan covers the whole run"
    assert len(VENDOR_KEYS) >= 6
    assert gateway.MOCK_AWS_CREDENTIALS.split(":")[1] in VENDOR_KEYS, "the Bedrock signer's secret is scanned"
    for headers, body in gw.seen:
        for key in VENDOR_KEYS:
            assert key not in headers, headers
            assert key.encode() not in body, body[:300]
    log = (gw.workdir / "envoy.log").read_text(errors="replace")
    assert "llm gateway" in log, "the filter's own log lines are in the scanned log"
    log += (gw.workdir / "access.log").read_text(errors="replace")
    for key in VENDOR_KEYS:
        assert key not in log


def test_the_filter_never_panicked(gw):
    log = (gw.workdir / "envoy.log").read_text(errors="replace")
    assert "panicked" not in log
    assert "RuntimeError" not in log
    stats = gw.stats("wasm")
    # VMs rebuilt after dying (FAIL_RELOAD); `vm_reload` itself never moves.
    assert stats.get("wasm.llm_edge.vm_reload_success", "0") == "0"
    assert stats.get("wasm.llm_upstream.vm_reload_success", "0") == "0"
