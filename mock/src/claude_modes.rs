//! Claude's thinking modes by model version, wherever Claude runs
//! (Anthropic's API, Bedrock, Vertex AI): adaptive thinking from Claude
//! 4.6 on ("Adaptive thinking"), and only adaptive thinking from 4.7 on
//! (`enabled` refused: "Use thinking.type.adaptive and output_config.effort
//! to control thinking behavior"); `output_config.effort`'s values.

/// A Claude model id's version (`claude-opus-4-6`, `claude-3-7-sonnet-…`,
/// `anthropic.claude-sonnet-4-20250514-v1:0`); `None` for a name without
/// one (the mock's own `mock-claude-sonnet`, which takes every mode).
pub fn version(model: &str) -> Option<(u32, u32)> {
    let rest = model.get(model.find("claude-")? + "claude-".len()..)?;
    let mut numbers = rest
        .split(['-', '.', ':', '@'])
        .filter(|t| !t.is_empty() && t.len() <= 2 && t.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|t| t.parse::<u32>().ok());
    let major = numbers.next()?;
    Some((major, numbers.next().unwrap_or(0)))
}

/// Claude's refusal of a thinking `type` its model does not take.
pub fn check_mode(kind: &str, model: &str) -> Result<(), String> {
    let Some(v) = version(model) else {
        return Ok(());
    };
    match kind {
        "adaptive" if v < (4, 6) => Err(format!(
            "\"thinking.type.adaptive\" is not supported for this model ({model}). Use \
             \"thinking.type.enabled\" with \"budget_tokens\"."
        )),
        "enabled" if v >= (4, 7) => Err(
            "\"thinking.type.enabled\" is not supported for this model. Use \
             \"thinking.type.adaptive\" and \"output_config.effort\" to control thinking behavior."
                .to_owned(),
        ),
        _ => Ok(()),
    }
}

/// `output_config.effort`'s values.
pub const EFFORTS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_by_version() {
        assert_eq!(version("anthropic.claude-opus-4-6-v1"), Some((4, 6)));
        assert_eq!(version("claude-3-7-sonnet-20250219"), Some((3, 7)));
        assert_eq!(
            version("anthropic.claude-sonnet-4-20250514-v1:0"),
            Some((4, 0))
        );
        assert_eq!(version("mock-claude-sonnet"), None);
        assert!(check_mode("adaptive", "claude-sonnet-4-20250514").is_err());
        assert!(check_mode("adaptive", "claude-opus-4-6").is_ok());
        assert!(check_mode("enabled", "claude-opus-4-6").is_ok());
        assert!(check_mode("enabled", "claude-opus-4-7").is_err());
        assert!(check_mode("enabled", "mock-claude-sonnet").is_ok());
    }
}
