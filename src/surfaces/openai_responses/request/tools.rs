//! `tools`, `tool_choice` and `text.format`.

use super::*;

/// One entry of `tools`: a function tool, a `namespace` of them (each
/// becomes a function tool named `<namespace>__<name>`, the name the answer
/// splits again), the hosted web search; another built-in tool is kept for
/// OpenAI only.
pub(super) fn any_tool(b: &mut Builder, tool: &Loose<client::Tool>, param: &Path) -> Result<()> {
    let m = object(tool, param)?;
    match required_string(&m.kind, param, "type")? {
        "function" => function_tool(b, m, param, None),
        "namespace" => {
            known(
                m.first_unknown(&["type", "name", "description", "tools"]),
                param,
            )?;
            let namespace = required_string(&m.name, param, "name")?;
            required_string(&m.description, param, "description")?;
            let tools = match &m.tools {
                Some(Loose::Array(tools)) => tools,
                Some(_) => return Err(wrong_type(format_args!("{param}.tools"), "an array")),
                None => {
                    let path = format!("{param}.tools");
                    return Err(invalid(
                        &path,
                        format!("Missing required parameter: '{path}'."),
                    ));
                }
            };
            for (j, inner) in tools.iter().enumerate() {
                let tools_path = Path::Member(param, "tools");
                let at = Path::Index(&tools_path, j);
                let inner = object(inner, &at)?;
                match required_string(&inner.kind, &at, "type")? {
                    "function" => function_tool(b, inner, &at, Some(namespace))?,
                    "custom" => b.native_only(
                        at,
                        format!("{at}: built-in tool 'custom' runs on OpenAI's own Responses API only; this model group's provider takes function tools"),
                    ),
                    other => {
                        return Err(invalid(
                            format!("{at}.type"),
                            format!("Invalid value: '{other}'. Supported values are: 'function' and 'custom'."),
                        ))
                    }
                }
            }
            Ok(())
        }
        kind if WEB_SEARCH_TOOLS.contains(&kind) => web_search(b, m, param),
        kind if BUILT_IN_TOOLS.contains(&kind) => {
            b.native_only(
                param,
                format!("{param}: built-in tool '{kind}' runs on OpenAI's own Responses API only; this model group's provider takes function tools"),
            );
            Ok(())
        }
        kind => Err(invalid(
            format!("{param}.type"),
            format!("Invalid value: '{kind}'."),
        )),
    }
}

