//! The parts of Gemini answers and streams: the search a turn runs first,
//! usage, candidates with their finish reasons and safety ratings, function
//! calls, and the response envelope and stream events.

use serde_json::{json, Map, Value};

use crate::answer::{Answer, Finish};
use crate::dialect::{to_json, Meta, Prompt, SseEvent};

use super::request::call_signature;
use super::Gemini;

/// The search a model turn runs first when Google Search is offered and
/// `includeServerSideToolInvocations` asks to see it, on a new turn (not
/// after function responses): its `toolCall` (signed, as Gemini signs the
/// first part of a step) and `toolResponse` parts, one id.
pub(super) fn server_invocations(p: &Prompt) -> Vec<Value> {
    if !(p.gemini_search && p.gemini_server_invocations && p.tool_results.is_none()) {
        return Vec::new();
    }
    let args = json!({"queries": [p.last_user_text]});
    vec![
        json!({"toolCall": {"toolType": "GOOGLE_SEARCH_WEB", "id": "mocksearch1", "args": args},
               "thoughtSignature": call_signature("GOOGLE_SEARCH_WEB", &args)}),
        json!({"toolResponse": {"toolType": "GOOGLE_SEARCH_WEB", "id": "mocksearch1",
               "response": {"results": [{"title": "Mock result", "url": "https://example.com/"}]}}}),
    ]
}

pub(super) fn usage(a: &Answer) -> Value {
    // Thoughts are counted beside the candidates, in the total.
    let mut u = json!({
        "promptTokenCount": a.prompt_tokens,
        "candidatesTokenCount": a.completion_tokens,
        "totalTokenCount": a.prompt_tokens + a.completion_tokens + a.reasoning_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": a.prompt_tokens}],
    });
    if a.cached_tokens > 0 {
        u["cachedContentTokenCount"] = json!(a.cached_tokens);
    }
    if a.reasoning_tokens > 0 {
        u["thoughtsTokenCount"] = json!(a.reasoning_tokens);
    }
    u
}

/// The usage of an answer of the prompt's candidates: each candidate's
/// tokens count (the same planned answer, `candidateCount` times).
pub(super) fn usage_of(p: &Prompt, a: &Answer) -> Value {
    let n = u64::from(p.choices());
    let mut u = usage(a);
    let candidates = a.completion_tokens * n;
    let thoughts = a.reasoning_tokens * n;
    u["candidatesTokenCount"] = json!(candidates);
    u["totalTokenCount"] = json!(a.prompt_tokens + candidates + thoughts);
    if thoughts > 0 {
        u["thoughtsTokenCount"] = json!(thoughts);
    }
    u
}

/// The prompt's candidates (`candidateCount`), each these parts under its index.
pub(super) fn candidates(p: &Prompt, parts: &[Value], finish: Option<&Finish>) -> Value {
    (0..p.choices())
        .map(|i| {
            let mut c = candidate(parts.to_vec(), finish);
            c["index"] = json!(i);
            c
        })
        .collect()
}

fn finish_reason(f: &Finish) -> &'static str {
    match f {
        Finish::Stop | Finish::StopSequence(_) | Finish::ToolCalls | Finish::PauseTurn => "STOP",
        Finish::Length => "MAX_TOKENS",
        Finish::ContentFilter => "SAFETY",
    }
}

pub(super) fn safety_ratings(blocked: bool) -> Value {
    json!([
        {"category": "HARM_CATEGORY_HARASSMENT", "probability": if blocked { "HIGH" } else { "NEGLIGIBLE" },
         "blocked": blocked},
        {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"},
    ])
}

/// A candidate: `parts` (omitted when empty, as Gemini does for a blocked
/// answer) and the finish reason if this is the last piece.
pub(super) fn candidate(parts: Vec<Value>, finish: Option<&Finish>) -> Value {
    let mut c = Map::new();
    if !parts.is_empty() {
        c.insert("content".into(), json!({"parts": parts, "role": "model"}));
    }
    if let Some(f) = finish {
        c.insert("finishReason".into(), json!(finish_reason(f)));
        if *f == Finish::ContentFilter {
            c.insert("safetyRatings".into(), safety_ratings(true));
        }
    }
    c.insert("index".into(), json!(0));
    Value::Object(c)
}

pub(super) fn call_parts(a: &Answer) -> Vec<Value> {
    a.tool_calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut part = json!({"functionCall": {"name": c.name, "args": c.arguments}});
            // Parallel calls: only the first carries the signature.
            if i == 0 {
                part["thoughtSignature"] = json!(call_signature(&c.name, &c.arguments));
            }
            part
        })
        .collect()
}

impl Gemini {
    pub(super) fn envelope(
        &self,
        p: &Prompt,
        meta: Meta,
        candidates: Value,
        usage: Value,
    ) -> Value {
        json!({
            "candidates": candidates,
            "usageMetadata": usage,
            "modelVersion": p.model,
            "responseId": format!("mockGemini{}", meta.seq),
        })
    }

    pub(super) fn event(&self, data: &Value, delta: bool) -> SseEvent {
        SseEvent {
            name: None,
            data: to_json(data),
            delta,
        }
    }
}
