//! The dialect with clients of the Messages API (a pass-through pair) and
//! the neutral request's thinking and caching controls.

use super::*;
use crate::model::request::{Reasoning as ReasoningControl, Thinking};
use crate::model::surface_state::SurfaceState;
use crate::surfaces::anthropic_messages::request::parse;
use serde_json::Value;

const PROVIDER: &str = r#"{"dialect":"anthropic","api_key":"sk-ant","default_max_tokens":1000}"#;

fn config() -> crate::config::Config {
    crate::config::Config::parse(
        format!(
            r#"{{"providers":{{"p":{PROVIDER}}},"model_groups":{{"g":{{"cluster":"c"}}}},"auth":{{"enabled":false}}}}"#
        )
        .as_bytes(),
        |_| None,
    )
    .unwrap()
}

/// The neutral encoding of a request (as for a client of another API).
fn encode(req: &ChatRequest) -> Result<Value, GatewayError> {
    encode_on(req, "claude-x")
}

fn encode_on(req: &ChatRequest, model: &str) -> Result<Value, GatewayError> {
    let config = config();
    let target = Target {
        provider: &config.providers["p"],
        model,
    };
    let up = Anthropic.encode_request(req, &target)?;
    Ok(serde_json::from_slice(&up.body).unwrap())
}

fn messages(body: &str) -> ChatRequest {
    parse(body.as_bytes()).unwrap()
}

#[test]
fn native_body_keeps_every_byte_but_the_model() {
    let body = "{ \"max_tokens\" :5,\n  \"model\"\t:  \"g\\u0020x\", \"messages\":[{\"role\":\"user\",\"content\":\"h\u{e9}  \\n\"}],\"service_tier\":\"auto\"}";
    let config = config();
    let target = Target {
        provider: &config.providers["p"],
        model: "claude-\"x\"",
    };
    let req = messages(body);
    let raw = crate::dialects::ClientRequest {
        body: &|| body.as_bytes().to_vec(),
        header: &|_| None,
    };
    let up = Anthropic
        .encode_native(Api::AnthropicMessages, &raw, &req, &target)
        .unwrap()
        .unwrap();
    assert_eq!(
        String::from_utf8(up.body).unwrap(),
        body.replace("\"g\\u0020x\"", "\"claude-\\\"x\\\"\"")
    );
    assert_eq!(up.path, "/v1/messages");
    assert!(up.headers.contains(&("x-api-key", "sk-ant".into())));
    assert!(up
        .headers
        .contains(&("anthropic-version", API_VERSION.into())));
    assert!(Anthropic.takes_client_header(Api::AnthropicMessages, b"anthropic-beta"));
    assert!(!Anthropic.takes_client_header(Api::OpenAiChat, b"anthropic-beta"));
    assert!(!Anthropic.takes_client_header(Api::AnthropicMessages, b"anthropic-version"));
    let raw = crate::dialects::ClientRequest {
        body: &|| b"{\"max_tokens\":1}".to_vec(),
        header: &|_| None,
    };
    let e = Anthropic
        .encode_native(Api::AnthropicMessages, &raw, &req, &target)
        .unwrap()
        .unwrap_err();
    assert!(e.message.contains("model: Field required"));
}

#[test]
fn native_body_loses_thinking_only_for_a_history_claude_cannot_verify() {
    let history = r#"{"model":"g", "max_tokens":4096, "thinking":{"type":"enabled","budget_tokens":2048},
        "tools":[{"name":"f","input_schema":{"type":"object"}}],
        "messages":[{"role":"user","content":"q"},
          {"role":"assistant","content":[CONTENT{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
          {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}]}"#;
    let config = config();
    let target = Target {
        provider: &config.providers["p"],
        model: "g",
    };
    let native = |body: &str| {
        let req = messages(body);
        let raw = crate::dialects::ClientRequest {
            body: &|| body.as_bytes().to_vec(),
            header: &|_| None,
        };
        let up = Anthropic
            .encode_native(Api::AnthropicMessages, &raw, &req, &target)
            .unwrap()
            .unwrap();
        String::from_utf8(up.body).unwrap()
    };
    // Another vendor's tool turn (no thinking, or unsigned): without
    // thinking, and without the unsigned block.
    let thinking = r#" "thinking":{"type":"enabled","budget_tokens":2048},"#;
    let bare = history.replace("CONTENT", "");
    assert_eq!(native(&bare), bare.replace(thinking, ""));
    let unsigned = history.replace(
        "CONTENT",
        r#"{"type":"thinking","thinking":"t","signature":""}, "#,
    );
    assert_eq!(native(&unsigned), bare.replace(thinking, ""));
    // Claude's own signed turn: every byte kept.
    let signed = history.replace(
        "CONTENT",
        r#"{"type":"thinking","thinking":"t","signature":"s"},"#,
    );
    assert_eq!(native(&signed), signed);
    // Another vendor's unsigned thinking in an earlier turn: the block
    // left out (Claude refuses it), thinking kept; other turns as sent.
    let earlier = r#"{"model":"g","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"q"},
        {"role":"assistant", "content":[{"type":"thinking","thinking":"t","signature":""}, {"type":"text","text":"a"}]},  {"role":"user","content":"again"}]}"#;
    assert_eq!(
        native(earlier),
        earlier.replace(
            r#"{"role":"assistant", "content":[{"type":"thinking","thinking":"t","signature":""}, {"type":"text","text":"a"}]},  "#,
            r#"{"role":"assistant", "content":[{"type":"text","text":"a"}]},  "#
        )
    );
}

