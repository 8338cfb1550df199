//! A Gemini `GenerateContentRequest` (the body of `:generateContent`,
//! `:streamGenerateContent` and `:countTokens`) read into the neutral
//! request. The model and the stream flag are the path's (`PathFacts`,
//! set by the edge after this parse).
//!
//! What only Gemini has (a `fileData` URI, `cachedContent`, code
//! execution, built-in tools other than Google Search, audio or image
//! output) is marked `native_only`: it passes through to a Gemini provider
//! and is refused, naming it, for the others. Safety settings are Gemini's
//! too but only hints: dropped for the others.

use serde_json::{Map, Value};

use super::members;
use crate::error::GatewayError;
use crate::model::request::{
    ChatRequest, Content, ContentPart, Document, DocumentSource, Effort, FunctionCall, FunctionDef,
    ImageUrl, JsonSchema, Message, NativeOnly, Reasoning, ResponseFormat, Thinking, Tool, ToolCall,
    ToolChoice, ToolKind, WebSearch, MAX_MESSAGES,
};
use crate::wire::gemini::{
    Content as Turn, CountTokensRequest, GenerateContentRequest, GenerationConfig, Part,
    MAX_CANDIDATES,
};

/// A generation's body.
pub fn parse(body: &[u8]) -> Result<ChatRequest, GatewayError> {
    let request: GenerateContentRequest = read(body, &members::REQUEST)?;
    conversation_rules(&request)?;
    let mut chat = convert(request)?;
    chat.source_len = body.len();
    Ok(chat)
}

/// What Gemini refuses of a generation's conversation, in its words,
/// whatever vendor answers: no contents, a content without parts (one
/// whose role Gemini does not know is refused for its role, later).
fn conversation_rules(request: &GenerateContentRequest) -> Result<(), GatewayError> {
    if request.contents.is_empty() {
        return Err(GatewayError::invalid(
            "contents",
            "* GenerateContentRequest.contents: contents is not specified",
        ));
    }
    let known_role =
        |role: Option<&str>| matches!(role, None | Some("user" | "model" | "function"));
    if let Some(i) = request
        .contents
        .iter()
        .position(|c| c.parts.is_empty() && known_role(c.role.as_deref()))
    {
        return Err(GatewayError::invalid(
            format!("contents[{i}].parts"),
            format!(
                "* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."
            ),
        ));
    }
    Ok(())
}

/// A `:countTokens` body: `contents`, or a `generateContentRequest`.
pub fn parse_count(body: &[u8]) -> Result<ChatRequest, GatewayError> {
    let count: CountTokensRequest = read(body, &members::COUNT_TOKENS)?;
    let request = match (count.contents, count.generate_content_request) {
        (Some(_), Some(_)) => {
            return Err(GatewayError::invalid(
                "contents",
                "contents and generateContentRequest are mutually exclusive",
            ))
        }
        (Some(contents), None) => GenerateContentRequest {
            contents,
            ..GenerateContentRequest::default()
        },
        (None, Some(request)) => request,
        (None, None) => GenerateContentRequest::default(),
    };
    let mut chat = convert(request)?;
    chat.source_len = body.len();
    Ok(chat)
}

/// The body as `T`, its members first checked against `shape` (the
/// types are shared with answers, which ignore members they do not know).
fn read<'a, T: serde::Deserialize<'a>>(
    body: &'a [u8],
    shape: &members::Shape,
) -> Result<T, GatewayError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(GatewayError::invalid("body", "request body is empty"));
    }
    members::check(body, shape)?;
    serde_json::from_slice(body)
        .map_err(|e| GatewayError::invalid("body", format!("Invalid JSON payload received. {e}")))
}

/// The parsing state: the neutral request being built and the first
/// Gemini-only feature met.
struct Reader {
    native_only: Option<NativeOnly>,
    /// Calls seen in model turns: (id, name, answered).
    calls: Vec<(String, String, bool)>,
}

impl Reader {
    fn gemini_only(&mut self, param: String, what: &str) {
        if self.native_only.is_none() {
            self.native_only = Some(NativeOnly {
                param,
                message: format!("{what}: only providers that speak the Gemini API take this"),
            });
        }
    }
}

