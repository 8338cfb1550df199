"""The book's examples that need Envoy or a running gateway (the rest of
the book's checks, which every `cargo test` runs, are tests/docs.rs: the
configuration examples parsed, every block marked, links, anchors,
repository paths, SUMMARY.md, the performance page's numbers). The
conventions are the book's own page, docs/src/development/docs.md.

- `yaml,envoy` / `yaml,envoy=pieces`: validated by the venv's Envoy
  (`envoy --mode validate`, which also runs the filter's on_configure);
- `sh,run` / `python,run`: run against a gateway started as `make run` starts
  it (the mock, no keys), on the host of this run (wasm or native);
- `yaml`: parsed.

Validation does not depend on the host: it is checked on the wasm leg only."""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

import gateway
from conftest import NATIVE

ROOT = gateway.ROOT
DOCS = ROOT / "docs/src"
MAKE_RUN_BASE = "http://127.0.0.1:10000"
# Placeholder for the gateway's filter configuration in a YAML example.
CONFIG_PLACEHOLDER = "{ ...the filter configuration... }"

host_independent = pytest.mark.skipif(NATIVE, reason="host-independent: checked on the wasm leg")



class Block:
    def __init__(self, page, line, info, text):
        self.page, self.line, self.info, self.text = page, line, info, text

    @property
    def id(self):
        base = DOCS if self.page.is_relative_to(DOCS) else ROOT
        return f"{self.page.relative_to(base)}:{self.line}"


def pages():
    return sorted(DOCS.rglob("*.md"))


def blocks_of(page):
    """Fenced code blocks, indented ones (in list items) included."""
    found, current = [], None
    for i, line in enumerate(page.read_text().splitlines(), 1):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if current is None:
            if stripped.startswith("```"):
                current = (i, indent, stripped[3:].strip(), [])
        elif stripped == "```":
            found.append(Block(page, current[0], current[2], "\n".join(current[3])))
            current = None
        else:
            current[3].append(line[min(indent, current[1]):])
    assert current is None, f"{page}: a code block is never closed"
    return found


def all_blocks(info=None):
    blocks = [b for p in pages() for b in blocks_of(p)]
    return [b for b in blocks if info is None or b.info == info]




@host_independent
@pytest.mark.parametrize("block", [b for b in all_blocks() if b.info.startswith("yaml")], ids=lambda b: b.id)
def test_yaml_examples_parse(block):
    assert list(yaml.safe_load_all(block.text)), block.id


# ---- Envoy YAML, validated by Envoy -----------------------------------------

def shipped_bootstrap():
    """envoy/gateway.yaml with this build's .wasm, as the tests start it."""
    return gateway.build_bootstrap(0, 0, 18000, env={})


def place(bootstrap, pieces):
    """A `yaml,envoy=pieces` example put in its places in the shipped bootstrap."""
    hcm, edge, upstream = gateway._wasm_filters(bootstrap)
    config = edge["configuration"]["value"]
    filters = hcm["http_filters"]
    router = filters[-1]["typed_config"]
    for where, piece in pieces.items():
        piece = json.loads(json.dumps(piece).replace(json.dumps(CONFIG_PLACEHOLDER)[1:-1],
                                                     json.dumps(config)[1:-1]))
        if where == "vm_config":
            for role in (edge, upstream):
                role["vm_config"] = piece
        elif where == "edge_filter":
            filters[0] = piece
        elif where == "upstream_filter":
            router["upstream_http_filters"][0] = piece
        elif where == "clusters":
            bootstrap["static_resources"]["clusters"].extend(piece)
        elif where == "routes":
            hcm["route_config"]["virtual_hosts"][0]["routes"][:0] = piece
        else:
            raise AssertionError(f"unknown place '{where}' (vm_config, edge_filter, upstream_filter, "
                                 "clusters, routes)")
    return bootstrap


