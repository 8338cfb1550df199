//! Temporary: the hand-written visitors (`legacy`) and the wire types'
//! parse over many generated and mutated bodies, asserting identical
//! results (the request's Debug form; the error's param, message and status).

use super::*;
use crate::surfaces::openai_chat::legacy;
use serde_json::json;

/// Raw string literals holding a chat body, from the crate's sources
/// (the unit tests' bodies), whole ones only (not `format!` templates).
fn unit_bodies() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut stack = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let Ok(code) = std::fs::read_to_string(&path) else {
                continue;
            };
            let mut rest = code.as_str();
            while let Some(start) = rest.find("r#\"") {
                rest = &rest[start + 3..];
                let Some(end) = rest.find("\"#") else { break };
                let literal = &rest[..end];
                rest = &rest[end + 2..];
                if literal.contains("\"messages\"") && !literal.contains("{{") {
                    out.push(literal.as_bytes().to_vec());
                }
            }
        }
    }
    out
}

/// OpenAI SDK-, LiteLLM- and OpenRouter-shaped bodies, with escapes and unicode.
fn client_bodies() -> Vec<Value> {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"},
        "units": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"], "additionalProperties": false});
    vec![
        json!({"model": "gpt-4o", "messages": [
                {"role": "system", "content": "You are helpful.\n\"quoted\" \\ \u{2603}", "name": "sys"},
                {"role": "developer", "content": [{"type": "text", "text": "dev"}]},
                {"role": "user", "content": [{"type": "text", "text": "h\u{e9}llo \u{1F600}\u{0}"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "high"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}], "name": "u"},
                {"role": "assistant", "content": null, "refusal": null, "annotations": [], "audio": null,
                 "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_2", "function": {"name": "f", "arguments": ""}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "ok"}]},
                {"role": "assistant", "content": "Sunny.", "refusal": "no", "name": "bot"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": schema, "strict": true}},
                {"type": "function", "function": {"name": "f", "parameters": null}}],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": false, "temperature": 0.7, "top_p": 1, "max_tokens": 100,
            "max_completion_tokens": 200, "stop": ["a", "b"], "seed": 42, "user": "u1", "n": 2,
            "stream": true, "stream_options": {"include_usage": true}, "request_id": "r-1",
            "presence_penalty": 0.5, "frequency_penalty": 0, "logit_bias": {"50256": -100},
            "logprobs": true, "top_logprobs": 2, "metadata": {"k": "v"}, "store": false,
            "service_tier": "auto", "modalities": ["text"], "prediction": null}),
        json!({"model": "anthropic/claude-sonnet-4", "messages": [
                {"role": "system", "content": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]},
                {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}, "cache_control": {"type": "ephemeral", "ttl": "5m"}}]},
                {"role": "assistant", "content": "a", "reasoning_content": "hmm",
                 "reasoning_details": [{"type": "reasoning.text", "text": "a", "index": 0, "format": "anthropic-claude-v1"},
                    {"type": "reasoning.text", "text": "b", "signature": "s1", "index": 0},
                    {"type": "reasoning.encrypted", "data": "enc", "index": 1, "id": "x"},
                    {"type": "reasoning.summary", "summary": "sum", "index": 2},
                    {"type": "reasoning.text", "text": "c", "signature": null}]},
                {"role": "assistant", "content": null, "reasoning_content": "only",
                 "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "r", "cache_control": {"type": "ephemeral"}}]}],
            "tools": [{"type": "function", "function": {"name": "f"}, "cache_control": {"type": "ephemeral", "ttl": "5m"}}],
            "tool_choice": "required", "reasoning": {"effort": "high", "max_tokens": 2048, "enabled": true},
            "response_format": {"type": "json_schema", "json_schema": {"name": "out", "description": "d",
                "schema": {"type": "object", "properties": {"a": {"type": "string"}}}, "strict": true}},
            "stop": "END", "stream": false, "stream_options": null, "temperature": null}),
        json!({"model": "gpt-4o-search-preview", "messages": [{"role": "user", "content": "news?"}],
            "web_search_options": {"search_context_size": "low", "user_location": {"type": "approximate",
                "approximate": {"city": "Paris", "region": "IDF", "country": "FR", "timezone": "Europe/Paris"}}},
            "reasoning_effort": "minimal", "response_format": {"type": "json_object"}, "tool_choice": "none",
            "tools": [], "stop": null, "user": null, "n": null, "seed": -3, "max_tokens": null}),
        json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "text"}, "reasoning_effort": null, "reasoning": {"enabled": false},
            "web_search_options": null, "tool_choice": "auto", "tools": null, "parallel_tool_calls": null}),
    ]
}

