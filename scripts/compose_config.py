#!/usr/bin/env python3
"""Writes envoy/compose/envoy.yaml (the Envoy config of envoy/docker-compose.yaml)
from envoy/gateway.yaml, keeping its comments: the same filter configuration,
routes and clusters, adapted for compose networking. After changing
envoy/gateway.yaml run `python3 scripts/compose_config.py`; a test fails while
the two differ."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "envoy/gateway.yaml"
TARGET = ROOT / "envoy/compose/envoy.yaml"

HEADER = """\
# GENERATED from envoy/gateway.yaml by scripts/compose_config.py: edit that
# file, then run `python3 scripts/compose_config.py`.
#
# The Envoy config of envoy/docker-compose.yaml (users' CI): the filter
# configuration, model groups and clusters of envoy/gateway.yaml (the
# `make run` config), adapted for compose networking:
#   - admin and listener on 0.0.0.0 inside the container (compose publishes
#     10000 and 9901 on the host);
#   - the clusters reach the mock provider by its compose service name `mock`
#     (STRICT_DNS: Docker's DNS resolves it);
#   - the .wasm is mounted at /etc/envoy/llm_gateway.wasm.
# Gateway keys are off: CI talks to the mock. Production configs keep "auth" on.

"""

REPLACEMENTS = [
    ("address: {socket_address: {address: 127.0.0.1, port_value: 9901}}",
     "address: {socket_address: {address: 0.0.0.0, port_value: 9901}}"),
    ("address: {socket_address: {address: 127.0.0.1, port_value: 10000}}",
     "address: {socket_address: {address: 0.0.0.0, port_value: 10000}}"),
    ("code: {local: {filename: target/wasm32-wasip1/release/llm_gateway.wasm}}",
     "code: {local: {filename: /etc/envoy/llm_gateway.wasm}}"),
    ("    type: STATIC\n", "    type: STRICT_DNS\n    dns_lookup_family: V4_ONLY\n"),
    ("address: {socket_address: {address: 127.0.0.1, port_value: 18000}}",
     "address: {socket_address: {address: mock, port_value: 18000}}"),
]


def render():
    text = SOURCE.read_text()
    body = text[text.index("\nadmin:") + 1:]
    for old, new in REPLACEMENTS:
        if old not in body:
            raise SystemExit(f"{SOURCE} changed shape: {old.strip()!r} not found; update {__file__}")
        body = body.replace(old, new)
    if "127.0.0.1" in body:
        raise SystemExit(f"{SOURCE} has a loopback address this script does not adapt; update {__file__}")
    return HEADER + body


if __name__ == "__main__":
    TARGET.write_text(render())
    print(f"wrote {TARGET.relative_to(ROOT)}", file=sys.stderr)
