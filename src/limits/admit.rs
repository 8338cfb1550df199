//! Admission and settlement: a request admitted by every counter that
//! applies to it (or refused by the first that would go over), its
//! reservation settled to what it used when it ends, refunded when it was
//! refused elsewhere.

use super::*;

/// What admission reserves against a request's token and spend budgets:
/// its worst case, settled to what it used when it ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reservation {
    pub input: u64,
    pub output: u64,
    pub micro_usd: u64,
}

/// What a request used, charged when it ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub micro_usd: u64,
}

fn tokens_of(kind: TokenKind, input: u64, output: u64) -> u64 {
    match kind {
        TokenKind::Total => input.saturating_add(output),
        TokenKind::Input => input,
        TokenKind::Output => output,
    }
}

/// The limit that refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// Index into the request's counters.
    pub counter: usize,
    pub used: u64,
    /// What the request asked for (1 request, or its reservation), when the message says it.
    pub requested: Option<u64>,
    pub reset_ms: u64,
}

/// What an admitted request holds in one counter until it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// Index into the request's counters.
    pub counter: usize,
    pub window_start: u64,
    pub amount: u64,
}

/// The admission decision for one request.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    pub refused: Option<Refusal>,
    pub headers: RateHeaders,
    /// Per counter: what remains in its window, once it was checked.
    pub remaining: Vec<Option<u64>>,
    /// What the request holds (reservations, its place in flight), to settle at its end.
    pub held: Vec<Held>,
}

/// How long a client refused for requests in flight is told to wait.
const IN_FLIGHT_RETRY_MS: u64 = 1000;

/// Admits a request or refuses it. Token and cost budgets get the
/// request's reservation (with `strict`, only if it fits; otherwise while
/// anything is left, so concurrent requests overshoot by at most one
/// reservation) and in-flight limits one place; then each request limit
/// counts the request in. A refusal takes back everything counted for it.
pub fn admit(
    store: &impl SharedStore,
    counters: &[Counter],
    now_ms: u64,
    reservation: Reservation,
    strict: bool,
) -> Verdict {
    let mut verdict = Verdict {
        remaining: vec![None; counters.len()],
        ..Verdict::default()
    };
    for (i, counter) in counters.iter().enumerate() {
        let budget = counter.budget;
        let (amount, cap) = match budget.metric {
            Metric::Requests => continue,
            Metric::InFlight => (1, Cap::Within(budget.limit)),
            Metric::Tokens(kind) => (
                tokens_of(kind, reservation.input, reservation.output),
                budget_cap(strict, budget.limit),
            ),
            Metric::MicroUsd => (reservation.micro_usd, budget_cap(strict, budget.limit)),
        };
        let (start, end) = budget.window.bounds(now_ms);
        let mut reset_ms = end - now_ms;
        if budget.metric == Metric::InFlight {
            reset_ms = IN_FLIGHT_RETRY_MS;
        }
        let outcome = if amount == 0 {
            // Nothing to reserve (an unpriced model): refused once spent.
            match store::used(store, &counter.id, start) {
                used if used >= budget.limit => Added::OverLimit(used),
                used => Added::Counted(used),
            }
        } else {
            store::add(store, &counter.id, start, amount, cap)
        };
        let remaining = match outcome {
            Added::Counted(used) => {
                if amount > 0 {
                    verdict.held.push(Held {
                        counter: i,
                        window_start: start,
                        amount,
                    });
                }
                Some(budget.limit.saturating_sub(used))
            }
            Added::OverLimit(used) => {
                let requested = match budget.metric {
                    Metric::InFlight => Some(1),
                    _ => strict.then_some(amount).filter(|&n| n > 0),
                };
                verdict.refused = Some(Refusal {
                    counter: i,
                    used,
                    requested,
                    reset_ms,
                });
                Some(budget.limit.saturating_sub(used))
            }
            // Not counted: the store failed or stayed contended. The request
            // is let through rather than refused for the gateway's own trouble.
            Added::Unavailable => None,
        };
        set(&mut verdict.remaining, i, remaining);
        if verdict.refused.is_some() {
            release(store, counters, &mut verdict);
            budget_headers(counters, now_ms, &mut verdict);
            return verdict;
        }
    }
    for (i, counter) in counters.iter().enumerate() {
        let budget = counter.budget;
        if budget.metric != Metric::Requests {
            continue;
        }
        let (start, end) = budget.window.bounds(now_ms);
        let reset_ms = end - now_ms;
        match store::add(store, &counter.id, start, 1, Cap::Within(budget.limit)) {
            Added::Counted(used) => {
                let remaining = budget.limit.saturating_sub(used);
                set(&mut verdict.remaining, i, Some(remaining));
                let snapshot = Snapshot {
                    limit: budget.limit,
                    remaining,
                    reset_ms,
                };
                verdict.headers.requests = RateHeaders::tighter(verdict.headers.requests, snapshot);
                verdict.held.push(Held {
                    counter: i,
                    window_start: start,
                    amount: 1,
                });
            }
            Added::OverLimit(used) => {
                set(&mut verdict.remaining, i, Some(0));
                let snapshot = Snapshot {
                    limit: budget.limit,
                    remaining: 0,
                    reset_ms,
                };
                verdict.headers.requests = RateHeaders::tighter(verdict.headers.requests, snapshot);
                verdict.refused = Some(Refusal {
                    counter: i,
                    used,
                    requested: Some(1),
                    reset_ms,
                });
                release(store, counters, &mut verdict);
                budget_headers(counters, now_ms, &mut verdict);
                return verdict;
            }
            // Not counted: the store failed or stayed contended. The request
            // is let through rather than refused for the gateway's own trouble.
            Added::Unavailable => {}
        }
    }
    budget_headers(counters, now_ms, &mut verdict);
    // Request counts are not settled: they stay counted.
    verdict.held.retain(|h| {
        counters
            .get(h.counter)
            .is_some_and(|c| c.budget.metric != Metric::Requests)
    });
    verdict
}

