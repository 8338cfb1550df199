# Two commands do everything on a fresh machine:
#   make run    start Envoy + the filter + the bundled mock provider
#   make test   install what is missing, then run every test
SHELL := /bin/bash
.DEFAULT_GOAL := help

TOOLCHAIN := $(shell sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
VENV      := .venv
PY        := $(VENV)/bin/python
WASM      := target/wasm32-wasip1/release/llm_gateway.wasm
MOCK      := target/release/mock-provider

.PHONY: bench soak wrk fuzz key-hash help setup toolchain venv build run test test-unit test-wasm test-integration lint clean

help:
	@echo "make run    - start the gateway on http://127.0.0.1:10000/v1 (mock provider; real vendors when keys are set)"
	@echo "make test   - install everything needed and run all tests"
	@echo "make bench  - the filter against plain Envoy, written to BENCHMARKS.md (a few minutes)"
	@echo "make soak   - 100k mixed requests through one Envoy, RSS before/during/after, into BENCHMARKS.md"

setup: toolchain venv

# The pinned toolchain with the wasm target (rustup installs what is missing).
toolchain:
	rustup toolchain install $(TOOLCHAIN) --profile minimal --component clippy,rustfmt --target wasm32-wasip1
	rustup target add wasm32-wasip1 --toolchain $(TOOLCHAIN)

$(VENV)/.installed: tests/requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

venv: $(VENV)/.installed

build: toolchain
	cargo build --release --target wasm32-wasip1 -p llm-gateway
	cargo build --release -p llm-mock

run: build venv
	$(PY) scripts/gateway.py run

# The hash to put in the filter config's auth.keys[].sha256 for a new key.
key-hash:
	@test -n "$(KEY)" || { echo "usage: make key-hash KEY=<new gateway key>"; exit 2; }
	@python3 -c 'import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())' "$(KEY)"

lint: toolchain
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy -p llm-gateway --target wasm32-wasip1 -- -D warnings

test-unit: toolchain
	cargo test --workspace

# The core's unit tests compiled to wasm32-wasip1 and run under Node's WASI.
test-wasm: toolchain
	cargo test -p llm-gateway --lib --target wasm32-wasip1

# Longer fuzzing pass than the one `make test` runs (see tests/fuzz.rs).
FUZZ_ITERATIONS ?= 200000
fuzz: toolchain
	FUZZ_ITERATIONS=$(FUZZ_ITERATIONS) cargo test --release --test fuzz -- --nocapture

test-integration: build venv
	$(PY) -m pytest -q tests

test: lint test-unit test-wasm test-integration

# The load generator (Debian package), installed when missing.
wrk:
	@command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }

# Not part of `make test`: performance is measured here, never asserted in tests.
bench: build venv wrk
	$(PY) scripts/bench.py bench

soak: build venv wrk
	$(PY) scripts/bench.py soak

clean:
	cargo clean
	rm -rf $(VENV) .run
