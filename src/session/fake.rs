//! A recording [`Host`] for the sessions' native tests: headers, bodies and
//! properties held in memory, a clock the test moves, and every host call
//! written down in order, in the line format `benches/wasm-floor` replays
//! (see `session::replay_script`).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::host::{Buffer, Host, Map, Phase};
use crate::headers::Headers;
use crate::limits::store::SetResult;
use crate::metering::metric_name;

/// A shared value and its CAS token.
type Versioned = (Vec<u8>, u32);

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
    /// Shared data: value and CAS token, by key.
    pub shared: RefCell<BTreeMap<Vec<u8>, Versioned>>,
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

    pub fn set(&self, map: Map, name: &str, value: &str) {
        self.set_header(map, name.as_bytes(), Some(value.as_bytes()));
        self.calls.borrow_mut().pop();
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
    fn headers(&self, map: Map) -> Headers {
        self.log(format!("headers {}", side(map)));
        Headers(self.map(map).borrow().clone())
    }

    fn header(&self, map: Map, name: &str) -> Option<Vec<u8>> {
        self.log(format!("header {} {name}", side(map)));
        find(&self.map(map).borrow(), name)
    }

    fn set_header(&self, map: Map, name: &[u8], value: Option<&[u8]>) {
        let mut headers = self.map(map).borrow_mut();
        headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        let name_text = String::from_utf8_lossy(name);
        match value {
            Some(v) => {
                headers.push((name.to_vec(), v.to_vec()));
                let v = String::from_utf8_lossy(v);
                self.log(format!("set_header {} {name_text}={v}", side(map)));
            }
            None => self.log(format!("remove_header {} {name_text}", side(map))),
        }
    }

    fn body(&self, buffer: Buffer, start: usize, size: usize) -> Vec<u8> {
        self.log(format!("body {}", which(buffer)));
        let body = self.buffer(buffer).borrow();
        let end = start.saturating_add(size).min(body.len());
        body.get(start.min(end)..end).unwrap_or_default().to_vec()
    }

    fn set_body(&self, buffer: Buffer, start: usize, size: usize, data: &[u8]) {
        let mut body = self.buffer(buffer).borrow_mut();
        let end = start.saturating_add(size).min(body.len());
        body.splice(start.min(end)..end, data.iter().copied());
        self.log(format!("set_body {} {} bytes", which(buffer), data.len()));
    }

    fn property(&self, path: &[&str]) -> Option<Vec<u8>> {
        self.log(format!("property {}", path.join("/")));
        self.properties.borrow().get(&path.join(".")).cloned()
    }

    fn set_property(&self, path: &[&str], value: Option<&[u8]>) {
        let shown = value.map(String::from_utf8_lossy).unwrap_or_default();
        self.log(format!("set_property {}={shown}", path.join("/")));
        let name = path.join(".");
        let mut properties = self.properties.borrow_mut();
        match value {
            Some(v) => properties.insert(name, v.to_vec()),
            None => properties.remove(&name),
        };
    }

    fn now(&self) -> SystemTime {
        self.log("now".to_owned());
        SystemTime::UNIX_EPOCH + Duration::from_secs_f64(self.clock.get())
    }

    fn send_response(&self, status: u16, _headers: &[(&str, &[u8])], body: &[u8], _: &str) {
        self.log(format!("send_response {status}"));
        *self.reply.borrow_mut() = Some((status, body.to_vec()));
    }

    fn count(&self, base: &str, labels: &[(&str, &str)], value: u64) {
        // As `host::metrics`: adding zero is no host call.
        if value > 0 {
            self.log(format!("count {} {value}", metric_name(base, labels)));
        }
    }

    fn record(&self, base: &str, labels: &[(&str, &str)], value: u64) {
        self.log(format!("record {} {value}", metric_name(base, labels)));
    }

    fn gauge(&self, base: &str, labels: &[(&str, &str)], value: u64) {
        self.log(format!("gauge {} {value}", metric_name(base, labels)));
    }

    fn shared_data(&self, key: &[u8]) -> Option<(Vec<u8>, u32)> {
        self.log(format!("shared_data {}", String::from_utf8_lossy(key)));
        self.shared.borrow().get(key).cloned()
    }

    fn set_shared_data(&self, key: &[u8], value: &[u8], cas: u32) -> SetResult {
        self.log(format!(
            "set_shared_data {} {} bytes",
            String::from_utf8_lossy(key),
            value.len()
        ));
        let mut shared = self.shared.borrow_mut();
        let token = shared.get(key).map_or(0, |(_, t)| *t);
        if cas != 0 && cas != token {
            return SetResult::CasMismatch;
        }
        shared.insert(key.to_vec(), (value.to_vec(), token + 1));
        SetResult::Done
    }

    fn overhead(&self, phase: Phase, _micros: u64) {
        self.log(format!("overhead {phase:?}"));
    }
}
