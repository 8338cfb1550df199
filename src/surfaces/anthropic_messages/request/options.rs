//! The Messages request's tools and its options that are objects of
//! their own: `tool_choice`, `thinking`, `output_config`'s format.

use super::*;

impl Parser {
    /// A tool definition; `None` for a server tool (marked native-only).
    pub(super) fn tool(
        &mut self,
        mut v: Any<wire::Tool>,
        at: &str,
    ) -> Result<Option<Tool>, GatewayError> {
        // A tool that is no object reads as a custom one (refused below).
        let kind = match &mut v {
            Loose::Object(tool) => tool.kind.take(),
            _ => None,
        };
        match kind {
            None | Some(Loose::Null) => {}
            Some(Loose::Str(kind)) if kind == "custom" => {}
            Some(Loose::Str(kind)) => {
                if SERVER_TOOL_PREFIXES.iter().any(|p| kind.starts_with(p)) {
                    self.native(format!("{at} ({kind})"));
                    return Ok(None);
                }
                return Err(invalid(
                    &format!("{at}.type"),
                    format!("unknown tool type '{kind}'"),
                ));
            }
            Some(_) => {
                return Err(invalid(
                    &format!("{at}.type"),
                    "Input should be a valid string",
                ))
            }
        }
        let tool = object(
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
        let direct = |callers: &List| matches!(callers, Loose::Array(c) if c.iter().any(|c| matches!(c, Loose::Str(c) if *c == "direct")));
        if tool
            .allowed_callers
            .as_ref()
            .is_some_and(|c| !c.is_null() && !direct(c))
        {
            self.native(format!("{at}.allowed_callers"));
        }
        let name = string(tool.name, "name", at)?;
        if name.is_empty() || name.len() > 128 {
            return Err(invalid(
                &format!("{at}.name"),
                "String should have 1 to 128 characters",
            ));
        }
        let schema = match tool.input_schema {
            None => return Err(required(&format!("{at}.input_schema"))),
            Some(Loose::Object(schema)) => schema,
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
                description: optional_string(tool.description, "description", at)?,
                parameters: Some(schema),
                strict: optional_bool(tool.strict, "strict", at)?,
            },
            cache_control: cache_control(tool.cache_control, at)?,
        }))
    }
}

/// `tool_choice` and its `disable_parallel_tool_use` (as `parallel_tool_calls: false`).
pub(super) fn tool_choice(
    v: Any<wire::ToolChoice>,
) -> Result<(Option<ToolChoice>, Option<bool>), GatewayError> {
    let at = "tool_choice";
    let (kind, v) = block_type(v, at)?;
    let allowed: &[&str] =
        match &*kind {
            "auto" | "any" => &["type", "disable_parallel_tool_use"],
            "tool" => &["type", "name", "disable_parallel_tool_use"],
            "none" => &["type"],
            _ => return Err(invalid(
                at,
                "Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'",
            )),
        };
    let mut choice = only(v, at, allowed)?;
    let kind = match &*kind {
        "auto" => ToolChoice::Auto,
        "any" => ToolChoice::Required,
        "tool" => ToolChoice::Function(string(choice.name.take(), "name", at)?),
        _ => ToolChoice::None,
    };
    let parallel = optional_bool(
        choice.disable_parallel_tool_use,
        "disable_parallel_tool_use",
        at,
    )?
    .filter(|d| *d)
    .map(|_| false);
    Ok((Some(kind), parallel))
}

/// `thinking`: `enabled` with a budget, `adaptive`, or `disabled` (`None`).
pub(super) fn thinking_config(v: Any<wire::Thinking>) -> Result<Option<Reasoning>, GatewayError> {
    let at = "thinking";
    let (kind, v) = block_type(v, at)?;
    match &*kind {
        "enabled" => {
            let thinking = only(v, at, &["type", "budget_tokens", "display"])?;
            let budget = thinking
                .budget_tokens
                .ok_or_else(|| required("thinking.budget_tokens"))?;
            let budget = integer(
                &budget,
                "thinking.budget_tokens",
                u64::from(MIN_THINKING_BUDGET),
            )?;
            Ok(Some(Reasoning {
                effort: None,
                budget_tokens: Some(budget),
            }))
        }
        "adaptive" => {
            only(v, at, &["type", "display"])?;
            Ok(Some(Reasoning::default()))
        }
        "disabled" => {
            only(v, at, &["type"])?;
            Ok(None)
        }
        _ => Err(invalid(
            at,
            "Input tag does not match any of the expected tags: 'adaptive', 'disabled', 'enabled'",
        )),
    }
}

/// `output_config.effort`.
pub(super) fn effort_level(name: &str) -> Result<Effort, GatewayError> {
    match name {
        "low" => Ok(Effort::Low),
        "medium" => Ok(Effort::Medium),
        "high" => Ok(Effort::High),
        "xhigh" => Ok(Effort::XHigh),
        "max" => Ok(Effort::Max),
        _ => Err(invalid(
            "output_config.effort",
            "Input should be 'low', 'medium', 'high', 'xhigh' or 'max'",
        )),
    }
}

/// Structured output: `{"type": "json_schema", "schema": {...}}`.
pub(super) fn output_format(
    v: Any<wire::OutputFormat>,
    at: &str,
) -> Result<ResponseFormat, GatewayError> {
    let (kind, v) = block_type(v, at)?;
    if kind != "json_schema" {
        return Err(invalid(
            &format!("{at}.type"),
            "Input should be 'json_schema'",
        ));
    }
    let format = only(v, at, &["type", "schema"])?;
    let schema = match format.schema {
        Some(Loose::Object(schema)) => schema,
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