#[test]
fn native_answer_is_the_vendors_read_for_metering() {
    let body = br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x-1","content":[{"type":"text","text":"hi","citations":[{"type":"char_location"}]}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2,"cache_read_input_tokens":4}}"#;
    let mut origin = Origin::default();
    let d = Anthropic
        .decode_native(Api::AnthropicMessages, body, &mut origin)
        .unwrap();
    assert!(matches!(&d.answer, Answer::Native(b) if b == body));
    assert_eq!(d.finish_reason, Some(FinishReason::Length));
    assert_eq!(d.usage.map(|u| u.prompt_tokens), Some(7));
    assert_eq!(
        (origin.id.as_str(), origin.model.as_str()),
        ("msg_1", "claude-x-1")
    );
}

const THINKING_STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm \u{e9}\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"sig\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"enc\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

fn run(api: Api, chunks: &[&[u8]]) -> (String, EventWriterFacts) {
    let origin = Origin {
        provider: "an".into(),
        ..Origin::default()
    };
    let writer = crate::surfaces::stream_writer(
        api,
        Anthropic.speaks(api),
        origin,
        "rid".into(),
        false,
        &SurfaceState::default(),
    );
    let mut d = Anthropic.stream_decoder(writer);
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c, &mut out);
    }
    d.finish(&mut out);
    let w = d.writer();
    let facts = EventWriterFacts {
        usage: w.usage(),
        content_started: w.content_started(),
        finished: w.finished(),
        failed: w.failure().is_some(),
        delivered: w.delivered_tokens(),
    };
    (String::from_utf8(out).unwrap(), facts)
}

#[derive(Debug, PartialEq)]
struct EventWriterFacts {
    usage: Option<Usage>,
    content_started: bool,
    finished: bool,
    failed: bool,
    delivered: u64,
}

#[test]
fn native_stream_passes_every_event_through_and_meters_it() {
    let (out, facts) = run(Api::AnthropicMessages, &[THINKING_STREAM.as_bytes()]);
    assert_eq!(out, THINKING_STREAM);
    assert_eq!(
        facts.usage,
        Some(Usage {
            prompt_tokens: 12,
            completion_tokens: 9,
            cached_tokens: Some(0),
            reasoning_tokens: None,
            cache_write_tokens: None,
        })
    );
    assert!(facts.content_started && facts.finished && !facts.failed);
    assert!(facts.delivered > 0);
    // However the network cuts it.
    let bytes = THINKING_STREAM.as_bytes();
    for i in (0..bytes.len()).step_by(7) {
        let (a, b) = bytes.split_at(i);
        assert_eq!(run(Api::AnthropicMessages, &[a, b]).0, THINKING_STREAM);
    }
    // A cut stream ends with the surface's error event.
    let (out, facts) = run(Api::AnthropicMessages, &[&bytes[..400]]);
    assert!(out.ends_with("\n\n") && out.contains("event: error\ndata: {\"type\":\"error\""));
    assert!(facts.failed);
}

