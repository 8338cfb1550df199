//! Long strings written into JSON fast.
//!
//! serde_json escapes a string one byte at a time: a 100 KB prompt costs
//! ~170 µs natively (more in V8), most of a request's encode time. Long
//! texts (messages, tool results) go through [`serialize`] instead: escaped
//! eight bytes at a time and handed to serde_json as a raw value, which its
//! serializer copies as it is. The output is byte for byte what serde_json
//! writes.

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::formats::swar;

/// Shorter strings take serde_json's own path: the detour costs more than
/// it saves.
const FAST_FROM: usize = 256;

/// The name serde_json's raw values serialize under (`RawValue`'s
/// `Serialize`: a struct of this name with one field of this name holding
/// the JSON text; its `raw_value` feature is on). serde_json's serializer
/// writes that text as it is, its `to_value` parses it; the wire types
/// using [`serialize`] go through nothing else. `RawValue::from_string`
/// would re-parse the whole escaped text to check it, which costs as much
/// as the escaping; this text is valid by construction. The tests compare
/// every output with serde_json's: a serde_json that renamed the protocol
/// fails them.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// A JSON string literal, already escaped, written through serde_json's
/// raw-value protocol without its check.
struct Escaped(String);

impl Serialize for Escaped {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut raw = serializer.serialize_struct(RAW_VALUE_TOKEN, 1)?;
        raw.serialize_field(RAW_VALUE_TOKEN, &self.0)?;
        raw.end()
    }
}

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
    Escaped(escape(text)).serialize(serializer)
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

    /// A small xorshift generator: the same cases on every run.
    struct Random(u64);

    impl Random {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// Characters each with its own escaping (or none): every control
    /// character, the two that JSON escapes by name, UTF-8 of every length,
    /// and the line separators JavaScript minds but JSON does not.
    fn palette() -> Vec<char> {
        let mut chars: Vec<char> = (0u8..0x20).map(char::from).collect();
        chars.extend([
            '"', '\\', '/', 'a', ' ', '\u{7f}', 'é', '\u{2028}', '\u{2029}', '日', '😀',
        ]);
        chars
    }

    #[test]
    fn random_and_mutated_texts_escape_as_serde_json() {
        let palette = palette();
        let mut random = Random(0x9e37_79b9_7f4a_7c15);
        let pick = |random: &mut Random| palette[random.below(palette.len())];
        for _ in 0..400 {
            // Lengths on both sides of FAST_FROM; some texts mostly plain
            // (long runs between escapes), some dense with them.
            let len = random.below(3 * FAST_FROM);
            let plain_runs = random.below(2) == 0;
            let text: String = (0..len)
                .map(|_| {
                    if plain_runs && random.below(16) != 0 {
                        'x'
                    } else {
                        pick(&mut random)
                    }
                })
                .collect();
            assert_as_serde_json(&text);
        }
        // A long prompt-like text with a few characters changed at random
        // places, again and again.
        let mut text: Vec<char> = "The quick brown fox jumps over the lazy dog. "
            .repeat(40)
            .chars()
            .collect();
        for _ in 0..300 {
            let at = random.below(text.len());
            text[at] = pick(&mut random);
            assert_as_serde_json(&text.iter().collect::<String>());
        }
    }

    #[test]
    fn pretty_printed_too() {
        let text = format!("{}\"\n\u{1}é", "y".repeat(FAST_FROM));
        let field = Field {
            text: &text,
            maybe: Some(&text),
        };
        let quoted = serde_json::to_string(&text).unwrap();
        assert_eq!(
            serde_json::to_string_pretty(&field).unwrap(),
            format!("{{\n  \"text\": {quoted},\n  \"maybe\": {quoted}\n}}")
        );
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
            maybe: Some(&long),
        })
        .unwrap();
        assert_eq!(value["text"], long.as_str());
        assert_eq!(value["maybe"], long.as_str());
    }
}