/// Values a mutation puts in place of a member or an element.
fn replacements() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(false),
        json!(0),
        json!(-1),
        json!(1.5),
        json!(3),
        json!(70000000000u64),
        json!(""),
        json!("x"),
        json!("auto"),
        json!("none"),
        json!("required"),
        json!("assistant"),
        json!("user"),
        json!("system"),
        json!("developer"),
        json!("tool"),
        json!("function"),
        json!("text"),
        json!("image_url"),
        json!("json_schema"),
        json!("json_object"),
        json!("ephemeral"),
        json!("1h"),
        json!("reasoning.text"),
        json!("reasoning.encrypted"),
        json!("reasoning.summary"),
        json!("approximate"),
        json!("high"),
        json!("low"),
        json!("{\"a\":1,\"a\":2}"),
        json!("{oops"),
        json!("data:image/png;base64,AAAA"),
        json!("ftp://x"),
        json!("h\u{e9}\n\"\\\u{1}"),
        json!([]),
        json!({}),
        json!(["a"]),
        json!([1]),
        json!(["a", "b", "c", "d", "e"]),
        json!({"type": "text", "text": "t"}),
        json!([{"type": "text", "text": "t"}]),
        json!({"type": "function", "function": {"name": "f"}}),
        json!([{"type": "function", "function": {"name": "f"}}]),
        json!({"role": "user", "content": "c"}),
        json!({"type": "ephemeral"}),
        json!({"include_usage": true}),
        json!({"name": "n", "arguments": "{}"}),
    ]
}

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn paths(v: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                at.push(Step::Key(k.clone()));
                paths(child, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                at.push(Step::Index(i));
                paths(child, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn get_mut<'v>(v: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    path.iter().try_fold(v, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::Index(i) => v.get_mut(*i),
    })
}

/// One change to a body: a value replaced, a member dropped, renamed or
/// duplicated (the duplicate is written as text), an element dropped or doubled.
#[derive(Clone, Debug)]
enum Mutation {
    Replace(Vec<Step>, Value),
    Drop(Vec<Step>),
    Rename(Vec<Step>, String),
    Duplicate(Vec<Step>),
    Double(Vec<Step>),
}

fn mutations(v: &Value) -> Vec<Mutation> {
    let mut all = Vec::new();
    let mut out = Vec::new();
    paths(v, &mut Vec::new(), &mut out);
    for path in out {
        for r in replacements() {
            all.push(Mutation::Replace(path.clone(), r));
        }
        match path.last() {
            Some(Step::Key(_)) => {
                all.push(Mutation::Drop(path.clone()));
                all.push(Mutation::Duplicate(path.clone()));
                for name in ["aaa", "zzz", "Type", "body.x", "t\u{e9}"] {
                    all.push(Mutation::Rename(path.clone(), name.into()));
                }
            }
            Some(Step::Index(_)) => {
                all.push(Mutation::Drop(path.clone()));
                all.push(Mutation::Double(path.clone()));
            }
            None => {}
        }
    }
    all
}

/// One mutation of `v`, at random.
fn random_mutation(v: &Value, rng: &mut Rng) -> Mutation {
    let mut out = Vec::new();
    paths(v, &mut Vec::new(), &mut out);
    let path = out.swap_remove(rng.below(out.len()));
    let keyed = matches!(path.last(), Some(Step::Key(_)));
    match (rng.below(6), path.last()) {
        (0, Some(_)) => Mutation::Drop(path),
        (1, Some(_)) if keyed => Mutation::Duplicate(path),
        (1, Some(_)) => Mutation::Double(path),
        (2, Some(_)) if keyed => {
            Mutation::Rename(path, ["aaa", "zzz", "Type"][rng.below(3)].into())
        }
        _ => {
            let mut r = replacements();
            Mutation::Replace(path, r.swap_remove(rng.below(r.len())))
        }
    }
}

