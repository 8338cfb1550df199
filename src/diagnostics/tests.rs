//! The view's answers, natively over a memory store: who may read it, what
//! each path serves, its refusals, its rate limit, and that the JSON holds
//! what was recorded and nothing secret.

use sha2::{Digest, Sha256};

use super::*;
use crate::diagnostics::trace::{AttemptTrace, Trace};
use crate::shared_state::cas::tests::MemoryStore;

const ADMIN: &str = "admin-secret";
const GATEWAY_KEY: &str = "gateway-secret";
const NOW: u64 = 1_733_000_000_000;

fn config(diagnostics: &str) -> Config {
    let hash = |k: &str| format!("{:x}", Sha256::digest(k.as_bytes()));
    let json = format!(
        r#"{{"providers":{{"an":{{"dialect":"anthropic","api_key":"sk-ant-vendor-secret"}},
                         "oa":{{"dialect":"openai","api_key":"sk-oa"}}}},
             "model_groups":{{"chat":{{"candidates":[{{"provider":"an","model":"claude-x","cluster":"failover"}}]}},
                              "other":{{"cluster":"oa_cluster"}}}},
             "rules":[{{"match":{{"headers":{{"x-route":"secret-value"}}}},"group":"other"}}],
             "auth":{{"enabled":true,"keys":[{{"name":"team-a","sha256":"{}","groups":["*"]}}]}},
             "limits":{{"rate":[{{"key":"team-a","tokens_per_hour":10000,"requests_per_minute":60}}]}}
             {diagnostics}}}"#,
        hash(GATEWAY_KEY)
    );
    Config::parse(json.as_bytes(), |_| None).unwrap()
}

fn on() -> Config {
    on_limited(1000)
}

fn on_limited(per_second: u64) -> Config {
    let hash = format!("{:x}", Sha256::digest(ADMIN.as_bytes()));
    config(&format!(
        r#","diagnostics":{{"admin_keys":[{{"name":"oncall","sha256":"{hash}"}}],"api_requests_per_second":{per_second}}}"#
    ))
}

fn ask<'a>(method: &'a str, path: &'a str, query: &'a str, key: Option<&'a str>) -> Ask<'a> {
    Ask {
        method,
        path,
        query,
        key,
        request_id: "diag-1",
    }
}

fn get(config: &Config, store: &MemoryStore, path: &str, query: &str, key: Option<&str>) -> Reply {
    serve(config, store, NOW, &ask("GET", path, query, key), || false)
}

fn json(reply: &Reply) -> serde_json::Value {
    serde_json::from_slice(&reply.body).unwrap()
}

fn header<'r>(reply: &'r Reply, name: &str) -> Option<&'r str> {
    reply
        .headers
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.as_str())
}

fn failover(id: &str, ago_ms: u64) -> Trace {
    Trace {
        at_ms: NOW - ago_ms,
        request_id: id.into(),
        surface: "openai_chat".into(),
        operation: "chat".into(),
        group: "chat".into(),
        key: "team-a".into(),
        cluster: "failover".into(),
        status: 200,
        attempts: vec![
            AttemptTrace {
                n: 1,
                provider: "an".into(),
                status: 503,
                outcome: "503".into(),
                code: Some("UPSTREAM_BUSY".into()),
                start_ms: Some(1),
                latency_ms: Some(3),
                ..AttemptTrace::default()
            },
            AttemptTrace {
                n: 2,
                provider: "oa".into(),
                status: 200,
                outcome: "200".into(),
                start_ms: Some(5),
                latency_ms: Some(20),
                retry_on: Some("5xx".into()),
                ..AttemptTrace::default()
            },
        ],
        prompt: Some("the prompt".into()),
        ..Trace::default()
    }
}

fn store_with(config: &Config, traces: Vec<Trace>) -> MemoryStore {
    ring::forget_claim();
    let store = MemoryStore::default();
    prepare(&store, config);
    for mut t in traces {
        assert!(ring::record(&store, 256, &mut t));
    }
    store
}

