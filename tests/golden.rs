//! Golden files for every wire format the gateway writes.
//!
//! - Client requests × every provider → the vendor request (path, headers,
//!   body; a body a pass-through pair keeps as the client sent it is shown
//!   as it is) or the error the gateway answers instead: OpenAI chat's
//!   `golden/requests/*.json` → `golden/vendor/<request>/<dialect>.txt`,
//!   every other API's `golden/requests/<api>/*.json` →
//!   `golden/vendor/<api>/<request>/<provider>.txt` (the Responses API also
//!   to Azure's v1 API and a chat-only OpenAI server).
//! - Vendor answers in `golden/responses/<dialect>/*` (`.json` bodies,
//!   `error_<status>_*.json` error bodies, `.sse` streams, Bedrock's
//!   `.events.json` event lists), and OpenAI's own Responses answers in
//!   `golden/responses/openai_responses/`, → what a client of each API gets:
//!   `golden/client/<api>/<dialect>/*.txt` (`native_*` for the Responses
//!   answers OpenAI and Azure pass through).
//!
//! A change in what we send or return shows up as a diff of these files.
//! `GOLDEN_UPDATE=1 cargo test --test golden` rewrites them; review the diff.

// Test code: unwrap and indexing are fine here.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use llm_gateway_core::config::Config;
use llm_gateway_core::dialects::{self, DialectKind, Target};
use llm_gateway_core::error::GatewayError;
use llm_gateway_core::model::response::Origin;
use llm_gateway_core::model::Api;
use llm_gateway_core::surfaces::route::PathFacts;
use llm_gateway_core::surfaces::{surface, SurfaceState};
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
        DialectKind::Gemini | DialectKind::VertexGemini => "gemini-2.5-flash",
        DialectKind::VertexAnthropic => "claude-sonnet-4-5@20250929",
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

/// The golden files one test owns: every file under `dir`. Each output is
/// compared with its file (or written, under `GOLDEN_UPDATE`); a mismatch
/// is collected so one run reports every changed file, and a file nothing
/// produced any more is stale (removed under `GOLDEN_UPDATE`).
struct Golden {
    dir: PathBuf,
    produced: BTreeSet<PathBuf>,
    failures: Vec<String>,
}

fn updating() -> bool {
    std::env::var_os("GOLDEN_UPDATE").is_some()
}

