//! Temporary: records every parse outcome of the Messages and Responses
//! surfaces over many generated and mutated bodies, to compare the
//! outcomes of two commits (`DIFF_OUT=file cargo test --test differential_wire`).
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;

use llm_gateway_core::error::GatewayError;
use llm_gateway_core::model::request::ChatRequest;
use llm_gateway_core::surfaces::anthropic_messages::request as messages;
use llm_gateway_core::surfaces::openai_responses::request as responses;
use serde_json::{json, Value};

/// The unit tests' bodies (request/tests.rs, ../tests.rs).
const UNIT_BODIES: &[&str] = &[
    r#"{"model": "g", "input": "hi", "instructions": "be brief", "max_output_tokens": 50, "temperature": 0.5, "stream": true, "user": "u"}"#,
    r#"{"model": "g", "input": "x", "tools": []}"#,
    r#"{"model": "g", "input": [{"role": "developer", "content": "dev"}, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"}]}, {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hmm"}], "encrypted_content": "enc"}, {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"}, {"type": "function_call", "call_id": "call_2", "name": "g", "arguments": "{\"a\":1}", "status": "completed"}, {"type": "reasoning", "summary": [{"type": "summary_text", "text": "signed"}], "encrypted_content": "gw-signature:sig-1"}, {"type": "function_call_output", "call_id": "call_1", "output": "one"}, {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "two"}]}, {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [{"type": "output_text", "text": "done", "annotations": []}]}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}, "strict": true}], "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": false, "reasoning": {"effort": "low", "summary": "auto"}, "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}, "strict": true}}, "metadata": {"task_type": "code"}, "store": false, "include": ["reasoning.encrypted_content"], "truncation": "disabled", "service_tier": "auto"}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "function", "name": "f"}]}"#,
    r#"{"model": "g", "input": "x", "previous_response_id": "resp_1"}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "function", "name": "f"}, {"type": "file_search", "vector_store_ids": ["vs_1"]}]}"#,
    r#"{"model": "g", "input": [{"type": "item_reference", "id": "msg_1"}]}"#,
    r#"{"model": "g", "input": [{"role": "user", "content": "go"}, {"type": "function_call", "call_id": "c1", "namespace": "multi_agent_v1", "name": "wait_agent", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c1", "output": "done"}], "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}, {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [{"type": "function", "name": "spawn_agent", "description": "Spawn.", "parameters": {"type": "object"}, "strict": false}, {"type": "function", "name": "wait_agent"}]}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "namespace", "name": "n", "description": "d", "tools": [{"type": "custom", "name": "c"}]}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "namespace", "name": "n", "description": "d"}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "namespace", "description": "d", "tools": []}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "namespace", "name": "n", "tools": []}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "namespace", "name": "n", "description": "d", "tools": [], "x": 1}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "namespace", "name": "n", "description": "d", "tools": [{"type": "mcp"}]}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "function", "name": "n__f"}, {"type": "namespace", "name": "n", "description": "d", "tools": [{"type": "function", "name": "f"}]}]}"#,
    r#"{"model": "g", "input": [{"role": "user", "content": "news?"}, {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "news"}}, {"role": "assistant", "content": "Here."}], "tools": [{"type": "web_search", "external_web_access": true, "filters": {"allowed_domains": ["example.com"]}, "search_context_size": "low", "user_location": {"type": "approximate", "city": "Paris", "country": "FR"}}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "web_search_preview"}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "web_search", "frobnicate": 1}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "web_search", "filters": {"allowed_domains": [1]}}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "web_search", "user_location": {"type": "exact"}}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "web_search", "search_context_size": "huge"}]}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "web_search", "external_web_access": "yes"}]}"#,
    r#"{"model":"g","input":"x","frobnicate":1}"#,
    r#"{"model":"g","input":"x","input":"y"}"#,
    r#"{"input":"x"}"#,
    r#"{"model":"g"}"#,
    r#"{"model":"g","input":5}"#,
    r#"{"model":"g","input":[{"role":"user","content":"x","extra":1}]}"#,
    r#"{"model":"g","input":[{"role":"tool","content":"x"}]}"#,
    r#"{"model":"g","input":[{"role":"user","content":[{"type":"text","text":"x"}]}]}"#,
    r#"{"model":"g","input":[{"type":"function_call","call_id":"c","name":"f"}]}"#,
    r#"{"model":"g","input":[{"type":"bogus"}]}"#,
    r#"{"model":"g","input":"x","tools":[{"type":"function","function":{"name":"f"}}]}"#,
    r#"{"model":"g","input":"x","tools":[{"type":"weird"}]}"#,
    r#"{"model":"g","input":"x","tool_choice":"sometimes"}"#,
    r#"{"model":"g","input":"x","temperature":3}"#,
    r#"{"model":"g","input":"x","max_output_tokens":0}"#,
    r#"{"model":"g","input":"x","reasoning":{"effort":"max"}}"#,
    r#"{"model":"g","input":"x","text":{"format":{"type":"json_schema","name":"s"}}}"#,
    r#"{"model":"g","input":"x","text":{"format":{"type":"json_schema","json_schema":{}}}}"#,
    r#"{"model":"g","input":"x","metadata":{"a":1}}"#,
    r#"{"model":"g","input":"x","metadata":{"a":"1","a":"2"}}"#,
    r#"{"model":"g","input":"x","x":1}"#,
    r#"{"model": "g", "input": "x", "tools": [{"type": "summary_text", "text": "why"}]}"#,
    r#"{"model": "g", "input": "x", "tools": []}"#,
    r#"{"model": "g", "input": "x", "tools": [{"input_tokens": 3, "input_tokens_details": {"cached_tokens": 1}, "output_tokens": 4, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 7}]}"#,
    r#"{"model": "g", "input": "x", "tools": []}"#,
    r#"{"model":"g","input":"hi","instructions":"be brief","tools":[{"type":"function","name":"f"}]}"#,
    r#"{"type":"response.output_text.delta","sequence_number":4,"delta":"x"}"#,
    r#"{"model":"g","input":"hi","tools":[{"type":"function","name":"f"},
            {"type":"namespace","name":"multi_agent_v1","description":"d",
             "tools":[{"type":"function","name":"wait_agent"}]}]}"#,
    r#"{"model":"g","input":"hi","user":"u","metadata":{"k":"v"},"top_p":0.5,
            "reasoning":{"effort":"low"},"text":{"format":{"type":"json_object"}}}"#,
];