#[test]
fn thinking_decodes_into_neutral_reasoning() {
    let (out, _) = run(Api::OpenAiChat, &[THINKING_STREAM.as_bytes()]);
    assert!(out.contains(r#""reasoning_content":"hmm é""#), "{out}");
    let body = br#"{"type":"message","id":"m","role":"assistant","model":"c","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"r"},{"type":"text","text":"x"}],"stop_reason":"end_turn","usage":{}}"#;
    let d = Anthropic
        .decode_response(body, &mut Origin::default())
        .unwrap();
    let Answer::Decoded(c) = d.answer else {
        panic!()
    };
    assert_eq!(
        c.reasoning,
        [
            Thinking {
                text: "t".into(),
                signature: Some("s".into()),
                redacted: None
            },
            Thinking {
                redacted: Some("r".into()),
                ..Thinking::default()
            }
        ]
    );
}

#[test]
fn encodes_caching_documents_tool_errors_and_thinking_history() {
    let req = messages(
        r#"{"model":"g","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},
        "system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral","ttl":"1h"}}],
        "messages":[
          {"role":"user","content":[{"type":"text","text":"q","cache_control":{"type":"ephemeral"}},
            {"type":"image","source":{"type":"url","url":"https://x/y.png"},"cache_control":{"type":"ephemeral"}},
            {"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"},"title":"T","cache_control":{"type":"ephemeral"}}]},
          {"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"r"},
            {"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}]},
          {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"cache_control":{"type":"ephemeral"},
            "content":[{"type":"text","text":"bad"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QQ=="}}]}]}],
        "tools":[{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
        "top_k":5,"temperature":0.5}"#,
    );
    let v = encode(&req).unwrap();
    assert_eq!(
        v["system"],
        serde_json::json!([{"type":"text","text":"sys","cache_control":{"type":"ephemeral","ttl":"1h"}}])
    );
    assert_eq!(
        v["messages"][0]["content"],
        serde_json::json!([
            {"type":"text","text":"q","cache_control":{"type":"ephemeral"}},
            {"type":"image","source":{"type":"url","url":"https://x/y.png"},"cache_control":{"type":"ephemeral"}},
            {"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"},"title":"T","cache_control":{"type":"ephemeral"}}])
    );
    assert_eq!(
        v["messages"][1]["content"],
        serde_json::json!([
            {"type":"thinking","thinking":"t","signature":"s"},
            {"type":"redacted_thinking","data":"r"},
            {"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}])
    );
    assert_eq!(
        v["messages"][2]["content"],
        serde_json::json!([{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"cache_control":{"type":"ephemeral"},
            "content":[{"type":"text","text":"bad"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QQ=="}}]}])
    );
    assert_eq!(
        v["tools"][0]["cache_control"],
        serde_json::json!({"type":"ephemeral"})
    );
    assert_eq!(
        v["thinking"],
        serde_json::json!({"type":"enabled","budget_tokens":2048})
    );
    // Anthropic refuses temperature and top_k with thinking on.
    assert!(v.get("temperature").is_none() && v.get("top_k").is_none());
    let plain = messages(
        r#"{"model":"g","max_tokens":100,"top_k":5,"messages":[{"role":"user","content":"x"}]}"#,
    );
    let v = encode(&plain).unwrap();
    assert_eq!(
        (v["top_k"].clone(), v.get("thinking")),
        (serde_json::json!(5), None)
    );
}

#[test]
fn efforts_become_budgets_below_max_tokens() {
    let with = |effort: Option<Effort>, budget: Option<u32>, max: u32| {
        let mut req =
            messages(r#"{"model":"g","max_tokens":1,"messages":[{"role":"user","content":"x"}]}"#);
        req.max_tokens = Some(max);
        req.reasoning = Some(ReasoningControl {
            effort,
            budget_tokens: budget,
        });
        encode(&req).map(|v| v["thinking"].clone())
    };
    let budget = |n: u32| Ok(serde_json::json!({"type":"enabled","budget_tokens":n}));
    assert_eq!(with(Some(Effort::Minimal), None, 20_000), budget(1024));
    assert_eq!(with(Some(Effort::Low), None, 20_000), budget(2048));
    assert_eq!(with(Some(Effort::Medium), None, 20_000), budget(8192));
    assert_eq!(with(Some(Effort::High), None, 20_000), budget(16384));
    assert_eq!(with(Some(Effort::High), None, 4000), budget(3999));
    assert_eq!(with(Some(Effort::None), None, 4000), Ok(Value::Null));
    assert_eq!(with(None, Some(3000), 4000), budget(3000));
    for (effort, budget, max) in [(Some(Effort::Low), None, 1000), (None, Some(4000), 4000)] {
        assert_eq!(
            with(effort, budget, max).unwrap_err().param.as_deref(),
            Some("max_tokens")
        );
    }
}

#[test]
fn claude_4_6_and_later_think_adaptively_and_earlier_ones_within_their_limit() {
    let with = |model: &str, effort: Option<Effort>, budget: Option<u32>, max: Option<u32>| {
        let mut req =
            messages(r#"{"model":"g","max_tokens":1,"messages":[{"role":"user","content":"x"}]}"#);
        req.max_tokens = max;
        req.reasoning = Some(ReasoningControl {
            effort,
            budget_tokens: budget,
        });
        encode_on(&req, model).map(|v| {
            (
                v["thinking"].clone(),
                v.get("output_config").cloned(),
                v["max_tokens"].clone(),
            )
        })
    };
    let json = |s: &str| serde_json::from_str::<Value>(s).unwrap();
    let adaptive = json(r#"{"type":"adaptive"}"#);
    // 4.6: an effort is adaptive thinking at it; the model's own choice
    // is adaptive thinking alone; a named budget is still `enabled`.
    assert_eq!(
        with("claude-opus-4-6", Some(Effort::High), None, Some(900)).unwrap(),
        (
            adaptive.clone(),
            Some(json(r#"{"effort":"high"}"#)),
            json("900")
        )
    );
    assert_eq!(
        with("claude-sonnet-4-6", None, None, None).unwrap(),
        (adaptive.clone(), None, json(&(8192 + 1000).to_string()))
    );
    assert_eq!(
        with("claude-opus-4-6", None, Some(2048), Some(4000))
            .unwrap()
            .0,
        json(r#"{"type":"enabled","budget_tokens":2048}"#)
    );
    // 4.7 takes adaptive thinking only: a budget is the effort it amounts to.
    assert_eq!(
        with("claude-opus-4-7", None, Some(2048), Some(4000)).unwrap(),
        (adaptive, Some(json(r#"{"effort":"low"}"#)), json("4000"))
    );
    // Before 4.6, Claude's own choice thinks with what fits, or not at all.
    assert_eq!(
        with("claude-sonnet-4-5", None, None, Some(1000)).unwrap().0,
        Value::Null
    );
    assert_eq!(
        with("claude-sonnet-4-5", None, None, Some(5000)).unwrap().0,
        json(r#"{"type":"enabled","budget_tokens":4999}"#)
    );
    // No limit: the whole budget, and the answer's default tokens on top.
    assert_eq!(
        with("claude-x", Some(Effort::Medium), None, None).unwrap(),
        (
            json(r#"{"type":"enabled","budget_tokens":8192}"#),
            None,
            json(&(8192 + 1000).to_string())
        )
    );
}

#[test]
fn thinking_is_off_for_a_tool_turn_without_signed_thinking_and_refused_with_forced_tools() {
    let history = r#"{"model":"g","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},
        "tools":[{"name":"f","input_schema":{"type":"object"}}],
        "messages":[{"role":"user","content":"q"},
          {"role":"assistant","content":[CONTENT{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
          {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}]}"#;
    let unsigned = messages(&history.replace("CONTENT", ""));
    assert_eq!(encode(&unsigned).unwrap().get("thinking"), None);
    let signed = messages(&history.replace(
        "CONTENT",
        r#"{"type":"thinking","thinking":"t","signature":"s"},"#,
    ));
    assert!(encode(&signed).unwrap()["thinking"].is_object());
    let forced = messages(
        r#"{"model":"g","max_tokens":4096,"thinking":{"type":"adaptive"},"tool_choice":{"type":"any"},
        "tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"q"}]}"#,
    );
    assert_eq!(
        encode(&forced).unwrap_err().param.as_deref(),
        Some("tool_choice")
    );
}

#[test]
fn unsigned_reasoning_of_another_vendor_is_left_out() {
    let mut req = messages(
        r#"{"model":"g","max_tokens":100,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}"#,
    );
    if let Some(Message::Assistant { reasoning, .. }) = req.messages.get_mut(1) {
        reasoning.push(Thinking {
            text: "unsigned".into(),
            ..Thinking::default()
        });
    }
    let v = encode(&req).unwrap();
    assert_eq!(
        v["messages"][1]["content"],
        serde_json::json!([{"type":"text","text":"y"}])
    );
}
