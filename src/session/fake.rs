//! A recording [`Host`] for the sessions' native tests: headers, bodies and
//! properties held in memory, a clock the test moves, and every host call
//! written down in order, in the line format `benches/wasm-floor` replays
//! (see `session::replay_script`). Any call can be made to fail
//! ([`FakeHost::fail`]): it is then written down with ` !failed` and changes
//! nothing.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::host::{status, Buffer, Host, HostCall, HostError, Map, Phase};
use crate::headers::Headers;
use crate::metering::metric_name;

/// A shared value and its CAS token.
type Versioned = (Vec<u8>, u32);

/// A callout: its cluster, headers and body.
pub type HttpCall = (String, Vec<(String, String)>, Vec<u8>);

#[derive(Default)]
pub struct FakeHost {
    pub request_headers: RefCell<Vec<(Vec<u8>, Vec<u8>)>>,
    pub response_headers: RefCell<Vec<(Vec<u8>, Vec<u8>)>>,
    pub request_body: RefCell<Vec<u8>>,
    pub response_body: RefCell<Vec<u8>>,
    pub properties: RefCell<BTreeMap<String, Vec<u8>>>,
    /// Seconds since the Unix epoch, moved by the test.
    pub clock: Cell<f64>,
    /// Every host call, in order: `now`, `headers request`,
    /// `set_header response x-llm-model=m`, `set_property llm_route=a/m:200`,
    /// `count llm_gateway.requests;status=200 1`, ...
    pub calls: RefCell<Vec<String>>,
    /// The local reply, if the session sent one: status and body.
    pub reply: RefCell<Option<(u16, Vec<u8>)>>,
    /// The local reply's headers.
    pub reply_headers: RefCell<Vec<(String, Vec<u8>)>>,
    /// Shared data: value and CAS token, by key.
    pub shared: RefCell<BTreeMap<Vec<u8>, Versioned>>,
    /// The session reset the stream.
    pub reset: Cell<bool>,
    /// HTTP callouts made: cluster, headers, body; the nth's token is n.
    pub http_calls: RefCell<Vec<HttpCall>>,
    /// Each callout's timeout (ms), in the same order.
    pub http_timeouts: RefCell<Vec<u32>>,
    /// Entropy handed out so far (each call's bytes differ).
    random_calls: Cell<u8>,
    failures: RefCell<Vec<Failure>>,
}

/// Calls made to fail: those whose line starts with `prefix`, every one or
/// only the `nth` (from 1) of them.
struct Failure {
    prefix: String,
    nth: Option<usize>,
    seen: usize,
}

impl FakeHost {
    pub fn new() -> Self {
        let host = Self::default();
        host.clock.set(1_733_000_000.0);
        host
    }

    fn map(&self, map: Map) -> &RefCell<Vec<(Vec<u8>, Vec<u8>)>> {
        match map {
            Map::Request => &self.request_headers,
            Map::Response => &self.response_headers,
        }
    }

    fn buffer(&self, buffer: Buffer) -> &RefCell<Vec<u8>> {
        match buffer {
            Buffer::Request => &self.request_body,
            Buffer::Response => &self.response_body,
        }
    }