fn convert(request: GenerateContentRequest) -> Result<ChatRequest, GatewayError> {
    if request.contents.len() > MAX_MESSAGES {
        return Err(GatewayError::invalid(
            "contents",
            format!("at most {MAX_MESSAGES} contents are accepted"),
        ));
    }
    let mut reader = Reader {
        native_only: None,
        calls: Vec::new(),
    };
    let mut messages = Vec::with_capacity(request.contents.len() + 1);
    if let Some(system) = &request.system_instruction {
        let mut text = String::new();
        for (j, part) in system.parts.iter().enumerate() {
            match &part.text {
                Some(t) => text.push_str(t),
                None => {
                    return Err(GatewayError::invalid(
                        format!("systemInstruction.parts[{j}]"),
                        "a system instruction takes text parts only",
                    ))
                }
            }
        }
        messages.push(Message::System {
            content: Content::Text(text),
            name: None,
        });
    }
    for (i, turn) in request.contents.iter().enumerate() {
        match turn.role.as_deref().unwrap_or("user") {
            "model" => messages.push(model_turn(&mut reader, turn, i)?),
            "user" | "function" => user_turn(&mut reader, turn, i, &mut messages)?,
            other => {
                return Err(GatewayError::invalid(
                    format!("contents[{i}].role"),
                    format!("Please use a valid role: user, model (not {other:?})"),
                ))
            }
        }
    }
    let mut chat = ChatRequest {
        messages: messages.into(),
        include_usage: true,
        ..ChatRequest::default()
    };
    tools(&mut reader, &request, &mut chat)?;
    generation_config(&mut reader, &request.generation_config, &mut chat)?;
    if request.cached_content.is_some() {
        reader.gemini_only("cachedContent".into(), "a context cache");
    }
    if request.labels.is_some() {
        reader.gemini_only("labels".into(), "labels");
    }
    if request.continuation_token.is_some() {
        reader.gemini_only("continuationToken".into(), "a continuation token");
    }
    // `serviceTier` and `store` are Google's processing and logging
    // choices: dropped for other vendors (the other surfaces drop their
    // `service_tier` likewise).
    chat.native_only = reader.native_only;
    Ok(chat)
}

/// Parts Gemini alone takes (code execution, video metadata).
fn other_data(reader: &mut Reader, part: &Part, at: &str) {
    if part.executable_code.is_some() {
        reader.gemini_only(format!("{at}.executableCode"), "executable code");
    } else if part.code_execution_result.is_some() {
        reader.gemini_only(
            format!("{at}.codeExecutionResult"),
            "a code execution result",
        );
    } else if part.video_metadata.is_some() {
        reader.gemini_only(format!("{at}.videoMetadata"), "video metadata");
    }
}

fn user_turn(
    reader: &mut Reader,
    turn: &Turn,
    i: usize,
    messages: &mut Vec<Message>,
) -> Result<(), GatewayError> {
    let mut parts = Vec::new();
    for (j, part) in turn.parts.iter().enumerate() {
        let at = format!("contents[{i}].parts[{j}]");
        if let Some(response) = &part.function_response {
            let id =
                answered_call(reader, response.id.as_deref(), &response.name).ok_or_else(|| {
                    GatewayError::invalid(
                        format!("{at}.functionResponse"),
                        format!(
                            "no earlier functionCall of {:?} is unanswered",
                            &*response.name
                        ),
                    )
                })?;
            let is_error = response
                .response
                .as_object()
                .is_some_and(|o| o.contains_key("error") && !o.contains_key("output"));
            let text = match &response.response {
                Value::Object(o) if o.len() == 1 => o
                    .get("output")
                    .or_else(|| o.get("result"))
                    .or_else(|| o.get("error"))
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_else(|| response.response.to_string()),
                other => other.to_string(),
            };
            // The images it returned (Gemini 3's multimodal responses)
            // go with its text; other media only to Gemini.
            let mut images = Vec::new();
            for (k, media) in response.parts.iter().enumerate() {
                match &media.inline_data {
                    Some(blob) if blob.mime_type.0.starts_with("image/") => {
                        images.push(ContentPart::ImageUrl {
                            image_url: ImageUrl {
                                url: format!("data:{};base64,{}", &*blob.mime_type, &*blob.data),
                                detail: None,
                            },
                            cache_control: None,
                        })
                    }
                    _ => reader.gemini_only(
                        format!("{at}.functionResponse.parts[{k}]"),
                        "media other than inline images in a function response",
                    ),
                }
            }
            let content = if images.is_empty() {
                Content::Text(text)
            } else {
                images.insert(0, ContentPart::text(text));
                Content::Parts(images)
            };
            messages.push(Message::Tool {
                content,
                tool_call_id: id,
                is_error,
                cache_control: None,
            });
        } else if let Some(text) = &part.text {
            parts.push(ContentPart::text(text.0.as_ref()));
        } else if let Some(blob) = &part.inline_data {
            let media_type = blob.mime_type.0.as_ref();
            if media_type.starts_with("image/") {
                parts.push(ContentPart::ImageUrl {
                    image_url: ImageUrl {
                        url: format!("data:{media_type};base64,{}", &*blob.data),
                        detail: None,
                    },
                    cache_control: None,
                });
            } else if media_type == "application/pdf" {
                parts.push(ContentPart::Document(Document {
                    source: DocumentSource::Base64 {
                        media_type: media_type.to_owned(),
                        data: blob.data.0.clone().into_owned(),
                    },
                    title: None,
                    cache_control: None,
                }));
            } else {
                reader.gemini_only(format!("{at}.inlineData"), &format!("{media_type} data"));
            }
        } else if part.file_data.is_some() {
            reader.gemini_only(
                format!("{at}.fileData"),
                "a file by URI (only Gemini fetches it)",
            );
        } else if part.function_call.is_some() {
            return Err(GatewayError::invalid(
                format!("{at}.functionCall"),
                "a functionCall belongs in a model turn",
            ));
        } else {
            other_data(reader, part, &at);
        }
    }
    if !parts.is_empty() {
        let content = match parts.as_slice() {
            [ContentPart::Text { text, .. }] => Content::Text(text.clone()),
            _ => Content::Parts(parts),
        };
        messages.push(Message::User {
            content,
            name: None,
        });
    }
    Ok(())
}

