//! A refusal of the global rate limit service: Envoy's rate limit filter
//! answers 429 itself (details `request_rate_limited`), with its
//! `x-ratelimit-limit` / `-remaining` / `-reset` (envoy/ratelimit.yaml's
//! `enable_x_ratelimit_headers`) and the service's names for the limit
//! that fired (`x-llm-ratelimit-name`) and what it counts
//! (`x-llm-ratelimit-budget`, from llm-ratelimit). The edge role answers
//! it as it answers a local limit's refusal: the client's error envelope
//! naming the limit, OpenAI's headers, `retry-after`, the metric and the
//! access log's `rate_limit`.

use crate::error::{ErrorCode, ErrorType, GatewayError};
use crate::headers::Headers;
use crate::limits::headers::{go_duration, RateHeaders, Snapshot};
use crate::session::host::{ignore, Host, Map};

/// What a global limit counts (the descriptor's `llm_budget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Budget {
    Requests,
    Tokens,
    Spend,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalRefusal {
    /// `global.<the service's name for the limit>` (the access log's `rate_limit`).
    pub log_name: String,
    budget: Budget,
    limit: Option<u64>,
    window_secs: Option<u64>,
    remaining: Option<u64>,
    reset_secs: Option<u64>,
}

/// Longest limit name kept (a header the service sets, bounded anyway).
const MAX_NAME: usize = 128;

impl GlobalRefusal {
    /// The refusal this response is, if it is one.
    pub fn read(host: &impl Host) -> Option<Self> {
        let details = host.property(&["response", "code_details"]).ok()??;
        if details != b"request_rate_limited" {
            return None;
        }
        Some(Self::of(|name| {
            host.header(Map::Response, name)
                .and_then(|v| String::from_utf8(v).ok())
        }))
    }

    /// The refusal a self-call's answer carries (its own edge read it, and
    /// passed Envoy's headers on).
    pub fn of_answer(headers: &Headers) -> Self {
        Self::of(|name| headers.text(name).ok().flatten().map(str::to_owned))
    }

    /// The refusal its response headers (`text`) describe.
    fn of(text: impl Fn(&str) -> Option<String>) -> Self {
        let number = |s: &str| s.trim().parse::<u64>().ok();
        // Envoy's draft-03 `x-ratelimit-limit`: `25, 25;w=3600` (the tightest first).
        let limit_header = text("x-ratelimit-limit").unwrap_or_default();
        let limit = limit_header.split(',').next().and_then(number);
        let window_secs = limit_header
            .split(";w=")
            .nth(1)
            .and_then(|w| number(w.split([';', ',']).next().unwrap_or_default()));
        let mut name = text("x-llm-ratelimit-name").unwrap_or_else(|| "unnamed".into());
        name.truncate(name.floor_char_boundary(MAX_NAME));
        let budget = match text("x-llm-ratelimit-budget").as_deref() {
            Some("tokens") => Budget::Tokens,
            Some("micro_usd") => Budget::Spend,
            _ => Budget::Requests,
        };
        Self {
            log_name: format!("global.{name}"),
            budget,
            limit,
            window_secs,
            remaining: text("x-ratelimit-remaining").as_deref().and_then(number),
            reset_secs: text("x-ratelimit-reset").as_deref().and_then(number),
        }
    }

    fn name(&self) -> &str {
        self.log_name.trim_start_matches("global.")
    }

    /// `retry-after`, and OpenAI's `x-ratelimit-*-requests` / `-tokens` for the limit that fired.
    pub fn set_headers(&self, host: &impl Host) {
        let reset_secs = self.reset_secs.unwrap_or(1).max(1);
        ignore(host.set_header(
            Map::Response,
            b"retry-after",
            Some(reset_secs.to_string().as_bytes()),
        ));
        let snapshot = self.limit.map(|limit| Snapshot {
            limit,
            remaining: self.remaining.unwrap_or(0),
            reset_ms: reset_secs.saturating_mul(1000),
        });
        let headers = match self.budget {
            Budget::Requests => RateHeaders {
                requests: snapshot,
                ..RateHeaders::default()
            },
            Budget::Tokens => RateHeaders {
                tokens: snapshot,
                ..RateHeaders::default()
            },
            Budget::Spend => RateHeaders::default(),
        };
        for (name, value) in headers.pairs() {
            ignore(host.set_header(Map::Response, name.as_bytes(), Some(value.as_bytes())));
        }
    }

