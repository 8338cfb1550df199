//! Each API's wire format as serde types, in the field order its vendor
//! writes, borrowing what it can: written once and used by whatever speaks
//! the API, the client surfaces and the vendor dialects alike.

pub mod anthropic;
pub mod bedrock;
pub mod bedrock_embeddings;
pub mod dashscope;
pub mod dashscope_embeddings;
pub mod gemini;
pub mod gemini_embeddings;
pub mod loose;
pub mod openai_chat;
pub mod openai_embeddings;
pub mod openai_models;
pub mod openai_responses;
pub mod syntax;
pub mod vertex_embeddings;

/// A conversation turn of content blocks (Anthropic Messages, Bedrock Converse).
#[derive(serde::Serialize)]
pub struct Turn<B> {
    pub role: &'static str,
    pub content: Vec<B>,
}

/// Appends blocks to a conversation, merging consecutive turns of one role:
/// these vendors want alternating roles, and all tool results for one
/// assistant turn in one user turn.
pub fn push_turn<B>(turns: &mut Vec<Turn<B>>, role: &'static str, blocks: Vec<B>) {
    if blocks.is_empty() {
        return;
    }
    match turns.last_mut() {
        Some(last) if last.role == role => last.content.extend(blocks),
        _ => turns.push(Turn {
            role,
            content: blocks,
        }),
    }
}
