//! Input items: messages (and their content parts), function calls and
//! their outputs, reasoning, and the built-in tools' items.

use super::*;
use crate::wire::openai_responses::client::{Item, List, Part};

pub(super) fn input_item(b: &mut Builder, item: &Loose<Item>, param: &Path) -> Result<()> {
    let m = object(item, param)?;
    let kind = string(&m.kind, param, "type")?.unwrap_or("message");
    match kind {
        "message" => message(b, m, param),
        "function_call" => {
            known(
                m.first_unknown(&[
                    "type",
                    "id",
                    "call_id",
                    "name",
                    "arguments",
                    "status",
                    "namespace",
                    "caller",
                ]),
                param,
            )?;
            let name = required_string(&m.name, param, "name")?;
            let call = ToolCall {
                id: required_string(&m.call_id, param, "call_id")?.to_owned(),
                kind: "function".into(),
                function: FunctionCall {
                    // A namespaced tool's call, as the vendor named it.
                    name: match string(&m.namespace, param, "namespace")? {
                        Some(namespace) => super::super::flat_name(namespace, name),
                        None => name.to_owned(),
                    },
                    arguments: required_string(&m.arguments, param, "arguments")?.to_owned(),
                },
            };
            if let Some(Message::Assistant { tool_calls, .. }) = b.assistant(true) {
                tool_calls.push(call);
            }
            Ok(())
        }
        "function_call_output" => {
            known(
                m.first_unknown(&[
                    "type",
                    "id",
                    "call_id",
                    "output",
                    "status",
                    "name",
                    "namespace",
                    "caller",
                ]),
                param,
            )?;
            let tool_call_id = required_string(&m.call_id, param, "call_id")?.to_owned();
            let output = Path::Member(param, "output");
            let content = match &m.output {
                Some(Loose::Str(s)) => Content::Text(s.clone().into_owned()),
                Some(Loose::Array(parts)) => Content::Parts(
                    parts
                        .iter()
                        .enumerate()
                        .map(|(j, p)| input_part(b, p, &Path::Index(&output, j)))
                        .collect::<Result<_>>()?,
                ),
                Some(_) => return Err(wrong_type(output, "a string or an array of content parts")),
                None => {
                    return Err(invalid(
                        output,
                        format!("Missing required parameter: '{output}'."),
                    ))
                }
            };
            b.request.messages.push(Message::Tool {
                content,
                tool_call_id,
                is_error: false,
                cache_control: None,
            });
            Ok(())
        }
        "reasoning" => {
            known(
                m.first_unknown(&[
                    "type",
                    "id",
                    "summary",
                    "content",
                    "encrypted_content",
                    "status",
                ]),
                param,
            )?;
            let mut text = String::new();
            for (key, list) in [("summary", &m.summary), ("content", &m.content)] {
                let list = match list {
                    None | Some(Loose::Null) => continue,
                    Some(Loose::Array(list)) => list,
                    Some(_) => return Err(wrong_type(Path::Member(param, key), "an array")),
                };
                for (j, part) in list.iter().enumerate() {
                    let list_path = Path::Member(param, key);
                    let p = Path::Index(&list_path, j);
                    let part = object(part, &p)?;
                    known(part.first_unknown(&["type", "text"]), &p)?;
                    text.push_str(required_string(&part.text, &p, "text")?);
                }
                // The summary is what the client saw; the raw content, when
                // it is there, is the same thought in full.
                if !text.is_empty() {
                    break;
                }
            }
            // The gateway's signature of translated thinking, or an
            // encrypted block (kept as redacted thinking).
            let encrypted = string(&m.encrypted_content, param, "encrypted_content")?;
            let (signature, redacted) = match encrypted {
                Some(e) => match e.strip_prefix(super::super::SIGNATURE_PREFIX) {
                    Some(signature) => (Some(signature.to_owned()), None),
                    None => (None, Some(e.to_owned())),
                },
                None => (None, None),
            };
            if !text.is_empty() || redacted.is_some() {
                b.reasoning.push(Thinking {
                    text,
                    signature,
                    redacted,
                });
            }
            Ok(())
        }
        // A search the vendor ran: its findings are in the answer that
        // followed, and no other vendor can take the call itself.
        "web_search_call" => known(m.first_unknown(&["type", "id", "status", "action"]), param),
        // A reference to a vendor's stored item (the gateway's own were
        // resolved before parsing).
        "item_reference" => {
            b.native_only(
                param,
                "an item_reference to an item the gateway did not store (its own item ids end \
                 in `_gw…`) needs the vendor that stored it: this model group's provider cannot \
                 take it",
            );
            Ok(())
        }
        kind if BUILT_IN_ITEMS.contains(&kind) => {
            b.native_only(
                param,
                format!("input items of type '{kind}' need OpenAI's own Responses API; this model group's provider cannot take them"),
            );
            Ok(())
        }
        other => Err(invalid(
            format!("{param}.type"),
            format!("Invalid value: '{other}'."),
        )),
    }
}

