//! One recorded request: what the recent-requests ring holds, the JSON the
//! view serves, and what backend health is computed from. Written by the
//! edge role when a request ends, from the facts its access-log line has,
//! with every attempt's own.

use serde::{Deserialize, Serialize};

use crate::config::diagnostics::MAX_ENTRY_BYTES;

/// A request as the view shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Trace {
    /// Its place in the ring's order (claimed when it was recorded).
    pub seq: u64,
    /// When the request arrived, Unix milliseconds.
    pub at_ms: u64,
    pub request_id: String,
    /// The client's API (`openai_chat`, `anthropic_messages`, ...).
    pub surface: String,
    /// `chat` for generations, `embeddings`, `count_tokens`, `stored_response`.
    pub operation: String,
    pub group: String,
    /// The gateway key's name ("" when auth is off or it had none).
    pub key: String,
    /// The model the client asked for.
    pub model: String,
    /// The Envoy cluster the gateway routed it to (an aggregate for failover).
    pub cluster: String,
    pub stream: bool,
    /// The status the client got, and the gateway's error code.
    pub status: u16,
    pub code: Option<String>,
    pub duration_ms: u64,
    pub ttft_ms: Option<u64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    pub usage_estimated: bool,
    pub cost_usd: Option<f64>,
    /// Envoy's response flags (`UH`, `UO`, `URX`, `UF`, `UT`...), read when
    /// the request failed or was retried.
    pub envoy_flags: Vec<String>,
    /// The limit that refused it (`key.requests_per_minute`, `global.<name>`).
    pub rate_limit: Option<String>,
    pub client_disconnected: bool,
    /// The response cache's verdict (`hit`, `semantic-hit`, `miss`,
    /// `bypass`); none for a group without a cache.
    pub cache: Option<String>,
    /// What context fitting did (`trimmed=4; compressed=1`): none until the
    /// gateway fits contexts.
    pub fitting: Option<String>,
    pub attempts: Vec<AttemptTrace>,
    /// Attempts left out to keep the entry bounded.
    #[serde(skip_serializing_if = "is_zero")]
    pub attempts_dropped: u64,
    /// The first bytes of the prompt and the answer, with `capture_content`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// One attempt of a request, as Envoy made it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AttemptTrace {
    /// 1 for the first.
    pub n: u64,
    pub provider: String,
    /// The vendor model it asked for.
    pub model: String,
    /// The vendor's status (0: none came).
    pub status: u16,
    /// Its status, or `reset` when Envoy ended it before its answer did.
    pub outcome: String,
    pub code: Option<String>,
    /// When it started, in milliseconds after the request arrived.
    pub start_ms: Option<u64>,
    /// From its start to its answer's end (or its reset).
    pub latency_ms: Option<u64>,
    pub ttft_ms: Option<u64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// Why Envoy made this attempt, from the second on: the retry policy's
    /// condition the previous attempt met (`5xx`, `reset`,
    /// `retriable-headers` for a 429 whose `retry-after` was short).
    pub retry_on: Option<String>,
    /// What context fitting did to its request (`x-llm-context`'s value).
    pub context: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl AttemptTrace {
    /// The attempt failed for a reason of its backend's (health counts it):
    /// no answer, a 5xx, a rate limit, a refused credential or a timeout.
    /// Any other 4xx is the request's own fault.
    pub fn failed(&self) -> bool {
        self.outcome == "reset" || matches!(self.status, 0 | 401 | 403 | 408 | 429 | 500..)
    }
}

/// The retry condition of Envoy's retry policy that the attempt after
/// `previous` answers.
pub fn retry_on(previous: &AttemptTrace) -> &'static str {
    if previous.outcome == "reset" || previous.status == 0 {
        return "reset";
    }
    match previous.status {
        500..=599 => "5xx",
        429 => "retriable-headers",
        _ => "retriable-status",
    }
}

/// Envoy's response flags, by bit (`StreamInfo::CoreResponseFlag`, the
/// order `response.flags` sets them in), as its access log names them.
const FLAGS: [&str; 30] = [
    "LH", "UH", "UT", "LR", "UR", "UF", "UC", "UO", "NR", "DI", "FI", "RL", "UAEX", "RLSE", "DC",
    "URX", "SI", "IH", "DPE", "UMSDR", "RFCF", "NFCF", "DT", "UPE", "NC", "OM", "DF", "DO", "DR",
    "UDO",
];

