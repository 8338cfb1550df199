//! OpenAI's rate-limit response headers, as api.openai.com sends them:
//! `x-ratelimit-limit-requests: 60`, `x-ratelimit-remaining-requests: 59`,
//! `x-ratelimit-reset-requests: 1s`, and the same for tokens
//! (`x-ratelimit-reset-tokens: 6m0s`: a Go duration); and, where OpenAI has
//! none, the same three for spend in USD (`x-ratelimit-limit-usd: 50`,
//! `x-ratelimit-remaining-usd: 12.5`, `x-ratelimit-reset-usd`).

/// One limit as the headers describe it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    pub limit: u64,
    pub remaining: u64,
    /// Milliseconds until the window resets.
    pub reset_ms: u64,
}

/// The tightest request limit, token limit and spend budget of a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateHeaders {
    pub requests: Option<Snapshot>,
    pub tokens: Option<Snapshot>,
    /// In millionths of a USD.
    pub usd: Option<Snapshot>,
}

impl RateHeaders {
    /// Keeps the one with less remaining (then the sooner reset).
    pub fn tighter(current: Option<Snapshot>, candidate: Snapshot) -> Option<Snapshot> {
        Some(match current {
            Some(c) if (c.remaining, c.reset_ms) <= (candidate.remaining, candidate.reset_ms) => c,
            _ => candidate,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.requests.is_none() && self.tokens.is_none() && self.usd.is_none()
    }

    /// Header names and values, requests first.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::with_capacity(6);
        for (snapshot, [limit, remaining, reset]) in [
            (
                self.requests,
                [
                    "x-ratelimit-limit-requests",
                    "x-ratelimit-remaining-requests",
                    "x-ratelimit-reset-requests",
                ],
            ),
            (
                self.tokens,
                [
                    "x-ratelimit-limit-tokens",
                    "x-ratelimit-remaining-tokens",
                    "x-ratelimit-reset-tokens",
                ],
            ),
        ] {
            if let Some(s) = snapshot {
                out.push((limit, s.limit.to_string()));
                out.push((remaining, s.remaining.to_string()));
                out.push((reset, go_duration(s.reset_ms)));
            }
        }
        if let Some(s) = self.usd {
            out.push(("x-ratelimit-limit-usd", usd(s.limit)));
            out.push(("x-ratelimit-remaining-usd", usd(s.remaining)));
            out.push(("x-ratelimit-reset-usd", go_duration(s.reset_ms)));
        }
        out
    }
}

/// Millionths of a USD as a decimal: `50`, `0.07`, `12.000001`.
pub fn usd(micro: u64) -> String {
    let (whole, fraction) = (micro / 1_000_000, micro % 1_000_000);
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = format!("{fraction:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// A duration as Go prints it (what OpenAI's reset headers hold): `350ms`,
/// `1s`, `1.5s`, `6m0s`, `1h2m3s`, to the millisecond.
pub fn go_duration(ms: u64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (hours, minutes) = (ms / 3_600_000, ms / 60_000 % 60);
    let seconds = ms / 1000 % 60;
    let millis = ms % 1000;
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&seconds.to_string());
    if millis > 0 {
        let fraction = format!("{millis:03}");
        out.push('.');
        out.push_str(fraction.trim_end_matches('0'));
    }
    out.push('s');
    out
}

/// `retry-after` in whole seconds, rounded up (waiting less is retrying too
/// early), at least 1.
pub fn retry_after_seconds(reset_ms: u64) -> u64 {
    reset_ms.div_ceil(1000).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_and_openai_do() {
        for (ms, text) in [
            (0, "0s"),
            (20, "20ms"),
            (999, "999ms"),
            (1000, "1s"),
            (1500, "1.5s"),
            (1234, "1.234s"),
            (60_000, "1m0s"),
            (360_000, "6m0s"),
            (3_723_400, "1h2m3.4s"),
            (86_400_000, "24h0m0s"),
        ] {
            assert_eq!(go_duration(ms), text, "{ms} ms");
        }
    }

    #[test]
    fn headers_carry_both_limits_and_retry_after_rounds_up() {
        let headers = RateHeaders {
            requests: Some(Snapshot {
                limit: 60,
                remaining: 59,
                reset_ms: 1000,
            }),
            tokens: Some(Snapshot {
                limit: 150_000,
                remaining: 149_984,
                reset_ms: 360_000,
            }),
            usd: None,
        };
        let expected = [
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-remaining-requests", "59"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-limit-tokens", "150000"),
            ("x-ratelimit-remaining-tokens", "149984"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ]
        .map(|(n, v)| (n, v.to_owned()));
        assert_eq!(headers.pairs(), expected);
        assert!(RateHeaders::default().pairs().is_empty());
        assert_eq!(retry_after_seconds(1), 1);
        assert_eq!(retry_after_seconds(0), 1);
        assert_eq!(retry_after_seconds(1001), 2);
        assert_eq!(retry_after_seconds(12_000), 12);
    }

    #[test]
    fn spend_is_in_usd() {
        assert_eq!(usd(50_000_000), "50");
        assert_eq!(usd(70_000), "0.07");
        assert_eq!(usd(12_000_001), "12.000001");
        assert_eq!(usd(0), "0");
        let headers = RateHeaders {
            usd: Some(Snapshot {
                limit: 50_000_000,
                remaining: 12_500_000,
                reset_ms: 3_600_000,
            }),
            ..RateHeaders::default()
        };
        assert_eq!(
            headers.pairs(),
            [
                ("x-ratelimit-limit-usd", "50"),
                ("x-ratelimit-remaining-usd", "12.5"),
                ("x-ratelimit-reset-usd", "1h0m0s"),
            ]
            .map(|(n, v)| (n, v.to_owned()))
        );
    }

    #[test]
    fn the_tighter_limit_wins() {
        let a = Snapshot {
            limit: 10,
            remaining: 5,
            reset_ms: 100,
        };
        let b = Snapshot {
            limit: 100,
            remaining: 2,
            reset_ms: 9000,
        };
        assert_eq!(RateHeaders::tighter(Some(a), b), Some(b));
        assert_eq!(RateHeaders::tighter(Some(b), a), Some(b));
        assert_eq!(RateHeaders::tighter(None, a), Some(a));
    }
}
