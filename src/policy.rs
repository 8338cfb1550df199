//! Per-provider request policy: rules by vendor-model glob that rename,
//! drop, default or cap request fields before a dialect encodes them, so
//! that each vendor model accepts what we send (the seeds' parameter
//! mapping). Rules work on the unified request's field names (OpenAI's).
//!
//! A provider's own rules come first, then the built-in ones of its
//! dialect; the first rule whose `models` glob matches the vendor model
//! applies, alone. A provider can therefore override a built-in rule for a
//! model with a rule of its own (even an empty one).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::model::json::Stop;
use crate::model::request::{ChatRequest, Effort, Reasoning};
use crate::routing::glob;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Glob (`*`, `?`) over the vendor model an attempt asks for.
    pub models: String,
    /// Field → new name; when the new name is set already, the old field is dropped.
    #[serde(default)]
    pub rename: BTreeMap<String, String>,
    /// Fields removed.
    #[serde(default)]
    pub drop: Vec<String>,
    /// Field → value set when the client gave none.
    #[serde(default)]
    pub default: Map<String, Value>,
    /// Numeric field → largest value sent.
    #[serde(default)]
    pub cap: Map<String, Value>,
}

/// Fields a rule may not touch: the request's structure, not its parameters.
const STRUCTURAL: &[&str] = &[
    "model",
    "messages",
    "tools",
    "tool_choice",
    "response_format",
    "stream",
    "stream_options",
    "request_id",
];

/// Typed fields of the unified request a rule can act on (others live in `extra`).
const TYPED: &[&str] = &[
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "user",
    "n",
    "parallel_tool_calls",
    "reasoning_effort",
];

/// Parameters OpenAI's reasoning models refuse (o-series, GPT-5): they take
/// `max_completion_tokens` and no sampling controls.
const REASONING_UNSUPPORTED: &[&str] = &[
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "logprobs",
    "top_logprobs",
    "logit_bias",
];

/// OpenAI's models that do not reason (they refuse `reasoning_effort`:
/// "Unsupported parameter"), by name anywhere in the vendor model (Azure
/// deployments are often named after them: `gpt-4o`, `gpt-35-turbo`): a
/// client asking them to think (a chat client's effort, an Anthropic
/// client's thinking) gets their answer without reasoning.
const NO_REASONING: &[&str] = &["*gpt-4*", "*gpt4*", "*gpt-3.5*", "*gpt-35*", "*chatgpt-*"];

/// The built-in rules (after the provider's own): for OpenAI's API
/// (`openai` and `azure` dialects), its reasoning models' rules, and no
/// reasoning effort for the models without reasoning.
pub fn builtin(openai_api: bool) -> Vec<Rule> {
    let rename = || BTreeMap::from([("max_tokens".to_owned(), "max_completion_tokens".to_owned())]);
    match openai_api {
        true => {
            let reasoning = |models: &str| Rule {
                models: models.into(),
                rename: rename(),
                drop: REASONING_UNSUPPORTED.iter().map(|s| (*s).into()).collect(),
                ..Rule::default()
            };
            vec![
                // GPT-5's chat model takes sampling controls.
                Rule {
                    models: "gpt-5-chat*".into(),
                    rename: rename(),
                    ..Rule::default()
                },
                reasoning("gpt-5*"),
                reasoning("o1*"),
                reasoning("o3*"),
                reasoning("o4*"),
            ]
            .into_iter()
            .chain(NO_REASONING.iter().map(|models| Rule {
                models: (*models).into(),
                drop: vec!["reasoning_effort".into()],
                ..Rule::default()
            }))
            .collect()
        }
        false => Vec::new(),
    }
}

