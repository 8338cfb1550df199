use super::*;
use crate::shared_state::cas::tests::MemoryStore;

const KEYS: &[&str] = &["search-team", "ads-team"];
const GROUPS: &[&str] = &["chat", "cheap"];
// 2026-02-14T13:45:30.250Z
const NOW: u64 = 1_771_076_730_250;

fn parse_rules(json: &str) -> Result<Vec<RateLimit>, String> {
    let mut rules: Vec<RateLimit> = serde_json::from_str(json).map_err(|e| e.to_string())?;
    validate(&mut rules, Some(KEYS), GROUPS)?;
    Ok(rules)
}

fn error_of(json: &str) -> String {
    parse_rules(json).err().unwrap_or_default()
}

#[test]
fn the_issues_example_is_three_limits_on_two_scopes() {
    let rules = parse_rules(
        r#"[{"key": "search-team", "group": "chat", "requests_per_minute": 600, "tokens_per_hour": 2000000},
            {"key": "search-team", "usd_per_day": 50}]"#,
    )
    .unwrap();
    let on_chat = counters(&rules, Some("search-team"), "chat");
    let fields: Vec<_> = on_chat
        .iter()
        .map(|c| (c.budget.field, c.budget.limit, c.scope))
        .collect();
    assert_eq!(
        fields,
        [
            ("requests_per_minute", 600, Scope::KeyGroup),
            ("tokens_per_hour", 2_000_000, Scope::KeyGroup),
            ("usd_per_day", 50_000_000, Scope::Key),
        ]
    );
    // Another group: only the key's budget; another key: nothing.
    assert_eq!(counters(&rules, Some("search-team"), "cheap").len(), 1);
    assert!(counters(&rules, Some("ads-team"), "chat").is_empty());
    assert_eq!(
        String::from_utf8(on_chat[0].id.clone()).unwrap(),
        "llm.limit|requests|minute|k11:search-team|g4:chat"
    );
}

