//! Accept loop (one thread per connection), routing, and the request flow
//! shared by all dialects.

use std::io::{self, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::answer::plan;
use crate::anthropic::Anthropic;
use crate::azure::Azure;
use crate::bedrock::Bedrock;
use crate::bedrock_invoke::BedrockInvoke;
use crate::dashscope::DashScope;
use crate::dialect::{to_json, Dialect, Failure, Filtered, Meta, Reply, SseEvent};
use crate::embeddings::Embeddings;
use crate::fast::{FastAnswers, FastRequest};
use crate::gemini::Gemini;
use crate::gzip;
use crate::http::{
    push_chunk, query_param, read_request, stream_head, write_response, ReadError, Request,
    LAST_CHUNK,
};
use crate::models::Models;
use crate::openai::OpenAi;
use crate::record::Recorder;
use crate::responses::Responses;
use crate::scenario::{self, Scenario, SeenIds};
use crate::sigv4::Verifier;
use crate::sse::{self, End};
use crate::vertex::{VertexAnthropic, VertexGemini};

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

/// Every dialect the mock speaks. A new vendor is one more line here.
/// Azure comes before OpenAI: its paths also end in /chat/completions.
/// The Responses API (OpenAI's and Azure's v1) has a path of its own, and
/// so has Bedrock's InvokeModel.
/// `aws`: credentials Bedrock requests must be SigV4-signed with.
pub fn dialects(aws: Option<Verifier>) -> Vec<Box<dyn Dialect>> {
    vec![
        Box::new(VertexGemini),
        Box::new(VertexAnthropic),
        Box::new(Responses),
        Box::new(Azure),
        Box::new(OpenAi),
        Box::new(Anthropic),
        Box::new(Gemini),
        Box::new(BedrockInvoke {
            bedrock: Bedrock {
                credentials: aws.clone(),
            },
        }),
        Box::new(Bedrock { credentials: aws }),
        Box::new(DashScope),
    ]
}

pub struct State {
    fast: bool,
    verbose: bool,
    dialects: Vec<Box<dyn Dialect>>,
    /// The embeddings endpoints (asked before the dialects).
    embeddings: Embeddings,
    /// Each vendor's model list (`models/`).
    models: Models,
    /// Pre-rendered `--fast` answers, same order as `dialects`.
    fast_answers: Vec<FastAnswers>,
    recorder: Recorder,
    fail_first: SeenIds,
    seq: AtomicU64,
}

impl State {
    pub fn new(fast: bool, verbose: bool, aws: Option<Verifier>) -> State {
        let embeddings = Embeddings { aws: aws.clone() };
        let models = Models::new(aws.clone());
        let dialects = dialects(aws);
        let fast_answers = dialects
            .iter()
            .map(|d| FastAnswers::new(d.as_ref(), now()))
            .collect();
        State {
            fast,
            verbose,
            dialects,
            embeddings,
            models,
            fast_answers,
            recorder: Recorder::default(),
            fail_first: SeenIds::new(100_000),
            seq: AtomicU64::new(1),
        }
    }

    fn meta(&self) -> Meta {
        Meta {
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            created: now(),
        }
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn serve(listener: TcpListener, state: Arc<State>) {
    for conn in listener.incoming() {
        match conn {
            Ok(stream) => {
                let st = Arc::clone(&state);
                // Small stacks: a soak may hold thousands of connections.
                let spawned = thread::Builder::new()
                    .stack_size(512 * 1024)
                    .spawn(move || connection(stream, &st));
                if let Err(e) = spawned {
                    eprintln!("mock-provider: cannot spawn connection thread: {e}");
                }
            }
            // E.g. out of file descriptors: back off instead of spinning.
            Err(e) => {
                eprintln!("mock-provider: accept failed: {e}");
                thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Per-connection output state, reused across keep-alive requests.
struct Conn {
    w: TcpStream,
    buf: Vec<u8>,
    body: Vec<u8>,
    keep_alive: bool,
    verbose: bool,
    /// This request's scenario header lines (raw bytes, CRLF-terminated).
    raw_headers: Vec<u8>,
    /// `quote-key`: the credential to quote into every JSON string sent.
    quote: Option<String>,
    /// The request accepts gzip: bodies (and streams) are sent compressed,
    /// as real vendors do.
    gzip: bool,
    /// `retry-after=N`: the wait every error answer states instead of the dialect's own.
    retry_after: Option<String>,
}

impl Conn {
    fn send(
        &mut self,
        status: u16,
        ctype: &str,
        extra: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<bool> {
        if self.verbose {
            eprintln!("  -> {status}");
        }
        let quoted = self.quote.as_deref().and_then(|q| quote_json(body, q));
        let body = quoted.as_deref().unwrap_or(body);
        let compressed = (self.gzip && !body.is_empty()).then(|| gzip::compress(body));
        let mut headers = extra.to_vec();
        if compressed.is_some() {
            headers.push(("content-encoding", "gzip"));
        }
        write_response(
            &mut self.w,
            &mut self.buf,
            status,
            ctype,
            &headers,
            &self.raw_headers,
            compressed.as_deref().unwrap_or(body),
            self.keep_alive,
        )?;
        Ok(self.keep_alive)
    }

    /// A JSON reply, with `retry-after` and the dialect's error-type header when set.
    fn reply(&mut self, r: &Reply, error_header: Option<(&str, String)>) -> io::Result<bool> {
        let mut extra: Vec<(&str, &str)> = Vec::new();
        let wait = self.retry_after.take();
        if let Some(secs) = wait.as_deref().or(r.retry_after) {
            extra.push(("retry-after", secs));
        }
        if let Some((name, value)) = &error_header {
            extra.push((name, value));
        }
        self.send(r.status, JSON, &extra, r.body.as_bytes())
    }

    /// The dialect's error response for a failure.
    fn fail(&mut self, d: &dyn Dialect, f: &Failure) -> io::Result<bool> {
        self.reply(&d.error(f), d.error_header(f))
    }
}

fn connection(stream: TcpStream, st: &State) {
    // Small writes must leave at once (streams, split), not wait for an ACK.
    let _ = stream.set_nodelay(true);
    // No read timeout: closing idle keep-alive connections races with
    // proxies reusing them. A client that stops reading is given up on.
    let _ = stream.set_write_timeout(Some(Duration::from_secs(30)));
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::with_capacity(16 * 1024, read_half);
    let mut c = Conn {
        w: stream,
        buf: Vec::with_capacity(4096),
        body: Vec::with_capacity(4096),
        keep_alive: true,
        verbose: st.verbose,
        raw_headers: Vec::new(),
        quote: None,
        gzip: false,
        retry_after: None,
    };
    let mut req = Request::default();
    loop {
        match read_request(&mut reader, &mut c.w, &mut req) {
            Ok(true) => {}
            Ok(false) | Err(ReadError::Closed) => return,
            Err(ReadError::Bad(status, msg)) => {
                c.keep_alive = false;
                let _ = c.send(status, TEXT, &[], msg.as_bytes());
                return;
            }
        }
        c.keep_alive = req.keep_alive();
        c.raw_headers.clear();
        c.quote = None;
        c.retry_after = None;
        c.gzip = !st.fast && gzip::accepted(req.header("accept-encoding"));
        match handle(&req, &mut c, st) {
            Ok(true) => {}
            Ok(false) | Err(_) => return,
        }
    }
}

/// Answers one request; returns whether the connection stays open.
fn handle(req: &Request, c: &mut Conn, st: &State) -> io::Result<bool> {
    let (method, path) = (req.method(), req.path());
    if st.verbose {
        eprintln!("{method} {path}");
    }
    // Google's token endpoint and metadata server (Vertex AI's credentials).
    if crate::oauth::handles(path) {
        return c.reply(&crate::oauth::answer(req), None);
    }
    if path.starts_with("/_mock/") {
        return control(req, c, st);
    }
    // `/scenario/<directives>/<vendor path>`: a provider whose base_path
    // carries directives always gets them (e.g. a primary that always fails).
    let (path_directives, path) = match path
        .strip_prefix("/scenario/")
        .and_then(|rest| rest.find('/').map(|i| rest.split_at(i)))
    {
        Some((directives, vendor_path)) => (Some(directives), vendor_path),
        None => (None, path),
    };
    // Model lists (not recorded: the gateway reads them on its own schedule).
    if method == "GET" {
        if let Some(route) = st.models.route(req, path) {
            return c.reply(&st.models.answer(&route, req), None);
        }
    }
    // Embeddings first: Bedrock's `/model/{id}/invoke` is Claude's otherwise.
    if let Some(endpoint) = st.embeddings.route(path) {
        st.recorder.record(req);
        if method != "POST" {
            return c.send(405, TEXT, &[("allow", "POST")], b"method not allowed");
        }
        let header = req.header(scenario::HEADER).unwrap_or_default();
        let sc = Scenario::parse(&format!("{header},{}", path_directives.unwrap_or_default()));
        let a = st.embeddings.answer(endpoint, req, path, &sc);
        let extra: Vec<(&str, &str)> = a.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        return c.send(a.status, JSON, &extra, a.body.as_bytes());
    }
    if let Some(d) = st.dialects.iter().find(|d| d.has_call(path)) {
        st.recorder.record(req);
        // An `error-NNN` directive fails these calls too (a primary that always fails).
        let header = req.header(scenario::HEADER).unwrap_or_default();
        let sc = Scenario::parse(&format!("{header},{}", path_directives.unwrap_or_default()));
        if let Some(status) = sc.error {
            return c.fail(d.as_ref(), &Failure::Status(status));
        }
        return c.reply(&d.call(req, path), None);
    }
    let found = st
        .dialects
        .iter()
        .zip(&st.fast_answers)
        .find(|(d, _)| d.handles(path));
    let Some((dialect, fast_answers)) = found else {
        return c.send(404, TEXT, &[], b"not found");
    };
    if method != "POST" {
        return c.send(405, TEXT, &[("allow", "POST")], b"method not allowed");
    }
    if st.fast && req.header(scenario::HEADER).is_none() && path_directives.is_none() {
        return fast(req, c, st, dialect.as_ref(), fast_answers);
    }
    if !st.fast {
        st.recorder.record(req);
    }
    completion(req, c, st, dialect.as_ref(), path_directives)
}

/// The test-control endpoints under /_mock/.
fn control(req: &Request, c: &mut Conn, st: &State) -> io::Result<bool> {
    match (req.method(), req.path()) {
        ("GET", "/_mock/health") => c.send(200, TEXT, &[], b"ok"),
        ("GET", "/_mock/requests") => {
            let test_id = query_param(req.query(), "test_id");
            let list = st.recorder.list(test_id.as_deref());
            c.send(200, JSON, &[], list.as_bytes())
        }
        ("DELETE", "/_mock/requests") => {
            let n = st.recorder.clear();
            c.send(200, JSON, &[], format!("{{\"deleted\":{n}}}").as_bytes())
        }
        ("GET", "/_mock/models") => c.send(200, JSON, &[], st.models.show().as_bytes()),
        ("POST", "/_mock/models") => match st.models.change(&req.body) {
            Ok(()) => c.send(200, JSON, &[], st.models.show().as_bytes()),
            Err(e) => c.send(400, TEXT, &[], e.as_bytes()),
        },
        _ => c.send(404, TEXT, &[], b"not found"),
    }
}

/// The full request flow: headers, scenario errors, validation, answer.
fn completion(
    req: &Request,
    c: &mut Conn,
    st: &State,
    d: &dyn Dialect,
    path_directives: Option<&str>,
) -> io::Result<bool> {
    let header = req.header(scenario::HEADER).unwrap_or_default();
    let sc = Scenario::parse(&format!("{header},{}", path_directives.unwrap_or_default()));
    crate::answer::set_signature_bytes(sc.signature_bytes.unwrap_or(0));
    c.retry_after = sc.retry_after.map(|s| s.to_string());
    if sc.quote_key {
        let received = ["authorization", "x-api-key", "api-key", "x-goog-api-key"]
            .iter()
            .find_map(|h| req.header(h))
            .unwrap_or_default();
        for name in ["x-debug-received-auth", "x-ratelimit-debug", "request-id"] {
            c.raw_headers
                .extend_from_slice(format!("{name}: {}\r\n", quoted(received)).as_bytes());
        }
        c.quote = Some(received.to_owned());
    }
    if let Some((lo, hi)) = sc.header_bytes {
        for name in ["x-mock-bytes", "x-ratelimit-mock-bytes"] {
            c.raw_headers.extend_from_slice(name.as_bytes());
            c.raw_headers.extend_from_slice(b": a");
            c.raw_headers.extend(lo..=hi);
            c.raw_headers.extend_from_slice(b"b\r\n");
        }
    }
    if let Err(f) = d.check_headers(req) {
        return c.fail(d, &f);
    }
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("We could not parse the JSON body of your request: {e}");
            return c.fail(d, &Failure::Invalid(msg));
        }
    };
    // The vendor's request rules come first: a scenario error is only
    // answered to a request the vendor would have accepted.
    let mut prompt = match d.parse_request(req, &body) {
        Ok(p) => p,
        Err(f) => return c.fail(d, &f),
    };
    // A model removed from the vendor's list at run time is gone: its 404.
    if let Some((catalog, model)) = crate::models::named(req.path(), &prompt.model) {
        if st.models.removed(catalog, &model) {
            return c.fail(d, &Failure::Status(404));
        }
        // A prompt over the model's window (its words are its tokens here).
        if let Some(window) = st.models.window(catalog, &model) {
            if let Some(failure) = over_window(d.name(), &prompt, window) {
                return c.fail(d, &failure);
            }
        }
    }
    let stream = d.is_stream(req, &body);
    prompt.stream = stream;
    if let (false, Some(pause)) = (stream, sc.slow) {
        thread::sleep(pause);
    }
    if sc.empty_200 {
        return c.send(200, JSON, &[], b"not json");
    }
    if sc.echo_key {
        let received = ["authorization", "x-api-key", "api-key", "x-goog-api-key"]
            .iter()
            .find_map(|h| req.header(h))
            .unwrap_or_default();
        let msg = format!("Incorrect API key provided: {received}");
        return c.fail(d, &Failure::Auth(msg));
    }
    if sc.context_error {
        return c.fail(d, &Failure::ContextLength);
    }
    if let Some(status) = sc.error {
        return c.fail(d, &Failure::Status(status));
    }
    if sc.busy_until_tool_results && prompt.tool_results.is_none() {
        return c.fail(d, &Failure::Status(529));
    }
    // Without an x-request-id there is nothing to remember: answer normally.
    if sc.fail_first
        && req
            .header("x-request-id")
            .is_some_and(|id| st.fail_first.first_time(id))
    {
        return c.fail(d, &Failure::Status(503));
    }
    let meta = st.meta();
    let sc = Scenario {
        crlf: sc.crlf || d.crlf(),
        gzip: c.gzip,
        ..sc
    };
    match sc.filter.and_then(|f| d.filtered(f, &prompt, meta)) {
        Some(Filtered::Reply(reply)) => return c.reply(&reply, None),
        Some(Filtered::Stream(events)) => return send_stream(c, d, &events, &sc),
        None => {}
    }
    let answer = plan(&prompt, &sc, d.name(), d.tool_preface());
    if !prompt.stream {
        let body = to_json(&d.response(&prompt, &answer, meta));
        return c.send(200, JSON, &[], body.as_bytes());
    }
    send_stream(c, d, &d.stream(&prompt, &answer, meta), &sc)
}

fn send_stream(
    c: &mut Conn,
    d: &dyn Dialect,
    events: &[SseEvent],
    sc: &Scenario,
) -> io::Result<bool> {
    if c.verbose {
        eprintln!("  -> 200 stream");
    }
    if c.gzip {
        c.raw_headers
            .extend_from_slice(b"content-encoding: gzip\r\n");
    }
    c.buf.clear();
    stream_head(
        &mut c.buf,
        d.stream_content_type(),
        &c.raw_headers,
        c.keep_alive,
    );
    c.w.write_all(&c.buf)?;
    let encode =
        |i: usize, e: &SseEvent, crlf: bool, out: &mut Vec<u8>| d.encode_event(i, e, crlf, out);
    let quote_event = |e: &SseEvent| {
        let mut e = e.clone();
        if let Some(q) = c
            .quote
            .as_deref()
            .and_then(|q| quote_json(e.data.as_bytes(), q))
        {
            e.data = String::from_utf8_lossy(&q).into_owned();
        }
        e
    };
    let events: Vec<SseEvent> = events.iter().map(quote_event).collect();
    let error = quote_event(&d.stream_error());
    match sse::send(&mut c.w, &events, &error, sc, &encode)? {
        End::Complete => Ok(c.keep_alive),
        End::Cut => {
            // Abrupt end: no terminating chunk, connection gone.
            let _ = c.w.shutdown(Shutdown::Both);
            Ok(false)
        }
    }
}

/// Benchmark path: pre-rendered answer, model filled in, one write.
fn fast(
    req: &Request,
    c: &mut Conn,
    st: &State,
    d: &dyn Dialect,
    answers: &FastAnswers,
) -> io::Result<bool> {
    if let Err(f) = d.check_headers(req) {
        return c.fail(d, &f);
    }
    let Ok(FastRequest {
        model: Some(model),
        stream,
    }) = serde_json::from_slice(&req.body)
    else {
        // Let the full path produce the vendor's 400.
        return completion(req, c, st, d, None);
    };
    c.body.clear();
    if d.is_stream(req, &serde_json::json!({ "stream": stream })) {
        answers.sse.render(&model, &mut c.body);
        c.buf.clear();
        stream_head(&mut c.buf, d.stream_content_type(), b"", c.keep_alive);
        push_chunk(&mut c.buf, &c.body);
        c.buf.extend_from_slice(LAST_CHUNK);
        c.w.write_all(&c.buf)?;
        return Ok(c.keep_alive);
    }
    answers.json.render(&model, &mut c.body);
    write_response(
        &mut c.w,
        &mut c.buf,
        200,
        JSON,
        &[],
        b"",
        &c.body,
        c.keep_alive,
    )?;
    Ok(c.keep_alive)
}

/// Fields `quote-key` leaves alone: what makes an answer parse as the
/// vendor's (types, roles, finish reasons, ids that tie events together)
/// and strings that must stay JSON (tool arguments).
const UNQUOTED: &[&str] = &[
    "type",
    "code",
    "status",
    "__type",
    "object",
    "role",
    "event",
    "id",
    "index",
    "finish_reason",
    "finishReason",
    "stop_reason",
    "stopReason",
    "arguments",
    "partial_json",
    "tool_call_id",
    "toolUseId",
    "name",
    "model",
    "modelVersion",
    "result_format",
    "request_id",
    "responseId",
];

/// What `quote-key` appends to a string: the credential and its base64.
fn quoted(credential: &str) -> String {
    format!(
        "[received: {credential}] [base64: {}]",
        base64(credential.as_bytes())
    )
}

/// `body` with the credential quoted into every JSON string (but the
/// fields in [`UNQUOTED`]); `None` when it is not JSON.
fn quote_json(body: &[u8], credential: &str) -> Option<Vec<u8>> {
    fn walk(v: &mut Value, q: &str) {
        match v {
            Value::String(s) => {
                s.push(' ');
                s.push_str(q);
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, q)),
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if !UNQUOTED.contains(&k.as_str()) {
                        walk(v, q);
                    }
                }
            }
            _ => {}
        }
    }
    let mut v: Value = serde_json::from_slice(body).ok()?;
    walk(&mut v, &quoted(credential));
    serde_json::to_vec(&v).ok()
}

pub(crate) fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [0, 1, 2].map(|i| chunk.get(i).copied().unwrap_or(0));
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize])
            } else {
                '='
            });
        }
    }
    out
}

