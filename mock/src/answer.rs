//! Deterministic answers: the same request always gets the same text, tool
//! calls, finish reason and token counts, so tests can assert exact values.

use serde_json::{Map, Value};

use crate::dialect::{count_words, Prompt, Tool, ToolChoice};
use crate::scenario::{Filter, Scenario, CACHED_TOKENS, CACHE_WRITE_TOKENS, REASONING_TOKENS};

/// Prepended to the answer under the `split` directive so that tiny writes
/// cut through multibyte UTF-8 characters.
pub const SPLIT_TEXT: &str = "héllo wörld 你好 🌍 done. ";

/// Words a `filtered-stream` answer gets out before the filter cuts it.
const FILTERED_AFTER_WORDS: u64 = 3;

#[derive(Debug, Clone, PartialEq)]
pub enum Finish {
    Stop,
    Length,
    StopSequence(String),
    ToolCalls,
    /// The vendor's output filter cut the answer (`filtered-answer`, `filtered-stream`).
    ContentFilter,
    /// Anthropic paused its server-tool loop (`pause-turn`; only its
    /// dialect plans it): the text so far, a search under way.
    PauseTurn,
}

#[derive(Debug, Clone)]
pub struct ToolCall {
    /// Number in the call id: `call_<n>` / `toolu_<n>`.
    pub n: u64,
    pub name: String,
    pub arguments: Value,
    /// `arguments` as compact JSON text (OpenAI sends it as a string).
    pub arguments_json: String,
}

#[derive(Debug, Clone)]
pub struct Answer {
    pub text: String,
    /// `text` cut into stream deltas; concatenated they give `text` back.
    pub chunks: Vec<String>,
    pub tool_calls: Vec<ToolCall>,
    pub finish: Finish,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of `prompt_tokens`, read from the prompt cache (`cached-usage`).
    pub cached_tokens: u64,
    /// Of `prompt_tokens`, written to the prompt cache (`cached-usage`).
    pub cache_write_tokens: u64,
    /// Reasoning ("thinking") tokens (`cached-usage`); dialects count them
    /// into or beside the completion tokens as their vendor does.
    pub reasoning_tokens: u64,
}

impl Answer {
    /// An answer of fixed text and chunks (benchmark mode).
    pub fn fixed(chunks: Vec<String>, prompt_tokens: u64) -> Answer {
        let text: String = chunks.concat();
        Answer {
            completion_tokens: count_words(&text),
            text,
            chunks,
            tool_calls: Vec::new(),
            finish: Finish::Stop,
            prompt_tokens,
            cached_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: 0,
        }
    }
}

/// Decides the answer for a prompt. `dialect` names the vendor in the default
/// text; `preface` is said before tool calls (see `Dialect::tool_preface`).
pub fn plan(p: &Prompt, sc: &Scenario, dialect: &str, preface: Option<&str>) -> Answer {
    let mut a = if sc.pause_turn && p.anthropic_server_loop {
        let mut paused = text_answer("Let me search the web.", p, p.prompt_words.max(1));
        paused.finish = Finish::PauseTurn;
        paused
    } else {
        plan_content(p, sc, dialect, preface)
    };
    if sc.cached_usage {
        a.cached_tokens = CACHED_TOKENS.min(a.prompt_tokens);
        a.cache_write_tokens = CACHE_WRITE_TOKENS.min(a.prompt_tokens - a.cached_tokens);
        a.reasoning_tokens = REASONING_TOKENS;
    }
    if p.reasoning {
        a.reasoning_tokens = count_words(&reasoning_text(p));
    }
    a
}

// --- reasoning ----------------------------------------------------------------
// What a thinking answer thought, and the signature vendors put on it. Real
// signatures are opaque and verified when the history comes back; the
// mock's are a digest of what they sign, so a changed or missing one is
// caught exactly.

