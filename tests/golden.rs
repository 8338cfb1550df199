//! Golden files for every wire format the gateway writes.
//!
//! - `golden/requests/*.json` (OpenAI chat client requests) and
//!   `golden/requests/anthropic_messages/*.json` (Messages requests) ×
//!   every dialect → `golden/vendor/<request>/<dialect>.txt` (Messages:
//!   `golden/vendor/anthropic_messages/<request>/<dialect>.txt`): the vendor
//!   request (path, headers, body; a body kept as the client sent it is
//!   shown as it is) or the error the gateway answers instead.
//! - `golden/responses/<dialect>/*` (vendor answers: `.json` bodies,
//!   `error_<status>_*.json` error bodies, `.sse` streams, Bedrock's
//!   `.events.json` event lists) → `golden/client/<surface>/<dialect>/*.txt`:
//!   what a client of each surface receives.
//!
//! A change in what we send or return shows up as a diff of these files.
//! `GOLDEN_UPDATE=1 cargo test --test golden` rewrites them; review the diff.

// Test code: unwrap and indexing are fine here.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use llm_gateway::config::Config;
use llm_gateway::dialects::{self, DialectKind, Target};
use llm_gateway::error::GatewayError;
use llm_gateway::model::response::Origin;
use llm_gateway::model::Api;
use llm_gateway::surfaces::surface;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn config() -> Config {
    let bytes = fs::read(root().join("config.json")).unwrap();
    Config::parse(&bytes, |_| None).unwrap()
}

fn dialect_name(kind: DialectKind) -> String {
    serde_json::to_value(kind)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// The vendor model each golden provider is asked for.
fn vendor_model(kind: DialectKind) -> &'static str {
    match kind {
        DialectKind::Openai | DialectKind::Azure => "gpt-4o",
        DialectKind::Anthropic => "claude-sonnet-4-5",
        DialectKind::Gemini => "gemini-2.5-flash",
        DialectKind::Bedrock => "anthropic.claude-sonnet-4-5-20250929-v1:0",
        DialectKind::Dashscope => "qwen-plus",
    }
}

fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn pretty(bytes: &[u8]) -> String {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => serde_json::to_string_pretty(&v).unwrap(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// Compares with the golden file (or writes it under `GOLDEN_UPDATE`);
/// a mismatch is collected so one run reports every changed file.
fn check(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if std::env::var_os("GOLDEN_UPDATE").is_some() {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, actual).unwrap();
        return;
    }
    let expected = fs::read_to_string(path).unwrap_or_default();
    if expected == actual {
        return;
    }
    let line = expected
        .lines()
        .zip(actual.lines())
        .position(|(e, a)| e != a)
        .unwrap_or(expected.lines().count().min(actual.lines().count()));
    failures.push(format!(
        "{} differs from line {}:\n  golden: {:?}\n  actual: {:?}",
        path.display(),
        line + 1,
        expected.lines().nth(line).unwrap_or("<end>"),
        actual.lines().nth(line).unwrap_or("<end>"),
    ));
}

fn report(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} golden file(s) changed (GOLDEN_UPDATE=1 cargo test --test golden rewrites them):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// An error as a client of `api` gets it: the status and the envelope.
fn client_error(api: Api, e: &GatewayError, request_id: Option<&str>) -> (u16, String) {
    let surface = surface(api);
    (
        surface.status(e.code),
        pretty(&surface.render_error(e, request_id)),
    )
}

/// What upstream sends for one client request of `api`, as the upstream
/// role builds it: the client's own body when the vendor speaks its API
/// (`encode_native`), else the provider's request policy, then the
/// dialect's encoder.
fn vendor_request(config: &Config, api: Api, kind: DialectKind, body: &[u8]) -> String {
    let name = format!("golden-{}", dialect_name(kind));
    let provider = &config.providers[&name];
    let model = vendor_model(kind);
    let dialect = dialects::dialect(kind);
    let target = Target { provider, model };
    let raw = || body.to_vec();
    let mut native = false;
    let encoded = surface(api).parse_request(body).and_then(|request| {
        if let Some(up) = dialect
            .speaks(api)
            .then(|| dialect.encode_native(api, &raw, &request, &target))
            .flatten()
        {
            native = true;
            return up;
        }
        if let Some(field) = &request.native_only {
            return Err(GatewayError::invalid(
                field.as_str(),
                format!(
                    "{field}: only providers that speak the {} API take this",
                    api.name()
                ),
            ));
        }
        let adapted = provider.apply_policy(model, &request);
        let request = adapted.as_ref().unwrap_or(&request);
        dialect.encode_request(request, &target)
    });
    match encoded {
        Ok(up) => {
            let mut text = format!("POST {}\n", up.path);
            for (name, value) in &up.headers {
                writeln!(text, "{name}: {value}").unwrap();
            }
            let body = if native {
                String::from_utf8_lossy(&up.body).into_owned()
            } else {
                pretty(&up.body)
            };
            writeln!(text, "\n{body}").unwrap();
            text
        }
        Err(e) => {
            let (status, body) = client_error(api, &e, None);
            format!("HTTP {status} (the gateway answers)\n\n{body}\n")
        }
    }
}

/// Where each surface's request fixtures are, and where what vendors get goes.
fn request_dirs(api: Api) -> (PathBuf, PathBuf) {
    match api {
        Api::OpenAiChat => (root().join("requests"), root().join("vendor")),
        _ => (
            root().join("requests").join(api.name()),
            root().join("vendor").join(api.name()),
        ),
    }
}

#[test]
fn vendor_requests_match_golden_files() {
    let config = config();
    let mut failures = Vec::new();
    for api in Api::ALL {
        let (requests, vendor) = request_dirs(api);
        for request in sorted_files(&requests) {
            let body = fs::read(&request).unwrap();
            let stem = request.file_stem().unwrap().to_string_lossy().into_owned();
            for &kind in DialectKind::ALL {
                let out = vendor
                    .join(&stem)
                    .join(format!("{}.txt", dialect_name(kind)));
                check(
                    &out,
                    &vendor_request(&config, api, kind, &body),
                    &mut failures,
                );
            }
        }
    }
    report(failures);
}

fn origin(kind: DialectKind) -> Origin {
    Origin {
        id: "chatcmpl-golden".into(),
        created: 1_733_000_000,
        model: vendor_model(kind).into(),
        provider: format!("golden-{}", dialect_name(kind)),
    }
}

/// A vendor stream fixture as the bytes on the wire.
fn stream_bytes(path: &Path) -> Vec<u8> {
    let raw = fs::read(path).unwrap();
    if !path.to_string_lossy().ends_with(".events.json") {
        return raw;
    }
    // Bedrock: each [event type, payload] framed as AWS event-stream.
    let events: Vec<(String, Value)> = serde_json::from_slice(&raw).unwrap();
    events
        .iter()
        .flat_map(|(kind, payload)| {
            llm_gateway::eventstream::encode(
                &[
                    (":event-type", kind),
                    (":content-type", "application/json"),
                    (":message-type", "event"),
                ],
                payload.to_string().as_bytes(),
            )
        })
        .collect()
}

/// Runs a vendor stream through the dialect's decoder in the given pieces.
fn client_stream(api: Api, kind: DialectKind, pieces: &[&[u8]]) -> String {
    let writer = llm_gateway::surfaces::stream_writer(
        api,
        dialects::dialect(kind).speaks(api),
        origin(kind),
        "req-golden".into(),
        true,
    );
    let mut decoder = dialects::dialect(kind).stream_decoder(writer);
    let mut out = Vec::new();
    for piece in pieces {
        decoder.feed(piece, &mut out);
    }
    decoder.finish(&mut out);
    String::from_utf8(out).unwrap()
}

fn client_answer(api: Api, kind: DialectKind, path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let dialect = dialects::dialect(kind);
    if name.ends_with(".sse") || name.ends_with(".events.json") {
        let bytes = stream_bytes(path);
        let whole = client_stream(api, kind, &[&bytes]);
        // However the network cuts the stream, the client gets the same bytes.
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(
            client_stream(api, kind, &bytewise),
            whole,
            "{name}, fed byte by byte"
        );
        let thirds: Vec<&[u8]> = bytes.chunks(bytes.len().div_ceil(3).max(1)).collect();
        assert_eq!(
            client_stream(api, kind, &thirds),
            whole,
            "{name}, fed in thirds"
        );
        return whole;
    }
    let body = fs::read(path).unwrap();
    if let Some(status) = name
        .strip_prefix("error_")
        .and_then(|rest| rest.split('_').next())
    {
        let status: u16 = status.parse().unwrap();
        let e = dialect.decode_error(status, &body);
        let (status, body) = client_error(api, &e, Some("req-golden"));
        return format!("HTTP {status} retry-after={:?}\n\n{body}\n", e.retry_after);
    }
    let mut origin = origin(kind);
    match dialect.decode_for(api, &body, &mut origin) {
        Ok(d) => {
            let usage = d.usage;
            let body = surface(api).render_answer(d.answer, &origin);
            format!("HTTP 200 usage={usage:?}\n\n{}\n", pretty(&body))
        }
        Err(e) => {
            let (status, body) = client_error(api, &e, Some("req-golden"));
            format!("HTTP {status} (decode failed)\n\n{body}\n")
        }
    }
}

#[test]
fn client_answers_match_golden_files() {
    let mut failures = Vec::new();
    for api in Api::ALL {
        for &kind in DialectKind::ALL {
            let name = dialect_name(kind);
            for fixture in sorted_files(&root().join("responses").join(&name)) {
                let file = fixture.file_name().unwrap().to_string_lossy().into_owned();
                let stem = file.split('.').next().unwrap().to_owned();
                let out = root()
                    .join("client")
                    .join(api.name())
                    .join(&name)
                    .join(format!("{stem}.txt"));
                check(&out, &client_answer(api, kind, &fixture), &mut failures);
            }
        }
    }
    report(failures);
}
