//! The neutral request every client surface decodes into. It has no JSON
//! form of its own: each surface reads its API's wire types
//! (`wire::<api>`) and maps them onto it (Chat Completions' too:
//! `wire::openai_chat::client`); OpenAI's Chat Completions body is written
//! from it by `wire::openai_chat::Request`, the other vendors' by their
//! dialects.

use serde_json::{Map, Value};

use crate::model::copy_on_write::Shared;

/// Upper bounds that keep a hostile body from costing more than it is worth.
pub const MAX_MESSAGES: usize = 10_000;
/// The most choices an answer has (OpenAI documents 128 for its `n`).
pub const MAX_CHOICES: u32 = 128;
pub const MAX_MODEL_NAME: usize = 256;

#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// What the client asked for; dialects send the vendor model instead.
    pub model: String,
    pub messages: Shared<Vec<Message>>,
    pub tools: Shared<Vec<Tool>>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    pub response_format: Option<ResponseFormat>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub max_completion_tokens: Option<u32>,
    pub stop: Vec<String>,
    pub seed: Option<i64>,
    /// Sample from the top K tokens only (Anthropic, Gemini, Bedrock's
    /// Claude, DashScope; OpenAI has no such control).
    pub top_k: Option<u32>,
    /// How much the model should think before it answers.
    pub reasoning: Option<Reasoning>,
    pub user: Option<String>,
    /// How many choices to answer (several: each the model's own answer).
    pub n: Option<u32>,
    pub stream: bool,
    /// `stream_options.include_usage`: whether the CLIENT asked for a usage chunk.
    pub include_usage: bool,
    /// Our extension: the request id (also accepted as header `x-request-id`).
    pub request_id: Option<String>,
    /// Parameters no field above carries, by their OpenAI names
    /// (presence_penalty, logprobs, metadata, ...): a Chat Completions
    /// client's other members, the Responses API's `metadata`, Gemini's
    /// penalties, and what a provider's request policy sets (its rules
    /// name fields as OpenAI does). Only OpenAI-API dialects send them
    /// (`dialects::openai`); routing rules read `metadata.task_type`.
    pub extra: Map<String, Value>,
    /// Size of the body this was parsed from: vendor bodies are about as
    /// long, so encoders size their buffer once.
    pub source_len: usize,
    /// The first feature only the client API's own vendors have (the
    /// Responses API's `previous_response_id` and built-in tools,
    /// Anthropic's server tools, MCP servers, containers): the neutral
    /// request cannot carry it, so a pass-through pair sends it on and a
    /// translated request is refused with this error.
    pub native_only: Option<NativeOnly>,
    /// The client's hosted web search (the Responses API's `web_search`
    /// tool, Chat Completions' `web_search_options`): the vendor's own
    /// search tool where it has one, else dropped (`Dialect::web_search`).
    pub web_search: Option<WebSearch>,
}

/// A web search the vendor runs on its side, as the client limited it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WebSearch {
    /// Search only these domains (empty: any).
    pub allowed_domains: Vec<String>,
    /// Where the user roughly is: city, region, country (ISO 3166-1
    /// alpha-2), IANA timezone.
    pub user_location: Option<UserLocation>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserLocation {
    pub city: Option<String>,
    pub region: Option<String>,
    pub country: Option<String>,
    pub timezone: Option<String>,
}

/// Why a request can only go to a vendor of the client's own API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeOnly {
    /// The field that needs it (`previous_response_id`, `tools[2]`).
    pub param: String,
    pub message: String,
}

impl NativeOnly {
    /// The 400 a translated request gets.
    pub fn error(&self) -> crate::error::GatewayError {
        crate::error::GatewayError::invalid(self.param.clone(), self.message.clone())
    }
}

/// A conversation turn, by its role.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    System {
        content: Content,
        name: Option<String>,
    },
    /// OpenAI's newer name for a system message.
    Developer {
        content: Content,
        name: Option<String>,
    },
    User {
        content: Content,
        name: Option<String>,
    },
    Assistant {
        content: Option<Content>,
        /// What the model thought before this answer, as the vendor that
        /// thought it must get it back (signed, or redacted).
        reasoning: Vec<Thinking>,
        tool_calls: Vec<ToolCall>,
        refusal: Option<String>,
        name: Option<String>,
    },
    Tool {
        content: Content,
        tool_call_id: String,
        /// The tool failed (Anthropic's `is_error`, Bedrock's `status: error`).
        is_error: bool,
        cache_control: Option<CacheControl>,
    },
}

