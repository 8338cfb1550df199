//! The Messages request's tools and its options that are objects of
//! their own: `tool_choice`, `thinking`, `output_config`'s format.

use super::*;

impl Parser {
    /// A tool definition; `None` for a server tool (marked native-only).
    pub(super) fn tool(&mut self, v: &Value, at: &str) -> Result<Option<Tool>, GatewayError> {
        let kind = match v.get("type") {
            None | Some(Value::Null) => "custom",
            Some(Value::String(t)) => t.as_str(),
            Some(_) => {
                return Err(invalid(
                    &format!("{at}.type"),
                    "Input should be a valid string",
                ))
            }
        };
        if kind != "custom" {
            if SERVER_TOOL_PREFIXES.iter().any(|p| kind.starts_with(p)) {
                self.native(format!("{at} ({kind})"));
                return Ok(None);
            }
            return Err(invalid(
                &format!("{at}.type"),
                format!("unknown tool type '{kind}'"),
            ));
        }
        let map = object(
            v,
            at,
            &[
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
            ],
        )?;
        // `defer_loading`, `input_examples` and `eager_input_streaming` are
        // hints other vendors do without (the tool is declared up front);
        // a tool the model may not call itself is Anthropic's alone.
        let direct = |callers: &Value| {
            callers
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c == "direct"))
        };
        if map
            .get("allowed_callers")
            .is_some_and(|c| !c.is_null() && !direct(c))
        {
            self.native(format!("{at}.allowed_callers"));
        }
        let name = string(map, "name", at)?;
        if name.is_empty() || name.len() > 128 {
            return Err(invalid(
                &format!("{at}.name"),
                "String should have 1 to 128 characters",
            ));
        }
        let schema = match map.get("input_schema") {
            None => return Err(required(&format!("{at}.input_schema"))),
            Some(s @ Value::Object(_)) => s.clone(),
            Some(_) => {
                return Err(invalid(
                    &format!("{at}.input_schema"),
                    "Input should be a valid dictionary",
                ))
            }
        };
        Ok(Some(Tool {
            kind: ToolKind::Function,
            function: FunctionDef {
                name,
                description: optional_string(map, "description", at)?,
                parameters: Some(schema),
                strict: optional_bool(map, "strict", at)?,
            },
            cache_control: cache_control(map, at)?,
        }))
    }
}

/// `tool_choice` and its `disable_parallel_tool_use` (as `parallel_tool_calls: false`).
pub(super) fn tool_choice(v: &Value) -> Result<(Option<ToolChoice>, Option<bool>), GatewayError> {
    let at = "tool_choice";
    let kind = block_type(v, at)?;
    let allowed: &[&str] =
        match kind {
            "auto" | "any" => &["type", "disable_parallel_tool_use"],
            "tool" => &["type", "name", "disable_parallel_tool_use"],
            "none" => &["type"],
            _ => return Err(invalid(
                at,
                "Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'",
            )),
        };
    let map = object(v, at, allowed)?;
    let choice = match kind {
        "auto" => ToolChoice::Auto,
        "any" => ToolChoice::Required,
        "tool" => ToolChoice::Function(string(map, "name", at)?),
        _ => ToolChoice::None,
    };
    let parallel = optional_bool(map, "disable_parallel_tool_use", at)?
        .filter(|d| *d)
        .map(|_| false);
    Ok((Some(choice), parallel))
}

/// `thinking`: `enabled` with a budget, `adaptive`, or `disabled` (`None`).
pub(super) fn thinking_config(v: &Value) -> Result<Option<Reasoning>, GatewayError> {
    let at = "thinking";
    match block_type(v, at)? {
        "enabled" => {
            let map = object(v, at, &["type", "budget_tokens", "display"])?;
            let budget = map
                .get("budget_tokens")
                .ok_or_else(|| required("thinking.budget_tokens"))?;
            let budget = integer(
                budget,
                "thinking.budget_tokens",
                u64::from(MIN_THINKING_BUDGET),
            )?;
            Ok(Some(Reasoning {
                effort: None,
                budget_tokens: Some(budget),
            }))
        }
        "adaptive" => {
            object(v, at, &["type", "display"])?;
            Ok(Some(Reasoning::default()))
        }
        "disabled" => {
            object(v, at, &["type"])?;
            Ok(None)
        }
        _ => Err(invalid(
            at,
            "Input tag does not match any of the expected tags: 'adaptive', 'disabled', 'enabled'",
        )),
    }
}

/// `output_config.effort` (`xhigh` and `max` are the neutral `high`).
pub(super) fn effort_level(name: &str) -> Result<Effort, GatewayError> {
    match name {
        "low" => Ok(Effort::Low),
        "medium" => Ok(Effort::Medium),
        "high" | "xhigh" | "max" => Ok(Effort::High),
        _ => Err(invalid(
            "output_config.effort",
            "Input should be 'low', 'medium', 'high', 'xhigh' or 'max'",
        )),
    }
}

/// Structured output: `{"type": "json_schema", "schema": {...}}`.
pub(super) fn output_format(v: &Value, at: &str) -> Result<ResponseFormat, GatewayError> {
    if block_type(v, at)? != "json_schema" {
        return Err(invalid(
            &format!("{at}.type"),
            "Input should be 'json_schema'",
        ));
    }
    let map = object(v, at, &["type", "schema"])?;
    let schema = match map.get("schema") {
        Some(s @ Value::Object(_)) => s.clone(),
        None => return Err(required(&format!("{at}.schema"))),
        Some(_) => {
            return Err(invalid(
                &format!("{at}.schema"),
                "Input should be a valid dictionary",
            ))
        }
    };
    Ok(ResponseFormat::JsonSchema {
        json_schema: JsonSchema {
            name: "output".into(),
            description: None,
            schema: Some(schema),
            strict: Some(true),
        },
    })
}
