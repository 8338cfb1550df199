//! What the cache keeps of an answer: the neutral answer as the vendor
//! gave it (its blocks in order, how it finished, its usage, who answered
//! and when), never a rendered body, nor anything of the request that
//! made it (no vendor key, URL or header). Every surface renders it.

use serde::{Deserialize, Serialize};

use crate::model::request::Thinking;
use crate::model::response::{Completion, FinishReason, ToolCallOut, Usage};

/// The version of the entries this build writes: an entry of another is a miss.
const VERSION: u8 = 1;

/// One cached answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    #[serde(rename = "v")]
    pub version: u8,
    /// The answer's parts, in the order the vendor gave them.
    pub blocks: Vec<Block>,
    /// `stop`, `length` or `tool_calls`: nothing else is kept.
    pub finish: String,
    /// The stop sequence it ended on, when the vendor said which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequence: Option<String>,
    /// The vendor's usage, when it reported it: what a hit saves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<StoredUsage>,
    /// The provider (configuration name) and vendor model that answered.
    pub provider: String,
    pub model: String,
    /// When it was stored (Unix seconds): a hit's `age`.
    pub stored_at: u64,
}

/// A part of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    /// Reasoning, with the vendor's signature over it.
    Thinking {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the vendor sent encrypted.
    Redacted {
        data: String,
    },
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
}

impl Block {
    /// Its text's length in bytes.
    pub fn text_len(&self) -> usize {
        match self {
            Block::Text { text } => text.len(),
            Block::Thinking { text, signature } => {
                text.len() + signature.as_ref().map_or(0, String::len)
            }
            Block::Redacted { data } => data.len(),
            Block::ToolCall {
                id,
                name,
                arguments,
            } => id.len() + name.len() + arguments.len(),
        }
    }
}

/// Usage as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredUsage {
    #[serde(rename = "in")]
    pub prompt: u64,
    #[serde(rename = "out")]
    pub completion: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<u64>,
}

impl From<Usage> for StoredUsage {
    fn from(u: Usage) -> Self {
        Self {
            prompt: u.prompt_tokens,
            completion: u.completion_tokens,
            cached: u.cached_tokens,
            reasoning: u.reasoning_tokens,
            cache_write: u.cache_write_tokens,
        }
    }
}

impl From<StoredUsage> for Usage {
    fn from(u: StoredUsage) -> Self {
        Usage {
            prompt_tokens: u.prompt,
            completion_tokens: u.completion,
            cached_tokens: u.cached,
            reasoning_tokens: u.reasoning,
            cache_write_tokens: u.cache_write,
        }
    }
}

/// Whether an answer that finished so may be kept: it ended as the model
/// meant it to (a stop, its output limit, tool calls), not filtered nor
/// paused.
pub fn keeps(finish: FinishReason) -> bool {
    matches!(
        finish,
        FinishReason::Stop | FinishReason::Length | FinishReason::ToolCalls
    )
}

impl Entry {
    /// An entry of `blocks` that finished so, or `None` when it may not be kept.
    pub fn new(blocks: Vec<Block>, finish: FinishReason, usage: Option<Usage>) -> Option<Self> {
        keeps(finish).then(|| Entry {
            version: VERSION,
            blocks,
            finish: finish.as_str().to_owned(),
            stop_sequence: None,
            usage: usage.map(StoredUsage::from),
            provider: String::new(),
            model: String::new(),
            stored_at: 0,
        })
    }

    /// A decoded whole answer's entry (`None`: it may not be kept).
    pub fn of_completion(completion: &Completion) -> Option<Self> {
        let finish = completion.finish_reason?;
        let mut blocks: Vec<Block> = completion
            .reasoning
            .iter()
            .map(|t| match &t.redacted {
                Some(data) => Block::Redacted { data: data.clone() },
                None => Block::Thinking {
                    text: t.text.clone(),
                    signature: t.signature.clone(),
                },
            })
            .collect();
        if let Some(text) = completion.content.as_ref().filter(|t| !t.is_empty()) {
            blocks.push(Block::Text { text: text.clone() });
        }
        blocks.extend(completion.tool_calls.iter().map(|c| Block::ToolCall {
            id: c.id.clone(),
            name: c.function.name.clone(),
            arguments: c.function.arguments.clone(),
        }));
        Entry::new(blocks, finish, completion.usage)
    }

