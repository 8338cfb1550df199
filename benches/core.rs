//! Micro benchmarks of the pure core, natively: `cargo bench --bench core`.
//!
//! No criterion: a timing loop (std::time::Instant, black_box) reporting the
//! median of several batches is enough to compare changes on one machine,
//! and keeps the dependency tree and compile time as they are. Prints a
//! markdown table that `make bench` puts into BENCHMARKS.md.
#![allow(
    // A benchmark harness, not filter code: failing loudly is what we want.
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use llm_gateway_core::cache::key::RequestKey;
use llm_gateway_core::cache::semantic::{Index, Settings as SemanticSettings};
use llm_gateway_core::cache::semantic_index::{Quantized, REC_HEAD};
use llm_gateway_core::config::Config;
use llm_gateway_core::dialects::{dialect, DialectKind, Target};
use llm_gateway_core::formats::sse::{SseError, SseParser};
use llm_gateway_core::model::embed::Encoding;
use llm_gateway_core::model::request::ChatRequest;
use llm_gateway_core::model::response::Origin;
use llm_gateway_core::model::surface_state::SurfaceState;
use llm_gateway_core::redact::Redactor;
use llm_gateway_core::shared_state::cas::{SetResult, SharedStore, Unreadable};
use llm_gateway_core::shared_state::{Key, Namespace};
use llm_gateway_core::surfaces::anthropic_messages::request as messages;
use llm_gateway_core::wire::openai_embeddings;

/// A dialect, its provider config fields, a vendor response, a vendor stream's events.
type Sample = (DialectKind, &'static str, Vec<u8>, Vec<Vec<u8>>);

/// Every dialect, with its config and sample vendor answers: a response and
/// a stream as its events. The match has no wildcard: a new `DialectKind`
/// does not compile until it is benchmarked here too.
fn dialects() -> Vec<Sample> {
    DialectKind::ALL
        .iter()
        .map(|&kind| match kind {
            DialectKind::Openai => (
                kind,
                r#""dialect":"openai""#,
                openai_response(),
                openai_stream(),
            ),
            DialectKind::Azure => (
                kind,
                r#""dialect":"azure","api_version":"2024-10-21""#,
                openai_response(),
                openai_stream(),
            ),
            DialectKind::Anthropic => (
                kind,
                r#""dialect":"anthropic""#,
                anthropic_response(),
                anthropic_stream(),
            ),
            DialectKind::Gemini => (
                kind,
                r#""dialect":"gemini""#,
                gemini_response(),
                gemini_stream(),
            ),
            DialectKind::VertexGemini => (
                kind,
                r#""dialect":"vertex_gemini","project":"p","location":"us-central1""#,
                gemini_response(),
                gemini_stream(),
            ),
            DialectKind::VertexAnthropic => (
                kind,
                r#""dialect":"vertex_anthropic","project":"p","location":"global""#,
                anthropic_response(),
                anthropic_stream(),
            ),
            DialectKind::Bedrock => (
                kind,
                r#""dialect":"bedrock""#,
                bedrock_response(),
                bedrock_stream(),
            ),
            DialectKind::Dashscope => (
                kind,
                r#""dialect":"dashscope""#,
                dashscope_response(),
                dashscope_stream(),
            ),
        })
        .collect()
}

fn sse_events(s: &str) -> Vec<Vec<u8>> {
    s.split_inclusive("\n\n")
        .map(|e| e.as_bytes().to_vec())
        .collect()
}

fn gemini_response() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "candidates": [{"content": {"parts": [{"text": answer_text()}], "role": "model"},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 200, "totalTokenCount": 220},
        "modelVersion": "gemini-x", "responseId": "r1"
    }))
    .unwrap()
}

fn gemini_stream() -> Vec<Vec<u8>> {
    (0..STREAM_CHUNKS)
        .map(|i| {
            let mut c = serde_json::json!({"candidates": [{"content": {"parts": [{"text": CHUNK_TEXT}], "role": "model"}, "index": 0}],
                "modelVersion": "gemini-x", "responseId": "r1"});
            if i + 1 == STREAM_CHUNKS {
                c["candidates"][0]["finishReason"] = "STOP".into();
                c["usageMetadata"] = serde_json::json!({"promptTokenCount": 20, "candidatesTokenCount": 200});
            }
            format!("data: {c}\r\n\r\n").into_bytes()
        })
        .collect()
}

