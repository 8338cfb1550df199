//! Deterministic mutation fuzzing of everything that reads untrusted bytes:
//! every client surface's request parser, SSE framing, and every dialect's
//! response, error and stream decoders, for clients of every API. The property: no panic, whatever the input
//! and however it is split into chunks.
//!
//! `cargo test --test fuzz` runs a short pass (CI); `make fuzz` runs longer
//! (FUZZ_ITERATIONS, default here 3000 per target).

// Test code: indexing and expect are fine here.
#![allow(clippy::indexing_slicing, clippy::expect_used)]

use llm_gateway_core::config::Config;
use llm_gateway_core::dialects::{dialect, DialectKind, Target};
use llm_gateway_core::error::GatewayError;
use llm_gateway_core::formats::sse::SseParser;
use llm_gateway_core::model::call::Call;
use llm_gateway_core::model::request::ChatRequest;
use llm_gateway_core::model::response::Origin;
use llm_gateway_core::model::surface_state::SurfaceState;
use llm_gateway_core::model::{Api, Request};
use llm_gateway_core::surfaces::route::PathFacts;
use llm_gateway_core::surfaces::surface;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: fast, deterministic, good enough to pick mutations.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"null",
    b"true",
    b"-1",
    b"1e999",
    b"18446744073709551616",
    b"\r\n",
    b"\n\n",
    b"\r",
    b"data: ",
    b"event: ",
    b": ping\n",
    b"data: [DONE]\n\n",
    "é".as_bytes(),
    "你".as_bytes(),
    "🌍".as_bytes(),
    b"\xff",
    b"\xf0\x9f",
    b"\"role\":\"tool\"",
    b"\"tool_calls\":[",
    b"\"content\":[",
    b"\"type\":\"tool_use\"",
    b"\"index\":99999",
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut data = seed.to_vec();
    for _ in 0..=rng.below(8) {
        let at = rng.below(data.len() + 1);
        match rng.below(6) {
            0 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] ^= 1 << rng.below(8);
            }
            1 => data.insert(at, rng.next() as u8),
            2 if at < data.len() => {
                let end = (at + rng.below(16)).min(data.len());
                data.drain(at..end);
            }
            3 if at < data.len() => {
                let end = (at + rng.below(64)).min(data.len());
                let copy = data[at..end].to_vec();
                let to = rng.below(data.len() + 1);
                data.splice(to..to, copy);
            }
            _ => {
                let token = TOKENS[rng.below(TOKENS.len())];
                data.splice(at..at, token.iter().copied());
            }
        }
    }
    data
}

fn iterations() -> usize {
    std::env::var("FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

/// Splits `data` into random chunks.
fn chunks<'a>(rng: &mut Rng, data: &'a [u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let n = 1 + rng.below(rest.len().min(40));
        let (a, b) = rest.split_at(n);
        out.push(a);
        rest = b;
    }
    out
}

const REQUESTS: &[&str] = &[
    r#"{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required","temperature":0.5,"max_tokens":10,"stop":["x"],"stream":true,"stream_options":{"include_usage":true}}"#,
    r#"{"model":"m","messages":[{"role":"user","content":"hello"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},"n":1,"user":"u"}"#,
];

const STREAMS: &[&str] = &[
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":3}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"h\u{e9}\"}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":5}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\"}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"t\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"s\"}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"r\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n",
];

const RESPONSES: &[&str] = &[
    r#"{"id":"msg_1","type":"message","model":"c","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"f","input":{"a":1}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2}}"#,
    r#"{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    r#"{"error":{"message":"m","type":"t","param":null,"code":"context_length_exceeded"}}"#,
];