impl Rule {
    /// Checks a configured rule; `field` names it in errors.
    pub fn validate(&self, field: &str) -> Result<(), String> {
        if self.models.is_empty() {
            return Err(format!("{field}.models: must not be empty"));
        }
        let named = self
            .rename
            .iter()
            .flat_map(|(a, b)| [a, b])
            .chain(&self.drop)
            .chain(self.default.keys())
            .chain(self.cap.keys());
        for name in named {
            if name.is_empty() || STRUCTURAL.contains(&name.as_str()) {
                return Err(format!(
                    "{field}: '{name}' is not a request parameter a rule may change"
                ));
            }
        }
        for (name, value) in &self.cap {
            if !value.is_number() {
                return Err(format!("{field}.cap.{name}: must be a number"));
            }
        }
        for (name, value) in &self.default {
            check_type(name, value).map_err(|e| format!("{field}.default.{name}: {e}"))?;
        }
        Ok(())
    }

    /// `req` as this rule changes it, or `None` when it changes nothing.
    fn apply(&self, req: &ChatRequest) -> Option<ChatRequest> {
        let mut fields = Map::new();
        for name in self
            .rename
            .iter()
            .flat_map(|(a, b)| [a, b])
            .chain(&self.drop)
            .chain(self.default.keys())
            .chain(self.cap.keys())
        {
            if let Some(v) = get(req, name) {
                fields.insert(name.clone(), v);
            }
        }
        let before = fields.clone();
        for (from, to) in &self.rename {
            if let Some(v) = fields.remove(from) {
                fields.entry(to.clone()).or_insert(v);
            }
        }
        for name in &self.drop {
            fields.remove(name);
        }
        for (name, value) in &self.default {
            fields.entry(name.clone()).or_insert_with(|| value.clone());
        }
        for (name, max) in &self.cap {
            if let (Some(v), Some(max)) = (fields.get_mut(name), max.as_f64()) {
                if v.as_f64().is_some_and(|n| n > max) {
                    *v = self.cap.get(name).cloned().unwrap_or(Value::Null);
                }
            }
        }
        if fields == before {
            return None;
        }
        let mut out = req.clone();
        for name in before.keys().chain(fields.keys()) {
            set(&mut out, name, fields.get(name).cloned());
        }
        Some(out)
    }
}

/// The request for `model` under `rules` (the first that matches), or
/// `None` when no rule changes it.
pub fn apply(
    rules: &[Rule],
    builtin: &[Rule],
    model: &str,
    req: &ChatRequest,
) -> Option<ChatRequest> {
    rules
        .iter()
        .chain(builtin)
        .find(|r| glob(&r.models, model))
        .and_then(|r| r.apply(req))
}

/// Whether the rule for `model` drops `field`: a passed-through body, which
/// the rules do not rewrite, takes out its `reasoning` where the rule drops
/// `reasoning_effort` (a model without reasoning refuses it, summaries too).
pub fn drops(rules: &[Rule], builtin: &[Rule], model: &str, field: &str) -> bool {
    rules
        .iter()
        .chain(builtin)
        .find(|r| glob(&r.models, model))
        .is_some_and(|r| r.drop.iter().any(|d| d == field))
}

fn get(req: &ChatRequest, name: &str) -> Option<Value> {
    let num = |v: Option<u32>| v.map(Value::from);
    match name {
        "temperature" => req.temperature.map(Value::from),
        "top_p" => req.top_p.map(Value::from),
        "max_tokens" => num(req.max_tokens),
        "max_completion_tokens" => num(req.max_completion_tokens),
        "stop" => (!req.stop.is_empty()).then(|| Value::from(req.stop.clone())),
        "seed" => req.seed.map(Value::from),
        "user" => req.user.clone().map(Value::from),
        "n" => num(req.n),
        "parallel_tool_calls" => req.parallel_tool_calls.map(Value::from),
        // A budget alone is what it amounts to: OpenAI's vendors get that.
        "reasoning_effort" => req
            .reasoning
            .and_then(|r| r.effort_or_from_budget())
            .map(|e| Value::from(e.as_str())),
        other => req.extra.get(other).cloned(),
    }
}

/// A default's value must fit the typed field it sets.
fn check_type(name: &str, value: &Value) -> Result<(), String> {
    let mut probe = ChatRequest::default();
    if TYPED.contains(&name) && !set(&mut probe, name, Some(value.clone())) {
        return Err("not a valid value for this field".into());
    }
    Ok(())
}

