//! `replay` mode: the host calls the gateway makes for the benchmark's
//! request to mock-anthropic, in the same callbacks, with none of its work
//! (no parsing, routing, translation or JSON). What plain Envoy plus this
//! costs is the floor of any filter that must make those calls; the
//! gateway's cost above it is its own code.
//!
//! The calls are `replay.calls`, recorded from the gateway's own sessions
//! (`src/session/replay_script.rs` in the gateway crate, whose tests fail
//! when the sessions' calls change), so this follows the gateway instead of
//! being a copy of it. The format is described there.
//!
//! The client sends the vendor request (path, headers, body), so writing
//! back what was read stands in for translating it: the attempt writes the
//! body the edge role read, found through the handoff, as the gateway's
//! attempt encodes the request its edge role parsed.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::{Action, BufferType, MapType, MetricType};

use crate::now;

const SCRIPT: &str = include_str!("replay.calls");

/// The two requests the script has: a JSON answer and a stream.
const KINDS: [&str; 2] = ["json", "stream"];
const ROLES: [&str; 2] = ["edge", "upstream"];
const CALLBACKS: [&str; 9] = [
    "request_headers",
    "request_body.first",
    "request_body.next",
    "request_body.end",
    "response_headers",
    "response_body.first",
    "response_body.next",
    "response_body.end",
    "log",
];
/// How a stream request's body ends.
const STREAM_END: &[u8] = b"\"stream\":true}";
/// Indices in `CALLBACKS` (a body callback's three follow its first).
const REQUEST_HEADERS: usize = 0;
const REQUEST_BODY: usize = 1;
const RESPONSE_HEADERS: usize = 4;
const RESPONSE_BODY: usize = 5;
const LOG: usize = 8;

#[derive(Clone, Copy)]
enum Side {
    Request,
    Response,
}

impl Side {
    fn map(self) -> MapType {
        match self {
            Side::Request => MapType::HttpRequestHeaders,
            Side::Response => MapType::HttpResponseHeaders,
        }
    }
    fn buffer(self) -> BufferType {
        match self {
            Side::Request => BufferType::HttpRequestBody,
            Side::Response => BufferType::HttpResponseBody,
        }
    }
}

enum Op {
    Now,
    Headers(Side),
    Header(Side, String),
    SetHeader(Side, String, Vec<u8>),
    /// `content-length={length}`: the length of the body this role writes.
    SetLength(Side, String),
    RemoveHeader(Side, String),
    Body(Side),
    SetBody(Side),
    Property(Vec<String>),
    SetProperty(Vec<String>, Vec<u8>),
    /// The handoff: `{token}` between the two parts.
    SetHandoff(Vec<String>, Vec<u8>, Vec<u8>),
    /// A metric, its value, and its id once defined (the gateway caches them too).
    Metric(MetricType, String, u64, Cell<Option<u32>>),
}

#[derive(Default)]
struct Section {
    flow: Option<Action>,
    ops: Vec<Op>,
}

pub struct Script {
    /// By role, callback and kind (see `index`).
    sections: Vec<Section>,
    /// Where the handoff is (the upstream role reads it there).
    handoff: Vec<String>,
}

fn index(role: usize, callback: usize, kind: usize) -> usize {
    (role * CALLBACKS.len() + callback) * KINDS.len() + kind
}

fn position(names: &[&str], name: &str) -> Result<usize, String> {
    names
        .iter()
        .position(|n| *n == name)
        .ok_or_else(|| format!("unknown {name:?}"))
}

fn side(word: &str) -> Result<Side, String> {
    match word {
        "request" => Ok(Side::Request),
        "response" => Ok(Side::Response),
        other => Err(format!("unknown side {other:?}")),
    }
}

fn path(text: &str) -> Vec<String> {
    text.split('/').map(str::to_owned).collect()
}

fn op(line: &str) -> Result<Op, String> {
    let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
    let (first, args) = rest.split_once(' ').unwrap_or((rest, ""));
    Ok(match verb {
        "now" => Op::Now,
        "headers" => Op::Headers(side(first)?),
        "header" => Op::Header(side(first)?, args.to_owned()),
        "remove_header" => Op::RemoveHeader(side(first)?, args.to_owned()),
        "set_header" => {
            let (name, value) = args.split_once('=').ok_or("set_header without =")?;
            match value {
                "{length}" => Op::SetLength(side(first)?, name.to_owned()),
                _ => Op::SetHeader(side(first)?, name.to_owned(), value.as_bytes().to_vec()),
            }
        }
        "body" => Op::Body(side(first)?),
        "set_body" => Op::SetBody(side(first)?),
        "property" => Op::Property(path(first)),
        "set_property" => {
            let (name, value) = rest.split_once('=').ok_or("set_property without =")?;
            match value.split_once("{token}") {
                Some((before, after)) => Op::SetHandoff(
                    path(name),
                    before.as_bytes().to_vec(),
                    after.as_bytes().to_vec(),
                ),
                None => Op::SetProperty(path(name), value.as_bytes().to_vec()),
            }
        }
        "count" | "record" | "gauge" => {
            let kind = match verb {
                "count" => MetricType::Counter,
                "record" => MetricType::Histogram,
                _ => MetricType::Gauge,
            };
            let value = args.parse().map_err(|_| format!("bad value in {line:?}"))?;
            Op::Metric(kind, first.to_owned(), value, Cell::new(None))
        }
        _ => return Err(format!("the replay cannot make {line:?}")),
    })
}