/// The reasoning a thinking answer opens with (a function of the prompt).
pub fn reasoning_text(p: &Prompt) -> String {
    let said: String = p.last_user_text.chars().take(80).collect();
    match &p.tool_results {
        Some(_) => "The tool has answered; I will report its result.".to_owned(),
        None => format!("The user said: {said}. I will answer briefly."),
    }
}

/// The mock's signature over Claude's thinking, one scheme wherever Claude
/// runs (Anthropic's API, Bedrock's Converse and InvokeModel): Anthropic
/// documents signatures as "compatible across platforms (Claude APIs,
/// Amazon Bedrock, and Vertex AI)", so one platform's verifies on another.
pub fn claude_signature(thinking: &str) -> String {
    signature("mock-claude-thinking-v1", thinking)
}

/// The mock's signature over what Gemini signs (a function call): its own
/// scheme, so Claude's mocks refuse it and Gemini's refuses Claude's.
pub fn gemini_signature(signed: &str) -> String {
    signature("mock-gemini-v1", signed)
}

/// The signature over `signed` under a vendor's key: its digest, made
/// longer by `big-signatures`.
fn signature(key: &str, signed: &str) -> String {
    let digest = digest_signature(key, signed);
    // `big-signatures`: the digest's first 40 characters (10 whole base64
    // quads) repeated before it, to the size asked.
    let size = SIGNATURE_BYTES.with(std::cell::Cell::get);
    let filler = digest.get(..40).unwrap_or_default();
    let quads = size.saturating_sub(digest.len()).div_ceil(40);
    filler.repeat(quads) + &digest
}

