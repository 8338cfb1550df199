use super::*;
use crate::model::request::{Content, ContentPart, FunctionCall, Thinking, ToolCall};

fn policy(json: &str) -> Result<Policy, String> {
    serde_json::from_str(json).map_err(|e| e.to_string())
}

fn user(text: &str) -> Message {
    Message::User {
        content: Content::Text(text.into()),
        name: None,
    }
}

fn system(text: &str) -> Message {
    Message::System {
        content: Content::Text(text.into()),
        name: None,
    }
}

fn assistant(text: &str, calls: &[&str], signed: bool) -> Message {
    Message::Assistant {
        content: (!text.is_empty()).then(|| Content::Text(text.into())),
        reasoning: if signed {
            vec![Thinking {
                text: "thinking it over".into(),
                signature: Some("sig".into()),
                redacted: None,
            }]
        } else {
            Vec::new()
        },
        tool_calls: calls
            .iter()
            .map(|id| ToolCall {
                id: (*id).into(),
                kind: "function".into(),
                function: FunctionCall {
                    name: "read_file".into(),
                    arguments: "{\"path\":\"src/main.rs\"}".into(),
                },
            })
            .collect(),
        refusal: None,
        name: None,
    }
}

fn tool(id: &str, text: &str) -> Message {
    Message::Tool {
        content: Content::Text(text.into()),
        tool_call_id: id.into(),
        is_error: false,
        cache_control: None,
    }
}

use crate::model::request::Message;

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        messages: messages.into(),
        ..ChatRequest::default()
    }
}

