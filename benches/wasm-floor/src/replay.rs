//! `replay` mode: the host calls the gateway makes for one OpenAI→Anthropic
//! request, in the same callbacks, with none of its work (no parsing,
//! routing, translation or JSON). What plain Envoy plus this costs is the
//! floor of any filter that must make those calls; the gateway's cost above
//! it is its own code.
//!
//! Mirrors `src/session/edge.rs` and `src/session/attempt.rs` for a request that
//! carries no gateway key and no `x-llm-*` headers, to a provider with
//! neither host nor prices (mock-anthropic in envoy/gateway.yaml). The
//! client sends the vendor request (path, headers, body), so writing back
//! what was read stands in for translating it; `x-llm-cluster`, sent by the
//! client, stands in for the route the edge role would choose.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::SystemTime;

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::{Action, MetricType};

use crate::{now, PROVIDER_METADATA};

/// The headers the Anthropic dialect sets on a vendor request.
const VENDOR_HEADERS: [&str; 3] = ["content-type", "anthropic-version", "x-api-key"];

/// What the edge role hands its attempts (the gateway's `exchange`).
struct Stash {
    path: String,
    vendor_headers: Vec<(String, String)>,
    body: Vec<u8>,
}

thread_local! {
    static STASH: RefCell<HashMap<u64, Stash>> = RefCell::new(HashMap::new());
    static NEXT_TOKEN: RefCell<u64> = const { RefCell::new(0) };
    /// Metric ids, defined once (the gateway caches them too).
    static METRICS: RefCell<Option<[u32; 4]>> = const { RefCell::new(None) };
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

pub struct Edge {
    started: SystemTime,
    request_id: String,
    cluster: String,
    path: String,
    vendor_headers: Vec<(String, String)>,
    token: Option<u64>,
}

impl Edge {
    pub fn new() -> Self {
        Self {
            started: SystemTime::UNIX_EPOCH,
            request_id: String::new(),
            cluster: String::new(),
            path: String::new(),
            vendor_headers: Vec::new(),
            token: None,
        }
    }
}

impl Drop for Edge {
    fn drop(&mut self) {
        if let Some(token) = self.token {
            STASH.with(|s| s.borrow_mut().remove(&token));
        }
    }
}

impl Context for Edge {}

impl HttpContext for Edge {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        self.started = now();
        let headers = self.get_http_request_headers();
        self.request_id = match header(&headers, "x-request-id") {
            Some(id) => id.to_owned(),
            None => {
                let nanos = now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default();
                let id = format!("llm-{nanos:x}");
                self.set_http_request_header("x-request-id", Some(&id));
                id
            }
        };
        self.cluster = header(&headers, "x-llm-cluster")
            .unwrap_or_default()
            .to_owned();
        self.path = header(&headers, ":path").unwrap_or_default().to_owned();
        self.vendor_headers = VENDOR_HEADERS
            .iter()
            .filter_map(|&name| Some((name.to_owned(), header(&headers, name)?.to_owned())))
            .collect();
        if end_of_stream {
            Action::Continue
        } else {
            Action::Pause
        }
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        if !end_of_stream {
            return Action::Pause;
        }
        let body = self.get_http_request_body(0, size).unwrap_or_default();
        self.set_http_request_header("x-llm-cluster", Some(&self.cluster));
        let token = NEXT_TOKEN.with(|n| {
            let mut n = n.borrow_mut();
            *n += 1;
            *n
        });
        STASH.with(|s| {
            s.borrow_mut().insert(
                token,
                Stash {
                    path: std::mem::take(&mut self.path),
                    vendor_headers: std::mem::take(&mut self.vendor_headers),
                    body,
                },
            )
        });
        self.token = Some(token);
        let handoff = format!("{token};0;{};mock-anthropic", self.request_id);
        self.set_property(vec!["llm_handoff"], Some(handoff.as_bytes()));
        Action::Continue
    }

    fn on_http_response_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        self.set_http_response_header("x-request-id", Some(&self.request_id));
        let _ = self.get_http_response_header(":status");
        Action::Continue
    }

    fn on_log(&mut self) {
        let millis = now()
            .duration_since(self.started)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        let ids = METRICS.with(|m| *m.borrow_mut().get_or_insert_with(define_metrics));
        let [requests, input, output, duration] = ids;
        let _ = hostcalls::increment_metric(requests, 1);
        let _ = hostcalls::increment_metric(input, 30);
        let _ = hostcalls::increment_metric(output, 40);
        let _ = hostcalls::record_metric(duration, millis as u64);
        // As long as the gateway's access-log line.
        let line = format!(
            r#"{{"request_id":"{}","key":"","group":"mock-anthropic","status":200,"code":null,"attempts":1,"route":["mock-anthropic/mock-claude-sonnet:200"],"provider":"mock-anthropic","model":"mock-claude-sonnet","stream":false,"prompt_tokens":30,"completion_tokens":40,"cached_tokens":0,"reasoning_tokens":0,"usage_estimated":false,"cost_usd":null,"ttft_ms":null,"duration_ms":{millis},"delivered_tokens":40,"client_disconnected":false}}"#,
            self.request_id
        );
        self.set_property(vec!["llm_log"], Some(line.as_bytes()));
    }
}