    /// Sets a header as the proxy would have it (not a host call of the session's).
    pub fn set(&self, map: Map, name: &str, value: &str) {
        let mut headers = self.map(map).borrow_mut();
        headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name.as_bytes()));
        headers.push((name.as_bytes().to_vec(), value.as_bytes().to_vec()));
    }

    /// Makes the calls whose line (as `take_record` shows them) starts with
    /// `prefix` fail: every one, or only the `nth` (from 1) from now on.
    /// E.g. `fail("set_body response", Some(2))`, `fail("count", None)`.
    pub fn fail(&self, prefix: &str, nth: Option<usize>) {
        self.failures.borrow_mut().push(Failure {
            prefix: prefix.to_owned(),
            nth,
            seen: 0,
        });
    }

    /// A header as the test sees it (not a host call of the session's).
    pub fn get(&self, map: Map, name: &str) -> Option<String> {
        find(&self.map(map).borrow(), name).map(|v| String::from_utf8_lossy(&v).into_owned())
    }

    pub fn set_prop(&self, path: &[&str], value: &[u8]) {
        self.properties
            .borrow_mut()
            .insert(path.join("."), value.to_vec());
    }

    pub fn prop(&self, name: &str) -> Option<String> {
        self.properties
            .borrow()
            .get(name)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// The calls that changed something, property values left out
    /// (`set_property llm_route`), and forgets every call so far.
    pub fn take_calls(&self) -> Vec<String> {
        self.take_record()
            .into_iter()
            .filter(|call| !READS.contains(&call.split(' ').next().unwrap_or_default()))
            .map(|call| match call.split_once('=') {
                Some((set, _)) if set.starts_with("set_property ") => set.to_owned(),
                _ => call,
            })
            .collect()
    }

    /// Every call so far, reads included, and forgets them.
    pub fn take_record(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.borrow_mut())
    }

    pub fn advance(&self, seconds: f64) {
        self.clock.set(self.clock.get() + seconds);
    }

    fn log(&self, call: String) {
        self.calls.borrow_mut().push(call);
    }

    /// Writes the call down; `Err` when a [`FakeHost::fail`] rule takes it.
    fn call(&self, line: String, call: HostCall) -> Result<(), HostError> {
        let mut failed = false;
        for rule in self.failures.borrow_mut().iter_mut() {
            if line.starts_with(&rule.prefix) {
                rule.seen += 1;
                failed |= rule.nth.is_none_or(|n| n == rule.seen);
            }
        }
        if failed {
            self.log(format!("{line} !failed"));
            return Err(HostError::new(call, status::INTERNAL_FAILURE));
        }
        self.log(line);
        Ok(())
    }
}

/// The calls that only read.
const READS: [&str; 6] = [
    "now",
    "headers",
    "header",
    "body",
    "property",
    "shared_data",
];

fn find(headers: &[(Vec<u8>, Vec<u8>)], name: &str) -> Option<Vec<u8>> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| v.clone())
}

fn side(map: Map) -> &'static str {
    match map {
        Map::Request => "request",
        Map::Response => "response",
    }
}

fn which(buffer: Buffer) -> &'static str {
    match buffer {
        Buffer::Request => "request",
        Buffer::Response => "response",
    }
}

impl Host for FakeHost {
    fn headers(&self, map: Map) -> Result<Headers, HostError> {
        self.call(format!("headers {}", side(map)), HostCall::Headers)?;
        Ok(Headers(self.map(map).borrow().clone()))
    }

    fn header(&self, map: Map, name: &str) -> Option<Vec<u8>> {
        self.call(format!("header {} {name}", side(map)), HostCall::Headers)
            .ok()?;
        find(&self.map(map).borrow(), name)
    }

    fn set_header(&self, map: Map, name: &[u8], value: Option<&[u8]>) -> Result<(), HostError> {
        let name_text = String::from_utf8_lossy(name);
        let line = match value {
            Some(v) => format!(
                "set_header {} {name_text}={}",
                side(map),
                String::from_utf8_lossy(v)
            ),
            None => format!("remove_header {} {name_text}", side(map)),
        };
        self.call(line, HostCall::SetHeader)?;
        let mut headers = self.map(map).borrow_mut();
        headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        if let Some(v) = value {
            headers.push((name.to_vec(), v.to_vec()));
        }
        Ok(())
    }

    fn body(&self, buffer: Buffer, start: usize, size: usize) -> Result<Vec<u8>, HostError> {
        self.call(format!("body {}", which(buffer)), HostCall::Body)?;
        let body = self.buffer(buffer).borrow();
        let end = start.saturating_add(size).min(body.len());
        Ok(body.get(start.min(end)..end).unwrap_or_default().to_vec())
    }

    fn set_body(
        &self,
        buffer: Buffer,
        start: usize,
        size: usize,
        data: &[u8],
    ) -> Result<(), HostError> {
        let line = format!("set_body {} {} bytes", which(buffer), data.len());
        self.call(line, HostCall::SetBody)?;
        let mut body = self.buffer(buffer).borrow_mut();
        let end = start.saturating_add(size).min(body.len());
        body.splice(start.min(end)..end, data.iter().copied());
        Ok(())
    }