/// A block of the model's reasoning: its text and the vendor's signature
/// over it, or (`redacted`) the encrypted form a vendor sends instead.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thinking {
    pub text: String,
    pub signature: Option<String>,
    /// Anthropic's `redacted_thinking` data: opaque, passed back as it came.
    pub redacted: Option<String>,
}

/// How much the model should reason: an effort level, a token budget, or
/// both (vendors take one or the other; dialects convert).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reasoning {
    pub effort: Option<Effort>,
    pub budget_tokens: Option<u32>,
}

impl Reasoning {
    /// The effort asked for, else the one the budget amounts to; `None`
    /// when the client asked for neither (the vendor's default amount).
    pub fn effort_or_from_budget(&self) -> Option<Effort> {
        self.effort.or(self.budget_tokens.map(Effort::for_budget))
    }

    /// The thinking budget for Claude: the budget asked for, else the
    /// effort's ([`Effort::claude_budget`]), medium's when neither was
    /// given; `None` for effort `none`.
    pub fn claude_budget(&self) -> Option<u32> {
        match (self.budget_tokens, self.effort) {
            (Some(budget), _) => Some(budget),
            (None, effort) => effort.unwrap_or(Effort::Medium).claude_budget(),
        }
    }
}

/// The smallest thinking budget Claude takes (docs.claude.com, "Extended
/// thinking": `budget_tokens` >= 1024), on Anthropic's API and elsewhere.
pub const MIN_THINKING_BUDGET: u32 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    /// Reasoning off where the vendor allows it.
    None,
    Minimal,
    Low,
    Medium,
    High,
    /// OpenAI's `xhigh` (its recent models), Anthropic's `xhigh` effort.
    XHigh,
    /// The most a model can reason: OpenAI's and Anthropic's `max`.
    Max,
}

impl Effort {
    /// Claude's thinking budget for an effort (Anthropic's API and Claude on
    /// Bedrock take budgets, not efforts): minimal 1024 (the least Claude
    /// takes), low 2048, medium 8192, high 16384, xhigh 24576, max 32000
    /// tokens (beyond which Anthropic asks for batches); `None`: no thinking.
    pub fn claude_budget(self) -> Option<u32> {
        match self {
            Effort::None => None,
            Effort::Minimal => Some(MIN_THINKING_BUDGET),
            Effort::Low => Some(2048),
            Effort::Medium => Some(8192),
            Effort::High => Some(16384),
            Effort::XHigh => Some(24576),
            Effort::Max => Some(32000),
        }
    }

    /// The effort a token budget amounts to, for vendors that take efforts
    /// (OpenAI, Amazon Nova): Claude's table read backwards, up to 2048
    /// tokens low, up to 8192 medium, more high.
    pub fn for_budget(budget: u32) -> Effort {
        match budget {
            0..=2048 => Effort::Low,
            2049..=8192 => Effort::Medium,
            _ => Effort::High,
        }
    }

    pub fn parse(name: &str) -> Option<Effort> {
        match name {
            "none" => Some(Effort::None),
            "minimal" => Some(Effort::Minimal),
            "low" => Some(Effort::Low),
            "medium" => Some(Effort::Medium),
            "high" => Some(Effort::High),
            "xhigh" => Some(Effort::XHigh),
            "max" => Some(Effort::Max),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Effort::None => "none",
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
            Effort::XHigh => "xhigh",
            Effort::Max => "max",
        }
    }
}

/// A prompt-cache breakpoint: the prefix up to here may be cached
/// (Anthropic's `cache_control`, Bedrock's `cachePoint`, OpenAI's
/// `prompt_cache_breakpoint`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CacheControl {
    /// How long the prefix should stay cached, as the client's API says it:
    /// Anthropic's `"5m"` or `"1h"`, OpenAI's `"30m"` or `"12h"` (a least
    /// lifetime); the vendor's default when absent.
    pub ttl: Option<String>,
}

impl CacheControl {
    /// The TTL as Anthropic and Bedrock take it (`5m`, `1h`): OpenAI's
    /// lifetimes are longer than 5 minutes, so the hour.
    pub fn claude_ttl(&self) -> Option<&'static str> {
        match self.ttl.as_deref()? {
            "5m" => Some("5m"),
            _ => Some("1h"),
        }
    }

    /// The TTL as OpenAI takes it (`30m`, `12h`, least lifetimes): none for
    /// 5 minutes (OpenAI's default, 30, is longer), 12 hours for an hour.
    pub fn openai_ttl(&self) -> Option<&'static str> {
        match self.ttl.as_deref()? {
            "5m" => None,
            "30m" => Some("30m"),
            _ => Some("12h"),
        }
    }
}