/// The hosted web search: its domain filter and the user's location
/// (`search_context_size` and `external_web_access` have no counterpart
/// elsewhere: checked, not carried).
fn web_search(b: &mut Builder, m: &client::Tool, param: &Path) -> Result<()> {
    known(
        m.first_unknown(&[
            "type",
            "filters",
            "user_location",
            "search_context_size",
            "external_web_access",
        ]),
        param,
    )?;
    let mut search = WebSearch::default();
    if let Some(filters) = m.filters.as_ref().filter(|f| !f.is_null()) {
        let at = Path::Member(param, "filters");
        let f = object(filters, &at)?;
        known(f.first_unknown(&["allowed_domains"]), &at)?;
        match &f.allowed_domains {
            None | Some(Loose::Null) => {}
            Some(Loose::Array(domains)) => {
                for (k, d) in domains.iter().enumerate() {
                    let domain = d.as_str().ok_or_else(|| {
                        wrong_type(format!("{at}.allowed_domains[{k}]"), "a string")
                    })?;
                    search.allowed_domains.push(domain.to_owned());
                }
            }
            Some(_) => {
                return Err(wrong_type(
                    format!("{at}.allowed_domains"),
                    "an array of strings",
                ))
            }
        }
    }
    if let Some(location) = m.user_location.as_ref().filter(|l| !l.is_null()) {
        let at = Path::Member(param, "user_location");
        let l = object(location, &at)?;
        known(
            l.first_unknown(&["type", "city", "region", "country", "timezone"]),
            &at,
        )?;
        if let Some(kind) = string(&l.kind, &at, "type")?.filter(|k| *k != "approximate") {
            return Err(invalid(
                format!("{at}.type"),
                format!("Invalid value: '{kind}'. Supported values are: 'approximate'."),
            ));
        }
        let text = |value, key| string(value, &at, key).map(|s| s.map(str::to_owned));
        search.user_location = Some(UserLocation {
            city: text(&l.city, "city")?,
            region: text(&l.region, "region")?,
            country: text(&l.country, "country")?,
            timezone: text(&l.timezone, "timezone")?,
        });
    }
    if let Some(size) = string(&m.search_context_size, param, "search_context_size")? {
        if !["low", "medium", "high"].contains(&size) {
            return Err(invalid(
                format!("{param}.search_context_size"),
                format!(
                    "Invalid value: '{size}'. Supported values are: 'low', 'medium' and 'high'."
                ),
            ));
        }
    }
    if m.external_web_access
        .as_ref()
        .is_some_and(|v| !matches!(v, Loose::Null | Loose::Bool(_)))
    {
        return Err(wrong_type(
            format!("{param}.external_web_access"),
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
    m: &client::Tool,
    param: &Path,
    namespace: Option<&str>,
) -> Result<()> {
    known(
        m.first_unknown(&[
            "type",
            "name",
            "description",
            "parameters",
            "strict",
            "defer_loading",
        ]),
        param,
    )?;
    let parameters = match m.parameters {
        None => None,
        Some(raw) if raw.get() == "null" => None,
        Some(raw) if raw.get().starts_with('{') => Some(to_value(raw)?),
        Some(_) => {
            return Err(wrong_type(
                format!("{param}.parameters"),
                "a JSON Schema object",
            ))
        }
    };
    let strict = match &m.strict {
        None | Some(Loose::Null) => None,
        Some(Loose::Bool(s)) => Some(*s),
        Some(_) => return Err(wrong_type(format!("{param}.strict"), "a boolean")),
    };
    let name = required_string(&m.name, param, "name")?;
    let name = match namespace {
        Some(namespace) => super::super::flat_name(namespace, name),
        None => name.to_owned(),
    };
    // One name, one tool: a namespaced tool's flat name must stay its own.
    if b.request.tools.iter().any(|t| t.function.name == name) {
        return Err(invalid(
            format!("{param}.name"),
            format!("Duplicate tool name: '{name}'."),
        ));
    }
    b.request.tools.push(Tool {
        kind: ToolKind::Function,
        function: FunctionDef {
            name,
            description: string(&m.description, param, "description")?.map(str::to_owned),
            parameters,
            strict,
        },
        cache_control: None,
    });
    Ok(())
}

pub(super) fn tool_choice(
    b: &mut Builder,
    choice: &Loose<client::ToolChoice>,
) -> Result<ToolChoice> {
    match choice {
        Loose::Str(s) => match &**s {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(invalid(
                "tool_choice",
                format!("Invalid value: '{other}'. Supported values are: 'none', 'auto', and 'required'."),
            )),
        },
        Loose::Object(m) => {
            let kind = required_string(&m.kind, &Path::Top("tool_choice"), "type")?;
            if kind == "function" {
                known(m.first_unknown(&["type", "name"]), &Path::Top("tool_choice"))?;
                return Ok(ToolChoice::Function(
                    required_string(&m.name, &Path::Top("tool_choice"), "name")?.to_owned(),
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

const FORMAT: Path = Path::Top("text.format");

/// `text.format`: `text`, `json_object`, or a flat `json_schema`.
pub(super) fn text_format(raw: &RawValue) -> Result<ResponseFormat> {
    let format: Option<Loose<client::Format>> = view(Some(raw))?;
    let Some(Loose::Object(m)) = &format else {
        return Err(wrong_type("text.format", "an object"));
    };
    match required_string(&m.kind, &FORMAT, "type")? {
        "text" => {
            known(m.first_unknown(&["type"]), &FORMAT)?;
            Ok(ResponseFormat::Text)
        }
        "json_object" => {
            known(m.first_unknown(&["type"]), &FORMAT)?;
            Ok(ResponseFormat::JsonObject)
        }
        "json_schema" => {
            known(
                m.first_unknown(&["type", "name", "schema", "strict", "description"]),
                &FORMAT,
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
            // Read from the JSON value, as ever: serde's own errors name
            // what is wrong.
            let flat = Flat::deserialize(to_value(raw)?)
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
