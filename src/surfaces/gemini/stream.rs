//! Gemini's stream: each event a whole `GenerateContentResponse` carrying
//! the next piece (text, a thought, whole function calls), the last with
//! the `finishReason` and `usageMetadata`. Framed as SSE (`alt=sse`:
//! `data: {...}\r\n\r\n`) or, without it, as one JSON array written
//! element by element (`[{...}`, `,\r\n{...}`, `]`).

use std::borrow::Cow;

use super::{args_of, carry_signature, finish_reason, status_of, thought_part, usage_metadata};
use crate::error::GatewayError;
use crate::model::response::{FinishReason, Origin, Usage};
use crate::model::stream::{Passed, Reasoning, StreamEncoder};
use crate::wire::gemini::{Candidate, Content, FunctionCall, GenerateContentResponse, Part, Text};

/// Function call arguments held until the call is whole: more than any
/// call carries is cut off here rather than held without bound.
const MAX_HELD_ARGUMENTS: usize = 16 << 20;

/// A tool call being assembled: Gemini sends calls whole.
struct HeldCall {
    /// The choice it is part of.
    choice: u32,
    id: String,
    name: String,
    arguments: String,
}

pub struct Chunks {
    json_array: bool,
    /// An element of the array (or an event) was written.
    opened: bool,
    calls: Vec<HeldCall>,
    held: usize,
    /// Choice 0's finish.
    finish: Option<FinishReason>,
    /// The other choices' finishes (`candidateCount` > 1), in order of arrival.
    more_finishes: Vec<(u32, FinishReason)>,
    /// The choice the events belong to.
    choice: u32,
    /// The vendor's own events went through (a Gemini provider).
    passed_through: bool,
}

impl Chunks {
    pub fn new(json_array: bool) -> Self {
        Self {
            json_array,
            opened: false,
            calls: Vec::new(),
            held: 0,
            finish: None,
            more_finishes: Vec::new(),
            choice: 0,
            passed_through: false,
        }
    }

    /// Frames one element's JSON.
    fn frame(&mut self, out: &mut Vec<u8>, json: &[u8]) {
        if self.json_array {
            out.extend_from_slice(if self.opened { b",\r\n" } else { b"[" });
            out.extend_from_slice(json);
        } else {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(json);
            out.extend_from_slice(b"\r\n\r\n");
        }
        self.opened = true;
    }

    fn chunk(
        &mut self,
        origin: &Origin,
        out: &mut Vec<u8>,
        parts: Vec<Part>,
        finish: Option<FinishReason>,
        usage: Option<&Usage>,
    ) {
        let content = (!parts.is_empty()).then(|| Content {
            role: Some("model".into()),
            parts,
        });
        let candidate = Candidate {
            content,
            finish_reason: finish.map(|f| Text::from(finish_reason(f))),
            index: Some(self.choice),
        };
        self.respond(origin, out, vec![candidate], usage);
    }

    /// One element of these candidates.
    fn respond(
        &mut self,
        origin: &Origin,
        out: &mut Vec<u8>,
        candidates: Vec<Candidate>,
        usage: Option<&Usage>,
    ) {
        let response = GenerateContentResponse {
            candidates,
            usage_metadata: usage.map(usage_metadata),
            model_version: Some(origin.model.as_str().into()),
            response_id: Some(Text(Cow::Borrowed(origin.id.as_str()))),
            ..GenerateContentResponse::default()
        };
        if let Ok(json) = serde_json::to_vec(&response) {
            self.frame(out, &json);
        }
    }

    /// Writes the current choice's calls held, whole, in one chunk.
    fn flush_calls(&mut self, origin: &Origin, out: &mut Vec<u8>) {
        if !self.calls.iter().any(|c| c.choice == self.choice) {
            return;
        }
        let (calls, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.calls)
            .into_iter()
            .partition(|c| c.choice == self.choice);
        self.calls = others;
        self.held = self.calls.iter().map(|c| c.arguments.len()).sum();
        let parts = calls
            .iter()
            .map(|call| Part {
                function_call: Some(FunctionCall {
                    id: Some(call.id.as_str().into()),
                    name: call.name.as_str().into(),
                    args: Some(args_of(&call.arguments)),
                }),
                ..Part::default()
            })
            .collect();
        self.chunk(origin, out, parts, None, None);
    }
}

impl StreamEncoder for Chunks {
    /// Gemini's stream has no opening event.
    fn start(&mut self, _origin: &Origin, _out: &mut Vec<u8>) {}