/// The id of the call a `functionResponse` answers: by its id when it
/// has one, else the first unanswered call of its name.
fn answered_call(reader: &mut Reader, id: Option<&str>, name: &str) -> Option<String> {
    let call = match id {
        Some(id) => reader.calls.iter_mut().find(|(c, _, _)| c == id),
        None => reader
            .calls
            .iter_mut()
            .find(|(_, n, answered)| n == name && !answered),
    }?;
    call.2 = true;
    Some(call.0.clone())
}

fn model_turn(reader: &mut Reader, turn: &Turn, i: usize) -> Result<Message, GatewayError> {
    let mut text: Option<String> = None;
    let mut reasoning: Vec<Thinking> = Vec::new();
    let mut tool_calls = Vec::new();
    for (j, part) in turn.parts.iter().enumerate() {
        let at = format!("contents[{i}].parts[{j}]");
        if part.is_thought() {
            // Another vendor's reasoning goes back to it with its
            // signature; Gemini's own signatures only Gemini checks.
            let carried = part
                .thought_signature
                .as_deref()
                .and_then(super::carried_signature);
            if let Some((data, true)) = &carried {
                reasoning.push(Thinking {
                    redacted: Some(data.clone()),
                    ..Thinking::default()
                });
                continue;
            }
            let piece = part.text.as_deref().unwrap_or("");
            let open = reasoning
                .last_mut()
                .filter(|t| t.signature.is_none() && t.redacted.is_none());
            match open {
                Some(block) => block.text.push_str(piece),
                None => reasoning.push(Thinking {
                    text: piece.to_owned(),
                    ..Thinking::default()
                }),
            }
            if let (Some((signature, _)), Some(block)) = (carried, reasoning.last_mut()) {
                block.signature = Some(signature);
            }
        } else if let Some(call) = &part.function_call {
            let id = match call.id.as_deref() {
                Some(id) if !id.is_empty() => id.to_owned(),
                _ => format!("call_{i}_{j}"),
            };
            let arguments = match &call.args {
                Some(args @ Value::Object(_)) => args.to_string(),
                None | Some(Value::Null) => "{}".to_owned(),
                Some(_) => {
                    return Err(GatewayError::invalid(
                        format!("{at}.functionCall.args"),
                        "args must be an object",
                    ))
                }
            };
            reader
                .calls
                .push((id.clone(), call.name.0.to_string(), false));
            tool_calls.push(ToolCall {
                id,
                kind: "function".into(),
                function: FunctionCall {
                    name: call.name.0.to_string(),
                    arguments,
                },
            });
        } else if let Some(t) = &part.text {
            text.get_or_insert_with(String::new).push_str(t);
        } else if part.function_response.is_some() {
            return Err(GatewayError::invalid(
                format!("{at}.functionResponse"),
                "a functionResponse belongs in a user turn",
            ));
        } else if part.inline_data.is_some() || part.file_data.is_some() {
            reader.gemini_only(at, "data in a model turn");
        } else {
            other_data(reader, part, &at);
        }
    }
    Ok(Message::Assistant {
        content: text.map(Content::Text),
        reasoning,
        tool_calls,
        refusal: None,
        name: None,
    })
}

