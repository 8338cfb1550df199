//! OpenAI's rules by model that Chat Completions and the Responses API
//! apply to content parts and tools: which roles take which parts in Chat
//! Completions (an image only in a `user` message);
//! `prompt_cache_breakpoint` on input parts, which only GPT-5.6 and later
//! take; and, on Chat Completions, no function tools beside a reasoning
//! effort on GPT-5.2 and later.

use serde_json::Value;

use crate::dialect::Failure;

fn param(message: String, param: String) -> Failure {
    Failure::Param {
        message,
        param,
        code: None,
    }
}

/// Whether a model takes `prompt_cache_breakpoint` (platform.openai.com
/// prompt caching guide: "Supported for gpt-5.6 and later models").
pub fn takes_breakpoints(model: &str) -> bool {
    gpt_version(model).is_some_and(|v| v >= (5, 6))
}

/// A part's `prompt_cache_breakpoint` (`at`: the part's path):
/// `{"mode": "explicit", "ttl"?: "30m" | "12h"}`, on a model that takes it.
pub fn check_breakpoint(part: &Value, model: &str, at: &str) -> Result<(), Failure> {
    let Some(breakpoint) = part.get("prompt_cache_breakpoint") else {
        return Ok(());
    };
    let at = format!("{at}.prompt_cache_breakpoint");
    if !takes_breakpoints(model) {
        return Err(param(
            "prompt_cache_breakpoint is not supported on this model.".into(),
            at,
        ));
    }
    let Some(members) = breakpoint.as_object() else {
        return Err(param(
            format!("Invalid type for '{at}': expected an object."),
            at,
        ));
    };
    if let Some(unknown) = members.keys().find(|k| *k != "mode" && *k != "ttl") {
        return Err(param(
            format!("Unknown parameter: '{at}.{unknown}'."),
            format!("{at}.{unknown}"),
        ));
    }
    if breakpoint.get("mode").and_then(Value::as_str) != Some("explicit") {
        return Err(param(
            "Invalid value. Supported values are: 'explicit'.".into(),
            format!("{at}.mode"),
        ));
    }
    match breakpoint.get("ttl") {
        None => Ok(()),
        Some(ttl) if ttl == "30m" || ttl == "12h" => Ok(()),
        Some(ttl) => Err(param(
            format!("Invalid value: {ttl}. Supported values are: '30m' and '12h'."),
            format!("{at}.ttl"),
        )),
    }
}

/// A GPT model's version by its name (`gpt-5.4-mini` → 5.4).
fn gpt_version(model: &str) -> Option<(u32, u32)> {
    let version = model.strip_prefix("gpt-")?;
    let number = |s: &str| -> Option<u32> {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let mut parts = version.splitn(2, '.');
    let major = parts.next().and_then(number)?;
    Some((major, parts.next().and_then(number).unwrap_or(0)))
}

/// Chat Completions on GPT-5.2 and later (their `-chat` models apart)
/// refuses function tools beside a reasoning effort other than `none`
/// (OpenAI's 400, param `reasoning_effort`).
pub fn check_reasoning_with_tools(
    obj: &serde_json::Map<String, Value>,
    model: &str,
) -> Result<(), Failure> {
    let recent = gpt_version(model).is_some_and(|v| v >= (5, 2)) && !model.contains("-chat");
    let function_tools = obj.get("tools").and_then(Value::as_array).is_some_and(|t| {
        t.iter()
            .any(|t| t.get("type").and_then(Value::as_str) == Some("function"))
    });
    let effort = obj.get("reasoning_effort").and_then(Value::as_str);
    if recent && function_tools && effort.is_some_and(|e| e != "none") {
        return Err(param(
            format!(
                "Function tools with reasoning_effort are not supported for {model} in \
                 /v1/chat/completions. To use function tools, use /v1/responses or set \
                 reasoning_effort to 'none'."
            ),
            "reasoning_effort".into(),
        ));
    }
    Ok(())
}

/// Chat Completions' messages' parts: an image only in a user message
/// ("Image URLs are only allowed for messages with role 'user'"), and each
/// part's breakpoint.
pub fn check_chat_parts(messages: &[Value], model: &str) -> Result<(), Failure> {
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        let Some(parts) = m.get("content").and_then(Value::as_array) else {
            continue;
        };
        for (j, part) in parts.iter().enumerate() {
            if part.get("type").and_then(Value::as_str) == Some("image_url") && role != "user" {
                return Err(param(
                    format!(
                        "Invalid 'messages[{i}]'. Image URLs are only allowed for messages \
                         with role 'user', but this message with role '{role}' contains an image URL."
                    ),
                    format!("messages[{i}]"),
                ));
            }
            check_breakpoint(part, model, &format!("messages[{i}].content[{j}]"))?;
        }
    }
    Ok(())
}

/// The Responses API's input messages' parts: each one's breakpoint.
pub fn check_input_parts(items: &[Value], model: &str) -> Result<(), Failure> {
    for (i, item) in items.iter().enumerate() {
        let parts = item
            .get("content")
            .or_else(|| item.get("output"))
            .and_then(Value::as_array);
        for (j, part) in parts.into_iter().flatten().enumerate() {
            let field = if item.get("content").is_some() {
                "content"
            } else {
                "output"
            };
            check_breakpoint(part, model, &format!("input[{i}].{field}[{j}]"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn breakpoints_on_the_models_that_take_them() {
        assert!(takes_breakpoints("gpt-5.6") && takes_breakpoints("gpt-6-mini"));
        assert!(
            !takes_breakpoints("gpt-5.5")
                && !takes_breakpoints("gpt-4o")
                && !takes_breakpoints("o3")
        );
        let part = |b: Value| json!({"type": "text", "text": "x", "prompt_cache_breakpoint": b});
        assert!(check_breakpoint(
            &part(json!({"mode": "explicit", "ttl": "12h"})),
            "gpt-5.6",
            "p"
        )
        .is_ok());
        for (b, model) in [
            (json!({"mode": "explicit"}), "gpt-4o"),
            (json!({"mode": "implicit"}), "gpt-5.6"),
            (json!({"mode": "explicit", "ttl": "1h"}), "gpt-5.6"),
            (json!({"mode": "explicit", "x": 1}), "gpt-5.6"),
        ] {
            assert!(
                check_breakpoint(&part(b.clone()), model, "p").is_err(),
                "{b} {model}"
            );
        }
    }

    #[test]
    fn an_image_only_in_a_user_message() {
        let image = json!({"type": "image_url", "image_url": {"url": "https://x/y.png"}});
        let user = json!([{"role": "user", "content": [image]}]);
        assert!(check_chat_parts(user.as_array().unwrap(), "gpt-4o").is_ok());
        let tool = json!([{"role": "tool", "tool_call_id": "c", "content": [image]}]);
        let Err(Failure::Param { message, .. }) =
            check_chat_parts(tool.as_array().unwrap(), "gpt-4o")
        else {
            panic!("an image in a tool message is refused");
        };
        assert!(
            message.contains("only allowed for messages with role 'user'"),
            "{message}"
        );
    }
}
