//! OpenAI's Responses API (`POST /v1/responses`; Azure OpenAI's v1 API at
//! `/openai/v1/responses`) for clients that speak it too: a pass-through
//! pair. The client's body goes on as it came, but the vendor model as
//! `model` (our `request_id` and the gateway's `metadata.task_type` taken
//! out, [`crate::dialects::edit_members`]; `reasoning` too for a model the
//! request policy gives none); the answer comes back as the vendor sent it,
//! byte for byte (who answered is the `x-llm-provider` header), its usage
//! and status read for metering; stream events are forwarded, usage
//! read from `response.completed` (or `.incomplete`); a vendor's `error` or
//! `response.failed` becomes the client's `error` and `response.failed`.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::super::{unparseable, DecodedResponse, Events, Member, Target};
use super::GATEWAY_METADATA;
use crate::error::{ErrorCode, GatewayError};
use crate::formats::sse::SseParser;
use crate::model::response::{Answer, FinishReason, Origin, Usage};
use crate::model::stream::{EventWriter, Passed, PassedResponse};
use crate::wire::openai_responses::{EventFacts, ResponseFacts};

/// What `include` asks of a reasoning model's thinking.
const ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

/// The request body: the client's as it came, but the vendor model as
/// `model`, no `request_id` (ours), and no `metadata.task_type` (the
/// gateway's): only those members are written anew.
pub(in crate::dialects) fn encode(raw: &[u8], target: &Target) -> Result<Vec<u8>, GatewayError> {
    /// The members that may need rewriting, read without the rest.
    #[derive(Deserialize)]
    struct Edited {
        #[serde(default)]
        model: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        metadata: Option<Map<String, Value>>,
        #[serde(default)]
        include: Option<Vec<Value>>,
    }
    let invalid =
        |e: serde_json::Error| GatewayError::invalid("body", format!("invalid request body: {e}"));
    let edited: Edited = serde_json::from_slice(raw).map_err(invalid)?;
    let model = serde_json::to_string(target.model).map_err(invalid)?;
    let metadata = match edited.metadata {
        Some(mut m) if GATEWAY_METADATA.iter().any(|k| m.contains_key(*k)) => {
            m.retain(|k, _| !GATEWAY_METADATA.contains(&k.as_str()));
            Some(serde_json::to_string(&m).map_err(invalid)?)
        }
        _ => None,
    };
    let first = match edited.model {
        Some(_) => String::new(),
        None => format!("\"model\":{model}"),
    };
    // A model without reasoning refuses `reasoning` (effort and summary)
    // and its encrypted content in `include` ("Encrypted content is not
    // supported with this model"): the provider's request policy says which
    // models (built in: GPT-4o and older).
    let provider = target.provider;
    let no_reasoning = crate::policy::drops(
        &provider.request_policy,
        &provider.builtin_policy,
        target.model,
        "reasoning_effort",
    );
    let include = match edited.include {
        Some(mut list) if no_reasoning && list.iter().any(|v| v == ENCRYPTED_REASONING) => {
            list.retain(|v| v != ENCRYPTED_REASONING);
            Some(match list.is_empty() {
                true => None,
                false => Some(serde_json::to_string(&list).map_err(invalid)?),
            })
        }
        _ => None,
    };
    crate::dialects::edit_members(raw, &first, |key| match key {
        "model" => Member::Replace(&model),
        "request_id" => Member::Drop,
        "reasoning" if no_reasoning => Member::Drop,
        "include" => match &include {
            None => Member::Keep,
            Some(None) => Member::Drop,
            Some(Some(list)) => Member::Replace(list),
        },
        "metadata" => metadata.as_deref().map_or(Member::Keep, Member::Replace),
        _ => Member::Keep,
    })
}

/// Usage in the neutral shape.
fn usage(facts: &ResponseFacts) -> Option<Usage> {
    facts.usage.as_ref().map(|u| Usage {
        prompt_tokens: u.input_tokens,
        completion_tokens: u.output_tokens,
        cached_tokens: u
            .input_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens),
        reasoning_tokens: u
            .output_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens),
        cache_write_tokens: u
            .input_tokens_details
            .as_ref()
            .and_then(|d| d.cache_write_tokens),
    })
}

/// The finish in the neutral vocabulary (for metering).
fn finish(facts: &ResponseFacts) -> Option<FinishReason> {
    match facts.status.as_deref()? {
        "incomplete" => Some(
            match facts
                .incomplete_details
                .as_ref()
                .and_then(|d| d.reason.as_deref())
            {
                Some("content_filter") => FinishReason::ContentFilter,
                _ => FinishReason::Length,
            },
        ),
        "completed" => Some(FinishReason::Stop),
        _ => None,
    }
}