/// Applies `m` to `v`; a duplicate comes back as the path to write twice.
fn apply(v: &mut Value, m: &Mutation) -> Option<Vec<Step>> {
    let parent = |path: &Vec<Step>| path[..path.len() - 1].to_vec();
    match m {
        Mutation::Replace(path, r) => {
            if let Some(at) = get_mut(v, path) {
                *at = r.clone();
            }
        }
        Mutation::Drop(path) => match (get_mut(v, &parent(path)), path.last()) {
            (Some(Value::Object(o)), Some(Step::Key(k))) => {
                o.remove(k);
            }
            (Some(Value::Array(a)), Some(Step::Index(i))) if *i < a.len() => {
                a.remove(*i);
            }
            _ => {}
        },
        Mutation::Rename(path, name) => {
            if let (Some(Value::Object(o)), Some(Step::Key(k))) =
                (get_mut(v, &parent(path)), path.last())
            {
                if let Some(x) = o.remove(k) {
                    o.insert(name.clone(), x);
                }
            }
        }
        Mutation::Double(path) => {
            if let (Some(Value::Array(a)), Some(Step::Index(i))) =
                (get_mut(v, &parent(path)), path.last())
            {
                if let Some(x) = a.get(*i).cloned() {
                    a.insert(*i, x);
                }
            }
        }
        Mutation::Duplicate(path) => return Some(path.clone()),
    }
    None
}