impl Golden {
    fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            produced: BTreeSet::new(),
            failures: Vec::new(),
        }
    }

    fn check(&mut self, path: &Path, actual: &str) {
        assert!(path.starts_with(&self.dir), "{}", path.display());
        self.produced.insert(path.to_owned());
        if updating() {
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
        self.failures.push(format!(
            "{} differs from line {}:\n  golden: {:?}\n  actual: {:?}",
            path.display(),
            line + 1,
            expected.lines().nth(line).unwrap_or("<end>"),
            actual.lines().nth(line).unwrap_or("<end>"),
        ));
    }

    fn finish(mut self) {
        let mut stale = Vec::new();
        files_under(&self.dir, &mut stale);
        for path in stale.iter().filter(|p| !self.produced.contains(*p)) {
            if updating() {
                fs::remove_file(path).unwrap();
            } else {
                self.failures.push(format!(
                    "{} is stale: no fixture produces it any more",
                    path.display()
                ));
            }
        }
        assert!(
            self.failures.is_empty(),
            "{} golden file(s) changed (GOLDEN_UPDATE=1 cargo test --test golden rewrites them):\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).into_iter().flatten() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// An error as a client of `api` gets it: the status and the envelope.
fn client_error(api: Api, e: &GatewayError, request_id: Option<&str>) -> (u16, String) {
    let surface = surface(api);
    (
        surface.status(e.code),
        pretty(&surface.render_error(e, request_id)),
    )
}

/// What upstream sends for one client request of `api`: the upstream
/// role's own decision ([`dialects::encode_generation`]).
fn vendor_request(config: &Config, api: Api, name: &str, stem: &str, body: &[u8]) -> String {
    let provider = &config.providers[name];
    let model = vendor_model(provider.dialect);
    // Gemini's model and stream flag are its path's: fixture `*_stream` streams.
    let facts = PathFacts {
        model: (api == Api::Gemini).then(|| "g".to_owned()),
        stream: (api == Api::Gemini).then_some(stem.ends_with("_stream")),
        ..PathFacts::default()
    };
    let encoded = surface(api)
        .parse_generation(&facts, body)
        .and_then(|generation| {
            let target = Target { provider, model };
            let client = dialects::ClientRequest {
                body: &|| body.to_vec(),
                header: &|_| None,
            };
            dialects::encode_generation(api, &client, &generation.request, &target)
        });
    match encoded {
        Ok(dialects::Encoded {
            request: up,
            native,
            ..
        }) => {
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

/// Where an API's request fixtures are, where what vendors get goes, and
/// the providers they go to: one per dialect and Bedrock with
/// `claude_invoke` (InvokeModel), and for the Responses API also Azure's
/// v1 API and a chat-only OpenAI server.
fn request_fixtures(api: Api) -> (PathBuf, PathBuf, Vec<String>) {
    let mut providers: Vec<String> = DialectKind::ALL
        .iter()
        .map(|&kind| format!("golden-{}", dialect_name(kind)))
        .collect();
    providers.push("golden-bedrock-invoke".into());
    match api {
        Api::OpenAiChat => (root().join("requests"), root().join("vendor"), providers),
        _ => {
            if api == Api::OpenAiResponses {
                providers.extend(["golden-azure-v1".into(), "golden-openai-chat-only".into()]);
            }
            let (requests, vendor) = (root().join("requests"), root().join("vendor"));
            (
                requests.join(api.name()),
                vendor.join(api.name()),
                providers,
            )
        }
    }
}

#[test]
fn vendor_requests_match_golden_files() {
    let config = config();
    let mut golden = Golden::new(root().join("vendor"));
    for api in Api::ALL {
        let (requests, vendor, providers) = request_fixtures(api);
        for request in sorted_files(&requests) {
            let body = fs::read(&request).unwrap();
            let stem = request.file_stem().unwrap().to_string_lossy().into_owned();
            for name in &providers {
                let out = vendor
                    .join(&stem)
                    .join(format!("{}.txt", name.trim_start_matches("golden-")));
                let text = vendor_request(&config, api, name, &stem, &body);
                golden.check(&out, &text);
            }
        }
    }
    golden.finish();
}

fn origin(kind: DialectKind) -> Origin {
    Origin {
        id: "chatcmpl-golden".into(),
        created: 1_733_000_000,
        model: vendor_model(kind).into(),
        provider: format!("golden-{}", dialect_name(kind)),
        stop_sequence: None,
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
            llm_gateway_core::formats::eventstream::encode(
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

/// How a client of one API gets a vendor's answers.
#[derive(Clone, Copy)]
struct Client<'a> {
    api: Api,
    /// The vendor speaks the client's API (a pass-through pair).
    native: bool,
    /// What the client's surface keeps for its answer (the request
    /// fields the Responses API repeats).
    state: &'a SurfaceState,
    /// The choices the client asked for (Chat's `n`, Gemini's `candidateCount`).
    choices: u32,
}

/// The choices a vendor fixture answers: `two_choices` ones answer 2, for
/// the client APIs that ask for several (Chat and Gemini; the Responses and
/// Messages APIs never do).
fn fixture_choices(fixture: &Path) -> u32 {
    if stem(fixture).ends_with("two_choices") {
        2
    } else {
        1
    }
}

/// Runs a vendor stream through the dialect's decoder in the given pieces.
fn client_stream(kind: DialectKind, client: Client, pieces: &[&[u8]]) -> String {
    let writer = llm_gateway_core::surfaces::stream_writer(
        client.api,
        client.native,
        origin(kind),
        "req-golden".into(),
        true,
        client.state,
    )
    .with_choices(client.choices);
    let mut decoder = dialects::dialect(kind).stream_decoder(writer);
    let mut out = Vec::new();
    for piece in pieces {
        decoder.feed(piece, &mut out);
    }
    decoder.finish(&mut out);
    String::from_utf8(out).unwrap()
}

fn client_answer(kind: DialectKind, client: Client, path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let dialect = dialects::dialect(kind);
    if name.ends_with(".sse") || name.ends_with(".events.json") {
        let bytes = stream_bytes(path);
        let whole = client_stream(kind, client, &[&bytes]);
        // However the network cuts the stream, the client gets the same bytes.
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(
            client_stream(kind, client, &bytewise),
            whole,
            "{name}, fed byte by byte"
        );
        let thirds: Vec<&[u8]> = bytes.chunks(bytes.len().div_ceil(3).max(1)).collect();
        assert_eq!(
            client_stream(kind, client, &thirds),
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
        let (status, body) = client_error(client.api, &e, Some("req-golden"));
        return format!("HTTP {status} retry-after={:?}\n\n{body}\n", e.retry_after);
    }
    let mut origin = origin(kind);
    let decoded = if client.native {
        dialect.decode_native(client.api, &body, &mut origin)
    } else {
        dialect.decode_response(&body, &mut origin)
    };
    match decoded {
        Ok(d) => {
            let usage = d.usage;
            let body = surface(client.api).render_answer(d.answer, &origin, client.state);
            format!("HTTP 200 usage={usage:?}\n\n{}\n", pretty(&body))
        }
        Err(e) => {
            let (status, body) = client_error(client.api, &e, Some("req-golden"));
            format!("HTTP {status} (decode failed)\n\n{body}\n")
        }
    }
}

fn stem(fixture: &Path) -> String {
    let file = fixture.file_name().unwrap().to_string_lossy().into_owned();
    file.split('.').next().unwrap().to_owned()
}

/// The API a vendor's own fixtures (`golden/responses/<dialect>/`) speak,
/// when it is a client API: a client of it gets them passed through.
fn fixture_api(kind: DialectKind) -> Option<Api> {
    match kind {
        DialectKind::Openai | DialectKind::Azure => Some(Api::OpenAiChat),
        DialectKind::Anthropic | DialectKind::VertexAnthropic => Some(Api::AnthropicMessages),
        DialectKind::Gemini => Some(Api::Gemini),
        _ => None,
    }
}

#[test]
fn client_answers_match_golden_files() {
    let mut golden = Golden::new(root().join("client"));
    // What Responses answers repeat: the basic request's fields.
    let basic = fs::read(root().join("requests/openai_responses/basic.json")).unwrap();
    let responses_state = surface(Api::OpenAiResponses)
        .parse_generation(&PathFacts::default(), &basic)
        .unwrap()
        .state;
    let none = SurfaceState::default();
    for api in Api::ALL {
        let state = match api {
            Api::OpenAiResponses => &responses_state,
            _ => &none,
        };
        for &kind in DialectKind::ALL {
            let name = dialect_name(kind);
            let dir = root().join("client").join(api.name()).join(&name);
            // The vendor's own answers (for OpenAI and Azure to a Responses
            // client: a chat-only server, a dated api_version).
            let own = Client {
                api,
                native: fixture_api(kind) == Some(api),
                state,
                choices: 1,
            };
            for fixture in sorted_files(&root().join("responses").join(&name)) {
                let choices = fixture_choices(&fixture);
                if choices > 1 && !matches!(api, Api::OpenAiChat | Api::Gemini) {
                    continue;
                }
                let out = dir.join(format!("{}.txt", stem(&fixture)));
                let client = Client { choices, ..own };
                golden.check(&out, &client_answer(kind, client, &fixture));
            }
            // OpenAI's Responses answers, passed through.
            if api == Api::OpenAiResponses && dialects::dialect(kind).speaks(api) {
                let native = Client {
                    native: true,
                    ..own
                };
                for fixture in sorted_files(&root().join("responses/openai_responses")) {
                    let out = dir.join(format!("native_{}.txt", stem(&fixture)));
                    golden.check(&out, &client_answer(kind, native, &fixture));
                }
            }
        }
    }
    golden.finish();
}

/// Where embeddings go: (file name, provider, vendor model).
const EMBEDDING_TARGETS: [(&str, &str, &str); 10] = [
    ("openai", "golden-openai", "text-embedding-3-small"),
    ("azure", "golden-azure", "embedding-deployment"),
    ("azure-v1", "golden-azure-v1", "embedding-deployment"),
    ("gemini", "golden-gemini", "gemini-embedding-001"),
    (
        "bedrock-titan",
        "golden-bedrock",
        "amazon.titan-embed-text-v2:0",
    ),
    ("bedrock-cohere", "golden-bedrock", "cohere.embed-v4:0"),
    ("dashscope", "golden-dashscope", "text-embedding-v4"),
    ("anthropic", "golden-anthropic", "claude-sonnet-4-5"),
    ("vertex", "golden-vertex_gemini", "text-embedding-005"),
    (
        "vertex-gemini-embedding",
        "golden-vertex_gemini",
        "gemini-embedding-001",
    ),
];

/// Embeddings: `embeddings/requests/*.json` × every target →
/// `embeddings/vendor/<request>/<target>.txt` (what the vendor gets, or
/// the gateway's refusal; requests named `gemini_batch*` / `gemini_one*`
/// are the Gemini surface's `:batchEmbedContents` / `:embedContent`
/// bodies, the others OpenAI's); `embeddings/responses/<target>.json` (a
/// vendor answer to two inputs) → `embeddings/client/<target>.txt` (what
/// an OpenAI client gets, in floats, byte for byte) and
/// `embeddings/client/gemini/<target>.txt` (a `:batchEmbedContents` client).
#[test]
fn embeddings_match_golden_files() {
    use llm_gateway_core::model::embed::{no_embeddings, Encoding};
    use llm_gateway_core::model::Request;
    use llm_gateway_core::surfaces::Operation;
    let config = config();
    let root = root().join("embeddings");
    let mut golden = Golden::new(root.join("vendor"));
    for request in sorted_files(&root.join("requests")) {
        let body = fs::read(&request).unwrap();
        let stem = request.file_stem().unwrap().to_string_lossy().into_owned();
        for (file, name, model) in EMBEDDING_TARGETS {
            let provider = &config.providers[name];
            let target = Target { provider, model };
            let path = match stem.split('_').take(2).collect::<Vec<_>>()[..] {
                ["gemini", "batch"] => "/v1beta/models/text-embedding-3-small:batchEmbedContents",
                ["gemini", _] => "/v1beta/models/text-embedding-3-small:embedContent",
                _ => "/v1/embeddings",
            };
            let route = llm_gateway_core::surfaces::route("POST", path, "");
            let Some(Ok(Operation::Call(call))) = route.map(|r| r.operation) else {
                panic!("{path} routes to no call");
            };
            let encoded = llm_gateway_core::surfaces::parse_call_body(&call, &body)
                .and_then(|r| match r {
                    Some(Request::Embed(r)) => Ok(r),
                    _ => Err(no_embeddings()),
                })
                .and_then(|r| {
                    let embedder =
                        dialects::embedder(dialects::dialect(provider.dialect), provider)
                            .ok_or_else(no_embeddings)?;
                    embedder.encode(&r, &target)
                });
            let text = match encoded {
                Ok(up) => {
                    let mut text = format!("POST {}\n", up.path);
                    for (name, value) in &up.headers {
                        writeln!(text, "{name}: {value}").unwrap();
                    }
                    writeln!(text, "\n{}", pretty(&up.body)).unwrap();
                    text
                }
                Err(e) => {
                    let (status, body) = client_error(call.api, &e, None);
                    format!("HTTP {status} (the gateway answers)\n\n{body}\n")
                }
            };
            golden.check(
                &root.join("vendor").join(&stem).join(format!("{file}.txt")),
                &text,
            );
        }
    }
    golden.finish();
    let mut golden = Golden::new(root.join("client"));
    for (file, name, model) in EMBEDDING_TARGETS {
        let path = root.join("responses").join(format!("{file}.json"));
        let Ok(body) = fs::read(&path) else { continue };
        let provider = &config.providers[name];
        let embedder = dialects::embedder(dialects::dialect(provider.dialect), provider);
        let text = match embedder.unwrap().decode(&body, model) {
            Ok(answer) => {
                let tokens = answer.prompt_tokens.unwrap_or(0);
                let rendered = llm_gateway_core::wire::openai_embeddings::render(
                    &answer,
                    model,
                    Encoding::Float,
                    tokens,
                );
                // As sent: the field order is OpenAI's.
                format!("{}\n", String::from_utf8_lossy(&rendered))
            }
            Err(e) => {
                let (status, body) = client_error(Api::OpenAiChat, &e, None);
                format!("HTTP {status}\n\n{body}\n")
            }
        };
        golden.check(&root.join("client").join(format!("{file}.txt")), &text);
        if let Ok(answer) = embedder.unwrap().decode(&body, model) {
            let rendered = llm_gateway_core::wire::gemini_embeddings::render(&answer, true);
            golden.check(
                &root.join("client/gemini").join(format!("{file}.txt")),
                &format!("{}\n", String::from_utf8_lossy(&rendered)),
            );
        }
    }
    golden.finish();
}
