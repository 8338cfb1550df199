"""The book (docs/src/) is executable: every code block says what it is and
is checked for it, every link resolves, and the performance page quotes no
number BENCHMARKS.md does not hold. The conventions are the book's own page,
docs/src/development/docs.md; the configuration examples are parsed by the
configuration parser in tests/docs.rs (`cargo test`).

- `yaml,envoy` / `yaml,envoy=pieces`: validated by the venv's Envoy with the
  built .wasm (`envoy --mode validate`, which also runs the filter's
  on_configure);
- `sh,run` / `python,run`: run against a gateway started as `make run` starts
  it (the mock, no keys), on the host of this run (wasm or native);
- `json,wire` and `yaml`: parsed;
- links to pages, their headings and files of the repository: resolved
  (the repository paths a page names in backticks are checked by
  tests/docs.rs, in `cargo test`, where a change that moves a file runs).

What does not depend on the host is checked on the wasm leg only."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import gateway
from conftest import NATIVE

ROOT = gateway.ROOT
DOCS = ROOT / "docs/src"
BENCHMARKS = ROOT / "BENCHMARKS.md"
MAKE_RUN_BASE = "http://127.0.0.1:10000"
# Placeholder for the gateway's filter configuration in a YAML example.
CONFIG_PLACEHOLDER = "{ ...the filter configuration... }"

host_independent = pytest.mark.skipif(NATIVE, reason="host-independent: checked on the wasm leg")

# What a code block's info string may say (docs/src/development/docs.md).
CHECKED = {"json,config", "json,wire", "yaml", "yaml,envoy", "yaml,envoy=pieces", "sh,run", "python,run"}
NOT_RUN = {"sh", "python", "text", "toml", "rust", "js", "console"}


class Block:
    def __init__(self, page, line, info, text):
        self.page, self.line, self.info, self.text = page, line, info, text

    @property
    def id(self):
        return f"{self.page.relative_to(DOCS)}:{self.line}"


def pages():
    return sorted(DOCS.rglob("*.md"))


# The README points into the book: its links are checked with the book's.
README = ROOT / "README.md"


def rel(page):
    return page.relative_to(DOCS) if page.is_relative_to(DOCS) else page.relative_to(ROOT)


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


def prose(page_text):
    """A page without its code blocks and code spans."""
    text = re.sub(r"^\s*```.*?^\s*```", "", page_text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


# ---- Every block says what it is --------------------------------------------

@host_independent
def test_every_code_block_says_what_it_is():
    bad = [f"{b.id}: ```{b.info}" for b in all_blocks()
           if not (b.info in CHECKED or b.info in NOT_RUN or b.info.startswith("json,config="))]
    assert not bad, ("mark each block as docs/src/development/docs.md says "
                     "(json,config / json,config=<path> / json,wire / yaml,envoy / sh,run ...):\n" + "\n".join(bad))
    # Enough of each kind that the checks below check something.
    assert len(all_blocks("json,wire")) >= 3
    assert len(all_blocks("yaml,envoy=pieces")) >= 3
    assert len(all_blocks("sh,run")) + len(all_blocks("python,run")) >= 4


@host_independent
@pytest.mark.parametrize("block", all_blocks("json,wire"), ids=lambda b: b.id)
def test_wire_examples_are_json(block):
    text = block.text.strip()
    try:
        json.loads(text)
    except json.JSONDecodeError:
        for line in text.splitlines():  # JSON lines
            json.loads(line)


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
def test_a_bad_envoy_piece_fails_validation(tmp_path):
    """The check can fail: a cluster Envoy refuses."""
    with pytest.raises(AssertionError):
        validate(place(shipped_bootstrap(), {"clusters": [{"name": "x", "type": "NO_SUCH_TYPE"}]}), tmp_path)


# ---- Examples run against a `make run` gateway ------------------------------

@pytest.fixture(scope="module")
def make_run_gateway(tmp_path_factory):
    """A gateway as `make run` starts it (envoy/gateway.yaml, the mock, no
    keys), on ports of its own; yields its base URL."""
    workdir = tmp_path_factory.mktemp("docs-gateway")
    mock, mock_port = gateway.start_mock()
    envoy = None
    try:
        envoy = gateway.start_envoy(gateway.build_bootstrap(0, 0, mock_port, env={}), workdir, timeout=60)
        yield f"http://127.0.0.1:{envoy.port}"
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


RUNNABLE = all_blocks("sh,run") + all_blocks("python,run")


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


# ---- Links ------------------------------------------------------------------

INCLUDE = re.compile(r"\{\{#include ([^}:]+)(?::([\w-]+))?\}\}")


def expanded(page):
    """The page's text with mdBook's includes put in (whole, or an anchor's lines)."""
    def include(m):
        text = (page.parent / m.group(1)).read_text()
        if m.group(2):
            lines = text.splitlines()
            start = lines.index(f"<!-- ANCHOR: {m.group(2)} -->")
            end = lines.index(f"<!-- ANCHOR_END: {m.group(2)} -->")
            text = "\n".join(lines[start + 1:end])
        return text
    return INCLUDE.sub(include, page.read_text())


def heading_id(title):
    """The id mdBook gives a heading: lowercase, markup and punctuation
    dropped, spaces as dashes."""
    title = re.sub(r"<[^>]+>", "", title)
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
    title = title.replace("`", "").replace("*", "").lower()
    return "".join(c for c in title.replace(" ", "-") if c.isalnum() or c in "-_")


def anchors(page):
    ids, seen = set(), {}
    for line in prose_lines(expanded(page)):
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            base = heading_id(m.group(1).strip())
            n = seen.get(base, 0)
            ids.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
    return ids


def prose_lines(text):
    return re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.M | re.S).splitlines()


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def links(page):
    text = re.sub(r"`[^`\n]*`", "", "\n".join(prose_lines(page.read_text())))
    return LINK.findall(text)


