//! Long strings written into JSON fast.
//!
//! serde_json escapes a string one byte at a time: a 100 KB prompt costs
//! ~170 µs natively (more in V8), most of a request's encode time. Long
//! texts (messages, tool results) go through [`serialize`] instead: escaped
//! eight bytes at a time and handed to serde_json as a raw value, which
//! serde_json checks with its own fast string scan and copies as it is. The
//! output is byte for byte what serde_json writes.

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::formats::swar;

/// Shorter strings take serde_json's own path: the raw value's check and
/// copy cost more than they save.
const FAST_FROM: usize = 256;

/// `#[serde(serialize_with = "crate::formats::json_text::serialize")]` for a text field.
pub fn serialize<T, S>(text: &T, serializer: S) -> Result<S::Ok, S::Error>
where
    T: AsRef<str> + ?Sized,
    S: Serializer,
{
    let text = text.as_ref();
    if text.len() < FAST_FROM {
        return serializer.serialize_str(text);
    }
    match RawValue::from_string(escape(text)) {
        Ok(raw) => raw.serialize(serializer),
        // Cannot happen (the escaping is tested against serde_json's); the
        // slow path is still right.
        Err(_) => serializer.serialize_str(text),
    }
}

/// The same, for an optional text field.
pub fn serialize_option<T, S>(text: &Option<T>, serializer: S) -> Result<S::Ok, S::Error>
where
    T: AsRef<str>,
    S: Serializer,
{
    match text {
        Some(text) => serialize(text, serializer),
        None => serializer.serialize_none(),
    }
}

/// Whether any of the eight bytes in `word` needs escaping: a control
/// character (< 0x20), `"` or `\`.
fn needs_escape(word: u64) -> bool {
    swar::has_byte_below(word, 0x20) || swar::has_byte(word, b'"') || swar::has_byte(word, b'\\')
}

/// `text` as a JSON string literal, escaped exactly as serde_json does.
fn escape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(bytes.len() + bytes.len() / 8 + 2);
    out.push('"');
    let mut run_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        i += swar::skip_words(bytes.get(i..).unwrap_or_default(), needs_escape);
        let Some(&byte) = bytes.get(i) else { break };
        let short = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => {
                i += 1;
                continue;
            }
        };
        // Runs end at ASCII bytes, so the slices fall on char boundaries.
        out.push_str(text.get(run_start..i).unwrap_or_default());
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(
                HEX.get(usize::from(byte >> 4)).copied().unwrap_or(b'0'),
            ));
            out.push(char::from(
                HEX.get(usize::from(byte & 0xf)).copied().unwrap_or(b'0'),
            ));
        } else {
            out.push_str(short);
        }
        i += 1;
        run_start = i;
    }
    out.push_str(text.get(run_start..).unwrap_or_default());
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Field<'a> {
        #[serde(serialize_with = "serialize")]
        text: &'a str,
        #[serde(serialize_with = "serialize_option")]
        maybe: Option<&'a str>,
    }

    fn assert_as_serde_json(text: &str) {
        assert_eq!(
            escape(text),
            serde_json::to_string(text).unwrap(),
            "{text:?}"
        );
        let ours = serde_json::to_string(&Field {
            text,
            maybe: Some(text),
        })
        .unwrap();
        let quoted = serde_json::to_string(text).unwrap();
        let theirs = format!(r#"{{"text":{quoted},"maybe":{quoted}}}"#);
        assert_eq!(ours, theirs);
    }

    #[test]
    fn escapes_exactly_as_serde_json() {
        let every_ascii: String = (0u8..0x80).map(char::from).collect();
        let long_plain = "lorem ipsum dolor sit amet ".repeat(400);
        let cases = [
            String::new(),
            "plain".into(),
            every_ascii.clone(),
            every_ascii.repeat(5),
            long_plain.clone(),
            format!("{long_plain}\"{long_plain}\\{long_plain}\n"),
            "héllo wörld 日本語 😀 \u{7f} \u{2028} \u{2029}".repeat(40),
        ];
        for case in &cases {
            assert_as_serde_json(case);
        }
        // An escape at every position of an eight-byte word, short and long.
        for prefix in 0..24 {
            for special in ["\"", "\\", "\n", "\u{1}", "\u{1f}", "é", " "] {
                let text = format!("{}{special}{}", "a".repeat(prefix), "b".repeat(300));
                assert_as_serde_json(&text);
            }
        }
    }

    #[test]
    fn none_stays_null() {
        let out = serde_json::to_string(&Field {
            text: "x",
            maybe: None,
        })
        .unwrap();
        assert_eq!(out, r#"{"text":"x","maybe":null}"#);
    }

    #[test]
    fn into_a_value_too() {
        let long = "x\"y".repeat(200);
        let value = serde_json::to_value(Field {
            text: &long,
            maybe: None,
        })
        .unwrap();
        assert_eq!(value["text"], long.as_str());
    }
}
