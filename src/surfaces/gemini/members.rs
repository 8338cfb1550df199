//! Gemini's refusal of a member it does not know, at any depth of the
//! request: `Invalid JSON payload received. Unknown name "x" at
//! 'contents[0].parts[0]': Cannot find field.` The wire types are shared
//! with the answers the Gemini dialect reads (which ignore members Gemini
//! adds), so the request's members are checked here first, in one pass
//! over the bytes that builds nothing: each object's members against its
//! message's fields (by JSON name or proto name, as proto3's JSON parser
//! takes them), the path formatted only for an error ([`at`]). What is not
//! an unknown member (a syntax error, a wrong type) is left to the typed
//! parse that follows, which says it as before.
//!
//! The fields are the Gemini API's (`GenerateContentRequest` and the
//! messages under it) as the Gen AI SDKs and Gemini CLI send them; the
//! members of free-form values (function arguments and results, schemas,
//! metadata structs) are the caller's, never checked.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::error::GatewayError;
use crate::model::json::{at, Index};

/// What a member's value is.
pub(crate) enum Shape {
    /// The caller's own JSON, or a scalar.
    Any,
    /// A message: its fields by JSON name.
    Object(&'static [(&'static str, Shape)]),
    /// A repeated message.
    List(&'static Shape),
}

use Shape::{Any, List, Object};

pub(crate) const REQUEST: Shape = Object(REQUEST_FIELDS);
pub(crate) const COUNT_TOKENS: Shape = Object(&[
    ("contents", List(&CONTENT)),
    ("generateContentRequest", REQUEST),
]);

/// `GenerateContentRequest`, as `wire::gemini::GenerateContentRequest`
/// reads it (`model` only in `countTokens`' `generateContentRequest`).
const REQUEST_FIELDS: &[(&str, Shape)] = &[
    ("model", Any),
    ("contents", List(&CONTENT)),
    ("systemInstruction", CONTENT),
    ("tools", List(&TOOL)),
    ("toolConfig", TOOL_CONFIG),
    ("generationConfig", GENERATION_CONFIG),
    ("safetySettings", List(&SAFETY_SETTING)),
    ("cachedContent", Any),
    ("labels", Any),
    ("serviceTier", Any),
    ("store", Any),
    ("continuationToken", Any),
];

const CONTENT: Shape = Object(&[("role", Any), ("parts", List(&PART))]);

/// `Part`: its `data` (one of), `thought` and `thoughtSignature`, its
/// metadata; the members the Gen AI SDKs write for the Gemini API.
const PART: Shape = Object(&[
    ("text", Any),
    ("thought", Any),
    ("thoughtSignature", Any),
    ("inlineData", BLOB),
    ("fileData", FILE_DATA),
    ("functionCall", FUNCTION_CALL),
    ("functionResponse", FUNCTION_RESPONSE),
    (
        "executableCode",
        Object(&[("language", Any), ("code", Any), ("id", Any)]),
    ),
    (
        "codeExecutionResult",
        Object(&[("outcome", Any), ("output", Any), ("id", Any)]),
    ),
    ("videoMetadata", VIDEO_METADATA),
    ("mediaResolution", MEDIA_RESOLUTION),
    ("partMetadata", Any),
    // Gemini 3's server-side tool invocations, sent back as they came.
    ("toolCall", Any),
    ("toolResponse", Any),
    // Newer metadata of media parts (google-genai 3.x).
    ("audioTranscription", Any),
    ("mediaProcessing", Any),
    ("speechMetadata", Any),
    ("documentMetadata", Any),
    ("spreadsheetMetadata", Any),
    ("audioMetadata", Any),
]);

/// `Blob` (`displayName` is Vertex AI's: the SDKs refuse it for the Gemini API).
const BLOB: Shape = Object(&[("mimeType", Any), ("data", Any)]);
const FILE_DATA: Shape = Object(&[("mimeType", Any), ("fileUri", Any)]);
const VIDEO_METADATA: Shape = Object(&[
    ("startOffset", Any),
    ("endOffset", Any),
    ("fps", Any),
    ("contentLayers", Any),
]);
const MEDIA_RESOLUTION: Shape = Object(&[("level", Any), ("numTokens", Any)]);
const FUNCTION_CALL: Shape = Object(&[("id", Any), ("name", Any), ("args", Any)]);
const FUNCTION_RESPONSE: Shape = Object(&[
    ("id", Any),
    ("name", Any),
    ("response", Any),
    ("parts", List(&FUNCTION_RESPONSE_PART)),
    ("willContinue", Any),
    ("scheduling", Any),
]);
/// A function response's media (`displayName` names it for the response's
/// `{"$ref": ...}`).
const FUNCTION_RESPONSE_PART: Shape = Object(&[
    (
        "inlineData",
        Object(&[("mimeType", Any), ("data", Any), ("displayName", Any)]),
    ),
    (
        "fileData",
        Object(&[("mimeType", Any), ("fileUri", Any), ("displayName", Any)]),
    ),
    ("mediaResolution", MEDIA_RESOLUTION),
    ("videoMetadata", VIDEO_METADATA),
    ("mediaProcessing", Any),
    ("documentMetadata", Any),
    ("spreadsheetMetadata", Any),
    ("audioMetadata", Any),
]);