/// The vendor's refusal of a prompt longer than the model's `window`:
/// OpenAI counts the completion's `max_tokens` too, Anthropic and Gemini
/// the input only; each in its own words.
pub(crate) fn over_window(
    vendor: &str,
    p: &crate::dialect::Prompt,
    window: u64,
) -> Option<Failure> {
    let prompt = p.prompt_words;
    let (total, message, code) = match vendor {
        "openai" | "azure" => {
            let completion = p.max_tokens.unwrap_or(0);
            let total = prompt + completion;
            (
                total,
                format!(
                    "This model's maximum context length is {window} tokens. However, you requested \
                     {total} tokens ({prompt} in the messages, {completion} in the completion). \
                     Please reduce the length of the messages or completion."
                ),
                Some("context_length_exceeded"),
            )
        }
        "anthropic" => (
            prompt,
            format!("prompt is too long: {prompt} tokens > {window} maximum"),
            None,
        ),
        "gemini" => (
            prompt,
            format!(
                "The input token count ({prompt}) exceeds the maximum number of tokens allowed ({window})."
            ),
            None,
        ),
        _ => (prompt, "Input is too long for requested model.".to_owned(), None),
    };
    (total > window).then(|| Failure::Param {
        message,
        param: "messages".to_owned(),
        code,
    })
}