    fn text(&mut self, origin: &Origin, out: &mut Vec<u8>, text: &str) {
        self.flush_calls(origin, out);
        let part = Part {
            text: Some(text.into()),
            ..Part::default()
        };
        self.chunk(origin, out, vec![part], None, None);
    }

    fn reasoning(&mut self, origin: &Origin, out: &mut Vec<u8>, delta: Reasoning<'_>) {
        self.flush_calls(origin, out);
        let part = match delta {
            Reasoning::Text(text) => thought_part(text, None),
            Reasoning::Signature(signature) => {
                thought_part("", Some(carry_signature(signature, false)))
            }
            Reasoning::Redacted(data) => thought_part("", Some(carry_signature(data, true))),
        };
        self.chunk(origin, out, vec![part], None, None);
    }

    fn tool_call_start(
        &mut self,
        _origin: &Origin,
        _out: &mut Vec<u8>,
        _index: u32,
        id: &str,
        name: &str,
    ) {
        self.calls.push(HeldCall {
            choice: self.choice,
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: String::new(),
        });
    }

    fn tool_call_arguments(
        &mut self,
        _origin: &Origin,
        _out: &mut Vec<u8>,
        _index: u32,
        fragment: &str,
    ) {
        if self.held + fragment.len() > MAX_HELD_ARGUMENTS {
            return;
        }
        let choice = self.choice;
        if let Some(call) = self.calls.iter_mut().rfind(|c| c.choice == choice) {
            call.arguments.push_str(fragment);
            self.held += fragment.len();
        }
    }

    fn finish(&mut self, origin: &Origin, out: &mut Vec<u8>, reason: FinishReason) {
        self.flush_calls(origin, out);
        match self.choice {
            0 => self.finish = Some(reason),
            choice => self.more_finishes.push((choice, reason)),
        }
    }

    /// Each candidate's events carry its index.
    fn choice(&mut self, _origin: &Origin, _out: &mut Vec<u8>, index: u32) {
        self.choice = index;
    }

    /// The last chunk: the finish reason (each candidate's) and the usage.
    fn done(&mut self, origin: &Origin, out: &mut Vec<u8>, usage: Option<&Usage>) {
        if !self.passed_through {
            self.flush_calls(origin, out);
            let finish = Some(self.finish.unwrap_or(FinishReason::Stop));
            if self.more_finishes.is_empty() {
                self.choice = 0;
                self.chunk(origin, out, Vec::new(), finish, usage);
            } else {
                // Calls of choices that never finished, then every finish.
                for choice in 0..=self.more_finishes.iter().map(|f| f.0).max().unwrap_or(0) {
                    self.choice = choice;
                    self.flush_calls(origin, out);
                }
                let finishes = std::iter::once((0, self.finish.unwrap_or(FinishReason::Stop)))
                    .chain(self.more_finishes.iter().copied());
                let candidates = finishes
                    .map(|(index, reason)| Candidate {
                        content: None,
                        finish_reason: Some(Text::from(finish_reason(reason))),
                        index: Some(index),
                    })
                    .collect();
                self.respond(origin, out, candidates, usage);
            }
        }
        if self.json_array {
            if !self.opened {
                out.push(b'[');
            }
            out.extend_from_slice(b"]");
        }
    }

    /// `{"error": {...}}` as the stream's last element.
    fn error(&mut self, out: &mut Vec<u8>, error: &GatewayError, request_id: &str) {
        let envelope = crate::wire::gemini::ErrorEnvelope {
            error: status_of(error, Some(request_id)),
        };
        if let Ok(json) = serde_json::to_vec(&envelope) {
            self.frame(out, &json);
        }
        if self.json_array {
            out.push(b']');
        }
    }

    /// A Gemini provider's SSE event: as it came for an SSE client, its
    /// data as the next array element otherwise.
    fn passthrough(&mut self, out: &mut Vec<u8>, event: &Passed) {
        self.passed_through = true;
        let event = event.data;
        if !self.json_array {
            out.extend_from_slice(event);
            self.opened = true;
            return;
        }
        let mut data = Vec::with_capacity(event.len());
        for line in event.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Some(rest) = line.strip_prefix(b"data:") {
                if !data.is_empty() {
                    data.push(b'\n');
                }
                data.extend_from_slice(rest.strip_prefix(b" ").unwrap_or(rest));
            }
        }
        if !data.is_empty() {
            self.frame(out, &data);
        }
    }
}