/// A vendor's error code in the neutral vocabulary.
fn error_code(code: Option<&str>) -> ErrorCode {
    match code {
        Some("rate_limit_exceeded") => ErrorCode::UpstreamRateLimit,
        Some("server_is_overloaded" | "slow_down") => ErrorCode::UpstreamBusy,
        _ => ErrorCode::UpstreamError,
    }
}

fn failure(facts: &ResponseFacts) -> GatewayError {
    let error = facts.error.as_ref();
    let message = error
        .and_then(|e| e.message.as_deref())
        .unwrap_or("the provider's response failed");
    GatewayError::new(error_code(error.and_then(|e| e.code.as_deref())), message)
}

/// A `response` object for a Responses client: the vendor's bytes, read
/// for metering.
pub(in crate::dialects) fn decode(
    body: &[u8],
    origin: &mut Origin,
) -> Result<DecodedResponse, GatewayError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| unparseable("response", e))?;
    if !value.is_object() {
        return Err(unparseable("response", "not a JSON object"));
    }
    let facts = ResponseFacts::deserialize(&value).unwrap_or_default();
    if !facts.model.is_empty() {
        origin.model = facts.model.to_string();
    }
    if !facts.id.is_empty() {
        origin.id = facts.id.to_string();
    }
    Ok(DecodedResponse {
        answer: Answer::Native(body.to_vec()),
        usage: usage(&facts),
        finish_reason: finish(&facts),
    })
}

/// The Responses stream, forwarded event by event.
#[derive(Default)]
pub(in crate::dialects) struct ResponsesStream;

impl Events<SseParser> for ResponsesStream {
    fn on_event(
        &mut self,
        (_event, data): (&str, &str),
        w: &mut EventWriter,
        out: &mut Vec<u8>,
    ) -> Result<(), GatewayError> {
        let event: EventFacts =
            serde_json::from_str(data).map_err(|e| unparseable("stream event", e))?;
        let kind = event.kind.as_ref();
        if let Some(response) = &event.response {
            w.set_id(&response.id);
            w.set_model(&response.model);
        }
        match kind {
            // A vendor error: the client's error event (and a retry, when
            // nothing was sent yet).
            "error" => {
                let code = error_code(event.code.as_deref());
                let message = event
                    .message
                    .as_deref()
                    .unwrap_or("the provider's stream failed");
                w.error(out, &GatewayError::new(code, message));
                return Ok(());
            }
            // Failed: the client's `error` and `response.failed` (the failure
            // recorded; before any content, a retry).
            "response.failed" => {
                if let Some(response) = &event.response {
                    w.set_usage(usage(response));
                }
                let failed = event.response.as_ref().map(failure);
                w.error(
                    out,
                    &failed.unwrap_or_else(crate::dialects::incomplete_stream),
                );
                return Ok(());
            }
            _ => {}
        }
        if let Some(delta) = &event.delta {
            w.count_delivered(delta);
        }
        let has_content = kind.ends_with(".delta") || kind == "response.output_item.added";
        let terminal = matches!(kind, "response.completed" | "response.incomplete");
        if terminal {
            if let Some(response) = &event.response {
                w.set_usage(usage(response));
            }
            w.mark_finished();
        }
        let passed = Passed {
            data: data.as_bytes(),
            name: Some(kind),
            sequence: event.sequence_number,
            response: event.response.as_ref().map(|r| PassedResponse {
                id: &r.id,
                model: &r.model,
                // Seconds, as a number (the SDK's type is a float).
                created: r.created_at.map(|t| t as u64),
            }),
        };
        w.passthrough(out, &passed, has_content || terminal);
        if terminal {
            // The vendor's terminal event was the end (the encoder adds nothing).
            w.done(out);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialects::openai::OpenAi;
    use crate::dialects::Dialect;
    use crate::model::surface_state::SurfaceState;
    use crate::model::Api;

    #[test]
    fn the_answer_is_the_vendors_bytes_with_usage_read() {
        let body = br#"{"id":"resp_1","object":"response","status":"incomplete","model":"gpt-4o-2024",
            "incomplete_details":{"reason":"max_output_tokens"},"output":[],"unmodelled":{"x":1},
            "usage":{"input_tokens":5,"output_tokens":16,"total_tokens":21,
                     "input_tokens_details":{"cached_tokens":2},"output_tokens_details":{"reasoning_tokens":4}}}"#;
        let mut origin = Origin {
            provider: "oa".into(),
            ..Origin::default()
        };
        let d = OpenAi
            .decode_native(Api::OpenAiResponses, body, &mut origin)
            .unwrap();
        assert_eq!(
            d.usage,
            Some(Usage {
                prompt_tokens: 5,
                completion_tokens: 16,
                cached_tokens: Some(2),
                reasoning_tokens: Some(4),
                cache_write_tokens: None,
            })
        );
        assert_eq!(d.finish_reason, Some(FinishReason::Length));
        assert_eq!(origin.model, "gpt-4o-2024");
        let Answer::Native(bytes) = d.answer else {
            panic!("native")
        };
        assert_eq!(bytes, body, "the vendor's bytes, nothing added");
    }

    fn run(input: &str) -> (String, EventWriter) {
        let writer = crate::surfaces::stream_writer(
            Api::OpenAiResponses,
            true,
            Origin::default(),
            "r".into(),
            true,
            &SurfaceState::default(),
        );
        let mut d = OpenAi.stream_decoder(writer);
        let mut out = Vec::new();
        d.feed(input.as_bytes(), &mut out);
        d.finish(&mut out);
        let text = String::from_utf8(out).unwrap();
        let w = d.writer();
        let usage = w.usage();
        let mut copy = crate::surfaces::stream_writer(
            Api::OpenAiResponses,
            true,
            w.origin().clone(),
            "r".into(),
            true,
            &SurfaceState::default(),
        );
        copy.set_usage(usage);
        if let Some(f) = w.failure() {
            copy.error(&mut Vec::new(), f);
        }
        (text, copy)
    }

    #[test]
    fn stream_events_pass_through_and_usage_is_read() {
        let stream = concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_9\",\"model\":\"gpt-4o\",\"status\":\"in_progress\",\"output\":[]}}\n\n",
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_9\",\"model\":\"gpt-4o\",\"status\":\"completed\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1,\"total_tokens\":4}}}\n\n",
        );
        let (text, w) = run(stream);
        assert_eq!(text, stream, "every event as the vendor sent it");
        assert_eq!(w.usage().map(|u| u.prompt_tokens), Some(3));
        assert!(w.failure().is_none());
        assert_eq!(w.origin().id, "resp_9");
        // Cut before the end: the client is told.
        let (text, w) = run(&stream[..stream.len() / 2]);
        assert!(text.contains("event: response.failed"), "{text}");
        assert!(w.failure().is_some());
    }