@host_independent
def test_every_link_resolves():
    broken = []
    anchor_cache = {}
    for page in [*pages(), README]:
        for target in links(page):
            if re.match(r"[a-z]+:", target):
                continue  # a web page: not reachable from here
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{rel(page)}: {target} (no such file)")
                continue
            if anchor:
                if resolved.suffix != ".md":
                    broken.append(f"{rel(page)}: {target} (an anchor in a file that is no page)")
                    continue
                ids = anchor_cache.setdefault(resolved, anchors(resolved))
                if anchor not in ids:
                    broken.append(f"{rel(page)}: {target} (no heading '{anchor}')")
    assert not broken, "\n".join(broken)


@host_independent
def test_the_readme_is_short_and_points_into_the_book():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move the detail into a page of the book"
    summary = {(DOCS / p).resolve() for p in LINK.findall((DOCS / "SUMMARY.md").read_text())}
    assert {(ROOT / t).resolve() for t in links(README)} & summary


@host_independent
def test_every_page_is_in_the_summary():
    summary = (DOCS / "SUMMARY.md").read_text()
    listed = {(DOCS / p).resolve() for p in LINK.findall(summary)}
    missing = [str(p.relative_to(DOCS)) for p in pages() if p.name != "SUMMARY.md" and p.resolve() not in listed]
    assert not missing, f"pages not in SUMMARY.md: {missing}"


# ---- Measured numbers come from BENCHMARKS.md -------------------------------

MEASURED = re.compile(r"\b\d+(?:\.\d+)?(?:\s?(?:µs|ms|%|MB|KB|x|req/s))|\b\d+\.\d+\b")


@host_independent
def test_the_performance_page_quotes_only_numbers_benchmarks_md_holds():
    page = DOCS / "performance/README.md"
    assert INCLUDE.search(page.read_text()), "the performance page includes BENCHMARKS.md's tables"
    own = prose(INCLUDE.sub("", page.read_text()))
    held = BENCHMARKS.read_text()
    numbers = MEASURED.findall(own)
    stray = [n for n in numbers if re.match(r"[\d.]+", n).group() not in held]
    assert not stray, f"numbers typed on the performance page that BENCHMARKS.md does not hold: {stray}"