/// The token and spend headers: the tightest of each, as admission left them.
fn budget_headers(counters: &[Counter], now_ms: u64, verdict: &mut Verdict) {
    for (counter, remaining) in counters.iter().zip(&verdict.remaining) {
        let Some(remaining) = *remaining else {
            continue;
        };
        let budget = counter.budget;
        let snapshot = Snapshot {
            limit: budget.limit,
            remaining,
            reset_ms: budget.window.bounds(now_ms).1 - now_ms,
        };
        let slot = match budget.metric {
            Metric::Tokens(_) => &mut verdict.headers.tokens,
            Metric::MicroUsd => &mut verdict.headers.usd,
            Metric::Requests | Metric::InFlight => continue,
        };
        *slot = RateHeaders::tighter(*slot, snapshot);
    }
}

fn budget_cap(strict: bool, limit: u64) -> Cap {
    if strict {
        Cap::Within(limit)
    } else {
        Cap::WhileLeft(limit)
    }
}

/// Takes back what a refused request held (its reservations and counts).
fn release(store: &impl SharedStore, counters: &[Counter], verdict: &mut Verdict) {
    for held in std::mem::take(&mut verdict.held) {
        let Some(c) = counters.get(held.counter) else {
            continue;
        };
        store::undo(store, &c.id, held.window_start, held.amount);
        if let Some(r) = verdict.remaining.get_mut(held.counter) {
            *r = r.map(|n| n.saturating_add(held.amount).min(c.budget.limit));
        }
    }
}

fn set(remaining: &mut [Option<u64>], i: usize, value: Option<u64>) {
    if let Some(slot) = remaining.get_mut(i) {
        *slot = value;
    }
}

/// Settles a request that ended (answered, failed, cancelled or left):
/// each reservation is replaced by what was used, in the windows current
/// now, and its place in flight released; a budget it reserved nothing in
/// is charged. Returns (counter index, remaining) for the counters that moved.
pub fn settle(
    store: &impl SharedStore,
    counters: &[Counter],
    held: &[Held],
    now_ms: u64,
    usage: Usage,
) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    for (i, counter) in counters.iter().enumerate() {
        let budget = counter.budget;
        let held = held.iter().find(|h| h.counter == i);
        let amount = match budget.metric {
            Metric::Requests => continue,
            Metric::InFlight => {
                if let Some(h) = held {
                    store::undo(store, &counter.id, h.window_start, h.amount);
                }
                continue;
            }
            Metric::Tokens(kind) => tokens_of(kind, usage.input, usage.output),
            Metric::MicroUsd => usage.micro_usd,
        };
        let (start, _) = budget.window.bounds(now_ms);
        let added = match held {
            Some(h) => store::settle(store, &counter.id, h.window_start, h.amount, start, amount),
            None if amount > 0 => store::add(store, &counter.id, start, amount, Cap::None),
            None => continue,
        };
        if let Added::Counted(used) = added {
            out.push((i, budget.limit.saturating_sub(used)));
        }
    }
    out
}

/// Takes back the request that [`admit`] counted at `admitted_ms`, from
/// its request counters: another limit (the global rate limit service)
/// refused it after all.
pub fn refund(store: &impl SharedStore, counters: &[Counter], admitted_ms: u64) {
    for counter in counters {
        if counter.budget.metric == Metric::Requests {
            let (start, _) = counter.budget.window.bounds(admitted_ms);
            store::undo(store, &counter.id, start, 1);
        }
    }
}

/// The 429 for a refusal: OpenAI's wording and `type`, the limit named
/// (never another key: a key's limits are its own), `retry-after` from the window.
pub fn refusal_error(counter: &Counter, refusal: &Refusal, group: &str) -> GatewayError {
    let budget = counter.budget;
    let amount = |n: u64| match budget.metric {
        Metric::MicroUsd => format!("{:.2}", n as f64 / 1e6),
        _ => n.to_string(),
    };
    let requested = refusal
        .requested
        .map(|n| format!(", Requested {}", amount(n)))
        .unwrap_or_default();
    let wait = headers::go_duration(refusal.reset_ms);
    let per = match budget.metric {
        Metric::InFlight => String::new(),
        _ => format!(" per {}", budget.window.name()),
    };
    let message = format!(
        "Rate limit reached for {}{per} ({}): Limit {}, Used {}{requested}. Please try again in {wait}.",
        budget.metric.describe(),
        counter.scope.describe(group),
        amount(budget.limit),
        amount(refusal.used),
    );
    GatewayError {
        retry_after: Some(headers::retry_after_seconds(refusal.reset_ms)),
        error_type: budget.metric.error_type(),
        ..GatewayError::new(ErrorCode::RateLimited, message)
    }
}