fn bedrock_response() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "output": {"message": {"role": "assistant", "content": [{"text": answer_text()}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 20, "outputTokens": 200, "totalTokens": 220}
    }))
    .unwrap()
}

fn bedrock_stream() -> Vec<Vec<u8>> {
    let event = |kind: &str, payload: serde_json::Value| {
        llm_gateway_core::formats::eventstream::encode(
            &[
                (":event-type", kind),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload.to_string().as_bytes(),
        )
    };
    let mut events = vec![event(
        "messageStart",
        serde_json::json!({"role": "assistant"}),
    )];
    for _ in 0..STREAM_CHUNKS {
        events.push(event(
            "contentBlockDelta",
            serde_json::json!({"contentBlockIndex": 0, "delta": {"text": CHUNK_TEXT}}),
        ));
    }
    events.push(event(
        "contentBlockStop",
        serde_json::json!({"contentBlockIndex": 0}),
    ));
    events.push(event(
        "messageStop",
        serde_json::json!({"stopReason": "end_turn"}),
    ));
    events.push(event(
        "metadata",
        serde_json::json!({"usage": {"inputTokens": 20, "outputTokens": 200, "totalTokens": 220}, "metrics": {"latencyMs": 1}}),
    ));
    events
}

fn dashscope_response() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "output": {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": answer_text()}}]},
        "usage": {"input_tokens": 20, "output_tokens": 200, "total_tokens": 220},
        "request_id": "r1"
    }))
    .unwrap()
}

fn dashscope_stream() -> Vec<Vec<u8>> {
    (0..STREAM_CHUNKS)
        .map(|i| {
            let last = i + 1 == STREAM_CHUNKS;
            let c = serde_json::json!({
                "output": {"choices": [{"finish_reason": if last { "stop" } else { "null" },
                                         "message": {"role": "assistant", "content": CHUNK_TEXT}}]},
                "usage": {"input_tokens": 20, "output_tokens": (i + 1) * 10, "total_tokens": 20 + (i + 1) * 10},
                "request_id": "r1"});
            format!("id:{}\nevent:result\n:HTTP_STATUS/200\ndata:{c}\n\n", i + 1).into_bytes()
        })
        .collect()
}

const STREAM_CHUNKS: usize = 20;
/// ~50 bytes per chunk, ~1 KB in all: like the mock's `--fast` answers.
const CHUNK_TEXT: &str = "The quick brown fox jumps over the lazy dog again. ";

fn answer_text() -> String {
    CHUNK_TEXT.repeat(STREAM_CHUNKS)
}

fn openai_response() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer_text()},
                     "finish_reason": "stop", "logprobs": null}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 200, "total_tokens": 220},
        "system_fingerprint": "fp_1"
    }))
    .unwrap()
}

fn openai_stream() -> Vec<Vec<u8>> {
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        let c = serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4o", "system_fingerprint": "fp_1",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut s = chunk(
        serde_json::json!({"role": "assistant", "content": ""}),
        serde_json::Value::Null,
    );
    for _ in 0..STREAM_CHUNKS {
        s += &chunk(
            serde_json::json!({"content": CHUNK_TEXT}),
            serde_json::Value::Null,
        );
    }
    s += &chunk(serde_json::json!({}), serde_json::json!("stop"));
    s += "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":200,\"total_tokens\":220}}\n\n";
    s += "data: [DONE]\n\n";
    sse_events(&s)
}

fn anthropic_response() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "text", "text": answer_text()}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 20, "output_tokens": 200}
    }))
    .unwrap()
}

