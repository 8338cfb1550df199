#!/usr/bin/env python3
"""Checks a native-host build (`libllm_gateway.so`, an Envoy dynamic module)
against the Envoy binary it is for. The ABI is pre-1.0 and Envoy only warns
on a version mismatch, so before a .so ships:

    native_module_check.py symbols MODULE ENVOY
        every Envoy callback MODULE imports is one ENVOY exports, every hook
        Envoy requires is exported, and both carry the same ABI version
        string (`nm -D` and the bytes: works for any architecture's ELF);
    native_module_check.py load MODULE ENVOY [--qemu-aarch64]
        ENVOY loads MODULE in both roles (the shipped bootstrap through
        scripts/gateway.py's `to_native`, the mock provider behind it) and
        serves a chat request; `--qemu-aarch64` runs an aarch64 ENVOY under
        qemu-user.

`make dist` runs `symbols` on each .so it ships, `make check-aarch64` runs
`load` on the aarch64 one; tests/test_native_host.py uses the same functions
for the x86_64 one.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import gateway

# The hooks Envoy 1.40 requires of an HTTP filter module (a missing one
# rejects the filter config).
REQUIRED_HOOKS = ["program_init"] + [f"http_filter_{h}" for h in (
    "config_new", "config_destroy", "new", "request_headers", "request_body", "request_trailers",
    "response_headers", "response_body", "response_trailers", "stream_complete", "destroy",
    "http_callout_done", "http_stream_headers", "http_stream_data", "http_stream_trailers",
    "http_stream_complete", "http_stream_reset", "scheduled",
    "downstream_above_write_buffer_high_watermark", "downstream_below_write_buffer_low_watermark")]
CALLBACK_PREFIX = "envoy_dynamic_module_"
# Where Debian's libc6-arm64-cross puts the aarch64 loader and libraries.
AARCH64_SYSROOT = "/usr/aarch64-linux-gnu"


class CheckFailed(Exception):
    pass


def symbols(path, *flags):
    nm = shutil.which("nm")
    if nm is None:
        raise CheckFailed("nm (binutils) is not installed")
    out = subprocess.run([nm, "-D", *flags, str(path)], check=True, capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()}


def imported_callbacks(module):
    return {s for s in symbols(module, "--undefined-only") if s.startswith(CALLBACK_PREFIX)}


def missing_callbacks(module, envoy):
    """The callbacks `module` imports that `envoy` does not export (Envoy
    would refuse the filter config: the .so binds every symbol when loaded)."""
    return sorted(imported_callbacks(module) - symbols(envoy, "--defined-only"))


def missing_hooks(module):
    exported = symbols(module, "--defined-only")
    return [h for h in REQUIRED_HOOKS if f"{CALLBACK_PREFIX}on_{h}" not in exported]


def abi_versions(path):
    """The ABI version strings in a binary (the module returns its own from
    `envoy_dynamic_module_on_program_init`; Envoy carries the one it speaks)."""
    return {v.decode() for v in re.findall(rb"\x00(v0\.\d+\.\d+)\x00", Path(path).read_bytes())}


def check_symbols(module, envoy):
    """Raises CheckFailed saying what does not match; returns the ABI version."""
    imported = imported_callbacks(module)
    # Far fewer means nm read the wrong file or the symbols are gone.
    if len(imported) < 20:
        raise CheckFailed(f"{module} imports only {len(imported)} Envoy callbacks: {sorted(imported)}")
    missing = missing_callbacks(module, envoy)
    if missing:
        raise CheckFailed(f"{module} needs callbacks {envoy} does not export: {missing}")
    hooks = missing_hooks(module)
    if hooks:
        raise CheckFailed(f"{module} does not export the required hooks {hooks}")
    ours = abi_versions(module)
    if len(ours) != 1:
        raise CheckFailed(f"{module} carries {len(ours)} ABI version strings: {sorted(ours)}")
    version = next(iter(ours))
    if version not in abi_versions(envoy):
        raise CheckFailed(f"{envoy} does not speak ABI {version} (it has {sorted(abi_versions(envoy))})")
    return version


def serve_one_request(workdir, timeout=20.0):
    """Starts the mock and Envoy on the shipped bootstrap with the native host
    (LLM_GATEWAY_HOST=native: the module gateway.NATIVE names, the Envoy
    gateway.envoy_binary() names) and sends a chat request through the edge
    and an attempt. Returns the response's (status, x-llm-provider, content)
    and the bootstrap Envoy served, then Envoy's log once it has stopped."""
    mock, mock_port = gateway.start_mock()
    envoy = None
    try:
        bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={})
        envoy = gateway.start_envoy(bootstrap, workdir, log_level="info", timeout=timeout)
        served = (Path(workdir) / "envoy.json").read_text()
        request = urllib.request.Request(
            f"http://127.0.0.1:{envoy.port}/v1/chat/completions",
            data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
            headers={"content-type": "application/json", "x-model-group": "mock-anthropic"})
        with urllib.request.urlopen(request, timeout=timeout) as r:
            content = json.loads(r.read())["choices"][0]["message"]["content"]
            response = (r.status, r.headers["x-llm-provider"], content)
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)
    return response, served, (Path(workdir) / "envoy.log").read_text()