impl Script {
    pub fn parse() -> Result<Script, String> {
        let slots = ROLES.len() * CALLBACKS.len() * KINDS.len();
        let mut sections: Vec<Option<Section>> = (0..slots).map(|_| None).collect();
        let mut handoff = None;
        // The slots the current section's lines go to.
        let mut current: Vec<usize> = Vec::new();
        for line in SCRIPT
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            if let Some(header) = line.strip_prefix('[') {
                let (names, flow) = header.split_once(']').ok_or("no ] in a section")?;
                let mut names = names.split(' ');
                let (kind, role, callback) = (names.next(), names.next(), names.next());
                let (Some(kind), Some(role), Some(callback)) = (kind, role, callback) else {
                    return Err(format!("bad section {line:?}"));
                };
                let kinds = match kind {
                    "both" => vec![0, 1],
                    kind => vec![position(&KINDS, kind)?],
                };
                let (role, callback) = (position(&ROLES, role)?, position(&CALLBACKS, callback)?);
                let flow = match flow.trim() {
                    "continue" => Some(Action::Continue),
                    "pause" => Some(Action::Pause),
                    "" => None,
                    other => return Err(format!("unknown flow {other:?}")),
                };
                current = kinds.iter().map(|&k| index(role, callback, k)).collect();
                for &slot in &current {
                    if let Some(section) = sections.get_mut(slot) {
                        *section = Some(Section {
                            flow,
                            ops: Vec::new(),
                        });
                    }
                }
                continue;
            }
            if current.is_empty() {
                return Err(format!("{line:?} is in no section"));
            }
            for &slot in &current {
                let parsed = op(line)?;
                if let Op::SetHandoff(path, ..) = &parsed {
                    handoff = Some(path.clone());
                }
                if let Some(Some(section)) = sections.get_mut(slot) {
                    section.ops.push(parsed);
                }
            }
        }
        let sections = sections
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or("a callback is missing from the script")?;
        let script = Script {
            sections,
            handoff: handoff.ok_or("the script has no handoff")?,
        };
        // The edge role learns which request it has from the body it reads first.
        for kind in 0..KINDS.len() {
            let end = script.section(0, REQUEST_BODY + 2, kind);
            if !matches!(
                end.and_then(|s| s.ops.first()),
                Some(Op::Body(Side::Request))
            ) {
                return Err("the edge role's request body does not start with reading it".into());
            }
        }
        Ok(script)
    }

    fn section(&self, role: usize, callback: usize, kind: usize) -> Option<&Section> {
        self.sections.get(index(role, callback, kind))
    }
}

/// What the edge role hands its attempts, by handoff value.
struct Stash {
    kind: usize,
    body: Vec<u8>,
}

thread_local! {
    static STASH: RefCell<HashMap<Vec<u8>, Stash>> = RefCell::new(HashMap::new());
    static NEXT_TOKEN: Cell<u64> = const { Cell::new(0) };
}

/// One request (edge role) or attempt (upstream role) replaying the script.
pub struct Replay {
    script: Rc<Script>,
    role: usize,
    kind: usize,
    /// The body this role writes: what it read last, or (upstream role,
    /// request) what the edge role read.
    body: Vec<u8>,
    request_bodies: usize,
    response_bodies: usize,
    /// The edge role's handoff, to end sharing when the request is over.
    handoff: Option<Vec<u8>>,
}

impl Replay {
    pub fn new(script: Rc<Script>, upstream: bool) -> Replay {
        Replay {
            script,
            role: usize::from(upstream),
            kind: 0,
            body: Vec::new(),
            request_bodies: 0,
            response_bodies: 0,
            handoff: None,
        }
    }

