//! Backend health as the gateway observed it: computed when the view is
//! read, from the attempts of the recorded requests of the last
//! `health_window_s` seconds (as far as the ring still holds them), per
//! provider and the cluster requests were routed to; and Envoy's own
//! refusals and retries per cluster, from the response flags.

use std::collections::BTreeMap;

use serde::Serialize;

use super::trace::Trace;

/// Time buckets of each backend's chart.
const BUCKETS: u64 = 12;
/// Consecutive failures from which a backend is `failing`.
const FAILING_STREAK: u64 = 3;

#[derive(Debug, Serialize, PartialEq)]
pub struct Health {
    pub window_s: u64,
    /// The oldest request counted (none when none was).
    pub since_ms: Option<u64>,
    pub backends: Vec<Backend>,
    pub clusters: Vec<ClusterFlags>,
}

/// One provider behind one cluster.
#[derive(Debug, Serialize, PartialEq)]
pub struct Backend {
    pub cluster: String,
    pub provider: String,
    /// `healthy`, `degraded` (some failures), `failing` (a streak of
    /// failures, or half its attempts failed).
    pub state: &'static str,
    pub attempts: u64,
    pub failures: u64,
    pub success_rate: f64,
    pub error_rate: f64,
    pub latency_ms: Percentiles,
    /// Streamed attempts only; none when there were none.
    pub ttft_ms: Option<Percentiles>,
    /// Its latest attempts that failed, in a row.
    pub consecutive_failures: u64,
    /// Every attempt the window holds failed: the streak may be longer.
    pub streak_reaches_window: bool,
    pub last_error: Option<LastError>,
    pub last_seen_ms: u64,
    /// Oldest first, `BUCKETS` of the window.
    pub series: Vec<Point>,
}

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct LastError {
    pub at_ms: u64,
    pub request_id: String,
    pub outcome: String,
    pub code: Option<String>,
}

/// One bucket of a backend's chart.
#[derive(Debug, Serialize, PartialEq)]
pub struct Point {
    pub start_ms: u64,
    pub attempts: u64,
    pub failures: u64,
    /// The median latency of its attempts, when it had any.
    pub p50_ms: Option<u64>,
}

/// Envoy's verdicts on the requests routed to one cluster (response flags).
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct ClusterFlags {
    pub cluster: String,
    pub requests: u64,
    /// `UH`: no healthy endpoint (all ejected by outlier detection, or failing health checks).
    pub no_healthy_upstream: u64,
    /// `UO`: a circuit breaker overflowed (connections, requests or retries).
    pub overflow: u64,
    /// `URX`: the retry policy's attempts ran out.
    pub retry_limit_exceeded: u64,
    /// `UT`: the route's or an attempt's timeout.
    pub timeouts: u64,
    /// `UF`, `UR`, `UC`: connections refused, reset or closed.
    pub connection_failures: u64,
    /// Requests that took more than one attempt.
    pub retried: u64,
}

#[derive(Default)]
struct Samples {
    latencies: Vec<u64>,
    ttfts: Vec<u64>,
    /// Newest first: (request time, failed).
    outcomes: Vec<(u64, bool)>,
    last_error: Option<LastError>,
    last_seen_ms: u64,
    buckets: Vec<(u64, u64, Vec<u64>)>,
}