def check_loads(workdir, abi, timeout):
    """serve_one_request, raising CheckFailed unless the module served it in
    both roles with its ABI version matched."""
    (status, provider, content), served, log = serve_one_request(workdir, timeout)
    if "dynamic_modules" not in served or "llm_gateway.wasm" in served:
        raise CheckFailed("the bootstrap did not run the native host")
    if (status, provider) != (200, "mock-anthropic") or "mock anthropic" not in content:
        raise CheckFailed(f"unexpected response: {status} {provider} {content!r}")
    for line in (f"Dynamic module ABI version {abi} matched.",
                 "llm gateway (llm_edge, native)", "llm gateway (llm_upstream, native)"):
        if line not in log:
            raise CheckFailed(f"{line!r} is not in Envoy's log ({Path(workdir) / 'envoy.log'})")


def qemu_aarch64_launcher(envoy, workdir):
    """An executable that runs the aarch64 `envoy` under qemu-user (what
    gateway.start_envoy starts in place of the venv's Envoy)."""
    qemu = shutil.which("qemu-aarch64")
    if qemu is None:
        raise CheckFailed("qemu-aarch64 is not installed (apt-get install qemu-user)")
    launcher = Path(workdir) / "envoy-qemu-aarch64"
    launcher.write_text(f'#!/bin/sh\nexec {qemu} -L {AARCH64_SYSROOT} {Path(envoy).resolve()} "$@"\n')
    launcher.chmod(0o755)
    return launcher


def load(module, envoy, qemu_aarch64, workdir, timeout):
    module, envoy, workdir = Path(module).resolve(), Path(envoy).resolve(), Path(workdir).resolve()
    if module.name != "libllm_gateway.so":
        # Envoy finds `dynamic_module_config.name: llm_gateway` by this name.
        raise CheckFailed(f"{module} must be named libllm_gateway.so")
    workdir.mkdir(parents=True, exist_ok=True)
    launcher = qemu_aarch64_launcher(envoy, workdir) if qemu_aarch64 else envoy
    os.environ["LLM_GATEWAY_HOST"] = "native"
    # gateway.start_envoy reads both when called: this process runs one check.
    gateway.NATIVE = module
    gateway.envoy_binary = lambda: str(launcher)
    check_loads(workdir, check_symbols(module, envoy), timeout)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("symbols", "load"):
        command = sub.add_parser(name)
        command.add_argument("module", type=Path)
        command.add_argument("envoy", type=Path)
    sub.choices["load"].add_argument("--qemu-aarch64", action="store_true", help="run ENVOY under qemu-aarch64")
    sub.choices["load"].add_argument("--workdir", type=Path, default=gateway.ROOT / ".run/native-module-check")
    sub.choices["load"].add_argument("--timeout", type=float, default=120.0,
                                     help="seconds for Envoy to start and to answer (qemu is slow)")
    args = parser.parse_args()
    try:
        if args.command == "symbols":
            abi = check_symbols(args.module, args.envoy)
            print(f"{args.module}: every imported callback is exported by {args.envoy}, ABI {abi}")
        else:
            load(args.module, args.envoy, args.qemu_aarch64, args.workdir, args.timeout)
            print(f"{args.envoy} loaded {args.module} in both roles and served a request")
    except (CheckFailed, RuntimeError) as failed:  # RuntimeError: gateway's, e.g. Envoy did not start
        sys.exit(f"native module check failed: {failed}")


if __name__ == "__main__":
    main()
