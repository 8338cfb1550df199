//! `tools`, `tool_choice` and `text.format`.

use serde_json::Value;

use super::*;

/// One entry of `tools`: a function tool, a `namespace` of them (each
/// becomes a function tool named `<namespace>__<name>`, the name the answer
/// splits again), the hosted web search; another built-in tool is kept for
/// OpenAI only.
pub(super) fn any_tool(b: &mut Builder, tool: &Value, param: &str) -> Result<()> {
    let map = tool
        .as_object()
        .ok_or_else(|| wrong_type(param, "an object"))?;
    match required_string(map, "type", param)? {
        "function" => function_tool(b, tool, param, None),
        "namespace" => {
            let m = object(tool, param, &["type", "name", "description", "tools"])?;
            let namespace = required_string(m, "name", param)?;
            required_string(m, "description", param)?;
            let tools = match m.get("tools") {
                Some(Value::Array(tools)) => tools,
                Some(_) => return Err(wrong_type(&format!("{param}.tools"), "an array")),
                None => {
                    let path = format!("{param}.tools");
                    return Err(invalid(
                        &path,
                        format!("Missing required parameter: '{path}'."),
                    ));
                }
            };
            for (j, inner) in tools.iter().enumerate() {
                let at = format!("{param}.tools[{j}]");
                let inner_map = inner
                    .as_object()
                    .ok_or_else(|| wrong_type(&at, "an object"))?;
                match required_string(inner_map, "type", &at)? {
                    "function" => function_tool(b, inner, &at, Some(namespace))?,
                    "custom" => b.native_only(
                        &at,
                        format!("{at}: built-in tool 'custom' runs on OpenAI's own Responses API only; this model group's provider takes function tools"),
                    ),
                    other => {
                        return Err(invalid(
                            &format!("{at}.type"),
                            format!("Invalid value: '{other}'. Supported values are: 'function' and 'custom'."),
                        ))
                    }
                }
            }
            Ok(())
        }
        kind if WEB_SEARCH_TOOLS.contains(&kind) => web_search(b, tool, param),
        kind if BUILT_IN_TOOLS.contains(&kind) => {
            b.native_only(
                param,
                format!("{param}: built-in tool '{kind}' runs on OpenAI's own Responses API only; this model group's provider takes function tools"),
            );
            Ok(())
        }
        kind => Err(invalid(
            &format!("{param}.type"),
            format!("Invalid value: '{kind}'."),
        )),
    }
}

/// The hosted web search: its domain filter and the user's location
/// (`search_context_size` and `external_web_access` have no counterpart
/// elsewhere: checked, not carried).
fn web_search(b: &mut Builder, tool: &Value, param: &str) -> Result<()> {
    let m = object(
        tool,
        param,
        &[
            "type",
            "filters",
            "user_location",
            "search_context_size",
            "external_web_access",
        ],
    )?;
    let mut search = WebSearch::default();
    if let Some(filters) = m.get("filters").filter(|v| !v.is_null()) {
        let at = format!("{param}.filters");
        let f = object(filters, &at, &["allowed_domains"])?;
        match f.get("allowed_domains") {
            None | Some(Value::Null) => {}
            Some(Value::Array(domains)) => {
                for (k, d) in domains.iter().enumerate() {
                    let domain = d.as_str().ok_or_else(|| {
                        wrong_type(&format!("{at}.allowed_domains[{k}]"), "a string")
                    })?;
                    search.allowed_domains.push(domain.to_owned());
                }
            }
            Some(_) => {
                return Err(wrong_type(
                    &format!("{at}.allowed_domains"),
                    "an array of strings",
                ))
            }
        }
    }
    if let Some(location) = m.get("user_location").filter(|v| !v.is_null()) {
        let at = format!("{param}.user_location");
        let l = object(
            location,
            &at,
            &["type", "city", "region", "country", "timezone"],
        )?;
        if let Some(kind) = string(l, "type", &at)?.filter(|k| *k != "approximate") {
            return Err(invalid(
                &format!("{at}.type"),
                format!("Invalid value: '{kind}'. Supported values are: 'approximate'."),
            ));
        }
        let text = |key| string(l, key, &at).map(|s| s.map(str::to_owned));
        search.user_location = Some(UserLocation {
            city: text("city")?,
            region: text("region")?,
            country: text("country")?,
            timezone: text("timezone")?,
        });
    }
    if let Some(size) = string(m, "search_context_size", param)? {
        if !["low", "medium", "high"].contains(&size) {
            return Err(invalid(
                &format!("{param}.search_context_size"),
                format!(
                    "Invalid value: '{size}'. Supported values are: 'low', 'medium' and 'high'."
                ),
            ));
        }
    }
    if m.get("external_web_access")
        .is_some_and(|v| !v.is_null() && !v.is_boolean())
    {
        return Err(wrong_type(
            &format!("{param}.external_web_access"),
            "a boolean",
        ));
    }
    b.request.web_search = Some(search);
    Ok(())
}