/// Health over `traces` (newest first) of the `window_s` seconds before `now_ms`.
pub fn compute(traces: &[Trace], now_ms: u64, window_s: u64) -> Health {
    let window_ms = window_s.saturating_mul(1000);
    let since = now_ms.saturating_sub(window_ms);
    let bucket_ms = (window_ms / BUCKETS).max(1);
    let mut backends: BTreeMap<(String, String), Samples> = BTreeMap::new();
    let mut clusters: BTreeMap<String, ClusterFlags> = BTreeMap::new();
    let mut oldest = None;
    for trace in traces.iter().filter(|t| t.at_ms >= since) {
        oldest = Some(trace.at_ms);
        if !trace.cluster.is_empty() {
            let c = clusters.entry(trace.cluster.clone()).or_default();
            c.requests += 1;
            let has = |flag: &str| trace.envoy_flags.iter().any(|f| f == flag);
            c.no_healthy_upstream += u64::from(has("UH"));
            c.overflow += u64::from(has("UO"));
            c.retry_limit_exceeded += u64::from(has("URX"));
            c.timeouts += u64::from(has("UT"));
            c.connection_failures += u64::from(has("UF") || has("UR") || has("UC"));
            c.retried += u64::from(trace.attempts.len() > 1);
        }
        // An attempt's own time, for its chart bucket and order.
        for attempt in trace.attempts.iter().rev() {
            if attempt.provider.is_empty() {
                continue;
            }
            let at = trace.at_ms + attempt.start_ms.unwrap_or(0);
            let s = backends
                .entry((trace.cluster.clone(), attempt.provider.clone()))
                .or_insert_with(|| Samples {
                    buckets: (0..BUCKETS).map(|_| (0, 0, Vec::new())).collect(),
                    ..Samples::default()
                });
            let failed = attempt.failed();
            s.outcomes.push((at, failed));
            s.last_seen_ms = s.last_seen_ms.max(at);
            if let Some(latency) = attempt.latency_ms {
                s.latencies.push(latency);
            }
            s.ttfts.extend(attempt.ttft_ms);
            if failed && s.last_error.as_ref().is_none_or(|e| e.at_ms < at) {
                s.last_error = Some(LastError {
                    at_ms: at,
                    request_id: trace.request_id.clone(),
                    outcome: attempt.outcome.clone(),
                    code: attempt.code.clone(),
                });
            }
            let bucket = (at.saturating_sub(since) / bucket_ms).min(BUCKETS - 1) as usize;
            if let Some((n, failures, latencies)) = s.buckets.get_mut(bucket) {
                *n += 1;
                *failures += u64::from(failed);
                latencies.extend(attempt.latency_ms);
            }
        }
    }
    Health {
        window_s,
        since_ms: oldest,
        backends: backends
            .into_iter()
            .map(|((cluster, provider), s)| backend(cluster, provider, s, since, bucket_ms))
            .collect(),
        clusters: clusters
            .into_iter()
            .map(|(cluster, flags)| ClusterFlags { cluster, ..flags })
            .collect(),
    }
}

fn backend(
    cluster: String,
    provider: String,
    mut s: Samples,
    since: u64,
    bucket_ms: u64,
) -> Backend {
    // Newest first (traces come so; a request's attempts were pushed last first).
    s.outcomes.sort_by_key(|o| std::cmp::Reverse(o.0));
    let attempts = s.outcomes.len() as u64;
    let failures = s.outcomes.iter().filter(|(_, f)| *f).count() as u64;
    let streak = s.outcomes.iter().take_while(|(_, f)| *f).count() as u64;
    let error_rate = if attempts == 0 {
        0.0
    } else {
        failures as f64 / attempts as f64
    };
    let state = if streak >= FAILING_STREAK || (attempts >= 4 && error_rate >= 0.5) {
        "failing"
    } else if failures > 0 {
        "degraded"
    } else {
        "healthy"
    };
    let series = s
        .buckets
        .iter_mut()
        .enumerate()
        .map(|(i, (n, failures, latencies))| Point {
            start_ms: since + i as u64 * bucket_ms,
            attempts: *n,
            failures: *failures,
            p50_ms: (!latencies.is_empty()).then(|| percentile(latencies, 50)),
        })
        .collect();
    Backend {
        cluster,
        provider,
        state,
        attempts,
        failures,
        success_rate: 1.0 - error_rate,
        error_rate,
        latency_ms: percentiles(&mut s.latencies),
        ttft_ms: (!s.ttfts.is_empty()).then(|| percentiles(&mut s.ttfts)),
        consecutive_failures: streak,
        streak_reaches_window: attempts > 0 && streak == attempts,
        last_error: s.last_error,
        last_seen_ms: s.last_seen_ms,
        series,
    }
}

fn percentiles(values: &mut [u64]) -> Percentiles {
    if values.is_empty() {
        return Percentiles::default();
    }
    Percentiles {
        p50: percentile(values, 50),
        p90: percentile(values, 90),
        p99: percentile(values, 99),
    }
}

