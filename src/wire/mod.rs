//! Each API's wire format as serde types, in the field order its vendor
//! writes, borrowing what it can: written once and used by whatever speaks
//! the API. (Core v2 moves every API's types here; Anthropic's are all
//! here, both directions.)

pub mod anthropic;
pub mod gemini;
pub mod openai_chat;
pub mod openai_embeddings;
pub mod openai_responses;