fn anthropic_stream() -> Vec<Vec<u8>> {
    let event = |name: &str, data: serde_json::Value| format!("event: {name}\ndata: {data}\n\n");
    let mut s = event(
        "message_start",
        serde_json::json!({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
        "stop_reason": null, "usage": {"input_tokens": 20, "output_tokens": 1}}}),
    );
    s += &event(
        "content_block_start",
        serde_json::json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "text", "text": ""}}),
    );
    for _ in 0..STREAM_CHUNKS {
        s += &event(
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": CHUNK_TEXT}}),
        );
    }
    s += &event(
        "content_block_stop",
        serde_json::json!({"type": "content_block_stop", "index": 0}),
    );
    s += &event(
        "message_delta",
        serde_json::json!({"type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 200}}),
    );
    s += &event("message_stop", serde_json::json!({"type": "message_stop"}));
    sse_events(&s)
}

/// A unified request of about `size` bytes.
/// OpenAI's embeddings answer: `n` vectors of `dims` floats of 9 decimals
/// (a fixed pseudo-random sequence), one per line as OpenAI writes them.
fn embeddings_answer(n: usize, dims: usize) -> Vec<u8> {
    let mut x: u64 = 12345;
    let data: Vec<String> = (0..n)
        .map(|i| {
            let values: Vec<String> = (0..dims)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    format!("{:.9}", ((x >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 0.1)
                })
                .collect();
            format!(
                "{{\n  \"object\": \"embedding\",\n  \"index\": {i},\n  \"embedding\": [\n    {}\n  ]\n}}",
                values.join(",\n    ")
            )
        })
        .collect();
    format!(
        "{{\n\"object\": \"list\",\n\"data\": [{}],\n\"model\": \"text-embedding-3-small\",\n\"usage\": {{\"prompt_tokens\": 100, \"total_tokens\": 100}}\n}}",
        data.join(",")
    )
    .into_bytes()
}

fn unified_request(size: usize) -> Vec<u8> {
    let mut body = serde_json::json!({"model": "bench", "max_tokens": 256,
        "messages": [{"role": "system", "content": "You are a benchmark."},
                     {"role": "user", "content": ""}]});
    let empty = serde_json::to_vec(&body).unwrap().len();
    body["messages"][1]["content"] = "lorem ipsum "
        .repeat(size.saturating_sub(empty) / 12)
        .into();
    serde_json::to_vec(&body).unwrap()
}

/// An Anthropic Messages request of about `size` bytes (the unified
/// request's content, as a client of the Messages API sends it).
fn messages_request(size: usize) -> Vec<u8> {
    let mut body = serde_json::json!({"model": "bench", "max_tokens": 256,
        "system": "You are a benchmark.",
        "messages": [{"role": "user", "content": ""}]});
    let empty = serde_json::to_vec(&body).unwrap().len();
    body["messages"][0]["content"] = "lorem ipsum "
        .repeat(size.saturating_sub(empty) / 12)
        .into();
    serde_json::to_vec(&body).unwrap()
}

/// A Responses request of about `size` bytes: instructions, a function
/// tool and a Codex-like history (messages, function calls, their outputs).
fn responses_request(size: usize) -> Vec<u8> {
    let mut body = serde_json::json!({"model": "bench", "instructions": "You are a benchmark.",
        "stream": true, "store": false, "include": ["reasoning.encrypted_content"],
        "tools": [{"type": "function", "name": "shell", "description": "Runs a command.", "strict": false,
            "parameters": {"type": "object", "properties": {"command": {"type": "array",
                "items": {"type": "string"}}}, "required": ["command"]}}],
        "input": []});
    let mut len = serde_json::to_vec(&body).unwrap().len();
    let mut items = Vec::new();
    for i in 0.. {
        let call_id = format!("call_{i}");
        let item = match i % 4 {
            0 => serde_json::json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "lorem ipsum dolor sit amet"}]}),
            1 => serde_json::json!({"type": "function_call", "call_id": call_id, "name": "shell",
                "arguments": "{\"command\":[\"ls\",\"-l\"]}"}),
            2 => {
                serde_json::json!({"type": "function_call_output", "call_id": format!("call_{}", i - 1),
                "output": "lorem ipsum\nlorem ipsum\n"})
            }
            _ => serde_json::json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "lorem ipsum dolor", "annotations": []}]}),
        };
        len += serde_json::to_vec(&item).unwrap().len() + 1;
        if len > size && !items.is_empty() {
            break;
        }
        items.push(item);
    }
    body["input"] = items.into();
    serde_json::to_vec(&body).unwrap()
}