fn define_metrics() -> [u32; 4] {
    let who = ";provider=mock-anthropic;model=mock-claude-sonnet;group=mock-anthropic";
    let define = |kind, name: &str| hostcalls::define_metric(kind, name).unwrap_or_default();
    [
        define(
            MetricType::Counter,
            &format!("wasm_floor.requests{who};status=200;code=;key="),
        ),
        define(
            MetricType::Counter,
            &format!("wasm_floor.token.usage;token_type=input{who};key="),
        ),
        define(
            MetricType::Counter,
            &format!("wasm_floor.token.usage;token_type=output{who};key="),
        ),
        define(
            MetricType::Histogram,
            &format!("wasm_floor.request.duration_ms{who}"),
        ),
    ]
}

pub struct Upstream {
    token: Option<u64>,
    provider: String,
    stream: bool,
    first_chunk: bool,
}

impl Upstream {
    pub fn new() -> Self {
        Self {
            token: None,
            provider: String::new(),
            stream: false,
            first_chunk: true,
        }
    }
}

impl Context for Upstream {}

impl HttpContext for Upstream {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        self.token = self
            .get_property(vec!["llm_handoff"])
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|h| h.split(';').next()?.parse().ok());
        self.provider = self
            .get_property(PROVIDER_METADATA.to_vec())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        if end_of_stream {
            Action::Continue
        } else {
            Action::Pause
        }
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        if !end_of_stream {
            return Action::Pause;
        }
        let Some(token) = self.token else {
            return Action::Continue;
        };
        // A copy, as the gateway encodes a new body from the parsed request.
        let Some((path, vendor_headers, body)) = STASH.with(|s| {
            s.borrow()
                .get(&token)
                .map(|s| (s.path.clone(), s.vendor_headers.clone(), s.body.clone()))
        }) else {
            return Action::Continue;
        };
        self.stream = body.windows(14).any(|w| w == b"\"stream\":true");
        // The gateway lists the request headers and removes what a vendor
        // must not receive (a short copy of `headers::vendor_may_receive`).
        for (name, _) in self.get_http_request_headers_bytes() {
            let withheld = ["x-llm-", "x-envoy-", "x-forwarded-", "accept-encoding"]
                .iter()
                .any(|p| name.starts_with(p));
            if withheld {
                self.set_http_request_header(&name, None);
            }
        }
        self.set_http_request_header(":path", Some(&path));
        for (name, value) in &vendor_headers {
            self.set_http_request_header(name, Some(value));
        }
        self.set_http_request_header("content-length", Some(&body.len().to_string()));
        self.set_http_request_body(0, size, &body);
        if self.stream {
            let _ = now();
        }
        Action::Continue
    }

    fn on_http_response_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        let headers = self.get_http_response_headers();
        let _ = header(&headers, ":status");
        // The gateway drops vendor headers clients have no use for (a short
        // copy of `headers::client_may_receive`).
        for (name, _) in &headers {
            let passed = [
                ":status",
                "content-type",
                "content-length",
                "transfer-encoding",
            ];
            if !passed.contains(&name.as_str()) {
                self.set_http_response_header(name, None);
            }
        }
        self.set_http_response_header("x-llm-provider", Some(&self.provider));
        self.set_http_response_header("x-llm-model", Some("mock-claude-sonnet"));
        self.set_http_response_header("x-llm-attempts", Some("1"));
        self.set_http_response_header("content-length", None);
        if self.stream {
            self.set_http_response_header("content-type", Some("text/event-stream"));
            self.set_http_response_header("cache-control", Some("no-cache"));
            let _ = now();
        }
        Action::Pause
    }

    fn on_http_response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        if !self.stream && !end_of_stream {
            return Action::Pause;
        }
        let body = self.get_http_response_body(0, size).unwrap_or_default();
        self.set_http_response_body(0, size, &body);
        if self.stream {
            let _ = now();
            if self.first_chunk {
                self.first_chunk = false;
                let _ = now();
            }
        }
        Action::Continue
    }
}
