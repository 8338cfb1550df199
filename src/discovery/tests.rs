use super::*;
use crate::config::Config;

fn parse(discovery: &str) -> Result<Config, String> {
    Config::parse(
        format!(
            r#"{{"providers":{{"oa":{{"dialect":"openai","api_key":"k","models":{{"fast":"gpt-4o-mini","*":"gpt-4o"}}}},
                               "an":{{"dialect":"anthropic","api_key":"k"}}}},
                 "model_groups":{{"fast":{{"cluster":"oa_c"}},
                                  "smart":{{"candidates":[{{"provider":"an","model":"claude-x","cluster":"an_c"}}]}},
                                  "other":{{"cluster":"elsewhere"}}}},
                 "auth":{{"enabled":false}},"discovery":{discovery}}}"#
        )
        .as_bytes(),
        |_| None,
    )
}

#[test]
fn the_section_is_checked_and_notes_the_configured_models() {
    let config =
        parse(r#"{"providers":{"oa":{"cluster":"oa_c"},"an":{"cluster":"an_c"}}}"#).unwrap();
    let d = config.discovery.as_ref().unwrap();
    assert_eq!(
        (d.interval_seconds, d.retry_seconds, d.timeout_ms),
        (3600, 10, 10_000)
    );
    assert!(!d.route && !d.avoid_retired);
    let oa: Vec<&str> = d.configured["oa"].keys().map(String::as_str).collect();
    assert_eq!(oa, ["gpt-4o", "gpt-4o-mini"], "the mapping's models");
    assert_eq!(
        d.configured["oa"]["gpt-4o-mini"].iter().collect::<Vec<_>>(),
        ["fast"],
        "the group that asks for it"
    );
    assert!(d.configured["an"].contains_key("claude-x"));
    // A shorthand group is on the provider whose list cluster it routes to.
    let fast = &config.model_groups["fast"].candidates[0];
    assert_eq!(d.provider_of(fast), Some("oa"));
    assert_eq!(
        d.provider_of(&config.model_groups["other"].candidates[0]),
        None
    );
    // A provider whose requests go through another cluster than its list's.
    let moved = parse(r#"{"providers":{"oa":{"cluster":"oa_list","clusters":["oa_c"]}}}"#).unwrap();
    let fast = &moved.model_groups["fast"].candidates[0];
    assert_eq!(
        moved.discovery.as_ref().unwrap().provider_of(fast),
        Some("oa")
    );
    for (section, error) in [
        (r#"{"providers":{}}"#, "discovery.providers: 1 to 64"),
        (
            r#"{"providers":{"nope":{"cluster":"c"}}}"#,
            "discovery.providers.nope: no provider named",
        ),
        (
            r#"{"providers":{"oa":{"cluster":""}}}"#,
            "discovery.providers.oa.cluster: must not be empty",
        ),
        (
            r#"{"providers":{"oa":{"cluster":"c","host":"a/b"}}}"#,
            "discovery.providers.oa.host",
        ),
        (
            r#"{"providers":{"oa":{"cluster":"c"},"an":{"cluster":"c"}}}"#,
            "discovery.providers.oa: cluster 'c' is provider an's",
        ),
        (
            r#"{"providers":{"oa":{"cluster":"c"},"an":{"cluster":"d","clusters":["c"]}}}"#,
            "discovery.providers.oa: cluster 'c' is provider an's",
        ),
        (
            r#"{"providers":{"oa":{"cluster":"c"}},"interval_seconds":0}"#,
            "discovery.interval_seconds",
        ),
        (
            r#"{"providers":{"oa":{"cluster":"c"}},"timeout_ms":5}"#,
            "discovery.timeout_ms",
        ),
        (
            r#"{"providers":{"oa":{"cluster":"c"}},"aliases":{"fast":"gpt-*"}}"#,
            "discovery.aliases.fast: a model group",
        ),
        (
            r#"{"providers":{"oa":{"cluster":"c"}},"aliases":{"x":""}}"#,
            "discovery.aliases: 'x'",
        ),
        (
            r#"{"providers":{"oa":{"cluster":"c"}},"every":1}"#,
            "unknown field",
        ),
    ] {
        let e = parse(section).unwrap_err();
        assert!(e.contains(error), "{e} should say {error}");
    }
}

fn discovered(config: &Config, lists: &[(&str, &[(&str, u64)])]) -> Discovered {
    let settings = config.discovery.as_ref().unwrap();
    Discovered::build(
        settings,
        1,
        |_| Some(7),
        |name| {
            let models = lists.iter().find(|(p, _)| *p == name).map(|(_, models)| {
                models
                    .iter()
                    .map(|(id, created)| crate::model::listing::Listed {
                        created: Some(*created),
                        ..crate::model::listing::Listed::named(*id)
                    })
                    .collect()
            });
            (models.map(|m| store::ListRecord::new(7, 1, m)), None)
        },
    )
}

#[test]
fn routes_go_to_the_first_group_whose_provider_lists_the_model() {
    let config = parse(
        r#"{"providers":{"oa":{"cluster":"oa_c"},"an":{"cluster":"an_c"}},"route":true,
            "aliases":{"claude-latest":"claude-*","newest-gpt":"gpt-*"}}"#,
    )
    .unwrap();
    let d = config.discovery.as_ref().unwrap();
    let seen = discovered(
        &config,
        &[
            ("oa", &[("gpt-4o", 10), ("gpt-4.1", 20)]),
            ("an", &[("claude-x", 5), ("claude-y@1", 9)]),
        ],
    );
    let all = |_: &str| true;
    let route = |model: &str, allows: &dyn Fn(&str) -> bool| {
        d.route(&config.model_groups, None, &seen, allows, model)
            .map(|r| (r.group.to_owned(), r.provider.to_owned(), r.model))
    };
    assert_eq!(
        route("gpt-4.1", &all),
        Some(("fast".into(), "oa".into(), "gpt-4.1".into()))
    );
    assert_eq!(
        route("claude-x", &all),
        Some(("smart".into(), "an".into(), "claude-x".into()))
    );
    // Listed under its bare name.
    assert_eq!(
        route("models/gpt-4o", &all).map(|r| r.0),
        Some("fast".into())
    );
    assert_eq!(
        route("claude-y@1", &all).map(|r| r.2),
        Some("claude-y@1".into())
    );
    // Aliases: the newest match among the providers the caller reaches.
    assert_eq!(
        route("newest-gpt", &all).map(|r| r.2),
        Some("gpt-4.1".into())
    );
    assert_eq!(
        route("claude-latest", &all).map(|r| r.2),
        Some("claude-y@1".into())
    );
    let fast_only = |g: &str| g == "fast";
    assert_eq!(route("claude-latest", &fast_only), None);
    assert_eq!(route("claude-x", &fast_only), None);
    assert_eq!(route("unknown", &all), None);
    // The configured model the vendor lacks: retired.
    assert!(seen.retired("oa", "gpt-4o-mini"));
    assert!(!seen.retired("oa", "gpt-4o"));
    assert!(!seen.retired("an", "claude-x"));
    // Off unless asked.
    let config = parse(r#"{"providers":{"oa":{"cluster":"oa_c"}}}"#).unwrap();
    let seen = discovered(&config, &[("oa", &[("gpt-4.1", 1)])]);
    let d = config.discovery.as_ref().unwrap();
    assert_eq!(
        d.route(&config.model_groups, None, &seen, all, "gpt-4.1"),
        None
    );
}

#[test]
fn records_of_another_identity_are_not_this_configurations() {
    let config = parse(r#"{"providers":{"oa":{"cluster":"oa_c"}}}"#).unwrap();
    let settings = config.discovery.as_ref().unwrap();
    let seen = Discovered::build(
        settings,
        1,
        |_| Some(8),
        |_| (Some(store::ListRecord::new(7, 1, vec![])), None),
    );
    assert!(seen.providers["oa"].list.is_none());
    assert!(
        seen.providers["oa"].retired.is_empty(),
        "nothing read: nothing retired"
    );
    // The identity follows where and with which key the list is read.
    let source = &settings.providers["oa"];
    let provider = &config.providers["oa"];
    let again = parse(r#"{"providers":{"oa":{"cluster":"oa_c"}}}"#).unwrap();
    assert_eq!(
        store::identity(provider, source),
        store::identity(
            &again.providers["oa"],
            &again.discovery.as_ref().unwrap().providers["oa"]
        )
    );
    let moved = parse(r#"{"providers":{"oa":{"cluster":"oa_c","host":"elsewhere"}}}"#).unwrap();
    assert_ne!(
        store::identity(provider, source),
        store::identity(
            &moved.providers["oa"],
            &moved.discovery.as_ref().unwrap().providers["oa"]
        )
    );
}
