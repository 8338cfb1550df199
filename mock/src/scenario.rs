//! Test directives from the `x-mock-scenario` request header, e.g.
//! `x-mock-scenario: tool, slow=50, crlf`. Unknown directives are ignored so
//! tests can carry tags meant for other components.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

pub const HEADER: &str = "x-mock-scenario";

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Scenario {
    /// `error-NNN`: answer this status with the dialect's error body.
    pub error: Option<u16>,
    /// `error-400-context`: the vendor's context-length 400.
    pub context_error: bool,
    /// `fail-first`: 503 for the first request with a given x-request-id.
    pub fail_first: bool,
    /// `busy-until-tool-results`: 529 overloaded for a request whose last
    /// message carries no tool results (a vendor down for a conversation's
    /// first turn, back for the turn after a tool call).
    pub busy_until_tool_results: bool,
    /// `slow[=ms]`: pause between stream events / before a plain answer.
    pub slow: Option<Duration>,
    /// `split`: multibyte answer written 3-7 bytes at a time.
    pub split: bool,
    /// `crlf`: SSE lines end with \r\n.
    pub crlf: bool,
    /// `cut`: drop the TCP connection in the middle of a stream event.
    pub cut: bool,
    /// `stream-error`: the vendor's mid-stream error after a few deltas.
    pub stream_error: bool,
    /// `stream-error-first`: the vendor's stream error as the very first event.
    pub stream_error_first: bool,
    /// `empty-200`: 200 with an unparseable body.
    pub empty_200: bool,
    /// `tool`: call a tool (if the request offers any).
    pub tool: bool,
    /// `two-tools`: call the first two tools in parallel.
    pub two_tools: bool,
    /// `pause-turn`: Anthropic pauses its server-side tool loop
    /// (`stop_reason: pause_turn`) on a new turn that offers its web search
    /// tool; the continuation (the assistant content sent back) is answered.
    pub pause_turn: bool,
    /// `echo-key`: a 401 whose message quotes the credential received, as
    /// some vendors do (the gateway must redact it).
    pub echo_key: bool,
    /// `quote-key`: a vendor that quotes the credential it received (and
    /// its base64) into every string of every body and stream event it
    /// sends, and into response headers.
    pub quote_key: bool,
    /// `header-bytes=LO-HI` (hex): a response header whose value holds every
    /// byte from LO to HI, in a header clients get and in one they do not.
    pub header_bytes: Option<(u8, u8)>,
    /// `blocked-prompt`, `filtered-answer`, `filtered-stream`: the vendor's content filter strikes.
    pub filter: Option<Filter>,
    /// `stream-error-after-start`: the vendor's mid-stream error right after
    /// the stream's opening events (Anthropic: `message_start`, `ping`),
    /// before any content, as real overloads arrive.
    pub stream_error_after_start: bool,
    /// `cached-usage`: usage reports cached prompt tokens, prompt tokens
    /// written to the cache and reasoning tokens where the dialect has them
    /// ([`CACHED_TOKENS`], [`CACHE_WRITE_TOKENS`], [`REASONING_TOKENS`]).
    pub cached_usage: bool,
    /// `unindexed`: OpenAI's embeddings answered without each item's
    /// `index`, as some OpenAI-compatible servers answer.
    pub unindexed: bool,
    /// `retry-after=N`: every error answer states this many seconds as its
    /// `retry-after` (instead of the 7 of the dialects whose vendors send one
    /// on a 429; on other statuses too, a wait that means nothing there).
    pub retry_after: Option<u64>,
    /// `big-signatures=N`: the signatures the mock issues (Gemini's on
    /// function calls, Claude's on thinking) are about N bytes of base64,
    /// still a digest of what they sign (checked when they come back), and
    /// a stream leaves in HTTP chunks of at most [`PIECE_BYTES`], so each
    /// signature crosses chunk boundaries.
    pub signature_bytes: Option<usize>,
    /// Not a directive: the request accepts gzip (set by the server).
    pub gzip: bool,
    // --- Driving agents (Claude Code) ---------------------------------------
    /// `call=NAME[:WORD]`: call the offered tool NAME (ignored when it is not
    /// offered); with WORD, a tool taking a shell `command` gets
    /// `echo WORD` (Claude Code's Bash), so its output is known.
    pub call: Option<(String, Option<String>)>,
    /// `unique-ids`: tool call ids never issued before by this mock, as
    /// real vendors' are, instead of numbered by the calls in the
    /// conversation: a trimmed conversation (context fitting) would get an
    /// id its client already holds from the turns it no longer carries,
    /// and a client keeping the whole session (Claude Code) ignores it.
    pub unique_ids: bool,
    /// `call-shell=<command>`: call the shell tool the client offers
    /// (Codex's `exec_command` or `shell`) with this command.
    pub call_shell: Option<String>,
    /// `fail-input=WORD`: an embeddings request with WORD in its body fails
    /// with 503 (one part of a batch the gateway split, on the vendor this
    /// directive is a base path of).
    pub fail_input: Option<String>,
}