    /// The entry as the neutral whole answer every surface renders.
    pub fn completion(&self) -> Completion {
        let mut completion = Completion {
            finish_reason: self.finish_reason(),
            usage: self.usage.map(Usage::from),
            ..Completion::default()
        };
        for block in &self.blocks {
            match block {
                Block::Text { text } => {
                    completion
                        .content
                        .get_or_insert_with(String::new)
                        .push_str(text);
                }
                Block::Thinking { text, signature } => completion.reasoning.push(Thinking {
                    text: text.clone(),
                    signature: signature.clone(),
                    redacted: None,
                }),
                Block::Redacted { data } => completion.reasoning.push(Thinking {
                    redacted: Some(data.clone()),
                    ..Thinking::default()
                }),
                Block::ToolCall {
                    id,
                    name,
                    arguments,
                } => completion.tool_calls.push(ToolCallOut::new(
                    id.clone(),
                    name.clone(),
                    arguments.clone(),
                )),
            }
        }
        completion
    }

    pub fn finish_reason(&self) -> Option<FinishReason> {
        FinishReason::parse(&self.finish).filter(|f| keeps(*f))
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// An entry this build wrote, or `None` (another version, or not one).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let entry: Entry = serde_json::from_slice(bytes).ok()?;
        (entry.version == VERSION && entry.finish_reason().is_some()).then_some(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion() -> Completion {
        Completion {
            more: Vec::new(),
            reasoning: vec![
                Thinking {
                    text: "think".into(),
                    signature: Some("sig".into()),
                    redacted: None,
                },
                Thinking {
                    redacted: Some("opaque".into()),
                    ..Thinking::default()
                },
            ],
            content: Some("answer".into()),
            tool_calls: vec![ToolCallOut::new("c1".into(), "f".into(), "{}".into())],
            finish_reason: Some(FinishReason::ToolCalls),
            usage: Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 4,
                cached_tokens: Some(1),
                reasoning_tokens: None,
                cache_write_tokens: Some(2),
            }),
        }
    }

    #[test]
    fn a_whole_answer_round_trips_through_an_entry() {
        let entry = Entry::of_completion(&completion()).unwrap();
        assert_eq!(entry.blocks.len(), 4);
        let decoded = Entry::decode(&entry.encode()).unwrap();
        assert_eq!(decoded, entry);
        let back = decoded.completion();
        let want = completion();
        assert_eq!(back.reasoning, want.reasoning);
        assert_eq!(back.content, want.content);
        assert_eq!(back.tool_calls, want.tool_calls);
        assert_eq!(back.finish_reason, want.finish_reason);
        assert_eq!(back.usage, want.usage);
    }

    #[test]
    fn only_a_normal_finish_is_kept() {
        for (finish, kept) in [
            (FinishReason::Stop, true),
            (FinishReason::Length, true),
            (FinishReason::ToolCalls, true),
            (FinishReason::ContentFilter, false),
            (FinishReason::Paused, false),
        ] {
            let mut c = completion();
            c.finish_reason = Some(finish);
            assert_eq!(Entry::of_completion(&c).is_some(), kept, "{finish:?}");
        }
        let mut unfinished = completion();
        unfinished.finish_reason = None;
        assert!(Entry::of_completion(&unfinished).is_none());
    }

    #[test]
    fn another_version_or_finish_is_not_an_entry() {
        let entry = Entry::of_completion(&completion()).unwrap();
        let mut other = entry.clone();
        other.version = VERSION + 1;
        assert!(Entry::decode(&other.encode()).is_none());
        let mut filtered = entry;
        filtered.finish = "content_filter".into();
        assert!(Entry::decode(&filtered.encode()).is_none());
        assert!(Entry::decode(b"not json").is_none());
    }
}