    #[test]
    fn a_failed_response_after_content_is_recorded() {
        let (text, w) = run(concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_7\",\"model\":\"gpt-4o\",\"created_at\":5}}\n\n",
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"Hi\"}\n\n",
            "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_7\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n",
        ));
        assert_eq!(w.failure().map(|f| f.message.as_str()), Some("boom"));
        let failed = text
            .split("\n\n")
            .find(|e| e.starts_with("event: response.failed"))
            .unwrap();
        assert!(failed.contains("\"id\":\"resp_7\""), "{failed}");
        assert!(
            failed.contains("\"sequence_number\":3"),
            "numbering goes on: {failed}"
        );
    }

    #[test]
    fn a_malformed_number_or_creation_is_passed_on_unfollowed() {
        let stream = concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":\"zero\",\"response\":{\"id\":\"resp_5\",\"model\":\"gpt-4o\",\"created_at\":\"soon\"}}\n\n",
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":-1,\"delta\":\"Hi\"}\n\n",
        );
        let (text, w) = run(stream);
        assert!(text.starts_with(stream), "{text}");
        assert_eq!(w.origin().id, "resp_5");
        // Cut before the end: our own events number from 0.
        let error = text.split("\n\n").find(|e| e.starts_with("event: error"));
        assert!(
            error.is_some_and(|e| e.contains("\"sequence_number\":0")),
            "{text}"
        );
    }

    #[test]
    fn a_vendor_error_event_fails_the_stream() {
        let (text, w) = run(
            "event: error\ndata: {\"type\":\"error\",\"code\":\"server_is_overloaded\",\"message\":\"busy\",\"sequence_number\":0}\n\n",
        );
        assert!(text.contains("\"code\":\"UPSTREAM_BUSY\""), "{text}");
        assert_eq!(w.failure().map(|f| f.code), Some(ErrorCode::UpstreamBusy));
    }
}