fn config() -> Config {
    let providers: Vec<String> = DialectKind::ALL
        .iter()
        .enumerate()
        .map(|(i, kind)| {
            let name = serde_json::to_string(kind).unwrap_or_default();
            // Azure requires its api-version, Vertex AI its project and
            // location; the others refuse them.
            let version = match kind {
                DialectKind::Azure => r#","api_version":"2024-10-21""#,
                DialectKind::VertexGemini | DialectKind::VertexAnthropic => {
                    r#","project":"p","location":"us-east5""#
                }
                _ => "",
            };
            format!(r#""p{i}":{{"dialect":{name},"api_key":"k"{version}}}"#)
        })
        .collect();
    let doc = format!(
        r#"{{"providers":{{{}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#,
        providers.join(",")
    );
    Config::parse(doc.as_bytes(), |_| None).expect("fuzz config")
}

/// Anthropic Messages requests to mutate.
const MESSAGES_REQUESTS: &[&str] = &[
    r#"{"model":"g","max_tokens":100,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QQ=="}},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"}}]}],"stream":true}"#,
    r#"{"model":"g","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":[{"type":"text","text":"r"}]}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}"#,
    r#"{"model":"g","max_tokens":10,"thinking":{"type":"adaptive"},"output_config":{"effort":"low"},"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}],"metadata":{"user_id":"u"},"top_k":3,"stop_sequences":["z"]}"#,
];

/// A generation's neutral request, as its surface parses a body on its path.
fn parsed(api: Api, body: &[u8]) -> Result<ChatRequest, GatewayError> {
    let generation = surface(api).parse_generation(&PathFacts::default(), body)?;
    Ok(generation.request)
}

#[test]
fn request_parsing_and_encoding_never_panic() {
    let config = config();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..iterations() {
        for (api, seeds) in [
            (Api::OpenAiChat, REQUESTS),
            (Api::AnthropicMessages, MESSAGES_REQUESTS),
        ] {
            let input = mutate(&mut rng, seeds[i % seeds.len()].as_bytes());
            let Ok(request) = parsed(api, &input) else {
                continue;
            };
            encode_for_every_provider(&config, api, &input, &request);
        }
    }
}

#[test]
fn sse_framing_never_panics() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    for i in 0..iterations() {
        let input = mutate(&mut rng, STREAMS[i % STREAMS.len()].as_bytes());
        let mut parser = SseParser::with_limit(256);
        for chunk in chunks(&mut rng, &input) {
            let _ = parser.feed(chunk, &mut |_: &str, _: &str| {
                Ok::<(), llm_gateway_core::formats::sse::SseError>(())
            });
        }
    }
}

#[test]
fn decoders_never_panic() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    for i in 0..iterations() {
        for &kind in DialectKind::ALL {
            let d = dialect(kind);
            let body = mutate(&mut rng, RESPONSES[i % RESPONSES.len()].as_bytes());
            let api = Api::ALL[i % Api::ALL.len()];
            let _ = d.decode_response(&body, &mut Origin::default());
            let _ = d.decode_native(api, &body, &mut Origin::default());
            let _ = d.decode_error(400 + (rng.below(200) as u16), &body);
            let stream = mutate(&mut rng, STREAMS[i % STREAMS.len()].as_bytes());
            let mut decoder = d.stream_decoder(llm_gateway_core::surfaces::stream_writer(
                api,
                d.speaks(api),
                Origin::default(),
                "r".into(),
                i % 2 == 0,
                &SurfaceState::default(),
            ));
            let mut out = Vec::new();
            for chunk in chunks(&mut rng, &stream) {
                decoder.feed(chunk, &mut out);
            }
            decoder.finish(&mut out);
            assert!(
                std::str::from_utf8(&out).is_ok(),
                "the unified stream is always valid UTF-8"
            );
        }
    }
}