/// `cached-usage`: prompt tokens reported as read from the cache (capped at
/// the prompt's tokens).
pub const CACHED_TOKENS: u64 = 2;
/// `cached-usage`: prompt tokens reported as written to the cache (capped
/// at the prompt's tokens not read from it).
pub const CACHE_WRITE_TOKENS: u64 = 3;
/// `cached-usage`: reasoning tokens, part of the completion tokens where the
/// vendor counts them so (OpenAI), on top of them where it does not (Gemini).
pub const REASONING_TOKENS: u64 = 3;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Filter {
    /// `blocked-prompt`: the vendor's input filter refuses the prompt, in
    /// its own shape (dialects without one ignore it).
    BlockedPrompt,
    /// `filtered-answer`: the output filter cuts the answer before any text
    /// (finish reason content filter, or the vendor's error).
    FilteredAnswer,
    /// `filtered-stream`: the output filter cuts the answer a few words in.
    FilteredStream,
}

const DEFAULT_SLOW: Duration = Duration::from_millis(200);
/// The HTTP chunks of a `big-signatures` stream.
pub const PIECE_BYTES: usize = 4093;
/// `big-signatures` at most (4 MiB).
const MAX_SIGNATURE_BYTES: usize = 4 << 20;
const ERROR_STATUSES: [u16; 9] = [400, 401, 403, 404, 413, 429, 500, 503, 529];

impl Scenario {
    pub fn parse(header: &str) -> Scenario {
        let mut s = Scenario::default();
        for d in header.split(',').map(str::trim) {
            match d {
                "error-400-context" => s.context_error = true,
                "fail-first" => s.fail_first = true,
                "busy-until-tool-results" => s.busy_until_tool_results = true,
                "slow" => s.slow = Some(DEFAULT_SLOW),
                "split" => s.split = true,
                "crlf" => s.crlf = true,
                "cut" => s.cut = true,
                "stream-error" => s.stream_error = true,
                "stream-error-first" => s.stream_error_first = true,
                "stream-error-after-start" => s.stream_error_after_start = true,
                "cached-usage" => s.cached_usage = true,
                "unindexed" => s.unindexed = true,
                "empty-200" => s.empty_200 = true,
                "tool" => s.tool = true,
                "two-tools" => s.two_tools = true,
                "unique-ids" => s.unique_ids = true,
                "pause-turn" => s.pause_turn = true,
                "echo-key" => s.echo_key = true,
                "quote-key" => s.quote_key = true,
                "blocked-prompt" => s.filter = Some(Filter::BlockedPrompt),
                "filtered-answer" => s.filter = Some(Filter::FilteredAnswer),
                "filtered-stream" => s.filter = Some(Filter::FilteredStream),
                _ => {
                    if let Some(range) = d.strip_prefix("header-bytes=") {
                        s.header_bytes = range.split_once('-').and_then(|(lo, hi)| {
                            let lo = u8::from_str_radix(lo, 16).ok()?;
                            let hi = u8::from_str_radix(hi, 16).ok()?;
                            (lo <= hi).then_some((lo, hi))
                        });
                    } else if let Some(word) = d.strip_prefix("fail-input=") {
                        s.fail_input = Some(word.to_owned()).filter(|w| !w.is_empty());
                    } else if let Some(command) = d.strip_prefix("call-shell=") {
                        s.call_shell = Some(command.to_owned()).filter(|c| !c.is_empty());
                    } else if let Some(n) = d.strip_prefix("big-signatures=") {
                        s.signature_bytes = n.parse().ok().filter(|&n| n <= MAX_SIGNATURE_BYTES);
                    } else if let Some(secs) = d.strip_prefix("retry-after=") {
                        s.retry_after = secs.parse().ok();
                    } else if let Some(ms) = d.strip_prefix("slow=") {
                        s.slow = ms.parse().ok().map(Duration::from_millis);
                    } else if let Some(call) = d.strip_prefix("call=") {
                        s.call = Some(match call.split_once(':') {
                            Some((name, word)) => (name.to_owned(), Some(word.to_owned())),
                            None => (call.to_owned(), None),
                        });
                    } else if let Some(code) = d.strip_prefix("error-") {
                        s.error = code.parse().ok().filter(|c| ERROR_STATUSES.contains(c));
                    }
                }
            }
        }
        s
    }
}