thread_local! {
    /// The size of the signatures of the request this thread answers
    /// (`big-signatures`; 0: their own 44 bytes).
    static SIGNATURE_BYTES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Sets the size of the signatures issued and checked for the request this
/// thread is answering (each connection's requests are answered on its thread).
pub fn set_signature_bytes(size: usize) {
    SIGNATURE_BYTES.with(|s| s.set(size));
}

/// A digest of `signed` under a vendor's key, as valid base64 (44
/// characters, one `=` of padding) with its `+` and `/`, so a gateway that
/// mangles it is caught. Canonical, as vendors' are: the character before
/// the padding leaves no bits over (strict decoders, such as the Gen AI
/// SDKs' for Gemini's `thoughtSignature` bytes, refuse any other).
fn digest_signature(key: &str, signed: &str) -> String {
    const LAST: &[u8; 16] = b"AEIMQUYcgkosw048";
    let digest = crate::sigv4::hex(&crate::sigv4::sha256(format!("{key}:{signed}").as_bytes()));
    let last = digest
        .as_bytes()
        .get(30)
        .and_then(|&h| char::from(h).to_digit(16))
        .and_then(|d| LAST.get(d as usize))
        .map_or('A', |&c| char::from(c));
    format!("bW9ja3NpZy+/{}{last}=", digest.get(..30).unwrap_or(""))
}

/// The answer when structured output is asked for: JSON with the schema's
/// required properties (plausible example values), or `{"answer": ...}`.
fn json_text(schema: Option<&Value>, said: &str) -> String {
    let v = match schema {
        Some(s) => match example(s, 0) {
            Value::Object(m) if !m.is_empty() => Value::Object(m),
            Value::Object(_) | Value::Null => serde_json::json!({"answer": said}),
            other => other,
        },
        None => serde_json::json!({"answer": said}),
    };
    serde_json::to_string(&v).unwrap_or_default()
}

fn plan_content(p: &Prompt, sc: &Scenario, dialect: &str, preface: Option<&str>) -> Answer {
    let prompt_tokens = p.prompt_words.max(1);
    let prefix = if sc.split { SPLIT_TEXT } else { "" };

    // The output filter strikes: before any text, or a few words in.
    let kept = match sc.filter {
        Some(Filter::FilteredAnswer) => Some(0),
        Some(Filter::FilteredStream) => Some(FILTERED_AFTER_WORDS),
        Some(Filter::BlockedPrompt) | None => None,
    };
    if let Some(kept) = kept {
        let said = format!("{prefix}Hello from the mock {dialect} provider.");
        let text = truncate_words(&said, kept);
        return Answer {
            completion_tokens: count_words(text),
            chunks: word_chunks(text),
            text: text.to_owned(),
            tool_calls: Vec::new(),
            finish: Finish::ContentFilter,
            prompt_tokens,
            cached_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: 0,
        };
    }

    // After a tool ran, acknowledge it instead of calling tools again.
    if let Some(results) = &p.tool_results {
        let text = format!("{prefix}Tool result received: {}", results.join(" | "));
        return text_answer(&text, p, prompt_tokens);
    }

    let calls: Vec<(String, Value)> = match sc.call_shell.as_deref().and_then(|c| shell_call(p, c))
    {
        Some(call) => vec![call],
        None => chosen_tools(p, sc)
            .into_iter()
            .map(|(name, schema)| {
                let arguments =
                    directed_arguments(sc, &schema).unwrap_or_else(|| args_from_schema(&schema));
                (name, arguments)
            })
            .collect(),
    };
    if !calls.is_empty() {
        let text = preface.unwrap_or("").to_owned();
        let tool_calls: Vec<ToolCall> = calls
            .into_iter()
            .zip(1..)
            .map(|((name, arguments), i)| {
                let arguments_json = serde_json::to_string(&arguments).unwrap_or_default();
                ToolCall {
                    n: if sc.unique_ids {
                        unique_call_number()
                    } else {
                        p.prior_tool_calls + i
                    },
                    name,
                    arguments,
                    arguments_json,
                }
            })
            .collect();
        // A tool call costs its argument words plus one for the call itself.
        let completion_tokens = count_words(&text)
            + tool_calls
                .iter()
                .map(|c| count_words(&c.arguments_json) + 1)
                .sum::<u64>();
        return Answer {
            chunks: word_chunks(&text),
            text,
            tool_calls,
            finish: Finish::ToolCalls,
            prompt_tokens,
            completion_tokens,
            cached_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: 0,
        };
    }

    let said: String = p.last_user_text.chars().take(200).collect();
    let mut text = format!("{prefix}Hello from the mock {dialect} provider. You said: {said}");
    if let Some(schema) = &p.json {
        text = json_text(schema.as_ref(), &text);
    }
    text_answer(&text, p, prompt_tokens)
}

/// `call-shell=<command>`: the shell tool the client offers, called with the
/// command in that tool's own argument shape (Codex's `exec_command` takes
/// `cmd`, its older `shell` an argv).
fn shell_call(p: &Prompt, command: &str) -> Option<(String, Value)> {
    let offered = |name: &str| p.tools.iter().any(|t| t.name == name);
    if offered("exec_command") {
        return Some(("exec_command".into(), serde_json::json!({ "cmd": command })));
    }
    offered("shell").then(|| {
        let argv = serde_json::json!({ "command": ["bash", "-lc", command] });
        ("shell".into(), argv)
    })
}

/// Which tools to call, as (name, schema). Empty: answer with text.
fn chosen_tools(p: &Prompt, sc: &Scenario) -> Vec<(String, Value)> {
    if p.tools.is_empty() || p.tool_choice == ToolChoice::None {
        return Vec::new();
    }
    if let Some(call) = directed_call(p, sc) {
        return vec![call];
    }
    let forced = matches!(p.tool_choice, ToolChoice::Any | ToolChoice::Named(_));
    if !(forced || sc.tool || sc.two_tools) {
        return Vec::new();
    }
    let entry = |t: &Tool| (t.name.clone(), t.schema.clone());
    if sc.two_tools {
        return p.tools.iter().take(2).map(entry).collect();
    }
    if let ToolChoice::Named(name) = &p.tool_choice {
        let schema = p
            .tools
            .iter()
            .find(|t| &t.name == name)
            .map_or(Value::Null, |t| t.schema.clone());
        return vec![(name.clone(), schema)];
    }
    p.tools.iter().take(1).map(entry).collect()
}

// --- Driving agents: `call=NAME[:WORD]` (scenario.rs) --------------------------

/// `unique-ids`: a tool call's number, never issued before by this mock
/// (above any a conversation's count gives), as real vendors' random ids.
fn unique_call_number() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000_000);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The tool `call=NAME` names, as (name, schema), when the request offers it.
fn directed_call(p: &Prompt, sc: &Scenario) -> Option<(String, Value)> {
    let (name, _) = sc.call.as_ref()?;
    let tool = p.tools.iter().find(|t| &t.name == name)?;
    Some((tool.name.clone(), tool.schema.clone()))
}