fn tools(
    reader: &mut Reader,
    request: &GenerateContentRequest,
    chat: &mut ChatRequest,
) -> Result<(), GatewayError> {
    let mut tools = Vec::new();
    for (t, tool) in request.tools.iter().enumerate() {
        for (f, declaration) in tool.function_declarations.iter().enumerate() {
            let parameters = match (&declaration.parameters_json_schema, &declaration.parameters) {
                (Some(schema), _) => Some(schema.clone().into_owned()),
                (None, Some(schema)) => Some(json_schema_of(schema)),
                (None, None) => None,
            };
            if declaration.name.is_empty() {
                return Err(GatewayError::invalid(
                    format!("tools[{t}].functionDeclarations[{f}].name"),
                    "a function declaration needs a name",
                ));
            }
            tools.push(Tool {
                kind: ToolKind::Function,
                function: FunctionDef {
                    name: declaration.name.0.to_string(),
                    description: declaration.description.as_deref().map(str::to_owned),
                    parameters,
                    strict: None,
                },
                cache_control: None,
            });
        }
        if tool.google_search.is_some() || tool.google_search_retrieval.is_some() {
            chat.web_search = Some(WebSearch::default());
        } else if let Some(name) = tool.built_in() {
            reader.gemini_only(format!("tools[{t}].{name}"), name);
        }
    }
    if let Some(config) = request
        .tool_config
        .as_ref()
        .and_then(|c| c.function_calling_config.as_ref())
    {
        let names = config.allowed_function_names.as_deref().unwrap_or_default();
        chat.tool_choice = match config.mode.as_deref() {
            None | Some("AUTO" | "MODE_UNSPECIFIED" | "VALIDATED") => Some(ToolChoice::Auto),
            Some("NONE") => Some(ToolChoice::None),
            Some("ANY") => match names {
                [one] => Some(ToolChoice::Function(one.0.to_string())),
                _ => Some(ToolChoice::Required),
            },
            Some(other) => {
                return Err(GatewayError::invalid(
                    "toolConfig.functionCallingConfig.mode",
                    format!("Invalid value {other:?}: AUTO, ANY, NONE or VALIDATED"),
                ))
            }
        };
    }
    chat.tools = tools.into();
    Ok(())
}