/// The names of the flags set in `response.flags`.
pub fn flag_names(bits: u64) -> Vec<String> {
    FLAGS
        .iter()
        .enumerate()
        .filter(|(bit, _)| bits & (1u64 << bit) != 0)
        .map(|(_, name)| (*name).to_owned())
        .collect()
}

impl Trace {
    /// The entry's bytes in a ring slot: its JSON, at most
    /// `MAX_ENTRY_BYTES` (captured content goes first, then the attempts
    /// between the first and the last two).
    pub fn encode(&mut self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(self).unwrap_or_default();
        if bytes.len() > MAX_ENTRY_BYTES {
            self.prompt = None;
            self.answer = None;
            bytes = serde_json::to_vec(self).unwrap_or_default();
        }
        while bytes.len() > MAX_ENTRY_BYTES && self.attempts.len() > 3 {
            self.attempts.remove(1);
            self.attempts_dropped += 1;
            bytes = serde_json::to_vec(self).unwrap_or_default();
        }
        if bytes.len() > MAX_ENTRY_BYTES {
            return Vec::new();
        }
        bytes
    }

    /// The trace a ring slot holds, or none for a slot never written or
    /// holding something else.
    pub fn decode(bytes: &[u8]) -> Option<Trace> {
        serde_json::from_slice(bytes).ok()
    }
}

/// The first `max` bytes of `content`, cut at a character boundary and as text.
pub fn captured(content: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(content.get(..max).unwrap_or(content));
    // A multi-byte character cut in two reads as U+FFFD at the end: dropped.
    text.trim_end_matches('\u{fffd}').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(status: u16, outcome: &str) -> AttemptTrace {
        AttemptTrace {
            status,
            outcome: outcome.into(),
            ..AttemptTrace::default()
        }
    }

    #[test]
    fn a_backends_failures_are_its_own_not_the_requests() {
        for (status, outcome, failed) in [
            (200, "200", false),
            (400, "400", false),
            (404, "404", false),
            (401, "401", true),
            (429, "429", true),
            (503, "503", true),
            (0, "reset", true),
            (200, "reset", true),
        ] {
            assert_eq!(
                attempt(status, outcome).failed(),
                failed,
                "{status} {outcome}"
            );
        }
    }

    #[test]
    fn the_retry_condition_is_the_previous_attempts_outcome() {
        assert_eq!(retry_on(&attempt(503, "503")), "5xx");
        assert_eq!(retry_on(&attempt(0, "reset")), "reset");
        assert_eq!(retry_on(&attempt(200, "reset")), "reset");
        assert_eq!(retry_on(&attempt(429, "429")), "retriable-headers");
        assert_eq!(retry_on(&attempt(409, "409")), "retriable-status");
    }

    #[test]
    fn flags_are_named_as_envoys_access_log_names_them() {
        assert_eq!(flag_names(0), Vec::<String>::new());
        // UpstreamOverflow is bit 7 (the edge's UPSTREAM_OVERFLOW, 0x80).
        assert_eq!(flag_names(0x80), ["UO"]);
        assert_eq!(flag_names(0b10 | (1 << 15)), ["UH", "URX"]);
        assert_eq!(flag_names(1 << 40), Vec::<String>::new());
    }

    #[test]
    fn entries_are_bounded_content_first_then_middle_attempts() {
        let mut trace = Trace {
            prompt: Some("p".repeat(MAX_ENTRY_BYTES)),
            attempts: vec![attempt(503, "503"); 3],
            ..Trace::default()
        };
        let bytes = trace.encode();
        assert!(bytes.len() <= MAX_ENTRY_BYTES);
        let back = Trace::decode(&bytes).unwrap();
        assert_eq!((back.prompt, back.attempts.len()), (None, 3));
        let mut trace = Trace {
            attempts: (0..100)
                .map(|n| AttemptTrace {
                    n,
                    provider: "p".repeat(500),
                    ..attempt(503, "503")
                })
                .collect(),
            ..Trace::default()
        };
        let back = Trace::decode(&trace.encode()).unwrap();
        assert!(back.attempts_dropped > 0);
        assert_eq!(back.attempts.first().map(|a| a.n), Some(0));
        assert_eq!(back.attempts.last().map(|a| a.n), Some(99));
    }

    #[test]
    fn content_is_cut_at_a_character() {
        assert_eq!(captured("héllo".as_bytes(), 2), "h");
        assert_eq!(captured(b"hello", 10), "hello");
        assert_eq!(captured(b"hello", 3), "hel");
    }
}