/// Codex-shaped and Agents SDK-shaped bodies, with escapes and unicode.
fn client_bodies() -> Vec<Value> {
    let schema = json!({"type": "object", "properties": {"command": {"type": "array",
        "items": {"type": "string"}}, "workdir": {"type": "string"}, "timeout_ms": {"type": "number"}},
        "required": ["command"], "additionalProperties": false});
    vec![
        json!({"model": "gpt-5-codex", "instructions": "You are Codex.\n\"quoted\" \\ \u{2603}",
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "h\u{e9}llo \u{1F600}\u{0}"}]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Thinking**"}],
                 "content": null, "encrypted_content": "gAAAA"},
                {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"},
                {"type": "function_call_output", "call_id": "call_1", "output": "{\"output\":\"a\\nb\"}"},
                {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
                {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done.", "annotations": []}]},
                {"type": "reasoning", "summary": [], "encrypted_content": "gw-signature:s1"},
                {"type": "message", "role": "user", "content": [
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"},
                    {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
                    {"type": "input_file", "file_url": "https://example.com/a.pdf"},
                    {"type": "input_image", "file_id": "file_1"}]}
            ],
            "tools": [
                {"type": "function", "name": "shell", "description": "Runs a shell command", "strict": false, "parameters": schema},
                {"type": "custom", "name": "apply_patch", "description": "Patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
                {"type": "web_search", "search_context_size": "medium"},
                {"type": "local_shell"}
            ],
            "tool_choice": "auto", "parallel_tool_calls": false, "reasoning": {"effort": "medium", "summary": "auto"},
            "store": false, "stream": true, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "0199-uuid",
            "text": {"verbosity": "low", "format": {"type": "json_schema", "name": "out", "schema": {"type": "object", "properties": {}}, "strict": true}}}),
        json!({"model": "gpt-4.1", "instructions": "You are a helpful agent.",
            "input": [{"content": "What's the weather?", "role": "user"},
                {"arguments": "{\"city\":\"Paris\"}", "call_id": "call_9", "name": "get_weather", "type": "function_call", "id": "fc_9", "status": "completed"},
                {"call_id": "call_9", "output": "sunny", "type": "function_call_output"},
                {"id": "msg_1", "content": [{"annotations": [], "text": "Sunny.", "type": "output_text", "logprobs": []}],
                 "role": "assistant", "status": "completed", "type": "message"},
                {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
                {"role": "system", "content": "sys"}],
            "tools": [{"name": "get_weather", "parameters": {"properties": {"city": {"title": "City", "type": "string"}},
                "required": ["city"], "title": "get_weather_args", "type": "object", "additionalProperties": false},
                "strict": true, "type": "function", "description": "Get the weather."}],
            "include": [], "stream": false, "tool_choice": {"type": "function", "name": "get_weather"},
            "parallel_tool_calls": null, "temperature": 0.7, "top_p": 1, "truncation": "auto", "max_output_tokens": 1000,
            "store": true, "reasoning": null, "text": {"format": {"type": "text"}}, "metadata": {"task_type": "chat", "x": "y"},
            "top_logprobs": null, "prompt_cache_retention": null, "user": "u1", "service_tier": "auto",
            "safety_identifier": "s", "stream_options": {"include_obfuscation": false}, "request_id": "r1",
            "max_tool_calls": 3, "client_metadata": {"a": 1}, "prompt_cache_options": null}),
        json!({"model": "m", "previous_response_id": "resp_1", "conversation": {"id": "conv_1"},
            "prompt": {"id": "p"}, "background": true, "context_management": [1], "moderation": null,
            "input": [{"type": "item_reference", "id": "msg_1"}, {"type": "web_search_call", "id": "ws", "status": "completed", "action": {}}],
            "tools": [{"type": "namespace", "name": "ns", "description": "d", "tools": [
                {"type": "function", "name": "a", "parameters": null, "defer_loading": true}, {"type": "custom", "name": "c"}]},
                {"type": "web_search_preview", "filters": {"allowed_domains": ["a.com", "b.org"]},
                 "user_location": {"type": "approximate", "city": "Paris", "region": "IDF", "country": "FR", "timezone": "Europe/Paris"},
                 "external_web_access": false}],
            "tool_choice": {"type": "file_search"}, "text": {"format": {"type": "json_object"}, "verbosity": "high"},
            "reasoning": {"effort": "xhigh", "generate_summary": "concise"}}),
    ]
}
/// Values a mutation puts in place of a member or an element.
fn responses_replacements() -> Vec<Value> {
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
        json!("assistant"),
        json!("user"),
        json!("system"),
        json!("developer"),
        json!("function"),
        json!("message"),
        json!("function_call"),
        json!("function_call_output"),
        json!("reasoning"),
        json!("input_text"),
        json!("input_image"),
        json!("input_file"),
        json!("output_text"),
        json!("refusal"),
        json!("json_schema"),
        json!("namespace"),
        json!("web_search"),
        json!("mcp"),
        json!("item_reference"),
        json!("high"),
        json!("gw-signature:x"),
        json!("data:image/png;base64,AAAA"),
        json!("h\u{e9}\n\"\\\u{1}"),
        json!([]),
        json!({}),
        json!(["a"]),
        json!([1]),
        json!({"type": "input_text", "text": "t"}),
        json!([{"type": "input_text", "text": "t"}]),
        json!({"type": "function", "name": "f"}),
        json!([{"type": "function", "name": "f"}]),
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
    Add(Vec<Step>, String, Value),
}

fn mutations(v: &Value, replacements: &[Value]) -> Vec<Mutation> {
    let mut all = Vec::new();
    let mut out = Vec::new();
    paths(v, &mut Vec::new(), &mut out);
    for path in out {
        let mut probe = v.clone();
        if get_mut(&mut probe, &path).is_some_and(|o| o.is_object()) {
            for key in ADDED {
                for r in replacements.iter().step_by(4) {
                    all.push(Mutation::Add(path.clone(), key.into(), r.clone()));
                }
            }
        }
        for r in replacements.iter().cloned() {
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
fn random_mutation(v: &Value, rng: &mut Rng, replacements: &[Value]) -> Mutation {
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
            let mut r = replacements.to_vec();
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
        Mutation::Add(path, key, value) => {
            if let Some(Value::Object(o)) = get_mut(v, path) {
                o.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
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
    out.push(format!("  \n{s}\t ").into_bytes());
    out.push(format!("{s} x").into_bytes());
    out.push(format!("{s}{s}").into_bytes());
    out
}
fn messages_seeds() -> Vec<Value> {
    let mut seeds: Vec<Value> = [
        include_str!("golden/requests/anthropic_messages/adaptive_effort_stream.json"),
        include_str!("golden/requests/anthropic_messages/basic.json"),
        include_str!("golden/requests/anthropic_messages/images_documents.json"),
        include_str!("golden/requests/anthropic_messages/server_tool.json"),
        include_str!("golden/requests/anthropic_messages/system_cache_tools.json"),
        include_str!("golden/requests/anthropic_messages/thinking_tool_history.json"),
    ]
    .iter()
    .map(|s| serde_json::from_str(s).unwrap())
    .collect();
    seeds.push(json!({"model":"g","max_tokens":4096,
        "system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral","ttl":"1h"}}],
        "messages":[
          {"role":"user","content":[{"type":"text","text":"hi"},
            {"type":"image","source":{"type":"base64","media_type":"image/png","data":"QUJD"},"cache_control":{"type":"ephemeral"}},
            {"type":"image","source":{"type":"url","url":"https://x/y.png"}},
            {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"},"title":"t","context":"c","citations":{"enabled":true}},
            {"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"}},
            {"type":"document","source":{"type":"url","url":"https://x/d.pdf"}},
            {"type":"search_result","source":"s","title":"t","content":[]}]},
          {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},
            {"type":"redacted_thinking","data":"enc"},
            {"type":"text","text":"checking"},
            {"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1,"b":[1.5,-2,"x"]},"caller":{"type":"direct"}}]},
          {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"42"},{"type":"image","source":{"type":"file","file_id":"f"}}],"is_error":true,"cache_control":{"type":"ephemeral"}},
            {"type":"text","text":"thanks"}]},
          {"role":"assistant","content":"ok"},
          {"role":"system","content":[{"type":"text","text":"mid"}]},
          {"role":"user","content":"again"}],
        "tools":[{"name":"f","description":"d","input_schema":{"type":"object","properties":{"a":{"type":"integer"}}},"cache_control":{"type":"ephemeral"},"strict":true,"allowed_callers":["direct"]},
                 {"type":"custom","name":"g","input_schema":{}},
                 {"type":"web_search_20250305","name":"web_search"}],
        "tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true},
        "stop_sequences":["X","Y"],"temperature":0.5,"top_p":1,"top_k":5,"metadata":{"user_id":"u1"},
        "thinking":{"type":"enabled","budget_tokens":2048},"stream":true,"service_tier":"auto",
        "output_config":{"effort":"low","format":{"type":"json_schema","schema":{"type":"object"}}}}));
    seeds.push(
        json!({"model":"g","max_tokens":100,"messages":[{"role":"user","content":"x"}],
        "thinking":{"type":"adaptive"},"output_format":{"type":"json_schema","schema":{}},
        "tool_choice":{"type":"auto"},"container":"c","mcp_servers":[],"system":"s"}),
    );
    // tests/fuzz.rs's Messages seeds.
    for body in [
        r#"{"model":"g","max_tokens":100,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QQ=="}},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"}}]}],"stream":true}"#,
        r#"{"model":"g","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":[{"type":"text","text":"r"}]}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}"#,
        r#"{"model":"g","max_tokens":10,"thinking":{"type":"adaptive"},"output_config":{"effort":"low"},"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}],"metadata":{"user_id":"u"},"top_k":3,"stop_sequences":["z"]}"#,
    ] {
        seeds.push(serde_json::from_str(body).unwrap());
    }
    // An object wide enough for the duplicate check's set.
    let wide: serde_json::Map<String, Value> = (0..24)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .collect();
    seeds.push(
        json!({"model":"g","max_tokens":10,"messages":[{"role":"user","content":"x"}],
        "tools":[{"name":"f","input_schema":{"type":"object","properties":wide}}]}),
    );
    seeds
}
fn messages_replacements() -> Vec<Value> {
    [
        "null",
        "true",
        "false",
        "0",
        "1",
        "-1",
        "-0",
        "1.5",
        "1.0",
        "2048",
        "4096",
        "70000",
        "18446744073709551615",
        "-9223372036854775808",
        "4294967296",
        "1e3",
        "\"\"",
        "\"x\"",
        "\"text\"",
        "\"direct\"",
        "\"ephemeral\"",
        "\"user\"",
        "\"\\u00e9\\n\\\"\"",
        "\"é😀\"",
        "[]",
        "[1]",
        "[\"direct\"]",
        "[{\"type\":\"text\",\"text\":\"t\"}]",
        "{}",
        "{\"type\":\"text\"}",
        "{\"type\":\"ephemeral\",\"ttl\":\"5m\"}",
    ]
    .iter()
    .map(|s| serde_json::from_str(s).unwrap())
    .collect()
}
const ADDED: [&str; 14] = [
    "type",
    "text",
    "cache_control",
    "citations",
    "source",
    "content",
    "name",
    "input",
    "caller",
    "is_error",
    "zz",
    "a",
    "ttl",
    "display",
];

fn hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn outcome(r: Result<ChatRequest, GatewayError>) -> String {
    match r {
        Ok(r) => format!("Ok#{:016x}", hash(format!("{r:?}").as_bytes())),
        Err(e) => format!("Err({:?} {:?} {})", e.param, e.message, e.status()),
    }
}

/// Every body's mutants: one fault, two faults, damaged bytes.
fn bodies(seeds: &[Vec<u8>], replacements: &[Value], rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    for seed in seeds {
        bodies.push(seed.clone());
        bodies.extend(damaged(seed, rng));
        let Ok(value) = serde_json::from_slice::<Value>(seed) else {
            continue;
        };
        let all = mutations(&value, replacements);
        for m in &all {
            let mut v = value.clone();
            let dup = apply(&mut v, m);
            let body = text(&v, dup.as_deref());
            if rng.below(8) == 0 {
                bodies.extend(damaged(&body, rng));
            }
            bodies.push(body);
        }
        // Two faults at once: which error wins must not change.
        for _ in 0..all.len().min(400) {
            let mut v = value.clone();
            let first = &all[rng.below(all.len())];
            apply(&mut v, first);
            let second = random_mutation(&v, rng, replacements);
            let dup = apply(&mut v, &second);
            bodies.push(text(&v, dup.as_deref()));
        }
    }
    bodies
}

fn odd_seeds(seeds: &mut Vec<Vec<u8>>, wide_member: &str) {
    for odd in [
        "[]",
        "5",
        "\"x\"",
        "null",
        "{}",
        "",
        " ",
        "{\"model\":\"g\"",
        "\u{feff}{}",
    ] {
        seeds.push(odd.as_bytes().to_vec());
    }
    let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\":\"v\"")).collect();
    for dup in [3, 15, 16, 17, 39] {
        seeds.push(
            format!(
                "{{\"model\":\"g\",{wide_member}:{{{},\"k{dup}\":\"w\"}}}}",
                keys.join(",")
            )
            .into_bytes(),
        );
        seeds.push(
            format!(
                "{{\"model\":\"g\",\"zz\":{{{},\"k{dup}\":\"w\"}}}}",
                keys.join(",")
            )
            .into_bytes(),
        );
    }
    for depth in [126, 127, 128, 129, 200] {
        let nest = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        seeds.push(format!("{{\"model\":\"g\",{wide_member}:{{\"a\":{nest}}}}}").into_bytes());
        seeds.push(format!("{{\"model\":\"g\",\"zz\":{nest}}}").into_bytes());
    }
}

