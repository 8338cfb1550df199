"""Vertex AI model groups for `make run` (scripts/gateway.py) and the tests.

- `mock-vertex` (Gemini on Vertex) and `mock-vertex-anthropic` (Claude on
  Vertex) against the mock's Vertex endpoints, with a service-account key
  made at start-up: the gateway signs its JWTs with the private half (the
  key file's JSON reaches the VMs as `MOCK_VERTEX_SA_KEY`), the mock's token
  endpoint verifies them with the public half (`--google-public-key`).
- `vertex` and `vertex-anthropic`, the real Vertex AI, when
  `GOOGLE_APPLICATION_CREDENTIALS` names a service-account key file (its
  `project_id`, or `GOOGLE_CLOUD_PROJECT`) or, on GCE/GKE, when only
  `GOOGLE_CLOUD_PROJECT` is set (the metadata server's tokens).
  `GOOGLE_CLOUD_LOCATION` picks the location (default `global`);
  `VERTEX_GEMINI_MODEL` and `VERTEX_CLAUDE_MODEL` the models.
"""

import json
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

MOCK_KEY_ENV = "MOCK_VERTEX_SA_KEY"
REAL_KEY_ENV = "VERTEX_SA_KEY"
MOCK_CLAUDE_MODEL = "claude-sonnet-4-5@20250929"


def service_account(workdir):
    """A fresh key pair: (the key file's JSON, the public key's PEM file).
    The key grants nothing anywhere: only the mock trusts it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    pem = workdir / "mock-google-service-account.pub.pem"
    pem.write_bytes(public)
    return json.dumps({
        "type": "service_account", "project_id": "mock-project", "private_key_id": "mock-key",
        "private_key": private, "client_email": "gateway@mock-project.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token",
    }), pem


def _cluster(name, address, port, provider, tls_host=None):
    cluster = {
        "name": name, "type": "STATIC" if address[0].isdigit() else "LOGICAL_DNS",
        "dns_lookup_family": "V4_PREFERRED", "connect_timeout": "5s",
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{
            "endpoint": {"address": {"socket_address": {"address": address, "port_value": port}}},
            "metadata": {"filter_metadata": {"llm": {"provider": provider}}},
        }]}]},
    }
    if tls_host:
        cluster["transport_socket"] = {"name": "envoy.transport_sockets.tls", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "sni": tls_host,
            "common_tls_context": {"validation_context": {"trusted_ca": {
                "filename": "/etc/ssl/certs/ca-certificates.crt"}}},
        }}
    return cluster


def mock_groups(mock_port):
    """(providers, groups, clusters) of the two mock Vertex groups."""
    common = {"api_key_env": MOCK_KEY_ENV, "project": "mock-project", "credentials": "service_account",
              "token_cluster": "mock_google_oauth"}
    providers = {
        "mock-vertex": {"dialect": "vertex_gemini", "location": "us-central1",
                        "models": {"text-embedding-005": "text-embedding-005",
                                   "gemini-embedding-001": "gemini-embedding-001", "*": "gemini-2.5-flash"},
                        **common},
        "mock-vertex-anthropic": {"dialect": "vertex_anthropic", "location": "us-east5",
                                  "models": {"*": MOCK_CLAUDE_MODEL}, **common},
    }
    groups = {name: {"cluster": name.replace("-", "_")} for name in providers}
    clusters = [_cluster(name.replace("-", "_"), "127.0.0.1", mock_port, name) for name in providers]
    # The mock answers Google's token endpoint too.
    clusters.append(_cluster("mock_google_oauth", "127.0.0.1", mock_port, "none"))
    return providers, groups, clusters


def real_groups(env):
    """(providers, groups, clusters, VM environment) of the real Vertex AI
    groups, or None when neither a key file nor a project is configured."""
    key_file, project = env.get("GOOGLE_APPLICATION_CREDENTIALS"), env.get("GOOGLE_CLOUD_PROJECT")
    vm_env = {}
    if key_file:
        key = Path(key_file).read_text()
        project = project or json.loads(key).get("project_id")
        credentials = {"credentials": "service_account", "api_key_env": REAL_KEY_ENV,
                       "token_cluster": "google_oauth"}
        token_cluster = _cluster("google_oauth", "oauth2.googleapis.com", 443, "none", "oauth2.googleapis.com")
        vm_env[REAL_KEY_ENV] = key
    elif project:
        credentials = {"credentials": "metadata_server", "token_cluster": "gce_metadata"}
        token_cluster = _cluster("gce_metadata", "169.254.169.254", 80, "none")
    else:
        return None
    location = env.get("GOOGLE_CLOUD_LOCATION", "global")
    host = "aiplatform.googleapis.com" if location == "global" else f"{location}-aiplatform.googleapis.com"
    providers = {
        "vertex": {"dialect": "vertex_gemini", "project": project, "location": location, "host": host,
                   "models": {"*": env.get("VERTEX_GEMINI_MODEL", "gemini-2.5-flash")}, **credentials},
        "vertex-anthropic": {"dialect": "vertex_anthropic", "project": project, "location": location,
                             "host": host, "models": {"*": env.get("VERTEX_CLAUDE_MODEL", MOCK_CLAUDE_MODEL)},
                             **credentials},
    }
    groups = {name: {"cluster": name.replace("-", "_")} for name in providers}
    clusters = [_cluster(name.replace("-", "_"), host, 443, name, host) for name in providers]
    return providers, groups, clusters + [token_cluster], vm_env


def set_vm_env(bootstrap, values):
    """Puts `values` into both roles' VM environment (never the process's)."""
    hcm = bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    edge = hcm["http_filters"][0]["typed_config"]["config"]
    upstream = hcm["http_filters"][-1]["typed_config"]["upstream_http_filters"][0]["typed_config"]["config"]
    for role in (edge, upstream):
        env = role["vm_config"].setdefault("environment_variables", {})
        env.setdefault("key_values", {}).update(values)


def for_run(workdir, env):
    """What `make run` adds: (mock arguments, build_bootstrap keyword
    arguments as a function of the mock's port)."""
    key, pem = service_account(workdir)
    real = real_groups(env)

    def bootstrap_args(mock_port):
        providers, groups, clusters = mock_groups(mock_port)
        vm_env = {MOCK_KEY_ENV: key}
        if real:
            providers, groups = {**providers, **real[0]}, {**groups, **real[1]}
            clusters = clusters + real[2]
            vm_env.update(real[3])
        # Their Model Garden lists too, through the groups' own clusters.
        discovery = {name: {"cluster": name.replace("-", "_")} for name in providers}
        return {"extra_providers": providers, "extra_groups": groups, "extra_clusters": clusters,
                "extra_discovery": discovery,
                "edit_bootstrap": lambda bootstrap: set_vm_env(bootstrap, vm_env)}
    return ("--google-public-key", str(pem)), bootstrap_args