/// `Tool`, as `wire::gemini::Tool` reads it.
const TOOL: Shape = Object(&[
    ("functionDeclarations", List(&FUNCTION_DECLARATION)),
    ("googleSearch", Any),
    ("googleSearchRetrieval", Any),
    ("codeExecution", Any),
    ("urlContext", Any),
    ("computerUse", Any),
    ("fileSearch", Any),
    ("googleMaps", Any),
    ("mcpServers", Any),
]);
const FUNCTION_DECLARATION: Shape = Object(&[
    ("name", Any),
    ("description", Any),
    ("parametersJsonSchema", Any),
    ("parameters", Any),
    ("response", Any),
    ("responseJsonSchema", Any),
    ("behavior", Any),
]);
const TOOL_CONFIG: Shape = Object(&[
    (
        "functionCallingConfig",
        Object(&[("mode", Any), ("allowedFunctionNames", Any)]),
    ),
    ("includeServerSideToolInvocations", Any),
    ("retrievalConfig", Any),
]);
/// `GenerationConfig`, as `wire::gemini::GenerationConfig` reads it.
const GENERATION_CONFIG: Shape = Object(&[
    ("stopSequences", Any),
    ("temperature", Any),
    ("topP", Any),
    ("topK", Any),
    ("maxOutputTokens", Any),
    ("candidateCount", Any),
    ("seed", Any),
    ("presencePenalty", Any),
    ("frequencyPenalty", Any),
    ("responseMimeType", Any),
    ("responseSchema", Any),
    ("responseJsonSchema", Any),
    ("_responseJsonSchema", Any),
    (
        "thinkingConfig",
        Object(&[
            ("includeThoughts", Any),
            ("thinkingBudget", Any),
            ("thinkingLevel", Any),
        ]),
    ),
    ("responseModalities", Any),
    ("responseLogprobs", Any),
    ("logprobs", Any),
    ("mediaResolution", Any),
    ("speechConfig", Any),
    ("imageConfig", Any),
    ("enableEnhancedCivicAnswers", Any),
    ("audioTranscriptionConfig", Any),
]);
const SAFETY_SETTING: Shape = Object(&[("category", Any), ("threshold", Any)]);

/// The first member of `body` that `shape` does not know, as Gemini's
/// 400; `Ok` for anything else (the typed parse reports it).
pub(crate) fn check(body: &[u8], shape: &Shape) -> Result<(), GatewayError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let Err(e) = Check(shape).deserialize(&mut de) else {
        return Ok(());
    };
    let message = e.to_string();
    // "contents[0].parts[0]: Unknown name \"x\": Cannot find field. at line 1 column 9"
    let Some(start) = message.find(UNKNOWN) else {
        return Ok(());
    };
    let path = message[..start].trim_end_matches(": ");
    let rest = &message[start + UNKNOWN.len()..];
    let Some(end) = rest.find(CANNOT) else {
        return Ok(());
    };
    let name = &rest[..end];
    let (text, param) = if path.is_empty() {
        (
            format!("Invalid JSON payload received. Unknown name \"{name}\": Cannot find field."),
            name.to_owned(),
        )
    } else {
        (
            format!(
                "Invalid JSON payload received. Unknown name \"{name}\" at '{path}': Cannot find field."
            ),
            format!("{path}.{name}"),
        )
    };
    Err(GatewayError::invalid(param, text))
}

const UNKNOWN: &str = "Unknown name \"";
const CANNOT: &str = "\": Cannot find field.";

/// A field's proto name (`function_declarations`) in an error's path, as
/// Google writes paths.
struct Proto(&'static str);

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        use fmt::Write;
        for c in self.0.chars() {
            if c.is_ascii_uppercase() {
                f.write_char('_')?;
                f.write_char(c.to_ascii_lowercase())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

/// Whether `key` names field `json` (lowerCamelCase) by its JSON name or
/// its proto name (`inline_data`).
fn names(key: &str, json: &str) -> bool {
    if key == json {
        return true;
    }
    let mut key = key.bytes();
    for c in json.bytes() {
        if c.is_ascii_uppercase() {
            if key.next() != Some(b'_') || key.next() != Some(c.to_ascii_lowercase()) {
                return false;
            }
        } else if key.next() != Some(c) {
            return false;
        }
    }
    key.next().is_none()
}

/// Checks one value against its shape.
struct Check<'s>(&'s Shape);

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.0 {
            Any => IgnoredAny::deserialize(d).map(|_| ()),
            _ => d.deserialize_any(self),
        }
    }
}

/// A member's name, looked up among its object's fields.
struct Field(&'static [(&'static str, Shape)]);

impl<'de> DeserializeSeed<'de> for Field {
    type Value = &'static (&'static str, Shape);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Field {
    type Value = &'static (&'static str, Shape);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        self.0
            .iter()
            .find(|(json, _)| names(key, json))
            .ok_or_else(|| E::custom(format!("{UNKNOWN}{key}{CANNOT}")))
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    // A value of another type than the field's is the typed parse's to refuse.
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let item = match self.0 {
            List(item) => *item,
            _ => &Any,
        };
        let mut i = 0;
        while at(Index(i), seq.next_element_seed(Check(item)))?.is_some() {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Object(fields) = self.0 else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        while let Some((json, shape)) = map.next_key_seed(Field(fields))? {
            at(Proto(json), map.next_value_seed(Check(shape)))?;
        }
        Ok(())
    }
}