/// A flat function tool `{type, name, description, parameters, strict}`,
/// on its own or in `namespace`.
fn function_tool(
    b: &mut Builder,
    tool: &Value,
    param: &str,
    namespace: Option<&str>,
) -> Result<()> {
    let m = object(
        tool,
        param,
        &[
            "type",
            "name",
            "description",
            "parameters",
            "strict",
            "defer_loading",
        ],
    )?;
    let parameters = match m.get("parameters") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        Some(_) => {
            return Err(wrong_type(
                &format!("{param}.parameters"),
                "a JSON Schema object",
            ))
        }
    };
    let strict = match m.get("strict") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(s)) => Some(*s),
        Some(_) => return Err(wrong_type(&format!("{param}.strict"), "a boolean")),
    };
    let name = required_string(m, "name", param)?;
    let name = match namespace {
        Some(namespace) => crate::surfaces::openai_responses::flat_name(namespace, name),
        None => name.to_owned(),
    };
    // One name, one tool: a namespaced tool's flat name must stay its own.
    if b.request.tools.iter().any(|t| t.function.name == name) {
        return Err(invalid(
            &format!("{param}.name"),
            format!("Duplicate tool name: '{name}'."),
        ));
    }
    b.request.tools.push(Tool {
        kind: ToolKind::Function,
        function: FunctionDef {
            name,
            description: string(m, "description", param)?.map(str::to_owned),
            parameters,
            strict,
        },
        cache_control: None,
    });
    Ok(())
}

pub(super) fn tool_choice(b: &mut Builder, choice: &Value) -> Result<ToolChoice> {
    match choice {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(invalid(
                "tool_choice",
                format!("Invalid value: '{other}'. Supported values are: 'none', 'auto', and 'required'."),
            )),
        },
        Value::Object(map) => {
            let kind = required_string(map, "type", "tool_choice")?;
            if kind == "function" {
                let m = object(choice, "tool_choice", &["type", "name"])?;
                return Ok(ToolChoice::Function(
                    required_string(m, "name", "tool_choice")?.to_owned(),
                ));
            }
            b.native_only(
                "tool_choice",
                format!("tool_choice of type '{kind}' needs OpenAI's own Responses API"),
            );
            Ok(ToolChoice::Auto)
        }
        _ => Err(wrong_type("tool_choice", "a string or an object")),
    }
}

/// `text.format`: `text`, `json_object`, or a flat `json_schema`.
pub(super) fn text_format(format: &Value) -> Result<ResponseFormat> {
    let map = format
        .as_object()
        .ok_or_else(|| wrong_type("text.format", "an object"))?;
    match required_string(map, "type", "text.format")? {
        "text" => {
            object(format, "text.format", &["type"])?;
            Ok(ResponseFormat::Text)
        }
        "json_object" => {
            object(format, "text.format", &["type"])?;
            Ok(ResponseFormat::JsonObject)
        }
        "json_schema" => {
            let m = object(
                format,
                "text.format",
                &["type", "name", "schema", "strict", "description"],
            )?;
            #[derive(Deserialize)]
            struct Flat {
                name: String,
                #[serde(default)]
                description: Option<String>,
                #[serde(default)]
                schema: Option<Value>,
                #[serde(default)]
                strict: Option<bool>,
            }
            let flat = Flat::deserialize(Value::Object(m.clone()))
                .map_err(|e| invalid("text.format", format!("invalid text.format: {e}")))?;
            if !flat.schema.as_ref().is_some_and(Value::is_object) {
                return Err(invalid(
                    "text.format.schema",
                    "Missing required parameter: 'text.format.schema' (a JSON Schema object).",
                ));
            }
            Ok(ResponseFormat::JsonSchema {
                json_schema: JsonSchema {
                    name: flat.name,
                    description: flat.description,
                    schema: flat.schema,
                    strict: flat.strict,
                },
            })
        }
        other => Err(invalid(
            "text.format.type",
            format!("Invalid value: '{other}'. Supported values are: 'text', 'json_object' and 'json_schema'."),
        )),
    }
}