/// Message content: a plain string or a list of typed parts.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl Content {
    /// All text parts joined: what vendors without rich content need.
    pub fn text(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => {
                let mut out = String::new();
                for part in parts {
                    if let ContentPart::Text { text, .. } = part {
                        out.push_str(text);
                    }
                }
                out
            }
        }
    }

    /// All text parts, one per line: a tool result's text as one string
    /// for a vendor that takes it so (its parts are separate pieces).
    pub fn text_lines(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => {
                let texts: Vec<&str> = parts
                    .iter()
                    .filter_map(|p| match p {
                        ContentPart::Text { text, .. } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                texts.join("\n")
            }
        }
    }

    pub fn has_image(&self) -> bool {
        matches!(self, Content::Parts(p) if p.iter().any(|x| matches!(x, ContentPart::ImageUrl { .. })))
    }
}

/// A part of a message's content.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentPart {
    Text {
        text: String,
        cache_control: Option<CacheControl>,
    },
    ImageUrl {
        image_url: ImageUrl,
        cache_control: Option<CacheControl>,
    },
    /// A document (a PDF or plain text) to read: only vendors that take
    /// documents get it (OpenAI-API vendors refuse it, see the dialects).
    Document(Document),
}

/// A document part: base64 data with its media type, a URL, or plain text.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub source: DocumentSource,
    pub title: Option<String>,
    pub cache_control: Option<CacheControl>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DocumentSource {
    Base64 { media_type: String, data: String },
    Url(String),
    Text(String),
}

impl ContentPart {
    /// A text part without a cache breakpoint.
    pub fn text(text: impl Into<String>) -> Self {
        ContentPart::Text {
            text: text.into(),
            cache_control: None,
        }
    }

    /// The cache breakpoint after this part, if any.
    pub fn cache_control(&self) -> Option<&CacheControl> {
        match self {
            ContentPart::Text { cache_control, .. }
            | ContentPart::ImageUrl { cache_control, .. } => cache_control.as_ref(),
            ContentPart::Document(d) => d.cache_control.as_ref(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImageUrl {
    pub url: String,
    pub detail: Option<String>,
}

/// An image reference, decoded from an `image_url.url`.
#[derive(Debug, PartialEq)]
pub enum Image<'a> {
    /// `data:<media type>;base64,<data>`
    Base64 { media_type: &'a str, data: &'a str },
    /// An `http(s)://` URL the vendor fetches itself.
    Url(&'a str),
}

impl ImageUrl {
    pub fn parse(&self) -> Result<Image<'_>, String> {
        if let Some(rest) = self.url.strip_prefix("data:") {
            let (meta, data) = rest
                .split_once(',')
                .ok_or("data URL without a ',' before the data")?;
            let media_type = meta
                .strip_suffix(";base64")
                .ok_or("only base64 data URLs are supported")?;
            if !media_type.starts_with("image/") {
                return Err(format!("unsupported media type '{media_type}'"));
            }
            // `image/jpg` is no registered type: vendors that check the
            // type (Anthropic, Gemini) refuse it; JPEG's is `image/jpeg`.
            let media_type = if media_type.eq_ignore_ascii_case("image/jpg") {
                "image/jpeg"
            } else {
                media_type
            };
            Ok(Image::Base64 { media_type, data })
        } else if self.url.starts_with("https://") || self.url.starts_with("http://") {
            Ok(Image::Url(&self.url))
        } else {
            Err("image_url.url must be an http(s) URL or a base64 data URL".into())
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub kind: String,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub kind: ToolKind,
    pub function: FunctionDef,
    /// A cache breakpoint after this tool's definition.
    pub cache_control: Option<CacheControl>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ToolKind {
    Function,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FunctionDef {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Option<Value>,
    pub strict: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolChoice {
    None,
    Auto,
    Required,
    Function(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: JsonSchema },
}

#[derive(Debug, Clone, PartialEq)]
pub struct JsonSchema {
    pub name: String,
    pub description: Option<String>,
    pub schema: Option<Value>,
    pub strict: Option<bool>,
}

impl ChatRequest {
    /// The maximum output tokens the client asked for, whichever field it used.
    pub fn max_output_tokens(&self) -> Option<u32> {
        self.max_completion_tokens.or(self.max_tokens)
    }

    pub fn has_images(&self) -> bool {
        self.messages.iter().any(|m| match m {
            Message::User { content, .. } => content.has_image(),
            _ => false,
        })
    }
}

/// Request ids travel in headers and logs: keep them short and plain.
pub fn valid_request_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}
