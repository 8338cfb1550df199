//! Anthropic tools: custom tools, the web search server tool and
//! `tool_choice`.

use serde_json::{Map, Value};

use crate::dialect::{Failure, Tool, ToolChoice};

use super::request::{invalid, str_field};

/// The keys of a custom (client) tool (the SDK's `ToolParam`).
const TOOL_KEYS: [&str; 10] = [
    "type",
    "name",
    "description",
    "input_schema",
    "cache_control",
    "strict",
    "input_examples",
    "defer_loading",
    "allowed_callers",
    "eager_input_streaming",
];

/// Fields of the web search server tool, `web_search_20250305`
/// (docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool).
const WEB_SEARCH_KEYS: &[&str] = &[
    "type",
    "name",
    "max_uses",
    "allowed_domains",
    "blocked_domains",
    "user_location",
    "cache_control",
];
const LOCATION_KEYS: &[&str] = &["type", "city", "region", "country", "timezone"];

pub(super) fn is_web_search(tool: &Value) -> bool {
    tool.get("type").and_then(Value::as_str) == Some("web_search_20250305")
}

/// The web search tool as Anthropic checks it: its own fields only, named
/// `web_search`, domains allowed or blocked (not both), an approximate
/// location. Anthropic runs it; the mock never searches (it is no tool the
/// model calls here).
fn check_web_search(t: &Value, at: &str) -> Result<(), Failure> {
    let at = format!("{at}.web_search_20250305");
    let extra = |v: &Value, keys: &[&str]| {
        v.as_object()
            .and_then(|o| o.keys().find(|k| !keys.contains(&k.as_str())).cloned())
    };
    if let Some(key) = extra(t, WEB_SEARCH_KEYS) {
        return Err(invalid(format!(
            "{at}.{key}: Extra inputs are not permitted"
        )));
    }
    if t.get("name").and_then(Value::as_str) != Some("web_search") {
        return Err(invalid(format!("{at}.name: Input should be 'web_search'")));
    }
    if let Some(n) = t.get("max_uses") {
        if n.as_u64().is_none_or(|n| n == 0) {
            return Err(invalid(format!(
                "{at}.max_uses: Input should be greater than 0"
            )));
        }
    }
    for key in ["allowed_domains", "blocked_domains"] {
        if let Some(list) = t.get(key) {
            if !list
                .as_array()
                .is_some_and(|l| l.iter().all(Value::is_string))
            {
                return Err(invalid(format!("{at}.{key}: Input should be a valid list")));
            }
        }
    }
    if t.get("allowed_domains").is_some() && t.get("blocked_domains").is_some() {
        return Err(invalid(
            "tools: web_search: cannot specify both allowed_domains and blocked_domains",
        ));
    }
    if let Some(location) = t.get("user_location") {
        if let Some(key) = extra(location, LOCATION_KEYS) {
            return Err(invalid(format!(
                "{at}.user_location.{key}: Extra inputs are not permitted"
            )));
        }
        if location.get("type").and_then(Value::as_str) != Some("approximate") {
            return Err(invalid(format!(
                "{at}.user_location.type: Input should be 'approximate'"
            )));
        }
    }
    Ok(())
}

pub(super) fn parse_tools(obj: &Map<String, Value>) -> Result<Vec<Tool>, Failure> {
    let Some(tools) = obj.get("tools") else {
        return Ok(Vec::new());
    };
    let tools = tools
        .as_array()
        .ok_or_else(|| invalid("tools: Input should be a valid list"))?;
    for (i, t) in tools.iter().enumerate() {
        if is_web_search(t) {
            check_web_search(t, &format!("tools.{i}"))?;
        }
    }
    tools
        .iter()
        .enumerate()
        .filter(|(_, t)| !is_web_search(t))
        .map(|(i, t)| {
            let at = format!("tools.{i}");
            let custom = t
                .get("type")
                .and_then(Value::as_str)
                .is_none_or(|ty| ty == "custom");
            if let Some(extra) = t.as_object().and_then(|o| {
                o.keys()
                    .find(|k| custom && !TOOL_KEYS.contains(&k.as_str()))
            }) {
                return Err(invalid(format!(
                    "{at}.custom.{extra}: Extra inputs are not permitted"
                )));
            }
            let name = str_field(t, "name", &at)?.to_owned();
            // Server tools (web_search etc.) carry a "type" and no schema.
            let schema = match (t.get("input_schema"), t.get("type")) {
                (Some(s), _) => s.clone(),
                (None, Some(_)) => Value::Null,
                (None, None) => return Err(invalid(format!("{at}.input_schema: Field required"))),
            };
            Ok(Tool { name, schema })
        })
        .collect()
}

pub(super) fn parse_tool_choice(v: Option<&Value>) -> Result<ToolChoice, Failure> {
    let Some(v) = v else {
        return Ok(ToolChoice::Auto);
    };
    match v.get("type").and_then(Value::as_str) {
        Some("auto") => Ok(ToolChoice::Auto),
        Some("any") => Ok(ToolChoice::Any),
        Some("none") => Ok(ToolChoice::None),
        Some("tool") => Ok(ToolChoice::Named(
            str_field(v, "name", "tool_choice")?.to_owned(),
        )),
        _ => Err(invalid(
            "tool_choice: Input tag found using 'type' does not match any of the expected tags: \
             'auto', 'any', 'tool', 'none'",
        )),
    }
}