fn message(b: &mut Builder, m: &Item, param: &Path) -> Result<()> {
    known(
        m.first_unknown(&["type", "id", "role", "content", "status", "phase"]),
        param,
    )?;
    let role = required_string(&m.role, param, "role")?;
    let content_param = Path::Member(param, "content");
    let content = m.content.as_ref().ok_or_else(|| {
        invalid(
            content_param,
            format!("Missing required parameter: '{content_param}'."),
        )
    })?;
    if role == "assistant" {
        let (text, refusal) = assistant_content(content, &content_param)?;
        if let Some(Message::Assistant {
            content,
            refusal: r,
            ..
        }) = b.assistant(false)
        {
            *content = text.map(Content::Text);
            *r = refusal;
        }
        return Ok(());
    }
    let content = match content {
        Loose::Str(s) => Content::Text(s.clone().into_owned()),
        Loose::Array(parts) => Content::Parts(
            parts
                .iter()
                .enumerate()
                .map(|(j, p)| input_part(b, p, &Path::Index(&content_param, j)))
                .collect::<Result<_>>()?,
        ),
        _ => {
            return Err(wrong_type(
                content_param,
                "a string or an array of content parts",
            ))
        }
    };
    b.request.messages.push(match role {
        "user" => Message::User { content, name: None },
        "system" => Message::System { content, name: None },
        "developer" => Message::Developer { content, name: None },
        other => {
            return Err(invalid(
                format!("{param}.role"),
                format!("Invalid value: '{other}'. Supported values are: 'assistant', 'system', 'developer', and 'user'."),
            ))
        }
    });
    Ok(())
}

/// An assistant message's history: its text and its refusal.
fn assistant_content(
    content: &List<Part>,
    param: &Path,
) -> Result<(Option<String>, Option<String>)> {
    let parts = match content {
        Loose::Str(s) => return Ok((Some(s.clone().into_owned()), None)),
        Loose::Array(parts) => parts,
        _ => return Err(wrong_type(param, "a string or an array of content parts")),
    };
    let (mut text, mut refusal) = (None::<String>, None::<String>);
    for (j, part) in parts.iter().enumerate() {
        let p = Path::Index(param, j);
        let m = object(part, &p)?;
        match required_string(&m.kind, &p, "type")? {
            "output_text" | "input_text" => {
                known(
                    m.first_unknown(&["type", "text", "annotations", "logprobs"]),
                    &p,
                )?;
                text.get_or_insert_with(String::new)
                    .push_str(required_string(&m.text, &p, "text")?);
            }
            "refusal" => {
                known(m.first_unknown(&["type", "refusal"]), &p)?;
                refusal
                    .get_or_insert_with(String::new)
                    .push_str(required_string(&m.refusal, &p, "refusal")?);
            }
            other => {
                return Err(invalid(
                    format!("{p}.type"),
                    format!(
                    "Invalid value: '{other}'. Assistant content is 'output_text' or 'refusal'."
                ),
                ))
            }
        }
    }
    Ok((text, refusal))
}