def validate(config, workdir):
    path = workdir / "envoy.json"
    path.write_text(json.dumps(config, indent=1))
    env = {"PATH": "/usr/bin:/bin", "ENVOY_DYNAMIC_MODULES_SEARCH_PATH": str(gateway.NATIVE.parent),
           "OPENAI_API_KEY": "sk-dummy", "ANTHROPIC_API_KEY": "sk-dummy"}
    result = subprocess.run([gateway.envoy_binary(), "--mode", "validate", "-c", str(path)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "OK" in out, out[-4000:]


@host_independent
@pytest.mark.parametrize("block", [b for b in all_blocks() if b.info.startswith("yaml,envoy")], ids=lambda b: b.id)
def test_envoy_examples_validate(block, tmp_path):
    (document,) = list(yaml.safe_load_all(block.text))
    if block.info == "yaml,envoy":
        config = json.loads(json.dumps(document).replace("target/wasm32-wasip1/release/llm_gateway.wasm",
                                                          str(gateway.WASM)))
    elif "vm_config" in document:
        config = place(shipped_bootstrap(), document)
    else:
        # The pieces with the filters on the native host: the same
        # configuration checked by the same parser (on_configure), without
        # compiling the .wasm (seconds on a busy machine).
        config = gateway.to_native(place(shipped_bootstrap(), document))
    validate(config, tmp_path)


@host_independent
def test_the_book_has_envoy_and_runnable_examples():
    """Enough of each kind that the checks here check something."""
    assert len([b for b in all_blocks() if b.info.startswith("yaml,envoy")]) >= 3
    assert len(all_blocks("sh,run")) + len(all_blocks("python,run")) >= 6
    assert len(README_RUNNABLE) == 2, "the README's curl and SDK examples"


@host_independent
def test_a_bad_envoy_piece_fails_validation(tmp_path):
    """The check can fail: a cluster Envoy refuses."""
    with pytest.raises(AssertionError):
        validate(place(shipped_bootstrap(), {"clusters": [{"name": "x", "type": "NO_SUCH_TYPE"}]}), tmp_path)


# ---- Examples run against a `make run` gateway ------------------------------

@pytest.fixture(scope="module")
def make_run_gateway(tmp_path_factory):
    """A gateway as `make run` starts it (envoy/gateway.yaml, the mock, no
    keys, the mock groups' caches, the diagnostics view open to this host), on
    ports of its own; yields its base URL."""
    workdir = tmp_path_factory.mktemp("docs-gateway")
    mock, mock_port = gateway.start_mock()
    envoy = None
    try:
        envoy = gateway.start_envoy(gateway.build_bootstrap(0, 0, mock_port, env={}, cache=True, diagnostics=True),
                                    workdir, timeout=60)
        yield f"http://127.0.0.1:{envoy.port}"
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


# The README's curl and SDK examples too (plain `sh` and `python` there, as
# GitHub shows them): those that call the gateway and no CLI.
README_RUNNABLE = [Block(b.page, b.line, f"{b.info},run", b.text) for b in blocks_of(ROOT / "README.md")
                   if b.info in ("sh", "python") and MAKE_RUN_BASE in b.text
                   and not re.search(r"(?m)^(?:[A-Z_]+=\S+ )*(claude|gemini|codex) [^=]", b.text)]
RUNNABLE = all_blocks("sh,run") + all_blocks("python,run") + README_RUNNABLE


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.id)
def test_examples_run_against_the_gateway(block, make_run_gateway):
    assert MAKE_RUN_BASE in block.text, f"{block.id} does not call make run's gateway"
    text = block.text.replace(MAKE_RUN_BASE, make_run_gateway)
    if block.info == "sh,run":
        # curl says an error status by its exit code here.
        text = re.sub(r"\bcurl -s\b", "curl -s --fail-with-body", text)
        cmd = ["bash", "-euo", "pipefail", "-c", text]
    else:
        cmd = [sys.executable, "-c", text]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "OPENAI_BASE_URL": "", "ANTHROPIC_BASE_URL": ""})
    assert result.returncode == 0, f"{block.id}:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    assert result.stdout.strip(), f"{block.id} printed nothing"
