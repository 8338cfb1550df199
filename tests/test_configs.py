"""Every Envoy config we ship is checked with the real binary, so an example
cannot rot; the production failover example is also run against the mock."""

import json
import subprocess

import pytest
import yaml

import gateway
from conftest import Gateway, serve_example_from_build

ENVOY_DIR = gateway.ROOT / "envoy"
# Bootstraps: envoy/*.yaml, and each example directory's gateway.yaml.
SHIPPED = sorted([p.name for p in ENVOY_DIR.glob("*.yaml") if "docker-compose" not in p.name]
                 + [str(p.relative_to(ENVOY_DIR)) for p in ENVOY_DIR.glob("*/gateway.yaml")])
DUMMY_ENV = {"OPENAI_API_KEY": "sk-dummy", "ANTHROPIC_API_KEY": "sk-dummy", "PATH": "/usr/bin:/bin"}


def test_something_is_shipped():
    assert {"gateway.yaml", "failover.yaml", "tracing.yaml", "hot-reload/gateway.yaml"} <= set(SHIPPED)


def validate(path):
    # Run from the repo root: the configs name the wasm by its build path.
    result = subprocess.run([gateway.envoy_binary(), "--mode", "validate", "-c", str(path)],
                            cwd=gateway.ROOT, env=DUMMY_ENV, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "OK" in result.stdout + result.stderr


def inline_ecds(node, found):
    """Replaces every filter loaded by ECDS from a file with the filter
    config that file holds (validation does not read ECDS sources)."""
    if isinstance(node, list):
        return [inline_ecds(n, found) for n in node]
    if not isinstance(node, dict):
        return node
    source = node.get("config_discovery", {}).get("config_source", {}).get("path_config_source")
    if source:
        doc = yaml.safe_load((gateway.ROOT / source["path"]).read_text())
        [resource] = doc["resources"]
        assert resource["name"] == node["name"]
        found.append(source["path"])
        return {"name": node["name"], "typed_config": resource["typed_config"]}
    return {k: inline_ecds(v, found) for k, v in node.items()}


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_validates(name, tmp_path):
    validate(ENVOY_DIR / name)
    found = []
    inlined = inline_ecds(yaml.safe_load((ENVOY_DIR / name).read_text()), found)
    if found:
        # The filter configs it discovers are validated too (on_configure included).
        path = tmp_path / "inlined.json"
        path.write_text(json.dumps(inlined))
        validate(path)


def test_a_bad_filter_config_is_rejected_naming_the_field(tmp_path):
    bootstrap = gateway.build_bootstrap(0, 0, 1, env={},
                                        edit=lambda c: c["model_groups"]["mock-openai"].update(cluster=""))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bootstrap))
    result = subprocess.run([gateway.envoy_binary(), "--mode", "validate", "-c", str(path)],
                            cwd=gateway.ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "model_groups.mock-openai.candidates[0].cluster: must not be empty" in result.stdout + result.stderr


def test_production_failover_example_fails_over(tmp_path):
    """envoy/failover.yaml with its vendor clusters pointed at the mock, the
    Anthropic one always answering 529: requests end at OpenAI."""
    # The mock accepts exactly one key per vendor: the one this config's environment gives.
    mock, mock_port = gateway.start_mock(args=("--aws-credentials", gateway.MOCK_AWS_CREDENTIALS,
                                               "--api-key", "openai=sk-dummy", "--api-key", "anthropic=sk-dummy"))
    bootstrap = yaml.safe_load((ENVOY_DIR / "failover.yaml").read_text())
    bootstrap["admin"]["address"]["socket_address"]["port_value"] = 0
    listener = bootstrap["static_resources"]["listeners"][0]
    listener["address"]["socket_address"].update(address="127.0.0.1", port_value=0)
    clusters = bootstrap["static_resources"]["clusters"]
    for i, c in enumerate(clusters):
        if c["name"] in ("anthropic", "openai"):
            clusters[i] = gateway.static_cluster(c["name"], mock_port, c["name"])
    serve_example_from_build(listener)
    envoy = None
    try:
        envoy = gateway.start_envoy(bootstrap, tmp_path, env=DUMMY_ENV)
        gw = Gateway(envoy.port, envoy.admin_port, mock_port, tmp_path, key="example-gateway-key")
        status, headers, body = gw.chat({"model": "chat", "messages": [{"role": "user", "content": "hi"}]},
                                        **{"x-test-id": "failover-example"})
        assert status == 200, body
        assert headers["x-llm-provider"] == "openai" and body["model"] == "gpt-4o"
        first, second = gw.mock_requests("failover-example")
        assert first["path"] == "/scenario/error-529/v1/messages" and first["body"]["model"] == "claude-sonnet-4-5"
        assert second["path"] == "/v1/chat/completions" and second["headers"]["authorization"] == "Bearer sk-dummy"
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)