/// A user, system or developer content part (also a tool output's).
fn input_part(b: &mut Builder, part: &Loose<Part>, param: &Path) -> Result<ContentPart> {
    let m = object(part, param)?;
    match required_string(&m.kind, param, "type")? {
        "input_text" => {
            known(
                m.first_unknown(&["type", "text", "prompt_cache_breakpoint"]),
                param,
            )?;
            Ok(ContentPart::Text {
                text: required_string(&m.text, param, "text")?.to_owned(),
                cache_control: breakpoint(&m.prompt_cache_breakpoint, param)?,
            })
        }
        "input_image" => {
            known(
                m.first_unknown(&[
                    "type",
                    "image_url",
                    "file_id",
                    "detail",
                    "prompt_cache_breakpoint",
                ]),
                param,
            )?;
            let detail = string(&m.detail, param, "detail")?.map(str::to_owned);
            if let Some(url) = string(&m.image_url, param, "image_url")? {
                let image_url = ImageUrl {
                    url: url.to_owned(),
                    detail,
                };
                image_url
                    .parse()
                    .map_err(|e| invalid(format!("{param}.image_url"), e))?;
                return Ok(ContentPart::ImageUrl {
                    image_url,
                    cache_control: breakpoint(&m.prompt_cache_breakpoint, param)?,
                });
            }
            if string(&m.file_id, param, "file_id")?.is_some() {
                b.native_only(param, "uploaded files (file_id) live on OpenAI's servers; this model group's provider cannot read them");
                return Ok(ContentPart::text(""));
            }
            Err(invalid(
                format!("{param}.image_url"),
                format!("Missing required parameter: '{param}.image_url'."),
            ))
        }
        "input_file" => {
            known(
                m.first_unknown(&[
                    "type",
                    "file_data",
                    "file_id",
                    "file_url",
                    "filename",
                    "prompt_cache_breakpoint",
                ]),
                param,
            )?;
            let title = string(&m.filename, param, "filename")?.map(str::to_owned);
            let source = if let Some(data) = string(&m.file_data, param, "file_data")? {
                let (media_type, data) = data
                    .strip_prefix("data:")
                    .and_then(|rest| rest.split_once(','))
                    .and_then(|(meta, data)| Some((meta.strip_suffix(";base64")?, data)))
                    .ok_or_else(|| {
                        invalid(
                            format!("{param}.file_data"),
                            "file_data must be a base64 data URL (data:<media type>;base64,...)",
                        )
                    })?;
                DocumentSource::Base64 {
                    media_type: media_type.to_owned(),
                    data: data.to_owned(),
                }
            } else if let Some(url) = string(&m.file_url, param, "file_url")? {
                DocumentSource::Url(url.to_owned())
            } else if string(&m.file_id, param, "file_id")?.is_some() {
                b.native_only(param, "uploaded files (file_id) live on OpenAI's servers; this model group's provider cannot read them");
                return Ok(ContentPart::text(""));
            } else {
                return Err(invalid(
                    param,
                    "input_file needs file_data, file_url or file_id",
                ));
            };
            Ok(ContentPart::Document(Document {
                source,
                title,
                cache_control: breakpoint(&m.prompt_cache_breakpoint, param)?,
            }))
        }
        other => Err(invalid(
            format!("{param}.type"),
            format!("Invalid value: '{other}'. Supported values are: 'input_text', 'input_image' and 'input_file'."),
        )),
    }
}

/// An input part's `prompt_cache_breakpoint`, `{"mode": "explicit",
/// "ttl"?: "30m" | "12h"}`: the neutral cache breakpoint after the part.
fn breakpoint(
    value: &Option<Loose<client::Breakpoint>>,
    param: &Path,
) -> Result<Option<CacheControl>> {
    let Some(value) = value.as_ref().filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let at = Path::Member(param, "prompt_cache_breakpoint");
    let b = object(value, &at)?;
    known(b.first_unknown(&["mode", "ttl"]), &at)?;
    let mode = required_string(&b.mode, &at, "mode")?;
    if mode != "explicit" {
        return Err(invalid(
            format!("{at}.mode"),
            format!("Invalid value: '{mode}'. Supported values are: 'explicit'."),
        ));
    }
    let ttl = match string(&b.ttl, &at, "ttl")? {
        None => None,
        Some(ttl @ ("30m" | "12h")) => Some(ttl.to_owned()),
        Some(other) => {
            return Err(invalid(
                format!("{at}.ttl"),
                format!("Invalid value: '{other}'. Supported values are: '30m' and '12h'."),
            ))
        }
    };
    Ok(Some(CacheControl { ttl }))
}
