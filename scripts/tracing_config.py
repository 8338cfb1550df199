#!/usr/bin/env python3
"""Rewrites envoy/tracing.yaml from envoy/gateway.yaml after a change to the
latter: tracing.yaml keeps its own header comment, the HTTP connection
manager's `request_id_extension` and `tracing`, and the `otel_collector`
cluster, and turns on the filter's `span_attributes`; everything else comes
from gateway.yaml. tests/test_tracing.py fails when the two drift apart."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACING = ROOT / "envoy/tracing.yaml"
GATEWAY = ROOT / "envoy/gateway.yaml"
HCM_ANCHOR = "          stat_prefix: llm\n"
CONFIG_ANCHOR = "                  value: &llm_config |\n                    {\n"
SPAN_ATTRIBUTES = '                      "span_attributes": true,\n'


def main():
    cur = TRACING.read_text()
    header = cur[:cur.index("\nadmin:")]
    start = cur.index("          # Our API lets clients")
    end = cur.index("\n", cur.index("{tag: llm.route")) + 1
    tail = cur[cur.index("  # The OpenTelemetry collector (OTLP/HTTP on 4318)."):]
    gateway = GATEWAY.read_text()
    body = gateway[gateway.index("\nadmin:"):]
    assert body.count(HCM_ANCHOR) == 1, "gateway.yaml's HCM no longer has one `stat_prefix: llm` line"
    body = body.replace(HCM_ANCHOR, HCM_ANCHOR + cur[start:end])
    assert body.count(CONFIG_ANCHOR) == 1, "gateway.yaml's filter config no longer starts as expected"
    body = body.replace(CONFIG_ANCHOR, CONFIG_ANCHOR + SPAN_ATTRIBUTES)
    TRACING.write_text(header + body.rstrip("\n") + "\n" + tail)


if __name__ == "__main__":
    main()
