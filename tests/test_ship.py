"""What we ship for other people's setups: the docker-compose file for users'
CI (parsed by docker-compose, its paths checked, its Envoy config validated),
and the release artifact of `make dist` (checksum, version, loads in Envoy)."""

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml

import compose_config as compose_gen
import gateway

ROOT = gateway.ROOT
COMPOSE = ROOT / "envoy/docker-compose.yaml"
COMPOSE_ENVOY = ROOT / "envoy/compose/envoy.yaml"
# Build outputs a compose file may mount: produced by `make build` / `make dist`.
BUILD_OUTPUTS = {gateway.WASM, ROOT / "dist/llm_gateway.wasm"}


def validate(config_path, cwd=ROOT):
    """`envoy --mode validate`; returns the combined output after asserting OK."""
    result = subprocess.run([gateway.envoy_binary(), "--mode", "validate", "-c", str(config_path)], cwd=cwd,
                            env={"OPENAI_API_KEY": "sk-dummy", "ANTHROPIC_API_KEY": "sk-dummy", "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "OK" in out, out[-4000:]
    return out


def filter_configs(bootstrap):
    """The two wasm filter configs of a bootstrap shaped like envoy/gateway.yaml."""
    return gateway._wasm_filters(bootstrap)[1:]


# ---- docker-compose ---------------------------------------------------------

def compose_config():
    exe = shutil.which("docker-compose")
    assert exe, "docker-compose is missing: `make compose-tools` installs Debian's package"
    result = subprocess.run([exe, "-f", str(COMPOSE), "config"], capture_output=True, text=True, timeout=60,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_compose_file_parses_and_everything_it_mounts_or_builds_from_exists():
    config = compose_config()
    services = config["services"]
    assert set(services) == {"envoy", "mock"}
    assert services["envoy"]["image"].startswith("envoyproxy/envoy:v1.40")
    # Both services are health-checked, and Envoy waits for the mock.
    for svc in services.values():
        assert svc["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL")
    assert services["envoy"]["depends_on"]["mock"]["condition"] == "service_healthy"
    # The mock is built from the repository with our Dockerfile.
    build = services["mock"]["build"]
    context = Path(build["context"])
    assert context.resolve() == ROOT
    dockerfile = context / build["dockerfile"]
    assert dockerfile.is_file(), dockerfile
    for line in dockerfile.read_text().splitlines():
        if line.startswith("COPY") and "--from=" not in line:
            for src in line.split()[1:-1]:
                assert (context / src).exists(), f"{dockerfile} copies {src}, missing from the repository"
    # The image's own health check is the one compose runs (tested live below).
    healthcheck = dockerfile.read_text().split("HEALTHCHECK", 1)[1].split("CMD", 1)[1].split("\n", 1)[0].strip()
    assert ["CMD", *json.loads(healthcheck)] == services["mock"]["healthcheck"]["test"]
    # Every bind mount exists in the repository, or is a build output.
    mounts = [v.split(":")[0] for svc in services.values() for v in svc.get("volumes", [])]
    assert mounts, "the compose file mounts the gateway config and the .wasm"
    for source in map(Path, mounts):
        assert source.is_absolute(), source
        if source in BUILD_OUTPUTS:
            continue
        assert source.exists(), f"{COMPOSE} mounts {source}, which does not exist"
        assert ROOT in source.resolve().parents, f"{source} is outside the repository"
    # The Envoy config it mounts is the one validated below, the wasm where it says.
    envoy_mounts = dict(v.split(":")[:2] for v in services["envoy"]["volumes"])
    assert Path(envoy_mounts[str(COMPOSE_ENVOY)]) == Path("/etc/envoy/envoy.yaml")
    wasm_target = envoy_mounts[str(gateway.WASM)]
    edge, upstream = filter_configs(yaml.safe_load(COMPOSE_ENVOY.read_text()))
    assert edge["vm_config"]["code"]["local"]["filename"] == wasm_target
    assert upstream["vm_config"]["code"]["local"]["filename"] == wasm_target
    # The mock listens where the clusters look for it, and checks Bedrock
    # signatures made with the credentials the Envoy config signs with.
    command = services["mock"]["command"]
    assert "0.0.0.0:18000" in command
    assert command[command.index("--aws-credentials") + 1] == gateway.MOCK_AWS_CREDENTIALS


def test_compose_envoy_config_validates_and_matches_the_make_run_config(tmp_path):
    text = COMPOSE_ENVOY.read_text()
    assert text == compose_gen.render(), \
        "envoy/compose/envoy.yaml is out of date: run `python3 scripts/compose_config.py`"
    bootstrap = yaml.safe_load(text)
    assert bootstrap["admin"]["address"]["socket_address"]["address"] == "0.0.0.0"
    listener = bootstrap["static_resources"]["listeners"][0]
    assert listener["address"]["socket_address"] == {"address": "0.0.0.0", "port_value": 10000}
    for cluster in bootstrap["static_resources"]["clusters"]:
        if "load_assignment" not in cluster:
            continue  # aggregate
        if cluster["name"] == "llm_self":
            continue  # the gateway's own internal listener (self-calls)
        assert cluster["type"] in ("STRICT_DNS", "LOGICAL_DNS"), cluster["name"]
        for group in cluster["load_assignment"]["endpoints"]:
            for ep in group["lb_endpoints"]:
                assert ep["endpoint"]["address"]["socket_address"] == {"address": "mock", "port_value": 18000}
    # Same filter configuration, clusters and model groups as `make run`.
    reference = yaml.safe_load((ROOT / "envoy/gateway.yaml").read_text())
    edge, _ = filter_configs(bootstrap)
    ref_edge, _ = filter_configs(reference)
    assert json.loads(edge["configuration"]["value"]) == json.loads(ref_edge["configuration"]["value"])
    assert ([c["name"] for c in bootstrap["static_resources"]["clusters"]]
            == [c["name"] for c in reference["static_resources"]["clusters"]])
    # Validated with the wasm where the compose file mounts it (here: the build
    # output); the `mock` hostname does not resolve here, which STRICT_DNS allows.
    local = tmp_path / "compose-envoy.yaml"
    local.write_text(text.replace("/etc/envoy/llm_gateway.wasm", str(gateway.WASM)))
    out = validate(local)
    providers = len(json.loads(edge["configuration"]["value"])["providers"])
    assert f"llm gateway (llm_upstream): configured {providers} providers" in out


# ---- make dist --------------------------------------------------------------

def test_make_dist_writes_a_checksummed_versioned_wasm_that_envoy_loads(tmp_path):
    dist = tmp_path / "dist"
    result = subprocess.run(["make", "--no-print-directory", "dist", f"DIST={dist}"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    crate_version = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)
    version = (dist / "VERSION").read_text().strip()
    assert version.startswith(crate_version)
    wasm = dist / "llm_gateway.wasm"
    versioned = dist / f"llm_gateway-{version}.wasm"
    assert wasm.read_bytes()[:4] == b"\0asm"
    assert versioned.read_bytes() == wasm.read_bytes()
    # sha256sum format, and `sha256sum -c` agrees.
    lines = (dist / "llm_gateway.wasm.sha256").read_text().splitlines()
    digest = hashlib.sha256(wasm.read_bytes()).hexdigest()
    assert lines == [f"{digest}  llm_gateway.wasm", f"{digest}  {versioned.name}"]
    check = subprocess.run(["sha256sum", "-c", "llm_gateway.wasm.sha256"], cwd=dist, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    # The artifact (optimised when wasm-opt is installed) loads and configures in Envoy.
    config = tmp_path / "gateway-dist.yaml"
    config.write_text((ROOT / "envoy/gateway.yaml").read_text().replace(
        "target/wasm32-wasip1/release/llm_gateway.wasm", str(wasm)))
    edge, _ = filter_configs(yaml.safe_load(config.read_text()))
    providers = len(json.loads(edge["configuration"]["value"])["providers"])
    assert f"llm gateway (llm_edge): configured {providers} providers" in validate(config)


def run_healthcheck(test, port_from, port_to):
    """A compose health check (["CMD", "bash", "-c", script]) run here, on our port."""
    assert test[:3] == ["CMD", "bash", "-c"], test
    script = test[3].replace(f"/{port_from} ", f"/{port_to} ")
    return subprocess.run(["bash", "-c", script], capture_output=True, timeout=10).returncode


def test_compose_stack_answers_and_its_health_checks_work(tmp_path):
    """envoy/compose/envoy.yaml run for real, with only the mock's address and
    the ports changed (`mock` -> localhost, still STRICT_DNS), and the compose
    health checks run against the live processes."""
    from conftest import Gateway
    services = compose_config()["services"]
    mock, mock_port = gateway.start_mock()
    text = COMPOSE_ENVOY.read_text().replace("/etc/envoy/llm_gateway.wasm", str(gateway.WASM))
    text = text.replace("address: mock, port_value: 18000", f"address: localhost, port_value: {mock_port}")
    text = text.replace("address: 0.0.0.0, port_value: 10000", "address: 127.0.0.1, port_value: 0")
    text = text.replace("address: 0.0.0.0, port_value: 9901", "address: 127.0.0.1, port_value: 0")
    envoy = None
    try:
        assert run_healthcheck(services["mock"]["healthcheck"]["test"], 18000, mock_port) == 0
        envoy = gateway.start_envoy(yaml.safe_load(text), tmp_path)
        assert run_healthcheck(services["envoy"]["healthcheck"]["test"], 9901, envoy.admin_port) == 0
        gw = Gateway(envoy.port, envoy.admin_port, mock_port, tmp_path, key=None)
        for group, provider in (("mock-anthropic", "mock-anthropic"), ("mock-failover", "mock-openai"),
                                ("mock-bedrock", "mock-bedrock"), ("mock-gemini", "mock-gemini")):
            status, headers, body = gw.chat({"model": "any", "messages": [{"role": "user", "content": "hi"}]},
                                            **{"x-model-group": group})
            assert status == 200, body
            assert headers["x-llm-provider"] == provider and body["choices"][0]["message"]["content"]
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)
    # And the checks fail when nothing answers: a port held bound that refuses connections.
    held, dead_port = gateway.refusing_port()
    with held:
        assert run_healthcheck(services["envoy"]["healthcheck"]["test"], 9901, dead_port) != 0
