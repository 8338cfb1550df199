"""The examples (envoy/examples/). The Kubernetes ones cannot be applied
here, so each is parsed, and the Envoy configuration they produce is rebuilt
as a bootstrap from the patches and filter configs they carry (with the
built .wasm) and checked by `envoy --mode validate`, which runs our filter's
on_configure: a config the filter rejects fails the test, naming the field.
The degradation ladder's is an Envoy config: validated as it is, and checked
to be what scripts/ladder_config.py writes."""

import json

import yaml

import gateway
import ladder_config
from conftest import Gateway, serve_example_from_build
from test_ship import validate

EXAMPLES = gateway.ROOT / "envoy/examples"
KUBERNETES = ("istio", "envoy-gateway")
LADDER = EXAMPLES / "ladder/envoy.yaml"
MOUNTED_WASM = "/etc/llm-gateway/llm_gateway.wasm"
HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
WASM = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
HTTP_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

KNOWN_KINDS = {
    ("networking.istio.io/v1", "Gateway"), ("networking.istio.io/v1", "VirtualService"),
    ("networking.istio.io/v1", "ServiceEntry"), ("networking.istio.io/v1alpha3", "EnvoyFilter"),
    ("gateway.networking.k8s.io/v1", "Gateway"), ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("gateway.networking.k8s.io/v1alpha3", "BackendTLSPolicy"),
    ("gateway.envoyproxy.io/v1alpha1", "EnvoyProxy"), ("gateway.envoyproxy.io/v1alpha1", "Backend"),
    ("gateway.envoyproxy.io/v1alpha1", "EnvoyExtensionPolicy"), ("gateway.envoyproxy.io/v1alpha1", "EnvoyPatchPolicy"),
}


def docs(path):
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def by_kind(directory, kind):
    return [d for p in sorted(directory.glob("*.yaml")) for d in docs(p) if d["kind"] == kind]


def with_built_wasm(obj):
    """The object with the mounted .wasm path replaced by the build output."""
    return json.loads(json.dumps(obj).replace(MOUNTED_WASM, str(gateway.WASM)))


def bootstrap(http_filters, routes, clusters, hcm_extra=None):
    """`hcm_extra`: more HCM fields the example sets (e.g. local_reply_config)."""
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "static_resources": {
            "listeners": [{
                "name": "example", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
                "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
                    "@type": HCM, "stat_prefix": "example", "http_filters": http_filters,
                    "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"], "routes": routes}]},
                    **(hcm_extra or {}),
                }}]}],
            }],
            "clusters": clusters,
        },
    }


def check(tmp_path, name, config):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(with_built_wasm(config), indent=1))
    return validate(path)


def test_every_example_parses_and_has_a_readme():
    dirs = sorted(p for p in EXAMPLES.iterdir() if p.is_dir())
    assert {d.name for d in dirs} == {*KUBERNETES, "ladder"}
    for d in dirs:
        assert (d / "README.md").is_file(), d
        files = sorted(d.glob("*.yaml"))
        assert files, d
        for f in files:
            for doc in docs(f):
                if d.name not in KUBERNETES:
                    assert doc["static_resources"]["clusters"], f
                    continue
                assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"], f
                assert (doc["apiVersion"], doc["kind"]) in KNOWN_KINDS, (f, doc["apiVersion"], doc["kind"])
                assert doc["metadata"]["namespace"] == "llm", f


# ---- Istio ------------------------------------------------------------------