/// Responses API requests and streams (OpenAI's own events), seeds for the
/// Responses surface.
const RESPONSES_REQUESTS: &[&str] = &[
    r#"{"model":"m","input":"hi","instructions":"x","stream":true,"max_output_tokens":20,"text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"}}}}"#,
    r#"{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/png;base64,AA"}]},{"type":"reasoning","summary":[{"type":"summary_text","text":"t"}],"encrypted_content":"gw-signature:s"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"web_search"}],"tool_choice":{"type":"function","name":"f"}}"#,
];
const RESPONSES_STREAMS: &[&str] = &[
    "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"model\":\"m\",\"created_at\":1}}\n\nevent: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"hi\"}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
    "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":0,\"response\":{\"error\":{\"code\":\"server_error\",\"message\":\"x\"}}}\n\nevent: error\ndata: {\"type\":\"error\",\"code\":\"c\",\"message\":\"m\"}\n\n",
];

#[test]
fn responses_surface_never_panics() {
    use llm_gateway_core::surfaces::stream_writer;
    let config = config();
    let api = Api::OpenAiResponses;
    let mut rng = Rng(0x5151_7a7a_0f0f_e1e1);
    for i in 0..iterations() {
        let input = mutate(
            &mut rng,
            RESPONSES_REQUESTS[i % RESPONSES_REQUESTS.len()].as_bytes(),
        );
        if let Ok(request) = parsed(api, &input) {
            encode_for_every_provider(&config, api, &input, &request);
        }
        for &kind in DialectKind::ALL {
            let d = dialect(kind);
            let seeds = if d.speaks(api) {
                RESPONSES_STREAMS
            } else {
                STREAMS
            };
            let body = mutate(&mut rng, RESPONSES[i % RESPONSES.len()].as_bytes());
            if let Ok(decoded) = d.decode_response(&body, &mut Origin::default()) {
                let _ = surface(api).render_answer(
                    decoded.answer,
                    &Origin::default(),
                    &SurfaceState::default(),
                );
            }
            let _ = d.decode_native(api, &body, &mut Origin::default());
            for native in [false, d.speaks(api)] {
                let stream = mutate(&mut rng, seeds[i % seeds.len()].as_bytes());
                let writer = stream_writer(
                    api,
                    native,
                    Origin::default(),
                    "r".into(),
                    true,
                    &SurfaceState::default(),
                );
                let mut decoder = d.stream_decoder(writer);
                let mut out = Vec::new();
                for chunk in chunks(&mut rng, &stream) {
                    decoder.feed(chunk, &mut out);
                }
                decoder.finish(&mut out);
                assert!(
                    std::str::from_utf8(&out).is_ok(),
                    "the stream is valid UTF-8"
                );
            }
        }
    }
}

/// A parsed request encoded for every provider of `config`, both ways: the
/// client's body kept (where the vendor speaks `api`) and translated.
fn encode_for_every_provider(
    config: &llm_gateway_core::config::Config,
    api: Api,
    input: &[u8],
    request: &ChatRequest,
) {
    for provider in config.providers.values() {
        let d = dialect(provider.dialect);
        let target = Target {
            provider,
            model: "m",
        };
        let client = llm_gateway_core::dialects::ClientRequest {
            body: &|| input.to_vec(),
            header: &|_| Some(b"beta-1, beta-2".to_vec()),
        };
        let _ = d.encode_native(api, &client, request, &target);
        let _ = d.encode_request(request, &target);
    }
}

/// Embeddings requests and vendor answers, mutated into what a client or
/// a vendor might send.
const EMBEDDINGS_REQUESTS: &[&str] = &[
    r#"{"model":"text-embedding-3-small","input":["a","b"],"dimensions":256,"encoding_format":"base64","task_type":"retrieval_query"}"#,
    r#"{"model":"m","input":[[1,2],[3]]}"#,
    r#"{"data":[{"index":1,"embedding":"AACAPw=="},{"index":0,"embedding":[0.5]}],"usage":{"prompt_tokens":2}}"#,
    r#"{"embeddings":[{"values":[0.1,0.2]}]}"#,
    r#"{"embeddings":{"float":[[0.1]]},"embedding":[0.2],"inputTextTokenCount":3}"#,
    r#"{"output":{"embeddings":[{"text_index":0,"embedding":[0.3]}]},"usage":{"total_tokens":1}}"#,
];