/// `call=NAME:WORD` to a tool taking a shell `command` (Claude Code's
/// Bash: `{"command", "description"}`): `echo WORD`.
fn directed_arguments(sc: &Scenario, schema: &Value) -> Option<Value> {
    let (_, word) = sc.call.as_ref()?;
    let word = word.as_ref()?;
    let properties = schema.get("properties")?;
    properties.get("command")?;
    let mut args = Map::new();
    args.insert("command".into(), Value::String(format!("echo {word}")));
    if properties.get("description").is_some() {
        args.insert("description".into(), Value::String(format!("Print {word}")));
    }
    Some(Value::Object(args))
}

/// Applies stop sequences and the max-token limit to a text answer.
fn text_answer(full: &str, p: &Prompt, prompt_tokens: u64) -> Answer {
    let (text, finish) = limit(full, &p.stop, p.max_tokens);
    Answer {
        completion_tokens: count_words(text),
        chunks: word_chunks(text),
        text: text.to_owned(),
        tool_calls: Vec::new(),
        finish,
        prompt_tokens,
        cached_tokens: 0,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
    }
}

/// Cuts `text` at the earliest stop sequence, then at `max` words. Whichever
/// a real model would hit first decides the finish reason.
pub fn limit<'a>(text: &'a str, stops: &[String], max: Option<u64>) -> (&'a str, Finish) {
    let stop = stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()).map(|at| (at, s)))
        .min_by_key(|(at, _)| *at);
    let (cut, finish) = match stop {
        Some((at, s)) => (
            text.get(..at).unwrap_or(""),
            Finish::StopSequence(s.clone()),
        ),
        None => (text, Finish::Stop),
    };
    match max {
        Some(n) if count_words(cut) > n => (truncate_words(cut, n), Finish::Length),
        _ => (cut, finish),
    }
}

/// The text up to the end of its `n`-th word.
pub fn truncate_words(text: &str, n: u64) -> &str {
    let mut words = 0;
    let mut in_word = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if in_word {
                words += 1;
                if words == n {
                    return text.get(..i).unwrap_or("");
                }
            }
            in_word = false;
        } else {
            if !in_word && words == n {
                return text.get(..i).unwrap_or("");
            }
            in_word = true;
        }
    }
    text
}

/// Splits text into one delta per word, each word with the whitespace before
/// it (the first also keeps any trailing whitespace of the text).
pub fn word_chunks(text: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut prev_ws = true;
    for (i, c) in text.char_indices() {
        let ws = c.is_whitespace();
        // A new chunk starts at the whitespace run before each word but the first.
        if ws && !prev_ws && i > start {
            chunks.push(text.get(start..i).unwrap_or("").to_owned());
            start = i;
        }
        prev_ws = ws;
    }
    if start < text.len() {
        let rest = text.get(start..).unwrap_or("");
        match chunks.last_mut() {
            // Trailing whitespace only: keep the delta count equal to the words.
            Some(last) if rest.trim().is_empty() => last.push_str(rest),
            _ => chunks.push(rest.to_owned()),
        }
    }
    chunks
}