    /// `llm_gateway.rate_limit` as a local limit's refusal counts it (scope `global`).
    pub fn count(&self, host: &impl Host, key: &str, group: &str) {
        ignore(host.count(
            "llm_gateway.rate_limit",
            &[
                ("key", key),
                ("group", group),
                ("scope", "global"),
                ("limit", self.name()),
                ("decision", "limited"),
            ],
            1,
        ));
    }

    /// The error, named as a local limit names its own.
    pub fn error(&self) -> GatewayError {
        let what = match self.budget {
            Budget::Requests => "requests",
            Budget::Tokens => "tokens",
            Budget::Spend => "spend (millionths of a USD)",
        };
        let per = match self.window_secs {
            Some(1) => " per second",
            Some(60) => " per minute",
            Some(3600) => " per hour",
            Some(86_400) => " per day",
            Some(604_800) => " per week",
            _ => "",
        };
        let limit = self
            .limit
            .map(|l| format!(": Limit {l}"))
            .unwrap_or_default();
        let wait = self
            .reset_secs
            .map(|s| {
                format!(
                    " Please try again in {}.",
                    go_duration(s.saturating_mul(1000))
                )
            })
            .unwrap_or_default();
        let message = format!(
            "Rate limit reached for {what}{per} (the gateway's global limit \"{}\"){limit}.{wait}",
            self.name()
        );
        GatewayError {
            retry_after: Some(self.reset_secs.unwrap_or(1).max(1)),
            error_type: match self.budget {
                Budget::Requests => None,
                Budget::Tokens => Some(ErrorType::Tokens),
                Budget::Spend => Some(ErrorType::InsufficientQuota),
            },
            ..GatewayError::new(ErrorCode::RateLimited, message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::fake::FakeHost;

    fn refused(headers: &[(&str, &str)]) -> FakeHost {
        let host = FakeHost::new();
        host.set_prop(&["response", "code_details"], b"request_rate_limited");
        for (name, value) in headers {
            host.set(Map::Response, name, value);
        }
        host
    }

    #[test]
    fn a_token_budget_refusal_is_named_and_gets_openais_token_headers() {
        let host = refused(&[
            ("x-ratelimit-limit", "25, 25;w=3600, 600;w=60"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "754"),
            ("x-llm-ratelimit-name", "tokens"),
            ("x-llm-ratelimit-budget", "tokens"),
        ]);
        let refusal = GlobalRefusal::read(&host).unwrap();
        assert_eq!(refusal.log_name, "global.tokens");
        refusal.set_headers(&host);
        let header = |name| host.get(Map::Response, name);
        assert_eq!(header("retry-after").as_deref(), Some("754"));
        assert_eq!(header("x-ratelimit-limit-tokens").as_deref(), Some("25"));
        assert_eq!(header("x-ratelimit-remaining-tokens").as_deref(), Some("0"));
        assert_eq!(
            header("x-ratelimit-reset-tokens").as_deref(),
            Some("12m34s")
        );
        assert_eq!(header("x-ratelimit-limit-requests"), None);
        let error = refusal.error();
        assert_eq!(
            (error.code, error.error_type),
            (ErrorCode::RateLimited, Some(ErrorType::Tokens))
        );
        assert_eq!(
            error.message,
            "Rate limit reached for tokens per hour (the gateway's global limit \"tokens\"): Limit 25. \
             Please try again in 12m34s."
        );
        refusal.count(&host, "team", "chat");
        assert!(host.take_record().iter().any(|call| call
            == "count llm_gateway.rate_limit;key=team;group=chat;scope=global;limit=tokens;decision=limited 1"));
    }

    #[test]
    fn without_the_services_names_it_is_an_unnamed_request_limit() {
        let host = refused(&[("x-ratelimit-limit", "5, 5;w=60")]);
        let refusal = GlobalRefusal::read(&host).unwrap();
        assert_eq!(refusal.log_name, "global.unnamed");
        assert_eq!(refusal.error().error_type, None);
        refusal.set_headers(&host);
        assert_eq!(
            host.get(Map::Response, "x-ratelimit-limit-requests")
                .as_deref(),
            Some("5")
        );
        assert_eq!(host.get(Map::Response, "retry-after").as_deref(), Some("1"));
    }

    #[test]
    fn any_other_429_is_not_the_services() {
        let host = FakeHost::new();
        host.set_prop(&["response", "code_details"], b"via_upstream");
        assert_eq!(GlobalRefusal::read(&host), None);
    }
}