/// Native calls: request lines (method, path, query) and bodies, mutated,
/// through the edge's reading of them and every dialect's encoding.
#[test]
fn native_calls_never_panic() {
    use llm_gateway_core::surfaces::{parse_call_body, route, Operation};
    let config = config();
    let mut rng = Rng(0x0bad_c0de_1234_5678);
    let lines: &[(&str, &str, &str)] = &[
        ("POST", "/v1/messages/count_tokens", ""),
        ("POST", "/v1/embeddings", ""),
        (
            "GET",
            "/v1/responses/resp_abc123",
            "include[]=x&stream=false",
        ),
        (
            "GET",
            "/v1/responses/resp_abc123/input_items",
            "limit=2&order=asc&after=msg_1",
        ),
        ("DELETE", "/v1/responses/resp_abc123", ""),
        ("POST", "/v1/responses/resp_abc123/cancel", ""),
    ];
    let bodies: Vec<&[u8]> = MESSAGES_REQUESTS
        .iter()
        .map(|r| r.as_bytes())
        .chain([b"".as_slice(), b"{}", b" { } "])
        .chain(EMBEDDINGS_REQUESTS.iter().map(|r| r.as_bytes()))
        .collect();
    for i in 0..iterations() {
        let (method, path, query) = lines[i % lines.len()];
        // Mostly valid request lines, so that the bodies reach the dialects.
        let mut line = |part: &str, mutated: bool| match mutated {
            true => String::from_utf8_lossy(&mutate(&mut rng, part.as_bytes())).into_owned(),
            false => part.to_owned(),
        };
        let (path, query) = (line(path, i % 4 == 0), line(query, i % 4 == 1));
        let Some(Ok(Operation::Call(call))) = route(method, &path, &query).map(|r| r.operation)
        else {
            continue;
        };
        // The edge hands every call it routes to the attempt as it is.
        assert_eq!(
            Call::decode(&call.encode()).as_ref(),
            Some(&call),
            "{call:?}"
        );
        let body = mutate(&mut rng, bodies[i % bodies.len()]);
        let request = parse_call_body(&call, &body);
        let request = request.as_ref().ok().and_then(Option::as_ref);
        let _ = call.local_answer(request.and_then(Request::chat));
        for provider in config.providers.values() {
            for model in ["m", "amazon.titan-embed-text-v2:0", "cohere.embed-v4:0"] {
                let target = Target { provider, model };
                let d = dialect(provider.dialect);
                let _ = d.encode_call(&call, &|| body.clone(), &target);
                if let (Some(embedder), Some(embed)) =
                    (d.embedder(), request.and_then(Request::embed))
                {
                    let _ = embedder.encode(embed, &target);
                    let _ = embedder.decode(&body, model);
                }
            }
        }
    }
}

/// Shared values by key, each with its CAS token.
type Entries = std::collections::HashMap<Vec<u8>, (Vec<u8>, u32)>;

/// A shared store in memory (Envoy's shared-data semantics: a CAS token per
/// write), for the diagnostics view.
#[derive(Default)]
struct Store {
    entries: std::cell::RefCell<Entries>,
    cas: std::cell::Cell<u32>,
}

impl llm_gateway_core::shared_state::cas::SharedStore for Store {
    fn get(
        &self,
        key: &[u8],
    ) -> Result<Option<(Vec<u8>, u32)>, llm_gateway_core::shared_state::cas::Unreadable> {
        Ok(self.entries.borrow().get(key).cloned())
    }
    fn set(
        &self,
        key: &[u8],
        value: &[u8],
        cas: u32,
    ) -> llm_gateway_core::shared_state::cas::SetResult {
        use llm_gateway_core::shared_state::cas::SetResult;
        let mut entries = self.entries.borrow_mut();
        if cas != 0 && entries.get(key).is_some_and(|(_, c)| *c != cas) {
            return SetResult::CasMismatch;
        }
        self.cas.set(self.cas.get() + 1);
        entries.insert(key.to_vec(), (value.to_vec(), self.cas.get()));
        SetResult::Done
    }
}