/// Example arguments for a JSON schema: every required property (all of
/// them if none is required); strings "example" or the first enum value,
/// numbers 1, booleans true, arrays empty, objects recursively.
pub fn args_from_schema(schema: &Value) -> Value {
    match example(schema, 0) {
        v @ Value::Object(_) => v,
        // Tool arguments are always an object, even for an odd schema.
        _ => Value::Object(Map::new()),
    }
}

fn example(schema: &Value, depth: u32) -> Value {
    if depth > 16 {
        return Value::Null;
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    // "type" may be a list such as ["string", "null"]: take the first non-null.
    // Gemini's OpenAPI-style schemas spell types in capitals (OBJECT, STRING).
    let ty = match schema.get("type") {
        Some(Value::String(t)) => Some(t.to_ascii_lowercase()),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_ascii_lowercase)
            .find(|t| t != "null"),
        _ => None,
    };
    let ty = ty.as_deref();
    let ty = ty.or_else(|| {
        if schema.get("properties").is_some() {
            Some("object")
        } else if schema.get("items").is_some() {
            Some("array")
        } else {
            None
        }
    });
    match ty {
        Some("integer" | "number") => Value::from(1),
        Some("boolean") => Value::Bool(true),
        Some("array") => Value::Array(Vec::new()),
        Some("null") => Value::Null,
        Some("object") => object_example(schema, depth),
        Some(_) => Value::from("example"),
        None => ["anyOf", "oneOf", "allOf"]
            .iter()
            .find_map(|k| {
                schema
                    .get(*k)
                    .and_then(Value::as_array)
                    .and_then(|a| a.first())
            })
            .map_or_else(|| Value::from("example"), |s| example(s, depth + 1)),
    }
}

fn object_example(schema: &Value, depth: u32) -> Value {
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    if required.is_empty() {
        for (k, s) in props {
            out.insert(k.clone(), example(s, depth + 1));
        }
    } else {
        for k in required {
            let s = props.get(k).unwrap_or(&Value::Null);
            out.insert(k.to_owned(), example(s, depth + 1));
        }
    }
    Value::Object(out)
}