#[test]
fn wildcards_give_each_key_and_group_its_own_counter() {
    let rules = parse_rules(r#"[{"key": "*", "group": "*", "requests_per_second": 5}, {"group": "chat", "requests_per_hour": 9}]"#)
        .unwrap();
    let a = counters(&rules, Some("search-team"), "chat");
    let b = counters(&rules, Some("ads-team"), "chat");
    assert_ne!(a[0].id, b[0].id);
    // The group-wide limit is one counter for every key.
    assert_eq!(a[1].id, b[1].id);
    assert_eq!(a[1].scope, Scope::Group);
    // Every counter the configuration can use, each once.
    assert_eq!(every_counter(&rules, KEYS, GROUPS).len(), 2 * 2 + 1);
    // A wildcard and a name never share a counter.
    let named = parse_rules(r#"[{"key": "*", "requests_per_second": 5}, {"key": "ads-team", "requests_per_second": 50}]"#)
        .unwrap();
    let both = counters(&named, Some("ads-team"), "chat");
    assert_eq!(both.len(), 2);
    assert_ne!(both[0].id, both[1].id);
}

#[test]
fn a_counter_id_does_not_depend_on_the_limit_value() {
    let before =
        parse_rules(r#"[{"key": "ads-team", "tokens_per_minute": 100, "tokens": "output"}]"#)
            .unwrap();
    let after = parse_rules(r#"[{"group": "chat", "requests_per_hour": 1}, {"key": "ads-team", "tokens_per_minute": 900, "tokens": "output"}]"#)
        .unwrap();
    let id = |r: &[RateLimit]| {
        counters(r, Some("ads-team"), "chat")
            .last()
            .map(|c| c.id.clone())
    };
    assert_eq!(id(&before), id(&after));
}

#[test]
fn invalid_limits_name_the_field() {
    for (json, field) in [
        (
            r#"[{"key": "nobody", "requests_per_minute": 1}]"#,
            "limits.rate[0].key: no gateway key named 'nobody'",
        ),
        (
            r#"[{"group": "nope", "requests_per_minute": 1}]"#,
            "limits.rate[0].group: no model group named 'nope'",
        ),
        (
            r#"[{"key": "*", "requests_per_minute": 0}]"#,
            "limits.rate[0].requests_per_minute: must be at least 1",
        ),
        (r#"[{"key": "*"}]"#, "limits.rate[0]: no limit"),
        (
            r#"[{"key": "*", "usd_per_day": -1}]"#,
            "limits.rate[0].usd_per_day: must be between",
        ),
        (
            r#"[{"key": "*", "requests_per_hour": 1, "tokens": "input"}]"#,
            "limits.rate[0].tokens: only token limits",
        ),
        (
            r#"[{"key": "*", "requests_per_hour": 1}, {"key": "*", "requests_per_hour": 2}]"#,
            "limits.rate[1].requests_per_hour: limits.rate[0] already limits",
        ),
    ] {
        let err = error_of(json);
        assert!(err.starts_with(field), "{json}: {err}");
    }
    assert!(error_of(r#"[{"key": "*", "tokens": "some"}]"#).contains("unknown variant"));
    assert!(error_of(r#"[{"key": "*", "requests_per_day": 1}]"#).contains("unknown field"));
    let mut keyed: Vec<RateLimit> =
        serde_json::from_str(r#"[{"key": "*", "requests_per_minute": 1}]"#).unwrap();
    let err = validate(&mut keyed, None, GROUPS).unwrap_err();
    assert_eq!(
        err,
        "limits.rate[0].key: auth is off, so no request has a key"
    );
}

#[test]
fn the_counter_space_is_bounded() {
    let keys: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let groups: Vec<String> = (0..26).map(|i| format!("g{i}")).collect();
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    let mut wide: Vec<RateLimit> = serde_json::from_str(
        r#"[{"key": "*", "group": "*", "requests_per_minute": 1, "tokens_per_hour": 5}]"#,
    )
    .unwrap();
    let err = validate(&mut wide, Some(&keys), &groups).unwrap_err();
    assert!(err.starts_with("limits.rate: 10400 counters"), "{err}");
    wide.truncate(0);
    assert!(validate(&mut wide, Some(&keys), &groups).is_ok());
}

#[test]
fn requests_are_counted_up_to_the_limit_then_refused_until_the_window_ends() {
    let rules = parse_rules(r#"[{"key": "*", "requests_per_minute": 2}]"#).unwrap();
    let c = counters(&rules, Some("ads-team"), "chat");
    let store = MemoryStore::default();
    let first = admit(&store, &c, NOW, Reservation::default(), false);
    assert_eq!(first.refused, None);
    let reset_ms = 60_000 - 30_250;
    assert_eq!(
        first.headers.requests,
        Some(Snapshot {
            limit: 2,
            remaining: 1,
            reset_ms
        })
    );
    assert_eq!(first.headers.tokens, None);
    assert_eq!(
        admit(&store, &c, NOW + 1, Reservation::default(), false)
            .headers
            .requests
            .map(|s| s.remaining),
        Some(0)
    );
    let third = admit(&store, &c, NOW + 2, Reservation::default(), false);
    let refusal = third.refused.unwrap();
    assert_eq!(
        (refusal.counter, refusal.used, refusal.reset_ms),
        (0, 2, reset_ms - 2)
    );
    // The next minute admits again.
    assert_eq!(
        admit(&store, &c, NOW + reset_ms, Reservation::default(), false).refused,
        None
    );
}

#[test]
fn a_refusal_by_one_limit_takes_back_the_count_of_the_others() {
    let rules = parse_rules(
        r#"[{"key": "*", "requests_per_hour": 10}, {"group": "chat", "requests_per_second": 1}]"#,
    )
    .unwrap();
    let c = counters(&rules, Some("ads-team"), "chat");
    let store = MemoryStore::default();
    assert_eq!(
        admit(&store, &c, NOW, Reservation::default(), false).refused,
        None
    );
    let second = admit(&store, &c, NOW + 1, Reservation::default(), false);
    assert_eq!(second.refused.map(|r| r.counter), Some(1));
    // The hourly limit counted the request, then took it back.
    assert_eq!(store::used(&store, &c[0].id, Window::Hour.bounds(NOW).0), 1);
    assert_eq!(second.remaining, [Some(9), Some(0)]);
}

fn tokens(input: u64, output: u64) -> Reservation {
    Reservation {
        input,
        output,
        micro_usd: 0,
    }
}

#[test]
fn token_budgets_reserve_at_admission_and_settle_at_the_end() {
    let rules = parse_rules(r#"[{"key": "ads-team", "tokens_per_hour": 100}, {"key": "ads-team", "tokens_per_minute": 1000, "tokens": "input"}]"#)
        .unwrap();
    let c = counters(&rules, Some("ads-team"), "chat");
    let store = MemoryStore::default();
    let hour = Window::Hour.bounds(NOW).0;
    let admitted = admit(&store, &c, NOW, tokens(30, 40), false);
    assert_eq!(admitted.refused, None);
    // The reservation shows in what remains.
    assert_eq!(
        admitted.headers.tokens.map(|s| (s.limit, s.remaining)),
        Some((100, 30))
    );
    assert_eq!(store::used(&store, &c[0].id, hour), 70);
    let used = Usage {
        input: 30,
        output: 10,
        micro_usd: 7,
    };
    // Settled to what was used: 40 of the 70 reserved, 30 of the 30 input.
    assert_eq!(
        settle(&store, &c, &admitted.held, NOW, used),
        [(0, 60), (1, 970)]
    );
    // A reservation larger than what is left takes the last of it, once.
    let big = admit(&store, &c, NOW, tokens(50, 50), false);
    assert_eq!(big.refused, None);
    assert_eq!(store::used(&store, &c[0].id, hour), 140);
    let refused = admit(&store, &c, NOW, tokens(1, 1), false).refused.unwrap();
    assert_eq!(
        (refused.counter, refused.used, refused.requested),
        (0, 140, None)
    );
    // Nothing was counted for the refused request, in either counter.
    assert_eq!(
        store::used(&store, &c[1].id, Window::Minute.bounds(NOW).0),
        80
    );
    // A request that ended having used nothing gives all of it back.
    settle(&store, &c, &big.held, NOW, Usage::default());
    assert_eq!(store::used(&store, &c[0].id, hour), 40);
    // Strict (refuse_on_estimate): only a reservation that fits.
    let refused = admit(&store, &c, NOW, tokens(31, 30), true)
        .refused
        .unwrap();
    assert_eq!((refused.used, refused.requested), (40, Some(61)));
    assert_eq!(admit(&store, &c, NOW, tokens(30, 30), true).refused, None);
    assert_eq!(store::used(&store, &c[0].id, hour), 100);
}

#[test]
fn fifty_in_flight_overshoot_by_at_most_one_request() {
    let rules = parse_rules(r#"[{"key": "ads-team", "tokens_per_hour": 200}]"#).unwrap();
    let c = counters(&rules, Some("ads-team"), "chat");
    let store = MemoryStore::default();
    // 50 requests admitted at once, each reserving 10 + 16 and using 10 + 15.
    let verdicts: Vec<Verdict> = (0..50)
        .map(|_| admit(&store, &c, NOW, tokens(10, 16), false))
        .collect();
    let admitted: Vec<&Verdict> = verdicts.iter().filter(|v| v.refused.is_none()).collect();
    assert_eq!(admitted.len(), 8);
    for v in &admitted {
        let used = Usage {
            input: 10,
            output: 15,
            micro_usd: 0,
        };
        settle(&store, &c, &v.held, NOW, used);
    }
    let charged = store::used(&store, &c[0].id, Window::Hour.bounds(NOW).0);
    assert_eq!(charged, 200);
    assert!(charged <= 200 + 26);
}

#[test]
fn a_window_that_ended_forgets_the_reservation() {
    let rules = parse_rules(r#"[{"key": "ads-team", "tokens_per_minute": 100}]"#).unwrap();
    let c = counters(&rules, Some("ads-team"), "chat");
    let store = MemoryStore::default();
    let v = admit(&store, &c, NOW, tokens(50, 50), false);
    let next = NOW + 60_000;
    let used = Usage {
        input: 5,
        output: 5,
        micro_usd: 0,
    };
    settle(&store, &c, &v.held, next, used);
    assert_eq!(
        store::used(&store, &c[0].id, Window::Minute.bounds(next).0),
        10
    );
}

#[test]
fn in_flight_is_released_however_a_request_ends() {
    let rules = parse_rules(r#"[{"key": "*", "max_in_flight": 2}]"#).unwrap();
    let c = counters(&rules, Some("ads-team"), "chat");
    let store = MemoryStore::default();
    let one = admit(&store, &c, NOW, Reservation::default(), false);
    let two = admit(&store, &c, NOW, Reservation::default(), false);
    let three = admit(&store, &c, NOW, Reservation::default(), false);
    assert_eq!((one.refused, two.refused), (None, None));
    let refusal = three.refused.unwrap();
    assert_eq!(
        (refusal.used, refusal.requested, refusal.reset_ms),
        (2, Some(1), 1000)
    );
    let e = refusal_error(&c[0], &refusal, "chat");
    assert_eq!(
        e.message,
        "Rate limit reached for requests in flight (this key): Limit 2, Used 2, Requested 1. Please try again in 1s."
    );
    // The first ends (answered, failed or left: settled the same way).
    settle(&store, &c, &one.held, NOW + 5, Usage::default());
    assert_eq!(
        admit(&store, &c, NOW + 6, Reservation::default(), false).refused,
        None
    );
    assert!(admit(&store, &c, NOW + 7, Reservation::default(), false)
        .refused
        .is_some());
}

#[test]
fn a_spend_budget_reserves_and_counts_micro_usd() {
    let rules = parse_rules(r#"[{"key": "search-team", "usd_per_month": 0.5}]"#).unwrap();
    let c = counters(&rules, Some("search-team"), "cheap");
    let store = MemoryStore::default();
    let spend = |micro_usd| Reservation {
        micro_usd,
        ..Reservation::default()
    };
    let v = admit(&store, &c, NOW, spend(600_000), false);
    assert_eq!(v.refused, None);
    // While it is in flight, nothing is left.
    assert!(admit(&store, &c, NOW, spend(1), false).refused.is_some());
    let used = Usage {
        input: 9,
        output: 9,
        micro_usd: 499_999,
    };
    assert_eq!(settle(&store, &c, &v.held, NOW, used), [(0, 1)]);
    // An unpriced request reserves nothing: admitted while anything is left.
    assert_eq!(admit(&store, &c, NOW, spend(0), false).refused, None);
    settle(
        &store,
        &c,
        &[],
        NOW,
        Usage {
            micro_usd: 1,
            ..Usage::default()
        },
    );
    let refusal = admit(&store, &c, NOW, spend(0), false).refused.unwrap();
    let e = refusal_error(&c[0], &refusal, "cheap");
    assert_eq!(e.code, ErrorCode::RateLimited);
    assert_eq!(
        e.error_type,
        Some(crate::error::ErrorType::InsufficientQuota)
    );
    assert!(e.message.starts_with("Rate limit reached for USD per month (this key): Limit 0.50, Used 0.50. Please try again in "), "{}", e.message);
    // Until March 1st.
    assert_eq!(
        e.retry_after,
        Some((1_772_323_200_000 - NOW).div_ceil(1000))
    );
    // Nothing held and nothing used: no host call.
    let calls = store.calls.get();
    assert!(settle(&store, &c, &[], NOW, Usage::default()).is_empty());
    assert_eq!(store.calls.get(), calls);
}

#[test]
fn the_error_names_the_limit_and_the_wait_but_no_key() {
    let rules = parse_rules(r#"[{"key": "search-team", "group": "chat", "requests_per_second": 1}, {"group": "chat", "tokens_per_minute": 10}]"#)
        .unwrap();
    let c = counters(&rules, Some("search-team"), "chat");
    let refusal = Refusal {
        counter: 0,
        used: 1,
        requested: Some(1),
        reset_ms: 250,
    };
    let e = refusal_error(&c[0], &refusal, "chat");
    assert_eq!(
        e.message,
        "Rate limit reached for requests per second (this key on model group chat): Limit 1, Used 1, Requested 1. Please try again in 250ms."
    );
    assert_eq!(
        (e.status(), e.retry_after, e.error_type),
        (429, Some(1), None)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&crate::wire::openai_chat::render_error(&e, Some("r1"))).unwrap();
    assert_eq!(json["error"]["type"], "requests");
    assert_eq!(json["error"]["code"], "RATE_LIMITED");
    let refusal = Refusal {
        counter: 1,
        used: 12,
        requested: None,
        reset_ms: 6000,
    };
    let e = refusal_error(&c[1], &refusal, "chat");
    assert_eq!(
        e.message,
        "Rate limit reached for tokens per minute (model group chat, all keys together): Limit 10, Used 12. Please try again in 6s."
    );
    assert!(!e.message.contains("search-team"));
    assert_eq!(crate::error::retry_delay_in(&e.message), Some(6));
}

#[test]
fn host_calls_per_request_are_few() {
    // The issue's example: 1 request limit, 1 token limit, 1 budget.
    let rules = parse_rules(
        r#"[{"key": "search-team", "group": "chat", "requests_per_minute": 600, "tokens_per_hour": 2000000},
            {"key": "search-team", "usd_per_day": 50}]"#,
    )
    .unwrap();
    let c = counters(&rules, Some("search-team"), "chat");
    let store = MemoryStore::default();
    for id in every_counter(&rules, KEYS, GROUPS) {
        store::ensure(&store, &id);
    }
    store.calls.set(0);
    let v = admit(&store, &c, NOW, tokens(10, 10), false);
    // A read and a write each: tokens reserved, USD read (unpriced: nothing
    // to reserve), requests counted.
    assert_eq!(store.calls.get(), 5);
    store.calls.set(0);
    settle(
        &store,
        &c,
        &v.held,
        NOW,
        Usage {
            input: 1,
            output: 1,
            micro_usd: 1,
        },
    );
    assert_eq!(store.calls.get(), 4);
}

#[test]
fn periods_of_any_length_and_alerts() {
    let rules = parse_rules(
        r#"[{"key": "ads-team", "usd_per": {"amount": 50, "period": "7d"}, "tokens_per": {"amount": 1000, "period": "12h"}, "requests_per": {"amount": 5, "period": "90s"}, "alert_at": 0.8}]"#,
    )
    .unwrap();
    let budgets = &rules[0].budgets;
    let fields: Vec<_> = budgets
        .iter()
        .map(|b| (b.field, b.window.name(), b.limit, b.alert_at))
        .collect();
    assert_eq!(
        fields,
        [
            ("requests_per", "90s".into(), 5, None),
            ("tokens_per", "12h".into(), 1000, Some(800)),
            ("usd_per", "7d".into(), 50_000_000, Some(40_000_000)),
        ]
    );
    let c = counters(&rules, Some("ads-team"), "chat");
    let store = MemoryStore::default();
    let v = admit(&store, &c, NOW, tokens(10, 10), false);
    assert_eq!(v.refused, None);
    let e = refusal_error(
        &c[2],
        &Refusal {
            counter: 2,
            used: 50_000_000,
            requested: None,
            reset_ms: 1000,
        },
        "chat",
    );
    assert!(
        e.message
            .starts_with("Rate limit reached for USD per 7d (this key)"),
        "{}",
        e.message
    );
    // A period that is a fixed window is that window (one counter, not two).
    assert!(error_of(r#"[{"key": "ads-team", "tokens_per": {"amount": 5, "period": "1h"}, "tokens_per_hour": 9}]"#)
        .contains("already limits"));
    for (json, error) in [
        (
            r#"[{"key": "ads-team", "usd_per": {"amount": 5, "period": "1y"}}]"#,
            "limits.rate[0].usd_per.period: '1y' is not a period",
        ),
        (
            r#"[{"key": "ads-team", "tokens_per": {"amount": 0.5, "period": "7d"}}]"#,
            "limits.rate[0].tokens_per.amount: a whole number",
        ),
        (
            r#"[{"key": "ads-team", "usd_per": {"amount": 0, "period": "7d"}}]"#,
            "limits.rate[0].usd_per: must be between",
        ),
        (
            r#"[{"key": "ads-team", "usd_per_day": 5, "alert_at": 1.5}]"#,
            "limits.rate[0].alert_at: a share",
        ),
        (
            r#"[{"key": "ads-team", "requests_per_second": 5, "alert_at": 0.5}]"#,
            "limits.rate[0].alert_at: only token and spend",
        ),
    ] {
        assert!(
            error_of(json).starts_with(error),
            "{json}: {}",
            error_of(json)
        );
    }
}