    /// Runs one callback's calls (from `skip` on) and answers its flow.
    fn run(&mut self, callback: usize, size: usize, skip: usize) -> Action {
        let script = Rc::clone(&self.script);
        // Every section is there (`Script::parse`).
        let Some(section) = script.section(self.role, callback, self.kind) else {
            return Action::Continue;
        };
        for op in section.ops.iter().skip(skip) {
            self.call(op, size);
        }
        section.flow.unwrap_or(Action::Continue)
    }

    fn call(&mut self, op: &Op, size: usize) {
        match op {
            Op::Now => {
                let _ = now();
            }
            Op::Headers(side) => {
                let _ = hostcalls::get_map_bytes(side.map());
            }
            Op::Header(side, name) => {
                let _ = hostcalls::get_map_value_bytes(side.map(), name);
            }
            Op::SetHeader(side, name, value) => {
                let _ = hostcalls::set_map_value_bytes(side.map(), name, Some(value));
            }
            Op::SetLength(side, name) => {
                let length = self.body.len().to_string();
                let _ = hostcalls::set_map_value_bytes(side.map(), name, Some(length.as_bytes()));
            }
            Op::RemoveHeader(side, name) => {
                let _ = hostcalls::set_map_value_bytes(side.map(), name, None);
            }
            Op::Body(side) => {
                self.body = hostcalls::get_buffer(side.buffer(), 0, size)
                    .ok()
                    .flatten()
                    .unwrap_or_default();
            }
            Op::SetBody(side) => {
                let _ = hostcalls::set_buffer(side.buffer(), 0, size, &self.body);
            }
            Op::Property(path) => {
                let value = hostcalls::get_property(path.iter().map(String::as_str).collect());
                if *path == self.script.handoff {
                    // A copy, as the gateway encodes a new body from the parsed request.
                    let found = value.ok().flatten().and_then(|key| {
                        STASH.with(|s| s.borrow().get(&key).map(|s| (s.kind, s.body.clone())))
                    });
                    if let Some((kind, body)) = found {
                        (self.kind, self.body) = (kind, body);
                    }
                }
            }
            Op::SetProperty(path, value) => {
                let path = path.iter().map(String::as_str).collect();
                let _ = hostcalls::set_property(path, Some(value));
            }
            Op::SetHandoff(path, before, after) => {
                let token = NEXT_TOKEN.with(|n| {
                    n.set(n.get() + 1);
                    n.get()
                });
                let mut value = before.clone();
                value.extend_from_slice(token.to_string().as_bytes());
                value.extend_from_slice(after);
                let path = path.iter().map(String::as_str).collect();
                let _ = hostcalls::set_property(path, Some(&value));
                let stash = Stash {
                    kind: self.kind,
                    body: std::mem::take(&mut self.body),
                };
                STASH.with(|s| s.borrow_mut().insert(value.clone(), stash));
                self.handoff = Some(value);
            }
            Op::Metric(kind, name, value, id) => {
                let id = match id.get() {
                    Some(id) => id,
                    None => match hostcalls::define_metric(*kind, name) {
                        Ok(defined) => {
                            id.set(Some(defined));
                            defined
                        }
                        Err(_) => return,
                    },
                };
                let _ = match kind {
                    MetricType::Counter => hostcalls::increment_metric(id, *value as i64),
                    _ => hostcalls::record_metric(id, *value),
                };
            }
        }
    }

    /// `.first`, `.next` or `.end` of a body callback.
    fn body_step(seen: &mut usize, end_of_stream: bool) -> usize {
        let step = match (end_of_stream, *seen) {
            (true, _) => 2,
            (false, 0) => 0,
            (false, _) => 1,
        };
        *seen += 1;
        step
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        if let Some(handoff) = self.handoff.take() {
            STASH.with(|s| s.borrow_mut().remove(&handoff));
        }
    }
}

impl Context for Replay {}

impl HttpContext for Replay {
    fn on_http_request_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        self.run(REQUEST_HEADERS, 0, 0)
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        let step = Self::body_step(&mut self.request_bodies, end_of_stream);
        if step == 2 && self.role == 0 {
            // Read first (the script says so): the body tells the request's
            // kind by its end, where the gateway writes `stream` (checked
            // when the script is recorded); no scan of a long body.
            self.call(&Op::Body(Side::Request), size);
            let stream = self.body.trim_ascii_end().ends_with(STREAM_END);
            self.kind = usize::from(stream);
            return self.run(REQUEST_BODY + step, size, 1);
        }
        self.run(REQUEST_BODY + step, size, 0)
    }

    fn on_http_response_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        self.run(RESPONSE_HEADERS, 0, 0)
    }

    fn on_http_response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        let step = Self::body_step(&mut self.response_bodies, end_of_stream);
        self.run(RESPONSE_BODY + step, size, 0)
    }

    fn on_log(&mut self) {
        self.run(LOG, 0, 0);
    }
}