/// JSON text of `v`, the member at `dup` written twice.
fn write(v: &Value, at: &mut Vec<String>, dup: &[String], out: &mut String) {
    match v {
        Value::Object(m) => {
            out.push('{');
            let mut first = true;
            for (k, child) in m {
                at.push(k.clone());
                let times = if at.as_slice() == dup { 2 } else { 1 };
                for _ in 0..times {
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    out.push_str(&serde_json::to_string(k).unwrap());
                    out.push(':');
                    write(child, at, dup, out);
                }
                at.pop();
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, child) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                at.push(format!("[{i}]"));
                write(child, at, dup, out);
                at.pop();
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn text(v: &Value, dup: Option<&[Step]>) -> Vec<u8> {
    let dup: Vec<String> = dup
        .unwrap_or(&[])
        .iter()
        .map(|s| match s {
            Step::Key(k) => k.clone(),
            Step::Index(i) => format!("[{i}]"),
        })
        .collect();
    let mut out = String::new();
    write(v, &mut Vec::new(), &dup, &mut out);
    out.into_bytes()
}

/// A deterministic xorshift.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// Byte-level damage: cuts, stray bytes, escaped keys, trailing text.
fn damaged(body: &[u8], rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let s = String::from_utf8_lossy(body).into_owned();
    out.push(body[..rng.below(body.len())].to_vec());
    for stray in [
        b"," as &[u8],
        b"}",
        b"]",
        b"\"",
        b"\\",
        b"\xff",
        b" ",
        b"\x00",
        b"1e999",
        b"tru",
    ] {
        let at = rng.below(body.len() + 1);
        let mut b = body[..at].to_vec();
        b.extend_from_slice(stray);
        b.extend_from_slice(&body[at..]);
        out.push(b);
    }
    out.push(s.replacen("\"type\"", "\"ty\\u0070e\"", 1).into_bytes());
    out.push(s.replace("\"type\"", "\"\\u0074ype\"").into_bytes());
    out.push(
        s.replacen("\"text\":\"", "\"text\":\"\\ud83d\\ude00\\n\\u00e9", 1)
            .into_bytes(),
    );
    out.push(
        s.replacen("\"text\":\"", "\"text\":\"\\ud800", 1)
            .into_bytes(),
    );
    out.push(s.replacen("\"role\"", "\"r\\u006fle\"", 1).into_bytes());
    out.push(s.replacen("\"model\"", "\"m\\u006fdel\"", 1).into_bytes());
    out.push(
        s.replacen("\"content\":\"", "\"content\":\"\\u00e9\\t", 1)
            .into_bytes(),
    );
    out.push(format!("  \n{s}\t ").into_bytes());
    out.push(format!("{s} x").into_bytes());
    out.push(format!("{s}{s}").into_bytes());
    out
}

fn outcome(r: Result<ChatRequest, GatewayError>) -> String {
    match r {
        Ok(r) => format!("Ok({r:?})"),
        Err(e) => format!("Err({:?} {:?} {})", e.param, e.message, e.status()),
    }
}

#[test]
fn the_wire_types_answer_as_the_visitors_did() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/requests");
    let mut seeds: Vec<Vec<u8>> = unit_bodies();
    for dir in [root.clone()] {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        seeds.extend(files.iter().map(|p| std::fs::read(p).unwrap()));
    }
    seeds.extend(client_bodies().iter().map(|v| v.to_string().into_bytes()));
    for odd in [
        "[]",
        "5",
        "\"x\"",
        "null",
        "{}",
        "",
        " ",
        "{\"model\":\"g\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]",
        "\u{feff}{}",
    ] {
        seeds.push(odd.as_bytes().to_vec());
    }
    // Depth and many keys: serde_json's depth limit, the checker's key set.
    let deep = format!(
        "{{\"model\":\"g\",\"messages\":[{{\"role\":\"user\",\"content\":\"x\"}}],\"metadata\":{}1{}}}",
        "[".repeat(130),
        "]".repeat(130)
    );
    seeds.push(deep.into_bytes());
    let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\":\"v\"")).collect();
    for dup in [3, 17, 39] {
        let body = format!(
            "{{\"model\":\"g\",\"messages\":[{{\"role\":\"user\",\"content\":\"x\"}}],\"metadata\":{{{},\"k{dup}\":\"w\"}}}}",
            keys.join(",")
        );
        seeds.push(body.into_bytes());
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    for seed in &seeds {
        bodies.push(seed.clone());
        bodies.extend(damaged(seed, &mut rng));
        let Ok(value) = serde_json::from_slice::<Value>(seed) else {
            continue;
        };
        let all = mutations(&value);
        for m in &all {
            let mut v = value.clone();
            let dup = apply(&mut v, m);
            let body = text(&v, dup.as_deref());
            if rng.below(8) == 0 {
                bodies.extend(damaged(&body, &mut rng));
            }
            bodies.push(body);
        }
        // Two faults at once: which error wins must not change.
        for _ in 0..all.len().min(400) {
            let mut v = value.clone();
            let first = &all[rng.below(all.len())];
            apply(&mut v, first);
            let second = random_mutation(&v, &mut rng);
            let dup = apply(&mut v, &second);
            bodies.push(text(&v, dup.as_deref()));
        }
    }
    // Past the limits: messages, reasoning blocks.
    for n in [10_000, 10_001] {
        let one = r#"{"role":"user","content":"x"}"#;
        let list = vec![one; n].join(",");
        bodies.push(format!(r#"{{"model":"m","messages":[{list}]}}"#).into_bytes());
    }
    for n in [4096, 4097] {
        let blocks: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#"{{"type":"reasoning.text","text":"t","index":{}}}"#,
                    i % 5000
                )
            })
            .collect();
        bodies.push(
            format!(
                r#"{{"model":"m","messages":[{{"role":"assistant","content":"a","reasoning_details":[{}]}}]}}"#,
                blocks.join(",")
            )
            .into_bytes(),
        );
    }
    let mut differ = Vec::new();
    let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
    for body in &bodies {
        let (old, new) = (
            outcome(legacy::parse(body)),
            outcome(ChatRequest::parse(body)),
        );
        let kind = [
            "Ok(",
            "invalid request body",
            "duplicate field",
            "missing field",
            "invalid type",
            "unknown",
            "must be",
        ]
        .into_iter()
        .rev()
        .find(|k| old.contains(k))
        .unwrap_or("other error");
        *kinds.entry(kind).or_default() += 1;
        if old != new {
            differ.push(format!(
                "{}\n  old: {old}\n  new: {new}",
                String::from_utf8_lossy(body)
            ));
        }
    }
    eprintln!("differential outcomes: {kinds:?}");
    eprintln!(
        "differential: {} bodies from {} seeds, {} differ",
        bodies.len(),
        seeds.len(),
        differ.len()
    );
    assert!(
        differ.is_empty(),
        "{} of {} differ:\n{}",
        differ.len(),
        bodies.len(),
        differ[..differ.len().min(10)].join("\n")
    );
}