def test_istio_envoyfilter_builds_a_config_envoy_and_the_filter_accept(tmp_path):
    (envoy_filter,) = by_kind(EXAMPLES / "istio", "EnvoyFilter")
    patches = envoy_filter["spec"]["configPatches"]
    edge = [p for p in patches if p["applyTo"] == "HTTP_FILTER" and p["patch"]["operation"] == "INSERT_BEFORE"]
    router = [p for p in patches if p["applyTo"] == "HTTP_FILTER" and p["patch"]["operation"] == "MERGE"]
    route = [p for p in patches if p["applyTo"] == "HTTP_ROUTE"]
    clusters = [p["patch"]["value"] for p in patches if p["applyTo"] == "CLUSTER"]
    assert len(edge) == len(router) == len(route) == 1 and len(clusters) == 2
    assert edge[0]["match"]["listener"]["filterChain"]["filter"]["subFilter"]["name"] == "envoy.filters.http.router"
    edge_filter = edge[0]["patch"]["value"]
    router_filter = router[0]["patch"]["value"]
    assert edge_filter["typed_config"]["config"]["allow_on_headers_stop_iteration"] is True
    upstream = router_filter["typed_config"]["upstream_http_filters"]
    assert upstream[-1]["name"] == "envoy.filters.http.upstream_codec"
    # Both roles read the same document.
    assert (json.loads(edge_filter["typed_config"]["config"]["configuration"]["value"])
            == json.loads(upstream[0]["typed_config"]["config"]["configuration"]["value"]))
    # The route patch applies to the VirtualService route of that name.
    (vs,) = by_kind(EXAMPLES / "istio", "VirtualService")
    route_name = route[0]["match"]["routeConfiguration"]["vhost"]["route"]["name"]
    assert route_name in [r["name"] for r in vs["spec"]["http"]]
    action = dict(route[0]["patch"]["value"]["route"], timeout="300s")
    # The HCM patch (local_reply_config) is validated with the rest.
    (hcm_patch,) = [p["patch"]["value"]["typed_config"] for p in patches if p["applyTo"] == "NETWORK_FILTER"]
    hcm_extra = {k: v for k, v in hcm_patch.items() if k != "@type"}
    assert "local_reply_config" in hcm_extra
    # The route's matches, /v1beta/ (Gemini CLI, the Gen AI SDKs) beside /v1/.
    (llm_route,) = [r for r in vs["spec"]["http"] if r["name"] == route_name]
    prefixes = [m["uri"]["prefix"] for m in llm_route["match"]]
    assert prefixes == ["/v1/", "/v1beta/"]
    config = bootstrap([edge_filter, router_filter],
                       [{"name": f"{route_name}-{i}", "match": {"prefix": p}, "route": action}
                        for i, p in enumerate(prefixes)], clusters, hcm_extra)
    out = check(tmp_path, "istio", config)
    assert "llm gateway (llm_edge): configured 2 providers" in out
    assert "llm gateway (llm_upstream): configured 2 providers" in out
    # Every cluster a model group names exists.
    groups = json.loads(edge_filter["typed_config"]["config"]["configuration"]["value"])["model_groups"]
    assert {g["cluster"] for g in groups.values()} <= {c["name"] for c in clusters}


# ---- Envoy Gateway ----------------------------------------------------------

def json_patch(doc, op):
    """The RFC 6902 `add` and `test` operations EnvoyPatchPolicy uses here."""
    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
    target = doc
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    key = int(last) if isinstance(target, list) else last
    if op["op"] == "test":
        assert target[key] == op["value"], op
    elif op["op"] == "add":
        if isinstance(target, list):
            target.insert(key, op["value"])
        else:
            target[key] = op["value"]
    else:
        raise AssertionError(f"unexpected op {op['op']}")