#[test]
fn record_outcomes() {
    let Ok(out) = std::env::var("DIFF_OUT") else {
        return;
    };
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/requests");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    // Messages.
    let mut seeds: Vec<Vec<u8>> = messages_seeds()
        .iter()
        .map(|v| v.to_string().into_bytes())
        .collect();
    odd_seeds(&mut seeds, "\"metadata\"");
    let mut n = 0usize;
    let mut errors = std::collections::BTreeSet::new();
    for body in bodies(&seeds, &messages_replacements(), &mut rng) {
        let (a, b) = (
            outcome(messages::parse(&body)),
            outcome(messages::parse_count(&body)),
        );
        if a.starts_with("Err") {
            errors.insert(
                a.split(" at line ")
                    .next()
                    .unwrap()
                    .chars()
                    .take(90)
                    .collect::<String>(),
            );
        }
        writeln!(file, "m {:016x} {a} {b}", hash(&body)).unwrap();
        n += 1;
    }
    eprintln!(
        "messages: {n} bodies from {} seeds, {} distinct errors",
        seeds.len(),
        errors.len()
    );

    // Responses.
    let mut seeds: Vec<Vec<u8>> = UNIT_BODIES.iter().map(|b| b.as_bytes().to_vec()).collect();
    for dir in [root.join("openai_responses"), root.clone()] {
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
    odd_seeds(&mut seeds, "\"metadata\"");
    let mut n = 0usize;
    for body in bodies(&seeds, &responses_replacements(), &mut rng) {
        writeln!(
            file,
            "r {:016x} {}",
            hash(&body),
            outcome(responses::parse(&body))
        )
        .unwrap();
        n += 1;
    }
    eprintln!("responses: {n} bodies from {} seeds", seeds.len());
}