    fn property(&self, path: &[&str]) -> Result<Option<Vec<u8>>, HostError> {
        self.call(format!("property {}", path.join("/")), HostCall::Property)?;
        Ok(self.properties.borrow().get(&path.join(".")).cloned())
    }

    fn set_property(&self, path: &[&str], value: Option<&[u8]>) -> Result<(), HostError> {
        let shown = value.map(String::from_utf8_lossy).unwrap_or_default();
        let line = format!("set_property {}={shown}", path.join("/"));
        self.call(line, HostCall::SetProperty)?;
        let name = path.join(".");
        let mut properties = self.properties.borrow_mut();
        match value {
            Some(v) => properties.insert(name, v.to_vec()),
            None => properties.remove(&name),
        };
        Ok(())
    }

    fn now(&self) -> SystemTime {
        self.log("now".to_owned());
        SystemTime::UNIX_EPOCH + Duration::from_secs_f64(self.clock.get())
    }

    fn send_response(
        &self,
        status: u16,
        headers: &[(&str, &[u8])],
        body: &[u8],
        _: &str,
    ) -> Result<(), HostError> {
        self.call(format!("send_response {status}"), HostCall::SendResponse)?;
        *self.reply.borrow_mut() = Some((status, body.to_vec()));
        *self.reply_headers.borrow_mut() = headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), v.to_vec()))
            .collect();
        Ok(())
    }

    fn count(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError> {
        // As `host::metrics`: adding zero is no host call.
        if value == 0 {
            return Ok(());
        }
        let line = format!("count {} {value}", metric_name(base, labels));
        self.call(line, HostCall::Metric)
    }

    fn record(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError> {
        let line = format!("record {} {value}", metric_name(base, labels));
        self.call(line, HostCall::Metric)
    }

    fn gauge(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError> {
        let line = format!("gauge {} {value}", metric_name(base, labels));
        self.call(line, HostCall::Metric)
    }

    fn shared_data(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, HostError> {
        let line = format!("shared_data {}", String::from_utf8_lossy(key));
        self.call(line, HostCall::SharedData)?;
        Ok(self.shared.borrow().get(key).cloned())
    }

    fn set_shared_data(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), HostError> {
        let line = format!(
            "set_shared_data {} {} bytes",
            String::from_utf8_lossy(key),
            value.len()
        );
        self.call(line, HostCall::SetSharedData)?;
        let mut shared = self.shared.borrow_mut();
        let token = shared.get(key).map_or(0, |(_, t)| *t);
        if cas != 0 && cas != token {
            return Err(HostError::new(
                HostCall::SetSharedData,
                status::CAS_MISMATCH,
            ));
        }
        shared.insert(key.to_vec(), (value.to_vec(), token + 1));
        Ok(())
    }

    fn http_call(
        &self,
        cluster: &str,
        headers: &[(&str, &[u8])],
        body: &[u8],
        timeout_ms: u32,
    ) -> Result<u32, HostError> {
        let path = headers
            .iter()
            .find(|(n, _)| *n == ":path")
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        self.call(format!("http_call {cluster} {path}"), HostCall::HttpCall)?;
        self.http_timeouts.borrow_mut().push(timeout_ms);
        let mut calls = self.http_calls.borrow_mut();
        calls.push((
            cluster.to_owned(),
            headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), String::from_utf8_lossy(v).into_owned()))
                .collect(),
            body.to_vec(),
        ));
        Ok(calls.len() as u32)
    }

    fn random(&self, out: &mut [u8]) -> Result<(), HostError> {
        self.call(format!("random {} bytes", out.len()), HostCall::Random)?;
        let call = self.random_calls.get().wrapping_add(1);
        self.random_calls.set(call);
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = call.wrapping_mul(31).wrapping_add(i as u8);
        }
        Ok(())
    }

    fn overhead(&self, phase: Phase, _micros: u64) -> Result<(), HostError> {
        self.call(format!("overhead {phase:?}"), HostCall::Metric)
    }

    fn reset_stream(&self) -> Result<(), HostError> {
        self.call("reset_stream".to_owned(), HostCall::ResetStream)?;
        self.reset.set(true);
        Ok(())
    }
}