def test_envoy_gateway_policies_build_a_config_envoy_and_the_filter_accept(tmp_path):
    d = EXAMPLES / "envoy-gateway"
    (eep,) = by_kind(d, "EnvoyExtensionPolicy")
    (epp,) = by_kind(d, "EnvoyPatchPolicy")
    (route,) = by_kind(d, "HTTPRoute")
    backends = {b["metadata"]["name"]: b for b in by_kind(d, "Backend")}
    (wasm,) = eep["spec"]["wasm"]
    assert wasm["code"]["type"] == "HTTP" and len(wasm["code"]["sha256"]) == 64
    # The edge filter as Envoy Gateway generates it (named after the policy,
    # disabled on the HCM, enabled per route; here enabled), code from a file.
    filter_name = f"envoy.filters.http.wasm/envoyextensionpolicy/{eep['metadata']['namespace']}/{eep['metadata']['name']}/wasm/0"
    edge = {"name": filter_name, "typed_config": {"@type": WASM, "config": {
        "name": wasm["name"], "root_id": wasm["rootID"], "fail_open": wasm["failOpen"],
        "vm_config": {"vm_id": "envoyextensionpolicy/llm/llm-edge/wasm/0", "runtime": "envoy.wasm.runtime.v8",
                      "code": {"local": {"filename": str(gateway.WASM)}},
                      "environment_variables": {"host_env_keys": wasm["env"]["hostKeys"]}},
        "configuration": {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": json.dumps(wasm["config"])},
    }}}
    listener_name = f"{eep['metadata']['namespace']}/{epp['spec']['targetRef']['name']}/http"
    hcm = {"default_filter_chain": {"filters": [{"typed_config": {"http_filters": [
        edge, {"name": "envoy.filters.http.router", "typed_config": {"@type": ROUTER}}]}}]}}
    # The routes' clusters, as Envoy Gateway builds them for FQDN backends.
    clusters, routes = {}, []
    for i, rule in enumerate(route["spec"]["rules"]):
        name = f"httproute/llm/{route['metadata']['name']}/rule/{i}"
        (ref,) = rule["backendRefs"]
        (endpoint,) = backends[ref["name"]]["spec"]["endpoints"]
        clusters[name] = {
            "name": name, "type": "STRICT_DNS", "connect_timeout": "10s",
            "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                "socket_address": {"address": endpoint["fqdn"]["hostname"], "port_value": endpoint["fqdn"]["port"]}}}}]}]},
            "typed_extension_protocol_options": {HTTP_OPTIONS: {
                "@type": "type.googleapis.com/" + HTTP_OPTIONS, "explicit_http_config": {"http_protocol_options": {}}}},
        }
        # Each of a rule's matches is a route of its own, as Envoy Gateway writes them.
        for m in rule["matches"]:
            match = {"prefix": m["path"]["value"],
                     "headers": [{"name": h["name"], "string_match": {"exact": h["value"]}}
                                 for h in m.get("headers", [])]}
            routes.append({"match": match, "route": {"cluster": name, "auto_host_rewrite": True}})
        # Gemini's clients (Gemini CLI, the Gen AI SDKs) call /v1beta/: every
        # rule routes it as it routes /v1/.
        prefixes = [(m["path"]["value"], m.get("headers")) for m in rule["matches"]]
        assert sorted(p for p, _ in prefixes) == ["/v1/", "/v1beta/"], rule
        assert prefixes[0][1] == prefixes[1][1], rule
    # Apply the patch policy.
    patched = set()
    for p in epp["spec"]["jsonPatches"]:
        if p["type"].endswith("Listener"):
            assert p["name"] == listener_name
            json_patch(hcm, p["operation"])
        else:
            json_patch(clusters[p["name"]], p["operation"])
            patched.add(p["name"])
    assert edge["typed_config"]["config"]["allow_on_headers_stop_iteration"] is True
    # Every cluster a model group routes to got the upstream role and a provider.
    groups = wasm["config"]["model_groups"]
    header_clusters = {r["matches"][0]["headers"][0]["value"]: f"httproute/llm/llm/rule/{i}"
                       for i, r in enumerate(route["spec"]["rules"]) if r["matches"][0].get("headers")}
    for group in groups.values():
        cluster = clusters[header_clusters[group["cluster"]]]
        assert cluster["name"] in patched
        provider = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["metadata"]["filter_metadata"]["llm"]["provider"]
        assert provider in wasm["config"]["providers"]
        filters = cluster["typed_extension_protocol_options"][HTTP_OPTIONS]["http_filters"]
        assert [f["name"] for f in filters] == ["llm_upstream", "envoy.filters.http.upstream_codec"]
        assert json.loads(filters[0]["typed_config"]["config"]["configuration"]["value"]) == wasm["config"]
    hcm_config = hcm["default_filter_chain"]["filters"][0]["typed_config"]
    http_filters = hcm_config["http_filters"]
    # The HCM fields the patches add (local_reply_config) are validated too.
    hcm_extra = {k: v for k, v in hcm_config.items() if k != "http_filters"}
    assert "local_reply_config" in hcm_extra
    out = check(tmp_path, "envoy-gateway", bootstrap(http_filters, routes, list(clusters.values()), hcm_extra))
    assert "llm gateway (llm_edge): configured 2 providers" in out
    assert "llm gateway (llm_upstream): configured 2 providers" in out


# ---- the degradation ladder ------------------------------------------------------

def test_ladder_example_is_what_the_generator_writes():
    assert ladder_config.render(LADDER.read_text()) == LADDER.read_text(), \
        "stale: run python3 scripts/ladder_config.py envoy/examples/ladder/envoy.yaml"


def test_ladder_example_validates_and_walks_its_rungs(tmp_path):
    bootstrap = yaml.safe_load(LADDER.read_text())
    out = check(tmp_path, "ladder", json.loads(json.dumps(bootstrap).replace(
        "target/wasm32-wasip1/release/llm_gateway.wasm", str(gateway.WASM))))
    assert "llm gateway (llm_edge): configured 2 providers, 4 model groups" in out
    clusters = {c["name"]: c for c in bootstrap["static_resources"]["clusters"]}
    ladder = clusters["ladder_chat-pro"]["cluster_type"]["typed_config"]["clusters"]
    assert ladder == ["openai", "ladder_chat-pro_chat-fast", "ladder_chat-pro_chat-base"]
    for name, rung, vendor in [("ladder_chat-pro_chat-fast", "chat-fast", "anthropic"),
                               ("ladder_chat-pro_chat-base", "chat-base", "openai")]:
        [endpoint] = clusters[name]["load_assignment"]["endpoints"][0]["lb_endpoints"]
        assert endpoint["metadata"]["filter_metadata"]["llm"] == {"provider": vendor, "model_group": rung}
        # Otherwise the vendor's cluster: same address, health check, outlier detection, breakers.
        copy = {k: v for k, v in clusters[name].items() if k not in ("name", "load_assignment")}
        assert copy == {k: v for k, v in clusters[vendor].items() if k not in ("name", "load_assignment")}
    hcm = bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    ladder_route, failover_route = hcm["route_config"]["virtual_hosts"][0]["routes"][:2]
    assert ladder_route["match"]["headers"] == [{"name": "x-llm-cluster", "string_match": {"exact": "ladder_chat-pro"}}]
    # The failover route's policy, one retry per rung below the top.
    assert ladder_route["route"]["retry_policy"] == dict(failover_route["route"]["retry_policy"], num_retries=2)


def test_ladder_example_degrades_against_the_mock(tmp_path):
    """The shipped ladder with its vendors pointed at the mock: chat-pro's
    OpenAI refuses connections, chat-fast's Anthropic is overloaded (529),
    and chat-base answers on the OpenAI mock, as gpt-4o-mini, through the
    rung copy of the very cluster that refused the first attempt."""
    env = {"OPENAI_API_KEY": "sk-dummy", "ANTHROPIC_API_KEY": "sk-dummy", "PATH": "/usr/bin:/bin"}
    mock, mock_port = gateway.start_mock(args=("--api-key", "openai=sk-dummy", "--api-key", "anthropic=sk-dummy"))
    held, dead_port = gateway.refusing_port()
    bootstrap = yaml.safe_load(LADDER.read_text())
    bootstrap["admin"]["address"]["socket_address"]["port_value"] = 0
    listener = bootstrap["static_resources"]["listeners"][0]
    listener["address"]["socket_address"].update(address="127.0.0.1", port_value=0)
    clusters = bootstrap["static_resources"]["clusters"]
    for i, c in enumerate(clusters):
        if "load_assignment" in c:
            [endpoint] = c["load_assignment"]["endpoints"][0]["lb_endpoints"]
            static = gateway.static_cluster(c["name"], dead_port if c["name"] == "openai" else mock_port, "")
            static["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["metadata"] = endpoint["metadata"]
            clusters[i] = static
    serve_example_from_build(listener)
    envoy = None
    try:
        envoy = gateway.start_envoy(bootstrap, tmp_path, env=env)
        gw = Gateway(envoy.port, envoy.admin_port, mock_port, tmp_path, key="example-gateway-key")
        status, headers, body = gw.chat({"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                                        **{"x-model-group": "chat-pro", "x-test-id": "ladder-example"})
        assert status == 200, body
        assert (headers["x-llm-provider"], body["model"], headers["x-llm-attempts"]) == ("openai", "gpt-4o-mini", "3")
        fast, base = gw.mock_requests("ladder-example")
        assert (fast["path"], fast["body"]["model"]) == ("/scenario/error-529/v1/messages", "claude-haiku-4-5")
        assert (base["path"], base["body"]["model"]) == ("/v1/chat/completions", "gpt-4o-mini")
        connect_fails = gw.stats("^cluster[.]openai[.]upstream_cx_connect_fail$")
        assert int(connect_fails["cluster.openai.upstream_cx_connect_fail"]) >= 1, "the top rung was tried"
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)
        held.close()