/// Median time of one call of `f`, over batches of about 5 ms each.
fn time<R>(mut f: impl FnMut() -> R) -> Duration {
    const BATCHES: usize = 21;
    let start = Instant::now();
    let mut iterations = 0u32;
    while start.elapsed() < Duration::from_millis(5) {
        black_box(f());
        iterations += 1;
    }
    let mut per_call: Vec<Duration> = (0..BATCHES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                black_box(f());
            }
            start.elapsed() / iterations
        })
        .collect();
    per_call.sort();
    per_call[BATCHES / 2]
}

/// Measured first, a dialect's 100 KB rows ran 3x slower than the same
/// code measured after another dialect (glibc's dynamic mmap threshold had
/// not yet risen to the request's buffers: every call mapped and faulted
/// in fresh pages). A few large allocations freed first raise it.
fn warm_up_the_allocator() {
    for size in [256 << 10, 1 << 20, 4 << 20] {
        black_box(vec![1u8; size]);
    }
}

/// What model discovery adds to a request that uses it: a known-limits
/// lookup per candidate (`model_facts.check_limits`), the discovered-route
/// decision for a model no group is named for (`discovery.route`), and a
/// retired check per candidate (`discovery.avoid_retired`), over a list of
/// a thousand models.
fn discovery_lookups() {
    use llm_gateway_core::catalog;
    use llm_gateway_core::discovery::{store::ListRecord, Discovered};
    use llm_gateway_core::model::listing::Listed;
    let config = Config::parse(
        br#"{"providers":{"p":{"dialect":"openai","api_key":"k"}},
             "model_groups":{"g":{"cluster":"c"},"h":{"cluster":"d"}},"auth":{"enabled":false},
             "discovery":{"providers":{"p":{"cluster":"c"}},"route":true}}"#,
        |_| None,
    )
    .unwrap();
    let settings = config.discovery.as_ref().unwrap();
    let models: Vec<Listed> = (0..1000)
        .map(|i| Listed::named(format!("model-{i:04}")))
        .collect();
    let seen = Discovered::build(
        settings,
        1,
        |_| Some(1),
        |_| (Some(ListRecord::new(1, 1, models.clone())), None),
    );
    let t = time(|| {
        catalog::facts(
            &config.model_facts,
            "p",
            config.providers.get("p"),
            black_box("claude-sonnet-4-5-20250929"),
            seen.lists("p", "claude-sonnet-4-5-20250929"),
        )
    });
    row(
        "model facts: one lookup (configuration, list, table)",
        t,
        "",
    );
    let t = time(|| {
        settings.route(
            &config.model_groups,
            None,
            &seen,
            |_| true,
            black_box("model-0999"),
        )
    });
    row("discovery: route a discovered model, 1000 listed", t, "");
    let t = time(|| seen.retired("p", black_box("model-0500")));
    row("discovery: retired check, one candidate", t, "");
}

/// Context fitting's own cost per attempt (`crate::fitting`) on a long
/// agent history (200 messages, tool calls and results, ~100 KB): the
/// estimate when it fits, and estimate plus trim to a 4096-token window.
/// A group without a policy pays nothing of it.
fn context_fitting() {
    use llm_gateway_core::fitting::{fit, Policy};
    let mut messages = Vec::new();
    for i in 0..40 {
        let text = "the gateway fits every request to the window of its model ".repeat(8);
        messages.push(serde_json::json!({"role": "user", "content": format!("{i}: {text}")}));
        messages.push(
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{i}"), "type": "function",
             "function": {"name": "read_file", "arguments": "{\"path\":\"src/main.rs\"}"}}]}),
        );
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": format!("call_{i}"),
                                         "content": "fn main() { println!(\"hello\"); }\n".repeat(40)}));
        messages.push(serde_json::json!({"role": "assistant", "content": text}));
        messages.push(serde_json::json!({"role": "user", "content": "go on"}));
    }
    let body =
        serde_json::to_vec(&serde_json::json!({"model": "m", "messages": messages})).unwrap();
    let request = ChatRequest::parse(&body).unwrap();
    let policy: Policy = serde_json::from_str(r#"{"strategies":["trim","reject"]}"#).unwrap();
    let kb = body.len() / 1024;
    let t = time(|| fit(&policy, black_box(&request), "m", Some(1_000_000), &[]).is_ok());
    row(
        &format!("context fitting: {kb} KB, 200 messages, fits (estimate)"),
        t,
        "",
    );
    let t = time(|| fit(&policy, black_box(&request), "m", Some(4096), &[]).is_ok());
    row(
        &format!("context fitting: {kb} KB, 200 messages, trimmed to 4096 tokens"),
        t,
        "",
    );
}

