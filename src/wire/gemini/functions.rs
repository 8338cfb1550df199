//! Function calls and their results as Gemini's parts carry them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Blob, Text};

/// A call the model asks for. Its arguments stay a `Value`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct FunctionCall<'a> {
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub id: Option<Text<'a>>,
    #[serde(borrow)]
    pub name: Text<'a>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
}

/// A call's result (`response` an object), with the media it returned
/// (`parts`, Gemini 3's multimodal function responses).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct FunctionResponse<'a> {
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub id: Option<Text<'a>>,
    #[serde(borrow)]
    pub name: Text<'a>,
    #[serde(default)]
    pub response: Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty", borrow)]
    pub parts: Vec<FunctionResponsePart<'a>>,
}

/// A medium a function returned: inline bytes (a `fileData` by URI is
/// not read).
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct FunctionResponsePart<'a> {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "inline_data",
        borrow
    )]
    pub inline_data: Option<Blob<'a>>,
}
