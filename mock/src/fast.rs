//! `--fast` benchmark mode: responses are rendered once at startup by the
//! real dialect code, with a placeholder where the model goes; a request then
//! costs one small JSON parse (model, stream) and one write.

use std::borrow::Cow;

use serde::Deserialize;

use crate::answer::Answer;
use crate::dialect::{to_json, Dialect, Meta, Prompt};

/// Stands in for the model name, quotes included, in the templates.
const PLACEHOLDER: &str = "\"@@MODEL@@\"";
const WORDS_PER_CHUNK: usize = 10;
const STREAM_CHUNKS: usize = 20;
/// ~1 KB of answer text: 20 chunks of 10 words.
const SENTENCE: &str = "The quick brown fox jumps over the lazy dog ";

/// The two fields the fast path reads; everything else is skipped.
#[derive(Deserialize)]
pub struct FastRequest<'a> {
    #[serde(borrow)]
    pub model: Option<Cow<'a, str>>,
    #[serde(default)]
    pub stream: bool,
}

/// A response body cut at each model placeholder.
pub struct Template {
    parts: Vec<Vec<u8>>,
}

impl Template {
    fn new(rendered: &[u8]) -> Template {
        let text = String::from_utf8_lossy(rendered);
        Template {
            parts: text
                .split(PLACEHOLDER)
                .map(|p| p.as_bytes().to_vec())
                .collect(),
        }
    }

    /// Appends the body with `model` (JSON-escaped) filled in.
    pub fn render(&self, model: &str, out: &mut Vec<u8>) {
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                // Writing a &str into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *out, model);
            }
            out.extend_from_slice(part);
        }
    }
}

/// Pre-rendered answers of one dialect.
pub struct FastAnswers {
    pub json: Template,
    pub sse: Template,
}

impl FastAnswers {
    pub fn new(dialect: &dyn Dialect, created: u64) -> FastAnswers {
        let words: Vec<&str> = SENTENCE.split_inclusive(' ').collect();
        let chunks: Vec<String> = (0..STREAM_CHUNKS)
            .map(|c| {
                (0..WORDS_PER_CHUNK)
                    .map(|w| {
                        words
                            .get((c * WORDS_PER_CHUNK + w) % words.len())
                            .copied()
                            .unwrap_or("")
                    })
                    .collect()
            })
            .collect();
        let answer = Answer::fixed(chunks, 10);
        let prompt = Prompt {
            model: "@@MODEL@@".into(),
            include_usage: true,
            ..Prompt::default()
        };
        let meta = Meta { seq: 0, created };
        let json = to_json(&dialect.response(&prompt, &answer, meta));
        let mut sse = Vec::new();
        for (i, e) in dialect.stream(&prompt, &answer, meta).iter().enumerate() {
            dialect.encode_event(i, e, false, &mut sse);
        }
        FastAnswers {
            json: Template::new(json.as_bytes()),
            sse: Template::new(&sse),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::openai::OpenAi;
    use serde_json::Value;

    #[test]
    fn templates_fill_in_the_model() {
        let f = FastAnswers::new(&OpenAi, 1);
        let mut out = Vec::new();
        f.json.render("gpt-\"x\"", &mut out);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["model"], "gpt-\"x\"");
        let text = v["choices"][0]["message"]["content"].as_str().unwrap();
        assert!(text.len() > 900 && text.len() < 1200, "{}", text.len());
        out.clear();
        f.sse.render("m", &mut out);
        let s = String::from_utf8(out).unwrap();
        let events: Vec<&str> = s.split("\n\n").filter(|e| !e.is_empty()).collect();
        // role + 20 content + finish + usage + [DONE]
        assert_eq!(events.len(), 24);
        assert!(s.ends_with("data: [DONE]\n\n"));
    }
}