/// The nearest-rank percentile `p` of `values` (sorted in place).
fn percentile(values: &mut [u64], p: u64) -> u64 {
    values.sort_unstable();
    let n = values.len() as u64;
    let rank = (p * n).div_ceil(100).clamp(1, n.max(1));
    values.get(rank as usize - 1).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::trace::AttemptTrace;

    const NOW: u64 = 1_000_000_000;

    fn attempt(provider: &str, status: u16, latency: u64, start: u64) -> AttemptTrace {
        AttemptTrace {
            provider: provider.into(),
            status,
            outcome: status.to_string(),
            latency_ms: Some(latency),
            start_ms: Some(start),
            ..AttemptTrace::default()
        }
    }

    fn trace(ago_s: u64, cluster: &str, attempts: Vec<AttemptTrace>, flags: &[&str]) -> Trace {
        Trace {
            at_ms: NOW - ago_s * 1000,
            request_id: format!("r{ago_s}"),
            cluster: cluster.into(),
            attempts,
            envoy_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            ..Trace::default()
        }
    }

    #[test]
    fn a_failover_shows_the_failing_vendor_and_the_one_that_answered() {
        // Newest first, as the ring reads them: three failovers, then an old one out of the window.
        let traces: Vec<Trace> = (1..=3)
            .map(|i| {
                trace(
                    i,
                    "failover",
                    vec![attempt("down", 503, 5, 0), attempt("up", 200, 40 + i, 10)],
                    &[],
                )
            })
            .chain([trace(
                400,
                "failover",
                vec![attempt("down", 200, 1, 0)],
                &[],
            )])
            .collect();
        let health = compute(&traces, NOW, 300);
        assert_eq!(health.since_ms, Some(NOW - 3000));
        let [down, up] = &health.backends[..] else {
            panic!("{health:?}")
        };
        assert_eq!((down.provider.as_str(), down.state), ("down", "failing"));
        assert_eq!(
            (down.attempts, down.failures, down.consecutive_failures),
            (3, 3, 3)
        );
        assert!(down.streak_reaches_window);
        let last = down.last_error.as_ref().unwrap();
        assert_eq!(
            (last.request_id.as_str(), last.outcome.as_str()),
            ("r1", "503")
        );
        assert_eq!((up.state, up.attempts, up.error_rate), ("healthy", 3, 0.0));
        assert_eq!(
            up.latency_ms,
            Percentiles {
                p50: 42,
                p90: 43,
                p99: 43
            }
        );
        assert_eq!(health.clusters[0].retried, 3);
        let charted: u64 = up.series.iter().map(|p| p.attempts).sum();
        assert_eq!((up.series.len() as u64, charted), (BUCKETS, 3));
    }

    #[test]
    fn a_success_ends_the_streak_and_the_state_follows_the_rate() {
        let traces = vec![
            trace(1, "c", vec![attempt("p", 503, 5, 0)], &[]),
            trace(2, "c", vec![attempt("p", 200, 5, 0)], &[]),
            trace(3, "c", vec![attempt("p", 503, 5, 0)], &[]),
            trace(4, "c", vec![attempt("p", 200, 5, 0)], &[]),
            trace(5, "c", vec![attempt("p", 200, 5, 0)], &[]),
        ];
        let b = &compute(&traces, NOW, 60).backends[0];
        assert_eq!(
            (b.consecutive_failures, b.failures, b.state),
            (1, 2, "degraded")
        );
        assert!(!b.streak_reaches_window);
        assert!((b.error_rate - 0.4).abs() < 1e-9);
    }

    #[test]
    fn envoys_flags_count_per_cluster() {
        let traces = vec![
            trace(1, "agg", vec![], &["UH"]),
            trace(2, "agg", vec![attempt("p", 503, 1, 0)], &["UO", "URX"]),
            trace(3, "agg", vec![attempt("p", 0, 1, 0)], &["UF"]),
        ];
        let c = &compute(&traces, NOW, 60).clusters[0];
        assert_eq!(
            (
                c.requests,
                c.no_healthy_upstream,
                c.overflow,
                c.retry_limit_exceeded,
                c.connection_failures
            ),
            (3, 1, 1, 1, 1)
        );
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&mut v, 50), 50);
        assert_eq!(percentile(&mut v, 99), 99);
        assert_eq!(percentile(&mut [7], 90), 7);
        assert_eq!(percentiles(&mut []), Percentiles::default());
    }
}