#[test]
fn policies_are_read_strictly() {
    let p = policy(r#"{"strategies":["route","trim","reject"]}"#).unwrap();
    assert_eq!(
        (p.strategies.len(), p.safety_margin_percent),
        (3, DEFAULT_MARGIN_PERCENT)
    );
    for (json, says) in [
        (r#"{"strategies":[]}"#, "at least one"),
        (r#"{"strategies":["trim","trim"]}"#, "named twice"),
        (
            r#"{"strategies":["reject","trim"]}"#,
            "nothing comes after reject",
        ),
        (r#"{"strategies":["shrink"]}"#, "unknown strategy 'shrink'"),
        (
            r#"{"strategies":["compress"]}"#,
            "compress needs a summariser",
        ),
        (
            r#"{"strategies":["trim"],"summariser":{"group":"s"}}"#,
            "only with the compress strategy",
        ),
        (
            r#"{"strategies":["trim","compress"],"summariser":{"group":"s"}}"#,
            "compress comes before trim",
        ),
        (
            r#"{"strategies":["compress"],"summariser":{"group":"s","max_blocks":17}}"#,
            "max_blocks: 1 to 16",
        ),
        (
            r#"{"strategies":["compress"],"summariser":{"group":"s","pace":1}}"#,
            "unknown field",
        ),
        (
            r#"{"strategies":["trim"],"safety_margin_percent":101}"#,
            "at most 100",
        ),
        (r#"{"strategies":["trim"],"margin":5}"#, "unknown field"),
    ] {
        let e = policy(json).unwrap_err();
        assert!(e.contains(says), "{json}: {e}");
    }
}

#[test]
fn the_edge_routes_by_the_window_only_with_route() {
    let p = |json| policy(json).unwrap();
    assert!(routes(None) && !shrinks(None));
    let both = p(r#"{"strategies":["route","trim"]}"#);
    assert!(routes(Some(&both)) && shrinks(Some(&both)));
    let refuse = p(r#"{"strategies":["route","reject"]}"#);
    assert!(routes(Some(&refuse)) && !shrinks(Some(&refuse)));
    let trim = p(r#"{"strategies":["trim"]}"#);
    assert!(!routes(Some(&trim)) && shrinks(Some(&trim)));
}

fn long(n: usize) -> String {
    "lorem ipsum dolor sit amet ".repeat(n)
}

#[test]
fn a_request_that_fits_goes_whole() {
    let p = policy(r#"{"strategies":["trim","reject"]}"#).unwrap();
    let r = request(vec![user("hello")]);
    let f = fit(&p, &r, "m", Some(1000), &[]).unwrap();
    assert!(f.request.is_none());
    assert_eq!(f.report.header(), "tokens=6/1000");
    let f = fit(&p, &r, "m", None, &[]).unwrap();
    assert_eq!(
        (f.report.outcome, f.report.header().as_str()),
        (Outcome::Unknown, "tokens=6")
    );
}

#[test]
fn the_oldest_turns_go_first_and_instructions_stay() {
    let p = policy(r#"{"strategies":["trim","reject"]}"#).unwrap();
    let r = request(vec![
        system("be brief"),
        user(&long(40)),
        assistant(&long(40), &[], false),
        user(&long(40)),
        assistant(&long(40), &[], false),
        user("and now?"),
    ]);
    let whole = estimate::prompt_tokens(&r);
    let f = fit(&p, &r, "m", Some(whole - 100), &[]).unwrap();
    let sent = f.request.unwrap();
    assert_eq!(f.report.trimmed, 2);
    assert_eq!(sent.messages.len(), 4);
    assert_eq!(sent.messages[0], system("be brief"));
    assert_eq!(sent.messages[3], user("and now?"));
    assert_eq!(f.report.tokens, estimate::prompt_tokens(&sent));
    assert_eq!(
        f.report.header(),
        format!("trimmed=2; tokens={}/{}", f.report.tokens, whole - 100)
    );
}

#[test]
fn the_output_limit_and_the_margin_count() {
    let p = policy(r#"{"strategies":["reject"],"safety_margin_percent":0}"#).unwrap();
    let mut r = request(vec![user(&long(10))]);
    let tokens = estimate::prompt_tokens(&r);
    assert!(fit(&p, &r, "m", Some(tokens), &[]).is_ok());
    r.max_tokens = Some(1);
    let (e, report) = *fit(&p, &r, "m", Some(tokens), &[]).unwrap_err();
    assert_eq!(
        (e.code, report.outcome),
        (ErrorCode::ContextLengthExceeded, Outcome::Rejected)
    );
    let p = policy(r#"{"strategies":["reject"],"safety_margin_percent":50}"#).unwrap();
    r.max_tokens = None;
    assert!(fit(&p, &r, "m", Some(tokens), &[]).is_err());
    assert!(fit(&p, &r, "m", Some(p.with_margin(tokens)), &[]).is_ok());
}

#[test]
fn the_latest_turn_is_never_dropped() {
    let p = policy(r#"{"strategies":["trim","reject"]}"#).unwrap();
    let r = request(vec![
        user(&long(40)),
        assistant("", &["c1"], true),
        tool("c1", &long(40)),
        user("and the text beside the tool result"),
    ]);
    // One turn (the user text beside a tool result opens none): rejected.
    let (e, report) = *fit(&p, &r, "m", Some(50), &[]).unwrap_err();
    assert_eq!(report.trimmed, 0);
    assert!(
        e.message.contains("more than model 'm' accepts (50)"),
        "{}",
        e.message
    );
    // Without reject it is sent as it is, said to be unfit.
    let p = policy(r#"{"strategies":["trim"]}"#).unwrap();
    let f = fit(&p, &r, "m", Some(50), &[]).unwrap();
    assert!(f.request.is_none());
    assert!(f.report.header().ends_with("; unfit"));
}

/// A tiny seeded generator (xorshift64*): the property test is the same
/// on every run, and a failing seed is printed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random tool-heavy agent history, valid for every vendor.
fn history(rng: &mut Rng) -> Vec<Message> {
    let mut out = Vec::new();
    let mut call = 0;
    if rng.below(2) == 0 {
        out.push(system(&long(rng.below(5) as usize + 1)));
    }
    if rng.below(6) == 0 {
        out.push(assistant("How can I help?", &[], false));
    }
    let turns = rng.below(8) + 1;
    for _ in 0..turns {
        out.push(user(&long(rng.below(30) as usize + 1)));
        if rng.below(8) == 0 {
            out.push(Message::Developer {
                content: Content::Text("mind the tests".into()),
                name: None,
            });
        }
        for _ in 0..rng.below(4) {
            let ids: Vec<String> = (0..rng.below(3) + 1)
                .map(|_| {
                    call += 1;
                    format!("call_{call}")
                })
                .collect();
            let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
            out.push(assistant("", &refs, rng.below(2) == 0));
            for id in &ids {
                out.push(tool(id, &long(rng.below(60) as usize + 1)));
            }
            if rng.below(4) == 0 {
                out.push(user("the text beside the results"));
            }
        }
        if rng.below(3) > 0 {
            out.push(assistant(
                &long(rng.below(20) as usize + 1),
                &[],
                rng.below(2) == 0,
            ));
        }
    }
    out
}

/// The rules the strict mock enforces (mock/src/openai.rs,
/// mock/src/anthropic/mod.rs, mock/src/gemini/request.rs), on the neutral
/// conversation every dialect encodes: a tool result answers a call of the
/// assistant message just before it (tool results between), every call
/// is answered in the very next messages, the conversation opens with the
/// user, and the last assistant tool turn starts with its signed thinking
/// when it had one (it is never edited: the output is a sub-list).
fn vendor_refusal(messages: &[Message], user_first: bool) -> Option<String> {
    let talk: Vec<&Message> = messages.iter().filter(|m| !pinned_message(m)).collect();
    if user_first && !matches!(talk.first(), Some(Message::User { .. })) {
        return Some("does not open with the user".into());
    }
    let mut open: Vec<&str> = Vec::new();
    for (i, m) in talk.iter().enumerate() {
        match m {
            Message::Tool { tool_call_id, .. } => {
                let Some(at) = open.iter().position(|id| id == tool_call_id) else {
                    return Some(format!("orphan tool result {tool_call_id} at {i}"));
                };
                open.remove(at);
            }
            _ if !open.is_empty() => return Some(format!("unanswered calls {open:?} at {i}")),
            Message::Assistant { tool_calls, .. } => {
                open = tool_calls.iter().map(|c| c.id.as_str()).collect();
            }
            _ => {}
        }
    }
    None
}

fn pinned_message(m: &Message) -> bool {
    matches!(m, Message::System { .. } | Message::Developer { .. })
}

#[test]
fn random_tool_heavy_histories_trim_into_conversations_vendors_accept() {
    let p = policy(r#"{"strategies":["trim"],"safety_margin_percent":0}"#).unwrap();
    let mut trimmed_some = 0;
    for seed in 1..=2000u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let messages = history(&mut rng);
        // A greeting first is OpenAI's only (trimming drops it first).
        let greeting = matches!(
            messages.iter().find(|m| !pinned_message(m)),
            Some(Message::Assistant { .. })
        );
        assert_eq!(
            vendor_refusal(&messages, !greeting),
            None,
            "seed {seed}: the generator"
        );
        let r = request(messages.clone());
        let whole = estimate::prompt_tokens(&r);
        let window = rng.below(whole + 1).max(1);
        let f = fit(&p, &r, "m", Some(window), &[]).unwrap();
        let Some(sent) = f.request else {
            continue;
        };
        trimmed_some += 1;
        let sent = &sent.messages;
        assert_eq!(vendor_refusal(sent, true), None, "seed {seed}: {sent:#?}");
        // A sub-list (nothing edited), every instruction kept, the tail whole.
        let mut rest = messages.iter();
        for m in sent.iter() {
            assert!(rest.any(|o| o == m), "seed {seed}: reordered or edited");
        }
        let pinned = |ms: &[Message]| ms.iter().filter(|m| pinned_message(m)).count();
        assert_eq!(pinned(sent), pinned(&messages), "seed {seed}");
        assert_eq!(sent.len() + f.report.trimmed, messages.len(), "seed {seed}");
        let last_user = messages
            .iter()
            .rposition(|m| matches!(m, Message::User { .. }))
            .unwrap();
        assert!(
            sent.ends_with(&messages[last_user..]),
            "seed {seed}: the latest turn cut"
        );
        assert_eq!(
            f.report.tokens,
            estimate::prompt_tokens(&request(sent.to_vec()))
        );
        if f.report.outcome == Outcome::Trimmed {
            assert!(f.report.tokens <= window, "seed {seed}");
        }
    }
    assert!(trimmed_some > 500, "{trimmed_some}");
}

#[test]
fn the_rules_catch_what_a_bad_trim_makes() {
    let good = vec![
        user("a"),
        assistant("", &["c1"], true),
        tool("c1", "r"),
        user("b"),
    ];
    assert_eq!(vendor_refusal(&good, true), None);
    // Dropping the oldest message alone, or the call without its result.
    assert!(vendor_refusal(&good[1..], true).is_some());
    assert!(vendor_refusal(&good[2..], false)
        .unwrap()
        .contains("orphan"));
    let unanswered = [user("a"), assistant("", &["c1"], false), user("b")];
    assert!(vendor_refusal(&unanswered, true)
        .unwrap()
        .contains("unanswered"));
}

fn compressing() -> Policy {
    policy(r#"{"strategies":["compress","trim","reject"],"summariser":{"group":"s"}}"#).unwrap()
}

/// An old turn with a huge tool result, an old long answer, and the
/// latest turn (long too: never a block).
fn tool_history() -> Vec<Message> {
    vec![
        system(&long(200)),
        user("read the file"),
        assistant("", &["call_1"], false),
        tool("call_1", &long(400)),
        assistant(&long(100), &[], false),
        user("and now?"),
        assistant("", &["call_2"], true),
        tool("call_2", &long(300)),
        user(&long(300)),
    ]
}

#[test]
fn blocks_are_old_long_texts_oldest_first_never_instructions_nor_the_latest_turn() {
    let messages = tool_history();
    let found = compress::blocks(&messages, 2048, 4);
    let places: Vec<(usize, usize)> = found.iter().map(|b| (b.message, b.part)).collect();
    // The tool result (3) and the long answer (4); not the system message,
    // not the short user texts, not the latest turn (5..: "and now?" opens
    // it, its tool loop follows).
    assert_eq!(places, [(3, 0), (4, 0)]);
    assert_eq!(compress::blocks(&messages, 2048, 1).len(), 1);
    assert!(compress::blocks(&messages, 1 << 20, 4).is_empty());
    // Parts: each text part is a block of its own.
    let parts = vec![
        Message::User {
            content: Content::Parts(vec![
                ContentPart::text("short"),
                ContentPart::text(long(100)),
            ]),
            name: None,
        },
        assistant("ok", &[], false),
        user("next"),
    ];
    let found = compress::blocks(&parts, 2048, 4);
    assert_eq!(
        found
            .iter()
            .map(|b| (b.message, b.part))
            .collect::<Vec<_>>(),
        [(0, 1)]
    );
}

/// A coding agent's tool loop: one turn (the first user message), its
/// results long.
fn tool_loop() -> Vec<Message> {
    vec![
        system("you are an agent"),
        user("fix the bug"),
        assistant("", &["call_1"], false),
        tool("call_1", &long(400)),
        assistant("", &["call_2"], true),
        tool("call_2", &long(300)),
        assistant("", &["call_3"], false),
        tool("call_3", &long(300)),
    ]
}

#[test]
fn a_tool_loops_answered_results_are_blocks_its_latest_are_not() {
    let messages = tool_loop();
    let found = compress::blocks(&messages, 2048, 4);
    let places: Vec<(usize, usize)> = found.iter().map(|b| (b.message, b.part)).collect();
    // The results an assistant message follows (3, 5); not the latest (7),
    // which the model has not answered yet; not the opening user message.
    assert_eq!(places, [(3, 0), (5, 0)]);
    // Applied per window, the pairing and the signed turn untouched.
    let p = compressing();
    let summaries = summaries_of(&messages);
    let r = request(messages.clone());
    let window = p.with_margin(estimate::prompt_tokens(&r) - 2000);
    let f = fit(&p, &r, "m", Some(window), &summaries).unwrap();
    assert_eq!((f.report.compressed, f.report.trimmed), (1, 0));
    let sent = f.request.unwrap();
    let Message::Tool { tool_call_id, .. } = &sent.messages[3] else {
        panic!("a tool result still")
    };
    assert_eq!(tool_call_id, "call_1");
    assert!(text_of(&sent.messages[3]).starts_with("[summary of an earlier tool result"));
    assert_eq!(sent.messages[4], messages[4], "the signed turn as it was");
    // A summary naming the unanswered result is ignored.
    let mut forged = summaries.clone();
    for s in &mut forged {
        s.message = 7;
        s.hash = compress::digest(&text_of(&messages[7]));
    }
    // Nothing else shrinks one turn: refused, nothing compressed.
    let (_, report) = *fit(&p, &r, "m", Some(window), &forged).unwrap_err();
    assert_eq!(report.compressed, 0);
}

fn text_of(message: &Message) -> String {
    match message {
        Message::Tool { content, .. } | Message::User { content, .. } => content.text(),
        Message::Assistant { content, .. } => {
            content.as_ref().map(Content::text).unwrap_or_default()
        }
        _ => String::new(),
    }
}

fn summaries_of(messages: &[Message]) -> Vec<compress::Summary> {
    compress::blocks(messages, 2048, 4)
        .iter()
        .map(|b| compress::Summary::of(b, &format!("summary of block {}", b.message)))
        .collect()
}

#[test]
fn summaries_replace_old_blocks_oldest_first_as_many_as_needed() {
    let p = compressing();
    let messages = tool_history();
    let summaries = summaries_of(&messages);
    let r = request(messages.clone());
    let whole = estimate::prompt_tokens(&r);
    // Room for all but the tool result's savings: one summary does.
    let window = p.with_margin(whole - 2000);
    let f = fit(&p, &r, "m", Some(window), &summaries).unwrap();
    assert_eq!(f.report.outcome, Outcome::Compressed);
    assert_eq!((f.report.compressed, f.report.trimmed), (1, 0));
    assert!(f.report.header().starts_with("compressed=1; tokens="));
    let sent = f.request.unwrap();
    assert_eq!(sent.messages.len(), messages.len(), "nothing dropped");
    let Message::Tool {
        content,
        tool_call_id,
        ..
    } = &sent.messages[3]
    else {
        panic!("a tool result still")
    };
    assert_eq!(tool_call_id, "call_1", "the pairing stays");
    assert_eq!(
        content.text(),
        "[summary of an earlier tool result by the gateway] summary of block 3"
    );
    assert_eq!(sent.messages[4], messages[4], "one was enough");
    assert_eq!(f.report.tokens, estimate::prompt_tokens(&sent));
    // A smaller window: both, the answer marked as a message.
    let window = p.with_margin(whole - 3000);
    let f = fit(&p, &r, "m", Some(window), &summaries).unwrap();
    assert_eq!(f.report.compressed, 2);
    let both = f.report.tokens;
    let sent = f.request.unwrap();
    assert!(
        text_of(&sent.messages[4]).starts_with("[summary of an earlier message by the gateway] ")
    );
    // Smaller still: compressed, then trimmed.
    let f = fit(&p, &r, "m", Some(p.with_margin(both - 10)), &summaries).unwrap();
    assert_eq!(f.report.outcome, Outcome::Trimmed);
    assert!(f.report.compressed > 0 && f.report.trimmed > 0);
    // Without summaries (the summariser failed): trimmed only.
    let f = fit(&p, &r, "m", Some(window), &[]).unwrap();
    assert_eq!(f.report.outcome, Outcome::Trimmed);
    assert_eq!(f.report.compressed, 0);
}

#[test]
fn a_summary_applies_only_to_its_own_block() {
    let p = compressing();
    let messages = tool_history();
    let summaries = summaries_of(&messages);
    let r = request(messages.clone());
    let window = p.with_margin(estimate::prompt_tokens(&r) - 2000);
    // The block's text changed: its digest no longer matches.
    let mut changed = messages.clone();
    changed[3] = tool("call_1", &long(401));
    let f = fit(&p, &request(changed), "m", Some(window), &summaries).unwrap();
    assert_eq!(f.report.compressed, 1, "the other block's summary instead");
    assert!(text_of(&f.request.unwrap().messages[3]).starts_with("lorem"));
    // Another place (a message removed before it): nothing matches.
    let mut moved = messages.clone();
    moved.remove(1);
    let f = fit(&p, &request(moved), "m", Some(window), &summaries).unwrap();
    assert_eq!(f.report.compressed, 0);
    // A summary naming the latest turn, or nothing, is ignored.
    let mut forged = summaries.clone();
    for s in &mut forged {
        s.message += 4;
    }
    let f = fit(&p, &r, "m", Some(window), &forged).unwrap();
    assert_eq!(f.report.compressed, 0);
}

#[test]
fn summaries_round_trip_and_are_bounded() {
    let messages = tool_history();
    let mut summaries = summaries_of(&messages);
    let encoded = compress::encode(&summaries).unwrap();
    assert_eq!(compress::decode(&encoded), summaries);
    assert!(compress::decode(b"not json").is_empty());
    let block = compress::blocks(&messages, 2048, 1)[0];
    let huge = compress::Summary::of(&block, &"é".repeat(10_000));
    assert!(huge.text.len() <= compress::MAX_SUMMARY_BYTES);
    summaries.push(huge);
    let encoded = compress::encode(&summaries).unwrap();
    assert_eq!(compress::decode(&encoded), summaries);
    assert_eq!(compress::cut("héllo", 2), "h");
}

#[test]
fn only_a_finished_answer_is_a_summary() {
    let answer = |content: &str, finish: &str, refusal: &str| {
        let body = format!(
            r#"{{"choices":[{{"message":{{"role":"assistant","content":{content},"refusal":{refusal}}},"finish_reason":{finish}}}]}}"#
        );
        compress::answer_text(body.as_bytes())
    };
    assert_eq!(
        answer(r#"" short ""#, r#""stop""#, "null"),
        Some("short".into())
    );
    assert_eq!(
        answer(r#""half a""#, r#""length""#, "null"),
        Some("half a [the summary was cut short]".into())
    );
    // A refusal, a filtered answer, an unfinished, an empty one: none.
    assert_eq!(answer(r#""I can't""#, r#""stop""#, r#""I can't""#), None);
    assert_eq!(answer(r#""part""#, r#""content_filter""#, "null"), None);
    assert_eq!(answer(r#""part""#, "null", "null"), None);
    assert_eq!(answer(r#""  ""#, r#""stop""#, "null"), None);
    assert_eq!(answer("null", r#""tool_calls""#, "null"), None);
    assert_eq!(compress::answer_text(br#"{"choices":[]}"#), None);
}

#[test]
fn a_long_block_is_sent_as_its_head_and_tail() {
    assert_eq!(compress::head_and_tail("short", 100), "short");
    let text = format!(
        "{}{}{}",
        "h".repeat(1000),
        "m".repeat(5000),
        "é".repeat(1000)
    );
    let sent = compress::head_and_tail(&text, 1001);
    let (head, tail) = sent
        .split_once("[... the middle of this text is left out ...]")
        .unwrap();
    assert_eq!(head.trim_end(), "h".repeat(500));
    assert!(
        tail.trim_start().chars().all(|c| c == 'é'),
        "on a character boundary"
    );
    assert!(head.trim_end().len() + tail.trim_start().len() <= 1001);
    assert!(
        !head.contains('m') && !tail.contains('m'),
        "the middle left out"
    );
}
