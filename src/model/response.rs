//! The neutral answer every dialect decodes into and every client surface
//! renders: finish reasons, token usage, who answered, tool calls, and a
//! complete (non-stream) completion.

use crate::model::request::Thinking;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    /// Anthropic's `pause_turn`: a long server-tool turn (web search)
    /// paused, to be continued by sending the assistant content back.
    Paused,
}

impl FinishReason {
    /// A finish reason by its name (OpenAI's vocabulary, which is ours).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "stop" => Some(Self::Stop),
            "length" => Some(Self::Length),
            "tool_calls" | "function_call" => Some(Self::ToolCalls),
            "content_filter" => Some(Self::ContentFilter),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool_calls",
            Self::ContentFilter => "content_filter",
            Self::Paused => "pause_turn",
        }
    }
}

/// Token usage; the details only when the vendor reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Every prompt token: cached, written to the cache and the rest.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens read from the vendor's cache.
    pub cached_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens written to the vendor's cache (Anthropic's
    /// `cache_creation_input_tokens`, OpenAI's `cache_write_tokens`).
    pub cache_write_tokens: Option<u64>,
}

impl Usage {
    /// The sum of two usages (a request's attempts).
    pub fn plus(&self, other: &Usage) -> Usage {
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        Usage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
            cached_tokens: sum(self.cached_tokens, other.cached_tokens),
            reasoning_tokens: sum(self.reasoning_tokens, other.reasoning_tokens),
            cache_write_tokens: sum(self.cache_write_tokens, other.cache_write_tokens),
        }
    }
}

/// Who answered: stamped on every unified response and chunk.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Origin {
    /// Response id (`chatcmpl-...`), one per response.
    pub id: String,
    pub created: u64,
    /// The vendor model that answered.
    pub model: String,
    pub provider: String,
    /// The stop sequence the answer ended on, when the vendor says which
    /// (Anthropic, Claude on Bedrock), as Anthropic reports it.
    pub stop_sequence: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallOut {
    pub id: String,
    pub kind: &'static str,
    pub function: FunctionOut,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FunctionOut {
    pub name: String,
    pub arguments: String,
}

impl ToolCallOut {
    pub fn new(id: String, name: String, arguments: String) -> Self {
        Self {
            id,
            kind: "function",
            function: FunctionOut { name, arguments },
        }
    }
}

/// A complete non-stream answer, as dialects decode it: its first choice
/// (the only one, unless the client asked for several), the others after
/// it, and the usage of the whole answer (every choice's tokens, metered
/// once).
#[derive(Debug, Clone, Default)]
pub struct Completion {
    /// The model's reasoning before its answer, in order.
    pub reasoning: Vec<Thinking>,
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCallOut>,
    pub finish_reason: Option<FinishReason>,
    pub usage: Option<Usage>,
    /// Choices 1 and on, in order (empty, and not allocated, for one).
    pub more: Vec<Choice>,
}

/// One choice of an answer with several, after the first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Choice {
    pub reasoning: Vec<Thinking>,
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCallOut>,
    pub finish_reason: Option<FinishReason>,
}

/// A choice of a [`Completion`] as surfaces render it.
#[derive(Debug, Clone, Copy)]
pub struct ChoiceRef<'a> {
    pub index: u32,
    pub reasoning: &'a [Thinking],
    pub content: Option<&'a str>,
    pub tool_calls: &'a [ToolCallOut],
    pub finish_reason: Option<FinishReason>,
}

impl Completion {
    /// An answer of these choices (at least one: none is the first left
    /// empty) and the usage of them all.
    pub fn of_choices(choices: Vec<Choice>, usage: Option<Usage>) -> Self {
        let mut choices = choices.into_iter();
        let first = choices.next().unwrap_or_default();
        Self {
            reasoning: first.reasoning,
            content: first.content,
            tool_calls: first.tool_calls,
            finish_reason: first.finish_reason,
            usage,
            more: choices.collect(),
        }
    }

    /// Every choice, the first first.
    pub fn choices(&self) -> impl Iterator<Item = ChoiceRef<'_>> {
        let first = ChoiceRef {
            index: 0,
            reasoning: &self.reasoning,
            content: self.content.as_deref(),
            tool_calls: &self.tool_calls,
            finish_reason: self.finish_reason,
        };
        std::iter::once(first).chain(self.more.iter().zip(1..).map(|(c, index)| ChoiceRef {
            index,
            reasoning: &c.reasoning,
            content: c.content.as_deref(),
            tool_calls: &c.tool_calls,
            finish_reason: c.finish_reason,
        }))
    }
}

/// A decoded non-stream answer: neutral, or already in the client
/// surface's own format (a pass-through pair: the same API on both sides).
#[derive(Debug, Clone)]
pub enum Answer {
    Decoded(Completion),
    Native(Vec<u8>),
}