/// Shared data as a map (the bench's proxy): a read copies the value out,
/// a write copies it in, as the hosts' shared data do.
#[derive(Default)]
struct BenchStore(std::cell::RefCell<std::collections::HashMap<Vec<u8>, Held>>);

/// A value and its CAS token.
type Held = (Vec<u8>, u32);

impl SharedStore for BenchStore {
    fn get(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, Unreadable> {
        Ok(self.0.borrow().get(key).cloned())
    }

    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> SetResult {
        let mut map = self.0.borrow_mut();
        let next = map.get(key).map_or(0, |(_, c)| *c);
        if cas != 0 && cas != next {
            return SetResult::CasMismatch;
        }
        map.insert(key.to_vec(), (value.to_vec(), next + 1));
        SetResult::Done
    }
}

/// The semantic cache's index of one group at 10,000 vectors of 1,536
/// dimensions (OpenAI's text-embedding-3-small), all in the lookup's own
/// partition (the worst case: every record compared): a lookup that finds
/// one (and marks it given: the index written back) and one that finds
/// none close enough.
fn semantic_index_lookups() {
    const DIMENSIONS: usize = 1536;
    const ENTRIES: usize = 10_000;
    let settings: SemanticSettings = serde_json::from_value(serde_json::json!({
        "embedding_group": "embed", "max_entries": ENTRIES, "max_bytes": 64u64 << 20,
    }))
    .unwrap();
    // The index as 10,000 inserts would leave it, written at once in the
    // layout src/cache/semantic_index.rs describes (10,000 inserts, each
    // copying the whole index in and out, would take minutes).
    let partition = Key::new("bench", &Namespace::of_key("k"), b"rest");
    let vector = |seed: usize| -> Vec<f32> {
        (0..DIMENSIONS)
            .map(|i| (((seed * 7919 + i * 104_729) % 2001) as f32 - 1000.0) / 1000.0)
            .collect()
    };
    let mut bytes = b"SEM1".to_vec();
    bytes.extend_from_slice(&(DIMENSIONS as u32).to_le_bytes());
    bytes.extend_from_slice(&(ENTRIES as u32).to_le_bytes());
    for n in 0..ENTRIES {
        let v = vector(n);
        let length = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        let q: Vec<i8> = v
            .iter()
            .map(|x| (x / length * 127.0).round() as i8)
            .collect();
        let norm = (q.iter().map(|&c| i32::from(c).pow(2)).sum::<i32>() as f32).sqrt();
        bytes.extend_from_slice(partition.as_bytes());
        bytes.extend_from_slice(&[0; 24]);
        bytes.extend_from_slice(&(n as u64).to_le_bytes());
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        bytes.extend_from_slice(&1u64.to_le_bytes());
        bytes.extend_from_slice(&norm.to_le_bytes());
        bytes.extend(q.iter().map(|&c| c as u8));
    }
    assert_eq!(bytes.len(), 12 + ENTRIES * (REC_HEAD + DIMENSIONS));
    let store = BenchStore::default();
    store.set(b"llm_semantic:g", &bytes, 0);
    let index = Index::new(&store, "g", &settings);
    assert_eq!(index.usage().unwrap().0, ENTRIES);
    let near = Quantized::of(&vector(ENTRIES / 2)).unwrap();
    let t = time(|| index.lookup(&partition, black_box(&near), 0.95, 2).unwrap());
    row(
        "semantic index lookup, 10,000 vectors of 1,536, a hit",
        t,
        "read, scan, written back (last use)",
    );
    let far = Quantized::of(&vec![1.0; DIMENSIONS]).unwrap();
    let t = time(|| index.lookup(&partition, black_box(&far), 0.999, 2));
    row(
        "semantic index lookup, 10,000 vectors of 1,536, a miss",
        t,
        "read and scan",
    );
    // A miss's vector stored: the least recently given record replaced.
    let mut n = 0u64;
    let t = time(|| {
        n += 1;
        let mut key = [1u8; 32];
        key[..8].copy_from_slice(&n.to_le_bytes());
        assert!(index.insert(&partition, &RequestKey(key), black_box(&far), (3, u64::MAX)));
    });
    row(
        "semantic index insert, 10,000 vectors of 1,536",
        t,
        "read, one record replaced, written back",
    );
}

fn row(name: &str, t: Duration, note: &str) {
    println!("| {name} | {:.2} | {note} |", t.as_secs_f64() * 1e6);
}

fn main() {
    println!("| benchmark | median µs | note |");
    println!("|---|---|---|");
    let origin = || Origin {
        id: "chatcmpl-r".into(),
        created: 1,
        model: "m".into(),
        provider: "p".into(),
        stop_sequence: None,
    };
    for size in [1024, 100 * 1024] {
        let body = unified_request(size);
        let t = time(|| ChatRequest::parse(black_box(&body)).unwrap());
        row(&format!("unified parse, {} KB", size / 1024), t, "");
    }
    for size in [1024, 100 * 1024] {
        let body = messages_request(size);
        let t = time(|| messages::parse(black_box(&body)).unwrap());
        row(&format!("messages parse, {} KB", size / 1024), t, "");
    }
    for size in [1024, 100 * 1024] {
        let body = responses_request(size);
        let t = time(|| {
            llm_gateway_core::surfaces::openai_responses::request::parse(black_box(&body)).unwrap()
        });
        row(&format!("responses parse, {} KB", size / 1024), t, "");
    }
    // A reasoning model's request policy (max_tokens renamed): what the
    // upstream role does before encoding for gpt-5 and the o-series.
    let config = Config::parse(
        br#"{"providers":{"p":{"dialect":"openai","api_key":"k"}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
        |_| None,
    )
    .unwrap();
    for size in [1024, 100 * 1024] {
        let req = ChatRequest::parse(&unified_request(size)).unwrap();
        let t = time(|| {
            config.providers["p"]
                .apply_policy("gpt-5", black_box(&req))
                .unwrap()
        });
        row(
            &format!("request policy for gpt-5, {} KB", size / 1024),
            t,
            "",
        );
    }
    discovery_lookups();
    context_fitting();
    semantic_index_lookups();
    warm_up_the_allocator();
    for (kind, provider, response, events) in dialects() {
        let name = serde_json::to_value(kind)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned();
        let config = Config::parse(
            format!(r#"{{"providers":{{"p":{{{provider},"api_key":"k"}}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#)
                .as_bytes(),
            |_| None,
        )
        .unwrap();
        let stream: Vec<u8> = events.concat();
        let d = dialect(kind);
        let target = Target {
            provider: &config.providers["p"],
            model: "vendor-model",
        };
        for size in [1024, 100 * 1024] {
            let body = unified_request(size);
            let t = time(|| {
                let req = ChatRequest::parse(black_box(&body)).unwrap();
                d.encode_request(&req, &target).unwrap()
            });
            row(
                &format!("{name}: parse + encode request, {} KB", size / 1024),
                t,
                "",
            );
        }
        let t = time(|| {
            let mut o = origin();
            d.decode_native(
                llm_gateway_core::model::Api::OpenAiChat,
                black_box(&response),
                &mut o,
            )
            .unwrap()
        });
        row(
            &format!("{name}: decode response, {} B", response.len()),
            t,
            "",
        );
        let mut out = Vec::with_capacity(8192);
        let t = time(|| {
            let mut decoder = d.stream_decoder(llm_gateway_core::surfaces::stream_writer(
                llm_gateway_core::model::Api::OpenAiChat,
                d.speaks(llm_gateway_core::model::Api::OpenAiChat),
                origin(),
                "r".into(),
                false,
                &SurfaceState::default(),
            ));
            out.clear();
            decoder.feed(black_box(&stream), &mut out);
            decoder.finish(&mut out);
            assert!(out.ends_with(b"data: [DONE]\n\n"));
        });
        let per_chunk = t / u32::try_from(STREAM_CHUNKS).unwrap();
        row(
            &format!("{name}: translate a {STREAM_CHUNKS}-chunk stream, one feed"),
            t,
            &format!("{:.2} µs per chunk", per_chunk.as_secs_f64() * 1e6),
        );
        let t = time(|| {
            let mut decoder = d.stream_decoder(llm_gateway_core::surfaces::stream_writer(
                llm_gateway_core::model::Api::OpenAiChat,
                d.speaks(llm_gateway_core::model::Api::OpenAiChat),
                origin(),
                "r".into(),
                false,
                &SurfaceState::default(),
            ));
            out.clear();
            for event in &events {
                decoder.feed(black_box(event), &mut out);
            }
            decoder.finish(&mut out);
        });
        row(
            &format!("{name}: translate a {STREAM_CHUNKS}-chunk stream, one feed per event"),
            t,
            &format!(
                "{:.2} µs per event",
                t.as_secs_f64() * 1e6 / events.len() as f64
            ),
        );
    }
    // Each client surface's stream encoder on one translated stream (the
    // OpenAI dialect's, decoded the same way for all three).
    let (kind, _, _, events) = dialects().swap_remove(0);
    let stream: Vec<u8> = events.concat();
    let mut out = Vec::with_capacity(16 * 1024);
    for api in [
        llm_gateway_core::model::Api::OpenAiChat,
        llm_gateway_core::model::Api::AnthropicMessages,
        llm_gateway_core::model::Api::OpenAiResponses,
    ] {
        let t = time(|| {
            let mut decoder =
                dialect(kind).stream_decoder(llm_gateway_core::surfaces::stream_writer(
                    api,
                    false,
                    origin(),
                    "r".into(),
                    true,
                    &SurfaceState::default(),
                ));
            out.clear();
            decoder.feed(black_box(&stream), &mut out);
            decoder.finish(&mut out);
        });
        row(
            &format!("a {STREAM_CHUNKS}-chunk stream to a {} client", api.name()),
            t,
            &format!(
                "{:.2} µs per chunk",
                t.as_secs_f64() * 1e6 / STREAM_CHUNKS as f64
            ),
        );
    }
    // An embeddings batch's answer (16 vectors of 1536, OpenAI's
    // text-embedding-3-small, pretty-printed as OpenAI writes it): read,
    // then written to the client in floats and in base64.
    let answer = embeddings_answer(16, 1536);
    let t = time(|| openai_embeddings::decode(black_box(&answer)).unwrap());
    row(
        "embeddings answer read, 16 x 1536",
        t,
        &format!("{} KB", answer.len() / 1024),
    );
    let (embeddings, _) = openai_embeddings::decode(&answer).unwrap();
    for encoding in [Encoding::Float, Encoding::Base64] {
        let t = time(|| openai_embeddings::render(black_box(&embeddings), "m", encoding, 100));
        row(
            &format!("embeddings answer written, 16 x 1536, {encoding:?}"),
            t,
            "",
        );
    }
    // SSE framing alone: 1 MB of events fed in 16 KB network chunks.
    let event = format!("event: delta\ndata: {{\"text\":\"{CHUNK_TEXT}\"}}\n\n");
    let input = event.repeat((1 << 20) / event.len());
    let t = time(|| {
        let mut parser = SseParser::default();
        let mut n = 0usize;
        for chunk in input.as_bytes().chunks(16 * 1024) {
            parser
                .feed(chunk, &mut |_: &str, data: &str| {
                    n += data.len();
                    Ok::<(), SseError>(())
                })
                .unwrap();
        }
        n
    });
    row(
        "SSE framing, 1 MB in 16 KB chunks",
        t,
        &format!("{:.0} MB/s", input.len() as f64 / t.as_secs_f64() / 1e6),
    );
    // The key redactor on what every answer passes through: a stream chunk
    // and a 100 KB answer, neither holding the key (the common case).
    let redactor = Redactor::new(Some("sk-bench-0123456789abcdefghijklmnop"));
    for (what, bytes) in [
        ("a stream chunk", event.clone().into_bytes()),
        ("a 100 KB answer", input.as_bytes()[..100 * 1024].to_vec()),
    ] {
        let mut buf = bytes.clone();
        let t = time(|| redactor.scrub(black_box(&mut buf)));
        row(
            &format!("redact {what}, {} B, no key in it", bytes.len()),
            t,
            &format!("{:.0} MB/s", bytes.len() as f64 / t.as_secs_f64() / 1e6),
        );
    }
}
