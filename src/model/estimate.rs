//! A cheap token estimate, for routing by context window (and, where a
//! vendor reports no usage, for metering).
//!
//! Roughly 4 bytes of ASCII text per token (English and code), one token per
//! non-ASCII character (CJK text runs about one token per character; this
//! over-counts accented Latin a little, which is the safe side for a window
//! check), plus a few tokens of framing per message and a flat cost per image.
//! It reads each byte once and allocates nothing.

use crate::formats::swar;
use crate::model::request::{ChatRequest, Content, ContentPart, DocumentSource, Message};

const TOKENS_PER_MESSAGE: u64 = 4;
/// What vendors charge for a typical image (OpenAI's high-detail tile math
/// and Anthropic's pixels/750 both land near here for ~1 MP images).
const TOKENS_PER_IMAGE: u64 = 1000;

pub fn text_tokens(text: &str) -> u64 {
    let mut count = TextCount::default();
    count.add(text);
    count.tokens()
}

/// Text seen so far, for an estimate over many pieces (stream deltas) that
/// does not round every piece up.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextCount {
    ascii: u64,
    other: u64,
}

impl TextCount {
    pub fn add(&mut self, text: &str) {
        // Bytes, not chars (no UTF-8 decoding): a non-ASCII character is one
        // lead byte (>= 0xC0) plus continuation bytes (0x80..0xC0). Counted
        // eight bytes at a time: a 100 KB prompt is read on every request.
        let bytes = text.as_bytes();
        let words = bytes.chunks_exact(8);
        let rest = words.remainder();
        let mut counts = swar::ByteCounts::default();
        for word in words {
            counts.add(u64::from_le_bytes(
                <[u8; 8]>::try_from(word).unwrap_or_default(),
            ));
        }
        counts.flush();
        let mut high = counts.high;
        self.other += counts.at_least_c0;
        for &b in rest {
            high += u64::from(b >= 0x80);
            self.other += u64::from(b >= 0xC0);
        }
        self.ascii += bytes.len() as u64 - high;
    }

    pub fn tokens(&self) -> u64 {
        self.ascii.div_ceil(4) + self.other
    }
}

fn content_tokens(content: &Content) -> u64 {
    match content {
        Content::Text(t) => text_tokens(t),
        Content::Parts(parts) => parts
            .iter()
            .map(|p| match p {
                ContentPart::Text { text, .. } => text_tokens(text),
                ContentPart::ImageUrl { .. } => TOKENS_PER_IMAGE,
                ContentPart::Document(d) => match &d.source {
                    DocumentSource::Text(text) => text_tokens(text),
                    // About a page per 3 KB of PDF, a page about an image's worth.
                    DocumentSource::Base64 { data, .. } => {
                        TOKENS_PER_IMAGE * (data.len() as u64 / 4096 + 1)
                    }
                    DocumentSource::Url(_) => TOKENS_PER_IMAGE,
                },
            })
            .sum(),
    }
}

/// Estimated prompt tokens of a request: messages, tool calls and tool schemas.
pub fn prompt_tokens(request: &ChatRequest) -> u64 {
    request.messages.iter().map(message_tokens).sum::<u64>() + tools_tokens(request)
}

/// One message's share of [`prompt_tokens`] (context fitting drops messages
/// and subtracts theirs).
pub fn message_tokens(message: &Message) -> u64 {
    TOKENS_PER_MESSAGE
        + match message {
            Message::System { content, .. }
            | Message::Developer { content, .. }
            | Message::User { content, .. }
            | Message::Tool { content, .. } => content_tokens(content),
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => {
                content.as_ref().map_or(0, content_tokens)
                    + tool_calls
                        .iter()
                        .map(|c| text_tokens(&c.function.name) + text_tokens(&c.function.arguments))
                        .sum::<u64>()
            }
        }
}

/// The tool schemas' share of [`prompt_tokens`].
fn tools_tokens(request: &ChatRequest) -> u64 {
    request
        .tools
        .iter()
        .map(|t| {
            text_tokens(&t.function.name)
                + t.function.description.as_deref().map_or(0, text_tokens)
                + t.function
                    .parameters
                    .as_ref()
                    .map_or(0, |p| text_tokens(&p.to_string()))
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_is_about_four_bytes_per_token() {
        // "The quick brown fox jumps over the lazy dog." is 10 tokens for GPT-4's tokenizer.
        assert_eq!(
            text_tokens("The quick brown fox jumps over the lazy dog."),
            11
        );
        assert_eq!(text_tokens(""), 0);
    }

    #[test]
    fn pieces_add_up_without_rounding_each() {
        let mut c = TextCount::default();
        for word in ["Hello", " from", " the", " mock"] {
            c.add(word);
        }
        assert_eq!(c.tokens(), text_tokens("Hello from the mock"));
    }

    #[test]
    fn counting_bytes_matches_counting_chars() {
        for text in [
            "",
            "plain ascii",
            "héllo wörld",
            "日本語のテキスト",
            "emoji 😀 mix ü",
            "\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}\u{10000}",
        ]
        .into_iter()
        .flat_map(|t| {
            // Long enough for whole eight-byte words, at every alignment.
            let long = format!("{t}a{t}ab{t}abc{t}abcd{t}abcdefg{t}");
            // And past 255 words, where the lanes are summed midway.
            let longer = long.repeat(300);
            [t.to_owned(), long, longer]
        }) {
            let text = text.as_str();
            let mut count = TextCount::default();
            count.add(text);
            let ascii = text.chars().filter(char::is_ascii).count() as u64;
            let other = text.chars().count() as u64 - ascii;
            assert_eq!((count.ascii, count.other), (ascii, other), "{text:?}");
        }
    }

    #[test]
    fn cjk_is_about_one_token_per_character() {
        // 12 characters; real tokenizers give 10-14 for this sentence.
        assert_eq!(text_tokens("今天天气很好，我们去公园散步"), 14);
        assert_eq!(text_tokens("안녕하세요"), 5);
    }

    #[test]
    fn requests_count_messages_images_and_tools() {
        let r = ChatRequest::parse(
            br#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"abcdefgh"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}],
                 "tools":[{"type":"function","function":{"name":"abcd","parameters":{"type":"object"}}}]}"#,
        )
        .unwrap();
        // 4 framing + 2 text + 1000 image + 1 name + 5 schema
        assert_eq!(prompt_tokens(&r), 4 + 2 + 1000 + 1 + 5);
    }
}
