"""Runs last (file order): across everything the integration run did, no
response and no Envoy log line carries a vendor key."""

from conftest import VENDOR_KEYS


def test_no_vendor_key_in_any_response_or_log(gw):
    assert len(gw.seen) > 50, "the scan covers the whole run"
    for headers, body in gw.seen:
        for key in VENDOR_KEYS:
            assert key not in headers, headers
            assert key.encode() not in body, body[:300]
    log = (gw.workdir / "envoy.log").read_text()
    assert "llm gateway" in log, "the filter's own log lines are in the scanned log"
    for key in VENDOR_KEYS:
        assert key not in log