/// Cuts a JSON text into fragments at deterministic but irregular places
/// (never inside a UTF-8 character), the way vendors stream tool arguments.
pub fn fragments(s: &str) -> Vec<&str> {
    const SIZES: [usize; 6] = [1, 4, 2, 7, 3, 5];
    let mut out = Vec::new();
    let mut rest = s;
    let mut k = 0;
    while !rest.is_empty() {
        let want = SIZES.get(k % SIZES.len()).copied().unwrap_or(4);
        let end = rest.char_indices().nth(want).map_or(rest.len(), |(i, _)| i);
        let (head, tail) = rest.split_at(end);
        out.push(head);
        rest = tail;
        k += 1;
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prompt(text: &str) -> Prompt {
        Prompt {
            model: "m".into(),
            last_user_text: text.into(),
            prompt_words: count_words(text),
            ..Prompt::default()
        }
    }

    #[test]
    fn schema_arguments() {
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
                "ignored": {"type": "string"},
                "opts": {"type": "object", "properties": {
                    "deep": {"type": ["boolean", "null"]}, "tags": {"type": "array"}, "x": {"type": "number"}}}
            },
            "required": ["city", "unit", "days", "opts"]
        });
        assert_eq!(
            args_from_schema(&schema),
            json!({"city": "example", "unit": "celsius", "days": 1,
                   "opts": {"deep": true, "tags": [], "x": 1}})
        );
        assert_eq!(args_from_schema(&json!({})), json!({}));
        assert_eq!(args_from_schema(&Value::Null), json!({}));
    }

    #[test]
    fn default_answer_and_usage() {
        let a = plan(&prompt("what is up"), &Scenario::default(), "openai", None);
        assert_eq!(
            a.text,
            "Hello from the mock openai provider. You said: what is up"
        );
        assert_eq!(a.finish, Finish::Stop);
        assert_eq!(a.prompt_tokens, 3);
        assert_eq!(a.completion_tokens, 11);
        assert_eq!(a.chunks.len(), 11);
        assert_eq!(a.chunks.concat(), a.text);
        assert_eq!(a.chunks.get(1).unwrap(), " from");
    }

    #[test]
    fn max_tokens_truncates() {
        let mut p = prompt("x");
        p.max_tokens = Some(3);
        let a = plan(&p, &Scenario::default(), "anthropic", None);
        assert_eq!(a.text, "Hello from the");
        assert_eq!(a.finish, Finish::Length);
        assert_eq!(a.completion_tokens, 3);
    }

    #[test]
    fn stop_sequences_cut() {
        let text = "Hello from the mock provider";
        let stops = vec!["zzz".to_owned(), "mock".to_owned(), "the".to_owned()];
        assert_eq!(
            limit(text, &stops, None),
            ("Hello from ", Finish::StopSequence("the".into()))
        );
        // The limit is reached before the stop sequence: length wins.
        assert_eq!(limit(text, &stops, Some(1)), ("Hello", Finish::Length));
        assert_eq!(
            limit(text, &stops, Some(2)).1,
            Finish::StopSequence("the".into())
        );
        assert_eq!(limit(text, &[], Some(10)), (text, Finish::Stop));
    }

    #[test]
    fn tool_choice_and_results() {
        let mut p = prompt("weather?");
        p.tools = vec![
            Tool {
                name: "a".into(),
                schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            },
            Tool {
                name: "b".into(),
                schema: json!({}),
            },
        ];
        assert!(plan(&p, &Scenario::default(), "openai", None)
            .tool_calls
            .is_empty());
        let sc = Scenario::parse("tool");
        let a = plan(&p, &sc, "openai", None);
        assert_eq!(a.finish, Finish::ToolCalls);
        assert_eq!(a.tool_calls.len(), 1);
        assert_eq!(
            a.tool_calls.first().unwrap().arguments_json,
            r#"{"q":"example"}"#
        );
        p.tool_choice = ToolChoice::Named("b".into());
        p.prior_tool_calls = 2;
        let a = plan(&p, &Scenario::default(), "anthropic", Some("Let me check."));
        assert_eq!(a.text, "Let me check.");
        let c = a.tool_calls.first().unwrap();
        assert_eq!((c.name.as_str(), c.n), ("b", 3));
        let a = plan(&p, &Scenario::parse("two-tools"), "openai", None);
        assert_eq!(a.tool_calls.len(), 2);
        let a = plan(&p, &Scenario::parse("filtered-stream"), "gemini", None);
        assert_eq!(
            (a.text.as_str(), a.finish),
            ("Hello from the", Finish::ContentFilter)
        );
        let a = plan(&p, &Scenario::parse("filtered-answer"), "gemini", None);
        assert_eq!((a.text.as_str(), a.chunks.len()), ("", 0));
        p.tool_results = Some(vec!["sunny".into(), "22C".into()]);
        let a = plan(&p, &Scenario::default(), "openai", None);
        assert_eq!(a.text, "Tool result received: sunny | 22C");
        assert!(a.tool_calls.is_empty());
    }

    #[test]
    fn chunks_and_fragments_round_trip() {
        for t in ["", "  a  b ", "one", "héllo wörld 你好 🌍 done."] {
            assert_eq!(word_chunks(t).concat(), t);
            assert_eq!(fragments(t).concat(), t);
        }
        assert_eq!(word_chunks("  a  b ").len(), 2);
        assert_eq!(truncate_words("  a  b c", 2), "  a  b");
        assert_eq!(truncate_words("a b", 5), "a b");
        assert!(fragments(r#"{"city":"example"}"#).len() > 3);
    }
}