#[test]
fn the_prefix_is_the_views_alone() {
    assert!(owns("/llm-gateway") && owns("/llm-gateway/") && owns("/llm-gateway/api/x"));
    assert!(!owns("/llm-gatewayx") && !owns("/v1/llm-gateway") && !owns("/"));
}

#[test]
fn off_the_path_is_a_404_and_records_nothing() {
    let config = config("");
    let store = MemoryStore::default();
    prepare(&store, &config);
    assert!(store.entries.borrow().is_empty(), "no counter made");
    let reply = get(&config, &store, "/llm-gateway/api/view", "", Some(ADMIN));
    assert_eq!((reply.status, reply.outcome), (404, "off"));
    assert_eq!(json(&reply)["error"]["code"], "MODEL_NOT_FOUND");
    let reply = get(&config, &store, "/llm-gateway/", "", None);
    assert_eq!(reply.status, 404);
}

#[test]
fn the_page_is_public_and_bundled_and_holds_no_data() {
    let config = on();
    let store = store_with(&config, vec![failover("r1", 10)]);
    let page = get(&config, &store, "/llm-gateway/", "", None);
    assert_eq!(page.status, 200);
    assert_eq!(
        header(&page, "content-type"),
        Some("text/html; charset=utf-8")
    );
    let html = String::from_utf8(page.body.clone()).unwrap();
    assert!(html.contains(r#"src="app.js""#) && !html.contains("r1"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no external asset"
    );
    let script = get(&config, &store, "/llm-gateway/app.js", "", None);
    let script = String::from_utf8(script.body).unwrap();
    for section in sections::SECTIONS {
        assert!(script.contains(&format!("LLMGW.section(\"{}\"", section.name)));
    }
    assert!(
        !script.contains("innerHTML"),
        "data is only ever put in the page as text"
    );
    let style = get(&config, &store, "/llm-gateway/app.css", "", None);
    assert_eq!(
        header(&style, "content-type"),
        Some("text/css; charset=utf-8")
    );
    let csp = header(&page, "content-security-policy").unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(header(&page, "cache-control"), Some("no-store"));
    let bare = get(&config, &store, "/llm-gateway", "", None);
    assert_eq!(
        (bare.status, header(&bare, "location")),
        (308, Some("/llm-gateway/"))
    );
}

#[test]
fn the_api_wants_an_admin_key_not_a_gateway_key() {
    let config = on();
    let store = store_with(&config, vec![]);
    for key in [None, Some(GATEWAY_KEY), Some("admin-secreT"), Some("")] {
        let reply = get(&config, &store, "/llm-gateway/api/view", "", key);
        assert_eq!(
            (reply.status, reply.outcome),
            (401, "unauthorized"),
            "{key:?}"
        );
        let error = &json(&reply)["error"];
        assert_eq!(error["code"], "AUTH_FAILED");
        assert_eq!(error["request_id"], "diag-1");
        assert!(header(&reply, "www-authenticate").is_some());
    }
    let reply = get(&config, &store, "/llm-gateway/api/view", "", Some(ADMIN));
    assert_eq!((reply.status, reply.outcome), (200, "api"));
    assert_eq!(json(&reply)["admin"], "oncall");
}

#[test]
fn loopback_peers_need_no_key_only_when_configured() {
    let open = config(r#","diagnostics":{"loopback_open":true}"#);
    let store = store_with(&open, vec![]);
    let from = |config: &Config, key: Option<&str>, loopback: bool| {
        serve(
            config,
            &store,
            NOW,
            &ask("GET", "/llm-gateway/api/view", "", key),
            || loopback,
        )
        .status
    };
    assert_eq!(from(&open, None, true), 200);
    assert_eq!(from(&open, None, false), 401);
    // A key presented is checked, also from the proxy's own host.
    assert_eq!(from(&open, Some("wrong"), true), 401);
    assert_eq!(from(&on(), None, true), 401);
    for (address, loopback) in [
        ("127.0.0.1:5000", true),
        ("127.9.9.9:1", true),
        ("[::1]:5000", true),
        ("[::ffff:127.0.0.1]:80", true),
        ("10.0.0.1:5000", false),
        ("[2001:db8::1]:80", false),
        ("[::ffff:10.0.0.1]:80", false),
        ("localhost:80", false),
        ("", false),
    ] {
        assert_eq!(is_loopback(address), loopback, "{address}");
    }
}

#[test]
fn the_view_shows_the_recorded_requests_and_their_health() {
    let config = on();
    let store = store_with(&config, vec![failover("r1", 3000), failover("r2", 2000)]);
    let view = json(&get(
        &config,
        &store,
        "/llm-gateway/api/view",
        "",
        Some(ADMIN),
    ));
    let names: Vec<&str> = view["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "health",
            "requests",
            "routes",
            "limits",
            "cache",
            "discovery"
        ]
    );
    assert_eq!(
        view["filters"]["groups"],
        serde_json::json!(["chat", "other"])
    );
    assert_eq!(view["filters"]["keys"], serde_json::json!(["team-a"]));
    let requests = &view["sections"][1]["data"];
    assert_eq!(
        (
            requests["recorded"].as_u64(),
            requests["ring_size"].as_u64()
        ),
        (Some(2), Some(256))
    );
    assert_eq!(requests["requests"][0]["request_id"], "r2", "newest first");
    assert_eq!(requests["requests"][0]["attempts"][1]["retry_on"], "5xx");
    assert!(
        requests["requests"][0].get("prompt").is_none(),
        "content only in the request's own view"
    );
    let health = &view["sections"][0]["data"]["backends"];
    assert_eq!(health[0]["provider"], "an");
    assert_eq!(health[0]["state"], "degraded");
    assert_eq!(health[0]["consecutive_failures"], 2);
    assert_eq!(health[1]["provider"], "oa");
    assert_eq!(health[1]["state"], "healthy");
    let one = json(&get(
        &config,
        &store,
        "/llm-gateway/api/requests/r1",
        "",
        Some(ADMIN),
    ));
    assert_eq!(
        (one["request_id"].as_str(), one["prompt"].as_str()),
        (Some("r1"), Some("the prompt"))
    );
    let missing = get(
        &config,
        &store,
        "/llm-gateway/api/requests/nope",
        "",
        Some(ADMIN),
    );
    assert_eq!(missing.status, 404);
    assert_eq!(json(&missing)["error"]["param"], "request_id");
}

#[test]
fn filters_narrow_the_requests_and_bad_ones_are_named() {
    let config = on();
    let mut failed = failover("bad", 1000);
    failed.status = 503;
    failed.group = "other".into();
    let store = store_with(&config, vec![failover("good", 2000), failed]);
    let ids = |query: &str| -> Vec<String> {
        let data = json(&get(
            &config,
            &store,
            "/llm-gateway/api/requests",
            query,
            Some(ADMIN),
        ));
        data["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["request_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(""), ["bad", "good"]);
    assert_eq!(ids("status=5xx"), ["bad"]);
    assert_eq!(ids("status=ok&group=chat"), ["good"]);
    assert_eq!(ids("key=team-b"), Vec::<String>::new());
    assert_eq!(ids("limit=1"), ["bad"]);
    let refused = get(
        &config,
        &store,
        "/llm-gateway/api/requests",
        "status=teapot",
        Some(ADMIN),
    );
    assert_eq!(refused.status, 400);
    assert_eq!(json(&refused)["error"]["param"], "status");
    let routes = json(&get(
        &config,
        &store,
        "/llm-gateway/api/routes",
        "group=other",
        Some(ADMIN),
    ));
    assert_eq!(routes["groups"].as_array().unwrap().len(), 1);
}

#[test]
fn the_routing_table_and_limits_show_no_secret() {
    let config = on();
    let store = store_with(&config, vec![]);
    let routes = get(&config, &store, "/llm-gateway/api/routes", "", Some(ADMIN));
    let text = String::from_utf8(routes.body.clone()).unwrap();
    for secret in [
        "sk-ant-vendor-secret",
        "sk-oa",
        "secret-value",
        GATEWAY_KEY,
        ADMIN,
    ] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let routes = json(&routes);
    assert_eq!(routes["groups"][0]["candidates"][0]["model"], "claude-x");
    assert_eq!(
        routes["rules"][0]["headers"],
        serde_json::json!(["x-route"])
    );
    let limits = json(&get(
        &config,
        &store,
        "/llm-gateway/api/limits",
        "",
        Some(ADMIN),
    ));
    let rows = limits["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["key"], "team-a");
    assert_eq!(
        (rows[0]["limit"].as_f64(), rows[0]["left"].as_f64()),
        (Some(60.0), Some(60.0))
    );
}

#[test]
fn the_api_is_rate_limited_per_proxy() {
    let config = on_limited(5);
    let store = store_with(&config, vec![]);
    let statuses: Vec<u16> = (0..7)
        .map(|_| get(&config, &store, "/llm-gateway/api", "", Some(ADMIN)).status)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429]);
    let limited = get(&config, &store, "/llm-gateway/api", "", Some(ADMIN));
    assert_eq!(
        (limited.outcome, header(&limited, "retry-after")),
        ("rate_limited", Some("1"))
    );
    assert_eq!(json(&limited)["error"]["code"], "RATE_LIMITED");
    // A second later: a new window. Unauthenticated requests never count.
    let later = serve(
        &config,
        &store,
        NOW + 1000,
        &ask("GET", "/llm-gateway/api", "", Some(ADMIN)),
        || false,
    );
    assert_eq!(later.status, 200);
    // The page's assets are not limited.
    assert_eq!(
        get(&config, &store, "/llm-gateway/app.js", "", None).status,
        200
    );
}

#[test]
fn other_methods_and_paths_are_refused_in_the_gateways_envelope() {
    let config = on();
    let store = store_with(&config, vec![]);
    let post = serve(
        &config,
        &store,
        NOW,
        &ask("POST", "/llm-gateway/api/view", "", Some(ADMIN)),
        || false,
    );
    assert_eq!((post.status, header(&post, "allow")), (405, Some("GET")));
    assert_eq!(json(&post)["error"]["code"], "METHOD_NOT_ALLOWED");
    for path in [
        "/llm-gateway/x",
        "/llm-gateway/api/nothing",
        "/llm-gateway/apix",
    ] {
        let reply = get(&config, &store, path, "", Some(ADMIN));
        assert_eq!(reply.status, 404, "{path}");
        assert_eq!(json(&reply)["error"]["param"], "path");
    }
    let index = json(&get(&config, &store, "/llm-gateway/api", "", Some(ADMIN)));
    assert_eq!(index["sections"][0]["path"], "/llm-gateway/api/health");
}

#[test]
fn the_cache_and_discovery_sections_show_what_they_share() {
    use crate::cache::key::RequestKey;
    use crate::cache::store::{Place, Tally};
    use crate::discovery::store::{self, ListRecord, Schedule};
    use crate::model::listing::Listed;
    use crate::model::request::ChatRequest;
    let hash = format!("{:x}", Sha256::digest(ADMIN.as_bytes()));
    let text = format!(
        r#"{{"providers":{{"an":{{"dialect":"anthropic","api_key":"sk-ant-vendor-secret"}},
                         "oa":{{"dialect":"openai","api_key":"sk-oa"}}}},
             "model_groups":{{"chat":{{"candidates":[{{"provider":"an","model":"claude-x","cluster":"an"}},
                                                     {{"provider":"an","model":"claude-old","cluster":"an"}}],
                                       "cache":{{"max_entries":8,"scope":"group"}}}},
                              "other":{{"candidates":[{{"provider":"oa","model":"gpt-x","cluster":"oa"}}]}}}},
             "discovery":{{"providers":{{"an":{{"cluster":"an"}},"oa":{{"cluster":"oa"}}}}}},
             "auth":{{"enabled":false}},
             "diagnostics":{{"admin_keys":[{{"name":"oncall","sha256":"{hash}"}}]}}}}"#
    );
    let config = Config::parse(text.as_bytes(), |_| None).unwrap();
    let shared = MemoryStore::default();
    prepare(&shared, &config);
    // Two lookups of the cached group, one hit that saved 250 micro-USD,
    // one entry stored.
    Tally::count(&shared, "chat", None).unwrap();
    Tally::count(&shared, "chat", Some(250)).unwrap();
    let settings = config.model_groups["chat"].cache.clone().unwrap();
    let place = Place::new(
        "chat",
        &settings,
        "",
        &RequestKey::of("chat", &ChatRequest::default()),
    );
    place.put(&shared, b"an entry", NOW / 1000);
    // Provider an listed claude-x (not claude-old); oa's reads fail.
    let discovery = config.discovery.as_ref().unwrap();
    let identity =
        |name: &str| store::identity(&config.providers[name], &discovery.providers[name]);
    let list = ListRecord::new(identity("an"), NOW - 5_000, vec![Listed::named("claude-x")]);
    shared.set(&store::list_key("an"), &list.encode(), 0);
    let mut schedule = Schedule {
        identity: identity("oa"),
        ..Schedule::default()
    };
    schedule.failed(NOW - 1_000, "HTTP 500 from the list", 10, 3600);
    shared.set(&store::schedule_key("oa"), &schedule.encode(), 0);

    let view = json(&get(
        &config,
        &shared,
        "/llm-gateway/api/view",
        "",
        Some(ADMIN),
    ));
    let section = |name: &str| {
        view["sections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["data"].clone())
            .unwrap()
    };
    let cache = section("cache");
    let groups = cache["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "only the cached group: {cache}");
    let chat = &groups[0];
    assert_eq!(
        (chat["group"].as_str(), chat["scope"].as_str()),
        (Some("chat"), Some("group"))
    );
    assert_eq!(
        (chat["lookups"].as_u64(), chat["hits"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(chat["hit_ratio"].as_f64(), Some(0.5));
    assert_eq!(chat["saved_usd"].as_f64(), Some(0.00025));
    assert_eq!(
        (chat["entries"].as_u64(), chat["max_entries"].as_u64()),
        (Some(1), Some(8))
    );
    assert!(chat["bytes"].as_u64().unwrap() > 8, "{chat}");

    let discovered = section("discovery");
    assert_eq!(discovered["enabled"], true);
    let providers = discovered["providers"].as_array().unwrap();
    let an = providers.iter().find(|p| p["provider"] == "an").unwrap();
    assert_eq!(an["models"].as_u64(), Some(1));
    assert_eq!(an["last_verified"].as_u64(), Some(NOW - 5_000));
    assert_eq!(an["retired"], serde_json::json!(["claude-old"]));
    let oa = providers.iter().find(|p| p["provider"] == "oa").unwrap();
    assert_eq!(
        (oa["models"].is_null(), oa["failures"].as_u64()),
        (true, Some(1))
    );
    assert_eq!(oa["last_error"], "HTTP 500 from the list");

    let routes = section("routes");
    let candidates = routes["groups"][0]["candidates"].as_array().unwrap();
    assert_eq!(routes["groups"][0]["name"], "chat");
    assert_eq!(candidates[0]["discovered"], true);
    assert_eq!(candidates[0]["last_verified"].as_u64(), Some(NOW - 5_000));
    assert_eq!(candidates[1]["discovered"], false);
    assert!(candidates[1]["last_verified"].is_null());
    let other = routes["groups"][1]["candidates"][0].clone();
    assert!(other["discovered"].is_null(), "oa has no list yet: {other}");
    let text = String::from_utf8_lossy(
        &get(&config, &shared, "/llm-gateway/api/view", "", Some(ADMIN)).body,
    )
    .into_owned();
    assert!(!text.contains("sk-ant-vendor-secret") && !text.contains("sk-oa"));

    // Discovery off, no cached group: the sections say so.
    let off = on();
    let view = json(&get(
        &off,
        &store_with(&off, vec![]),
        "/llm-gateway/api/view",
        "",
        Some(ADMIN),
    ));
    let parts = view["sections"].as_array().unwrap();
    let data = |name: &str| parts.iter().find(|s| s["name"] == name).unwrap()["data"].clone();
    assert_eq!(data("cache")["groups"], serde_json::json!([]));
    assert_eq!(data("discovery")["enabled"], false);
}