/// Gemini's OpenAPI-subset schema (`type: OBJECT`, `nullable`) as JSON
/// Schema: types in lowercase, `nullable` as a type union.
pub fn json_schema_of(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            let nullable = map.get("nullable") == Some(&Value::Bool(true));
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("nullable", _) => {}
                    ("type", Value::String(t)) => {
                        let t = Value::String(t.to_ascii_lowercase());
                        let t = if nullable {
                            Value::Array(vec![t, Value::String("null".into())])
                        } else {
                            t
                        };
                        out.insert(key.clone(), t);
                    }
                    ("properties" | "$defs" | "definitions", Value::Object(props)) => {
                        let props = props
                            .iter()
                            .map(|(k, v)| (k.clone(), json_schema_of(v)))
                            .collect();
                        out.insert(key.clone(), Value::Object(props));
                    }
                    ("items" | "additionalProperties" | "not", v) => {
                        out.insert(key.clone(), json_schema_of(v));
                    }
                    ("anyOf" | "oneOf" | "allOf", Value::Array(items)) => {
                        out.insert(
                            key.clone(),
                            Value::Array(items.iter().map(json_schema_of).collect()),
                        );
                    }
                    // Gemini's ordering hint: JSON Schema has none.
                    ("propertyOrdering", _) => {}
                    _ => {
                        out.insert(key.clone(), value.clone());
                    }
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn generation_config(
    reader: &mut Reader,
    config: &GenerationConfig,
    chat: &mut ChatRequest,
) -> Result<(), GatewayError> {
    const AT: &str = "generationConfig";
    chat.stop = config.stop_sequences.to_vec();
    chat.temperature = config.temperature;
    chat.top_p = config.top_p;
    chat.top_k = match config.top_k {
        Some(k) if k >= 0.0 && k.fract() == 0.0 && k <= f64::from(u32::MAX) => Some(k as u32),
        Some(_) => {
            return Err(GatewayError::invalid(
                format!("{AT}.topK"),
                "topK must be a non-negative integer",
            ))
        }
        None => None,
    };
    chat.max_tokens = config.max_output_tokens;
    chat.seed = config.seed;
    if let Some(n) = config.candidate_count.filter(|&n| n != 1) {
        if n == 0 || n > MAX_CANDIDATES {
            return Err(GatewayError::invalid(
                format!("{AT}.candidateCount"),
                format!("candidateCount must be between 1 and {MAX_CANDIDATES}"),
            ));
        }
        chat.n = Some(n);
    }
    for (name, value) in [
        ("presence_penalty", config.presence_penalty),
        ("frequency_penalty", config.frequency_penalty),
    ] {
        if let Some(v) = value.and_then(serde_json::Number::from_f64) {
            chat.extra.insert(name.into(), Value::Number(v));
        }
    }
    let json = match config.response_mime_type.as_deref() {
        None | Some("text/plain") => false,
        Some("application/json") => true,
        Some(other) => {
            reader.gemini_only(
                format!("{AT}.responseMimeType"),
                &format!("responseMimeType {other:?}"),
            );
            false
        }
    };
    let schema = match (&config.response_json_schema, &config.response_schema) {
        (Some(schema), _) => Some(schema.clone().into_owned()),
        (None, Some(schema)) => Some(json_schema_of(schema)),
        (None, None) => None,
    };
    chat.response_format = match (json, schema) {
        (true, Some(schema)) => Some(ResponseFormat::JsonSchema {
            json_schema: JsonSchema {
                name: "response".into(),
                description: None,
                schema: Some(schema),
                strict: None,
            },
        }),
        (true, None) => Some(ResponseFormat::JsonObject),
        (false, Some(_)) => {
            return Err(GatewayError::invalid(
                format!("{AT}.responseSchema"),
                "a response schema needs responseMimeType application/json",
            ))
        }
        (false, None) => None,
    };
    if let Some(thinking) = &config.thinking_config {
        let effort = match thinking.thinking_level.as_deref() {
            None => None,
            Some(level) => Some(Effort::parse(&level.to_ascii_lowercase()).ok_or_else(|| {
                GatewayError::invalid(
                    format!("{AT}.thinkingConfig.thinkingLevel"),
                    "thinkingLevel must be minimal, low, medium or high",
                )
            })?),
        };
        chat.reasoning = match (thinking.thinking_budget, effort) {
            (Some(0), None) => Some(Reasoning {
                effort: Some(Effort::None),
                budget_tokens: None,
            }),
            // -1: Gemini's dynamic thinking, the vendor's own default.
            (Some(budget), effort) if budget > 0 => Some(Reasoning {
                effort,
                budget_tokens: u32::try_from(budget).ok(),
            }),
            (_, Some(effort)) => Some(Reasoning {
                effort: Some(effort),
                budget_tokens: None,
            }),
            (Some(-1) | None, None) => None,
            (Some(_), None) => {
                return Err(GatewayError::invalid(
                    format!("{AT}.thinkingConfig.thinkingBudget"),
                    "thinkingBudget must be -1, 0 or positive",
                ))
            }
        };
    }
    let modalities_text_only = config.response_modalities.as_ref().is_none_or(|m| {
        m.as_array().is_some_and(|a| {
            a.iter()
                .all(|x| x.as_str().is_some_and(|s| s.eq_ignore_ascii_case("text")))
        })
    });
    if !modalities_text_only {
        reader.gemini_only(format!("{AT}.responseModalities"), "output other than text");
    }
    for (name, set) in [
        ("speechConfig", config.speech_config.is_some()),
        ("imageConfig", config.image_config.is_some()),
        ("responseLogprobs", config.response_logprobs == Some(true)),
        ("logprobs", config.logprobs.is_some()),
        ("mediaResolution", config.media_resolution.is_some()),
        (
            "audioTranscriptionConfig",
            config.audio_transcription_config.is_some(),
        ),
    ] {
        if set {
            reader.gemini_only(format!("{AT}.{name}"), name);
        }
    }
    Ok(())
}