/// Remembers which x-request-id values were already failed by `fail-first`.
/// Bounded: the oldest ids are forgotten first.
pub struct SeenIds {
    inner: Mutex<(HashSet<String>, VecDeque<String>)>,
    cap: usize,
}

impl SeenIds {
    pub fn new(cap: usize) -> Self {
        SeenIds {
            inner: Mutex::new((HashSet::new(), VecDeque::new())),
            cap,
        }
    }

    /// True the first time `id` is seen.
    pub fn first_time(&self, id: &str) -> bool {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (set, order) = &mut *guard;
        if set.contains(id) {
            return false;
        }
        if order.len() >= self.cap {
            if let Some(old) = order.pop_front() {
                set.remove(&old);
            }
        }
        set.insert(id.to_owned());
        order.push_back(id.to_owned());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_directives() {
        let s = Scenario::parse(" tool , slow=50,crlf,error-429, bogus,blocked-prompt");
        assert!(s.tool && s.crlf);
        assert_eq!(s.filter, Some(Filter::BlockedPrompt));
        assert_eq!(s.slow, Some(Duration::from_millis(50)));
        assert_eq!(s.error, Some(429));
        assert_eq!(
            Scenario::parse("big-signatures=70000").signature_bytes,
            Some(70000)
        );
        assert_eq!(
            Scenario::parse("big-signatures=9999999999").signature_bytes,
            None
        );
        let s = Scenario::parse("quote-key, header-bytes=80-ff");
        assert!(s.quote_key);
        assert_eq!(s.header_bytes, Some((0x80, 0xff)));
        assert_eq!(Scenario::parse("header-bytes=ff-80").header_bytes, None);
        assert_eq!(
            Scenario::parse("error-429,retry-after=2").retry_after,
            Some(2)
        );
        assert_eq!(Scenario::parse("retry-after=soon").retry_after, None);
        let s = Scenario::parse("error-400-context,slow,error-418");
        assert!(s.context_error);
        assert_eq!(s.error, None);
        assert_eq!(s.slow, Some(DEFAULT_SLOW));
    }

    #[test]
    fn call_shell_takes_a_command() {
        let s = Scenario::parse("tool, call-shell=echo marker-1 ,slow=1");
        assert_eq!(s.call_shell.as_deref(), Some("echo marker-1"));
        assert_eq!(Scenario::parse("call-shell=").call_shell, None);
    }

    #[test]
    fn seen_ids_are_bounded() {
        let seen = SeenIds::new(2);
        assert!(seen.first_time("a"));
        assert!(!seen.first_time("a"));
        assert!(seen.first_time("b"));
        assert!(seen.first_time("c"));
        assert!(seen.first_time("a"), "a was evicted");
    }
}