/// Sets (or with `None` removes) a field; false when the value does not fit.
fn set(req: &mut ChatRequest, name: &str, value: Option<Value>) -> bool {
    let u32_of = |v: &Option<Value>| {
        v.as_ref()
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    };
    let fits = |v: &Option<Value>, parsed: bool| v.is_none() || parsed;
    match name {
        "temperature" => {
            req.temperature = value.as_ref().and_then(Value::as_f64);
            fits(&value, req.temperature.is_some())
        }
        "top_p" => {
            req.top_p = value.as_ref().and_then(Value::as_f64);
            fits(&value, req.top_p.is_some())
        }
        "max_tokens" => {
            req.max_tokens = u32_of(&value);
            fits(&value, req.max_tokens.is_some())
        }
        "max_completion_tokens" => {
            req.max_completion_tokens = u32_of(&value);
            fits(&value, req.max_completion_tokens.is_some())
        }
        "n" => {
            req.n = u32_of(&value);
            fits(&value, req.n.is_some())
        }
        "seed" => {
            req.seed = value.as_ref().and_then(Value::as_i64);
            fits(&value, req.seed.is_some())
        }
        "user" => {
            req.user = value.as_ref().and_then(Value::as_str).map(str::to_owned);
            fits(&value, req.user.is_some())
        }
        "parallel_tool_calls" => {
            req.parallel_tool_calls = value.as_ref().and_then(Value::as_bool);
            fits(&value, req.parallel_tool_calls.is_some())
        }
        // OpenAI's one reasoning field: dropping it drops the reasoning
        // (a budget would be sent as the effort it amounts to).
        "reasoning_effort" => {
            let effort = value
                .as_ref()
                .and_then(Value::as_str)
                .and_then(Effort::parse);
            let budget_tokens = req.reasoning.and_then(|r| r.budget_tokens);
            req.reasoning = match (&value, effort) {
                (None, _) => None,
                (Some(_), effort) => effort.map(|effort| Reasoning {
                    effort: Some(effort),
                    budget_tokens,
                }),
            };
            fits(&value, effort.is_some())
        }
        "stop" => {
            // As the request's own `stop` parses: a string or up to 4 strings.
            let parsed = value.clone().map(serde_json::from_value::<Stop>);
            let fit = !matches!(parsed, Some(Err(_)));
            req.stop = parsed.and_then(Result::ok).map(|s| s.0).unwrap_or_default();
            fit
        }
        other => {
            match value {
                Some(v) => req.extra.insert(other.to_owned(), v),
                None => req.extra.remove(other),
            };
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(body: &str) -> ChatRequest {
        ChatRequest::parse(body.as_bytes()).unwrap()
    }

    const BOTH: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"temperature":0.2,"top_p":0.9,"presence_penalty":0.5,"user":"u"}"#;

    #[test]
    fn openai_reasoning_models_get_max_completion_tokens_and_no_sampling() {
        let builtin = builtin(true);
        for model in ["o3", "o4-mini", "o1-preview", "gpt-5", "gpt-5-mini"] {
            let out = apply(&[], &builtin, model, &req(BOTH)).expect(model);
            assert_eq!(out.max_tokens, None);
            assert_eq!(out.max_completion_tokens, Some(100));
            assert_eq!((out.temperature, out.top_p), (None, None));
            assert!(!out.extra.contains_key("presence_penalty"));
            assert_eq!(out.user.as_deref(), Some("u"), "others kept");
        }
        let chat = apply(&[], &builtin, "gpt-5-chat-latest", &req(BOTH)).unwrap();
        assert_eq!(
            (chat.max_completion_tokens, chat.temperature),
            (Some(100), Some(0.2))
        );
        assert!(
            apply(&[], &builtin, "gpt-4o", &req(BOTH)).is_none(),
            "others untouched"
        );
        assert!(super::builtin(false).is_empty());
    }

    #[test]
    fn a_provider_rule_comes_first_and_caps_and_defaults() {
        let rule: Rule = serde_json::from_str(
            r#"{"models":"claude-*","drop":["top_p"],"cap":{"max_tokens":50},"default":{"seed":7}}"#,
        )
        .unwrap();
        rule.validate("r").unwrap();
        let out = apply(
            std::slice::from_ref(&rule),
            &[],
            "claude-sonnet-4-5",
            &req(BOTH),
        )
        .unwrap();
        assert_eq!(
            (out.max_tokens, out.top_p, out.seed),
            (Some(50), None, Some(7))
        );
        assert_eq!(out.temperature, Some(0.2));
        let keep: Rule = serde_json::from_str(r#"{"models":"o3"}"#).unwrap();
        let builtin = builtin(true);
        assert!(
            apply(&[keep], &builtin, "o3", &req(BOTH)).is_none(),
            "an empty rule overrides"
        );
    }

    #[test]
    fn rules_act_on_reasoning_effort() {
        let rule = |json: &str| -> Rule { serde_json::from_str(json).unwrap() };
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning":{"effort":"high","max_tokens":900}}"#;
        let out = apply(
            &[rule(r#"{"models":"*","drop":["reasoning_effort"]}"#)],
            &[],
            "m",
            &req(body),
        )
        .unwrap();
        assert_eq!(out.reasoning, None, "the budget goes too");
        let budget_only = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning":{"max_tokens":900}}"#;
        let out = apply(&[], &builtin(true), "mock-gpt-4o", &req(budget_only)).unwrap();
        assert_eq!(out.reasoning, None, "a model without reasoning gets none");
        let out = apply(
            &[rule(
                r#"{"models":"*","default":{"reasoning_effort":"low"}}"#,
            )],
            &[],
            "m",
            &req(r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#),
        )
        .unwrap();
        assert_eq!(out.reasoning.and_then(|r| r.effort), Some(Effort::Low));
        assert!(out.extra.is_empty(), "typed, not an extra field");
        let e = rule(r#"{"models":"*","default":{"reasoning_effort":"ultra"}}"#)
            .validate("rule")
            .unwrap_err();
        assert!(e.contains("default.reasoning_effort"), "{e}");
    }

    #[test]
    fn a_model_without_reasoning_drops_it_by_rule() {
        let builtin = builtin(true);
        for model in ["mock-gpt-4o", "gpt-4.1-mini", "my-gpt4o-deployment"] {
            assert!(drops(&[], &builtin, model, "reasoning_effort"), "{model}");
        }
        for model in ["o3", "gpt-5", "claude-sonnet-4-5"] {
            assert!(!drops(&[], &builtin, model, "reasoning_effort"), "{model}");
        }
        let keep: Rule = serde_json::from_str(r#"{"models":"gpt-4o"}"#).unwrap();
        assert!(
            !drops(&[keep], &builtin, "gpt-4o", "reasoning_effort"),
            "a provider's own rule comes first"
        );
    }

    #[test]
    fn rename_keeps_an_explicit_target() {
        let r = req(
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":9,"max_completion_tokens":5}"#,
        );
        let out = apply(&[], &builtin(true), "o3-mini", &r).unwrap();
        assert_eq!((out.max_tokens, out.max_completion_tokens), (None, Some(5)));
    }

    #[test]
    fn invalid_rules_are_named() {
        for (json, expected) in [
            (r#"{"models":""}"#, "r.models: must not be empty"),
            (
                r#"{"models":"*","drop":["messages"]}"#,
                "r: 'messages' is not a request parameter",
            ),
            (
                r#"{"models":"*","cap":{"max_tokens":"x"}}"#,
                "r.cap.max_tokens: must be a number",
            ),
            (
                r#"{"models":"*","default":{"max_tokens":-1}}"#,
                "r.default.max_tokens: not a valid value",
            ),
        ] {
            let rule: Rule = serde_json::from_str(json).unwrap();
            let e = rule.validate("r").unwrap_err();
            assert!(e.starts_with(expected), "{e}");
        }
    }
}