/// The diagnostics view: mutated request lines, keys and queries, over a
/// ring whose slots hold mutated traces (and garbage), on every path.
#[test]
fn diagnostics_never_panic() {
    use llm_gateway_core::diagnostics::{self, ring, trace::Trace, Ask};
    use llm_gateway_core::shared_state::cas::SharedStore;
    let doc = r#"{"providers":{"a":{"dialect":"anthropic","api_key":"k"}},
        "model_groups":{"g":{"candidates":[{"provider":"a","model":"m","cluster":"c"}]}},
        "auth":{"enabled":true,"keys":[{"name":"k","sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","groups":["*"]}]},
        "limits":{"rate":[{"key":"*","group":"*","tokens_per_minute":100,"usd_per_day":1}]},
        "diagnostics":{"loopback_open":true,"recent_requests":16,"api_requests_per_second":10000}}"#;
    let config = Config::parse(doc.as_bytes(), |_| None).expect("diagnostics config");
    let store = Store::default();
    diagnostics::prepare(&store, &config);
    let seed = r#"{"seq":1,"at_ms":1733000000000,"request_id":"r","surface":"openai_chat","operation":"chat","group":"g","key":"k","cluster":"c","status":503,"attempts":[{"n":1,"provider":"a","status":503,"outcome":"503","start_ms":1,"latency_ms":3,"ttft_ms":2},{"n":2,"provider":"a","status":0,"outcome":"reset","retry_on":"5xx"}],"envoy_flags":["UO"],"cost_usd":0.1}"#;
    let lines: &[(&str, &str)] = &[
        ("/llm-gateway/api/view", "group=g&key=k&status=5xx&limit=3"),
        ("/llm-gateway/api/requests/r", ""),
        ("/llm-gateway/api/health", "status=error"),
        ("/llm-gateway/api/limits", "key=k"),
        ("/llm-gateway/api/routes", "group=g"),
        ("/llm-gateway/", ""),
    ];
    let mut rng = Rng(0xd1a9_0571_c5ee_d001);
    let mut answered = 0;
    for i in 0..iterations() / 4 {
        // A slot written as a worker would, mutated, or garbage.
        let slot = format!("llm_gateway.diag.slot.{}", i % 16);
        let bytes = mutate(&mut rng, seed.as_bytes());
        store.set(slot.as_bytes(), &bytes, 0);
        if let Some(mut trace) = Trace::decode(&bytes) {
            ring::record(&store, 16, &mut trace);
        }
        let (path, query) = lines[i % lines.len()];
        // Mostly whole paths, so that the bodies of the answers are made.
        let mut line = |part: &str, mutated: bool| match mutated {
            true => String::from_utf8_lossy(&mutate(&mut rng, part.as_bytes())).into_owned(),
            false => part.to_owned(),
        };
        let (path, query) = (line(path, i % 4 == 0), line(query, i % 4 == 1));
        let key =
            (i % 3 == 0).then(|| String::from_utf8_lossy(&mutate(&mut rng, b"test")).into_owned());
        if !diagnostics::owns(&path) {
            continue;
        }
        let ask = Ask {
            method: if i % 7 == 0 { "POST" } else { "GET" },
            path: &path,
            query: &query,
            key: key.as_deref(),
            request_id: "fuzz",
        };
        let reply = diagnostics::serve(&config, &store, 1_733_000_000_000 + i as u64, &ask, || {
            i % 2 == 0
        });
        assert!((200..600).contains(&reply.status));
        answered += usize::from(reply.status == 200);
    }
    assert!(
        answered > iterations() / 16,
        "the pass reached the view's answers"
    );
}
