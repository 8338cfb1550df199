use super::*;

fn settings(json: &str) -> Settings {
    let s: Settings = serde_json::from_str(json).unwrap();
    s.validate().unwrap();
    s
}

#[test]
fn configuration_then_vendor_then_table_each_fact_apart() {
    let mut s = settings(r#"{"models": {"claude-sonnet-4-5*": {"context_window": 100000}}}"#);
    // The table alone.
    let f = facts(&Settings::default(), "p", None, "claude-sonnet-4-5", None);
    assert_eq!(
        (f.context_window, f.max_output_tokens),
        (Some(200_000), Some(64_000))
    );
    assert_eq!(f.sources.context_window, Some(Source::Table));
    assert_eq!(f.input_usd_per_mtok, Some(3.0));
    // The vendor's list over the table; the table fills what it lacks.
    let listed = Listed {
        context_window: Some(180_000),
        ..Listed::named("claude-sonnet-4-5")
    };
    let f = facts(
        &Settings::default(),
        "p",
        None,
        "claude-sonnet-4-5",
        Some(&listed),
    );
    assert_eq!(f.context_window, Some(180_000));
    assert_eq!(f.sources.context_window, Some(Source::Vendor));
    assert_eq!(
        (f.max_output_tokens, f.sources.max_output_tokens),
        (Some(64_000), Some(Source::Table))
    );
    // The configuration over both: a glob, then a candidate of that provider.
    let f = facts(&s, "p", None, "claude-sonnet-4-5-20250929", Some(&listed));
    assert_eq!(
        (f.context_window, f.sources.context_window),
        (Some(100_000), Some(Source::Configuration))
    );
    s.note_candidate(
        "p",
        "claude-sonnet-4-5-20250929",
        Configured {
            context_window: Some(8000),
            max_output_tokens: None,
        },
    );
    assert_eq!(
        facts(&s, "p", None, "claude-sonnet-4-5-20250929", None).context_window,
        Some(8000)
    );
    assert_eq!(
        facts(&s, "other", None, "claude-sonnet-4-5-20250929", None).context_window,
        Some(100_000),
        "a candidate speaks for its own provider"
    );
}

#[test]
fn a_deployment_is_known_by_the_model_it_runs() {
    let deployment = Listed {
        base: Some("gpt-4o".into()),
        ..Listed::named("my-deployment")
    };
    let f = facts(
        &Settings::default(),
        "az",
        None,
        "my-deployment",
        Some(&deployment),
    );
    assert_eq!(f.context_window, Some(128_000));
    let f = facts(&Settings::default(), "az", None, "my-deployment", None);
    assert_eq!(f, ModelFacts::default(), "nothing known of a bare name");
}

#[test]
fn configured_prices_win() {
    let config = crate::config::Config::parse(
        br#"{"providers":{"p":{"dialect":"openai","api_key":"k","prices":{"gpt-4o":{"input":1,"output":2}}}},"model_groups":{"g":{"cluster":"c"}},"auth":{"enabled":false}}"#,
        |_| None,
    )
    .unwrap();
    let f = facts(
        &Settings::default(),
        "p",
        config.providers.get("p"),
        "gpt-4o",
        None,
    );
    assert_eq!(
        (
            f.input_usd_per_mtok,
            f.output_usd_per_mtok,
            f.sources.prices
        ),
        (Some(1.0), Some(2.0), Some(Source::Configuration))
    );
}

#[test]
fn bad_settings_are_refused() {
    for (json, error) in [
        (
            r#"{"models": {"m": {"context_window": 0}}}"#,
            "model_facts.models.m: limits",
        ),
        (
            r#"{"models": {"": {"context_window": 5}}}"#,
            "model_facts.models: '' is no model name",
        ),
    ] {
        let s: Settings = serde_json::from_str(json).unwrap();
        assert!(s.validate().unwrap_err().starts_with(error), "{json}");
    }
    assert!(serde_json::from_str::<Settings>(r#"{"models": {"m": {"window": 5}}}"#).is_err());
}
