//! A fake Envoy 1.40 for the native host's tests: every callback `abi.rs`
//! declares (`callbacks/`, same signatures, checked by the compiler) over
//! an in-memory model of streams keyed by their `FilterEnvoy` pointer, and
//! the handles the tests drive and inspect it with ([`Stream`],
//! [`FakeConfig`]). What the model keeps of Envoy's behaviour, where the
//! module relies on it:
//! - headers are bytes, multi-valued, matched without case; a set replaces
//!   every value, a null value removes the header;
//! - a body is Envoy's buffered chunks plus, inside a body hook, the chunk
//!   received: a hook that stops (`StopIterationAndBuffer`) adds the
//!   received chunk to the buffered ones; one that continues passes both
//!   on ([`Stream::forwarded_body`]);
//! - filter state is written once: a second `set_filter_state_bytes` of a
//!   key is refused (1.40 stores it read-only); an attempt's stream shares
//!   its request's, as upstream filters read the downstream's;
//! - dynamic metadata is per stream, and a later write replaces a value;
//!   endpoint metadata is the attempt's (the test names it); no stream
//!   has Envoy's attributes (the module reads them as absent);
//! - metrics are defined by a config only while it is created (then
//!   frozen), and recorded with as many label values as names;
//! - a local reply runs the response through the filter at once (its
//!   `local_reply` and response hooks), as Envoy's `sendLocalReply` does;
//! - schedulers keep what was committed to them, which the tests run as
//!   Envoy would (`on_..._scheduled`); resuming decoding passes the
//!   buffered request body on; callouts are kept for the test to answer.
//!
//! The model is per thread (each test runs on its own), except config
//! schedulers, which the token ticker commits from its own thread.

mod callbacks;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::abi::{
    self, EnvoyBuffer, FilterConfigEnvoy, FilterConfigModule, FilterEnvoy, FilterModule,
};
use crate::metrics::Kind;

/// Header names and values, in order.
pub type HeaderList = Vec<(Vec<u8>, Vec<u8>)>;

/// A local reply the module sent.
#[derive(Clone, Debug)]
pub struct LocalReply {
    pub status: u32,
    pub headers: HeaderList,
    pub body: Vec<u8>,
    pub details: Vec<u8>,
    /// A hook of the filter's session was running when it was sent (the
    /// reply would have re-entered it).
    pub sent_inside_session: bool,
}

/// One direction's body.
#[derive(Default)]
struct Body {
    buffered: Vec<Vec<u8>>,
    /// The chunk received, inside a body hook only.
    received: Option<Vec<Vec<u8>>>,
    /// What went on to the next filter.
    forwarded: Vec<u8>,
}

/// Filter state: every write asked for, and the values that took.
#[derive(Default)]
struct FilterState {
    values: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Key, value, and whether it was stored.
    writes: Vec<(Vec<u8>, Vec<u8>, bool)>,
}

#[derive(Default)]
struct StreamModel {
    /// By header type: request headers, request trailers, response
    /// headers, response trailers.
    headers: [HeaderList; 4],
    /// Request, response.
    bodies: [Body; 2],
    filter_state: Rc<RefCell<FilterState>>,
    dynamic_metadata: BTreeMap<(Vec<u8>, Vec<u8>), Vec<u8>>,
    endpoint_metadata: BTreeMap<(Vec<u8>, Vec<u8>), Vec<u8>>,
    attribute_strings: HashMap<u32, Vec<u8>>,
    attribute_ints: HashMap<u32, u64>,
    replies: Vec<LocalReply>,
    /// Reason and details of each reset.
    resets: Vec<(u32, Vec<u8>)>,
    route_cache_clears: usize,
    /// `get_body_size` calls on this stream (either direction).
    body_size_asks: usize,
    decoding_continued: usize,
    encoding_continued: usize,
    /// The module's filter on this stream and its config (Envoy's pointer).
    module: Option<FilterModule>,
    config: Option<usize>,
    /// Envoy reports an impossible header count (the tests' way to make a
    /// session panic inside the native host).
    absurd_header_count: bool,
    /// The callouts this stream's filter made, for the test to answer.
    callouts: Vec<FilterCallout>,
}

/// A callout a filter made: its id (Envoy's), cluster, headers and body.
#[derive(Clone, Debug)]
pub struct FilterCallout {
    pub id: u64,
    pub cluster: Vec<u8>,
    pub headers: HeaderList,
    pub body: Vec<u8>,
    pub timeout_ms: u64,
}

struct MetricDefinition {
    config: usize,
    kind: Kind,
    name: String,
    labels: Vec<String>,
}

/// A metric value the module recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub kind: Kind,
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: u64,
}

struct FilterScheduler {
    filter: usize,
    commits: Vec<u64>,
}

#[derive(Default)]
struct World {
    streams: HashMap<usize, StreamModel>,
    /// Configs still being created (they may define metrics).
    defining: Vec<usize>,
    metrics: Vec<MetricDefinition>,
    recorded: Vec<Recorded>,
    log: Vec<(u32, String)>,
    filter_schedulers: HashMap<usize, FilterScheduler>,
    /// The config schedulers made on this thread (by pointer).
    config_schedulers: Vec<usize>,
    /// Cluster and headers of each config callout.
    callouts: Vec<(Vec<u8>, HeaderList)>,
    /// The last filter callout's id.
    next_callout: u64,
}

thread_local! {
    static WORLD: RefCell<World> = RefCell::new(World::default());
}

fn with<R>(f: impl FnOnce(&mut World) -> R) -> R {
    WORLD.with(|world| f(&mut world.borrow_mut()))
}

/// Config schedulers (any thread commits them): their commits, by pointer.
fn config_schedulers() -> std::sync::MutexGuard<'static, HashMap<usize, Vec<u64>>> {
    static SCHEDULERS: OnceLock<Mutex<HashMap<usize, Vec<u64>>>> = OnceLock::new();
    SCHEDULERS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An opaque pointer of Envoy's, never dereferenced by the module;
/// unique in the process (config schedulers are process-wide).
fn new_pointer() -> *mut c_void {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    std::ptr::without_provenance_mut(NEXT.fetch_add(1, Ordering::Relaxed) * 16)
}

impl World {
    fn stream(&mut self, filter: FilterEnvoy) -> Option<&mut StreamModel> {
        self.streams.get_mut(&filter.addr())
    }
}

impl StreamModel {
    fn body(&mut self, body_type: u32) -> Option<&mut Body> {
        let direction = match body_type {
            abi::RECEIVED_REQUEST_BODY | abi::BUFFERED_REQUEST_BODY => 0,
            abi::RECEIVED_RESPONSE_BODY | abi::BUFFERED_RESPONSE_BODY => 1,
            _ => return None,
        };
        self.bodies.get_mut(direction)
    }

    /// The chunks of one body type: `None` for a received chunk outside a
    /// body hook (Envoy has none then).
    fn chunks(&mut self, body_type: u32) -> Option<&mut Vec<Vec<u8>>> {
        let received = matches!(
            body_type,
            abi::RECEIVED_REQUEST_BODY | abi::RECEIVED_RESPONSE_BODY
        );
        let body = self.body(body_type)?;
        if received {
            body.received.as_mut()
        } else {
            Some(&mut body.buffered)
        }
    }
}

/// Buffers pointing at the chunks (valid until the next change of them).
fn buffers(chunks: &[Vec<u8>]) -> Vec<EnvoyBuffer> {
    chunks
        .iter()
        .map(|c| EnvoyBuffer {
            ptr: c.as_ptr(),
            length: c.len(),
        })
        .collect()
}

/// The config callouts made on this thread: cluster and headers.
pub fn callouts() -> Vec<(Vec<u8>, HeaderList)> {
    with(|w| w.callouts.clone())
}

/// This thread's config schedulers not deleted yet.
pub fn config_schedulers_alive() -> usize {
    let created = with(|w| w.config_schedulers.clone());
    let alive = config_schedulers();
    created.iter().filter(|p| alive.contains_key(p)).count()
}

/// The module's log lines on this thread (level, message).
pub fn log_lines() -> Vec<(u32, String)> {
    with(|w| w.log.clone())
}

/// The metric values recorded on this thread, in order.
pub fn recorded() -> Vec<Recorded> {
    with(|w| w.recorded.clone())
}

/// The metrics this thread's configs defined: kind, name, label names.
pub fn defined() -> Vec<(Kind, String, Vec<String>)> {
    with(|w| {
        w.metrics
            .iter()
            .map(|m| (m.kind, m.name.clone(), m.labels.clone()))
            .collect()
    })
}

/// Logs through the module's logger land in [`log_lines`].
fn install_logger() {
    let _ = log::set_logger(&crate::logging::LOGGER);
    log::set_max_level(log::LevelFilter::Info);
}

/// One filter config Envoy made (`on_http_filter_config_new`), destroyed
/// when dropped.
pub struct FakeConfig {
    pub envoy: FilterConfigEnvoy,
    pub module: FilterConfigModule,
}

impl FakeConfig {
    /// The config of `role` (`llm_edge`, `llm_upstream`) over `document`;
    /// `module` is null when the module refused it.
    pub fn new(role: &str, document: &str) -> Self {
        install_logger();
        let envoy = with(|w| {
            let pointer = new_pointer();
            w.defining.push(pointer.addr());
            pointer
        });
        let buffer = |s: &str| EnvoyBuffer {
            ptr: s.as_ptr(),
            length: s.len(),
        };
        // SAFETY: the buffers hold the strings for the call.
        let module = unsafe {
            crate::envoy_dynamic_module_on_http_filter_config_new(
                envoy,
                buffer(role),
                buffer(document),
            )
        };
        // Envoy freezes stat creation once the config exists.
        with(|w| w.defining.retain(|c| *c != envoy.addr()));
        Self { envoy, module }
    }
}

impl Drop for FakeConfig {
    fn drop(&mut self) {
        // SAFETY: made by `config_new`, destroyed once.
        unsafe { crate::envoy_dynamic_module_on_http_filter_config_destroy(self.module) };
    }
}

/// One stream in the fake: a request (downstream) or an attempt of one
/// (upstream), named by the `FilterEnvoy` pointer the module is given.
#[derive(Clone, Copy, Debug)]
pub struct Stream(pub FilterEnvoy);

/// Request headers (index into a stream's header maps).
pub const REQUEST: usize = abi::REQUEST_HEADER as usize;
/// Response headers.
pub const RESPONSE: usize = abi::RESPONSE_HEADER as usize;

fn owned(headers: &[(&str, &[u8])]) -> HeaderList {
    headers
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.to_vec()))
        .collect()
}

impl Stream {
    /// A request with these request headers.
    pub fn request(headers: &[(&str, &[u8])]) -> Self {
        with(|w| {
            let pointer = new_pointer();
            let mut model = StreamModel::default();
            model.headers[REQUEST] = owned(headers);
            w.streams.insert(pointer.addr(), model);
            Self(pointer)
        })
    }

    /// An attempt of `request`, as the router starts one: the request's
    /// headers (its body is the test's to send), its filter state (the
    /// upstream filters read the downstream's), the endpoint's metadata.
    pub fn attempt_of(request: Stream, endpoint: &[(&str, &str, &str)]) -> Self {
        with(|w| {
            let pointer = new_pointer();
            let parent = w.stream(request.0).expect("the request's stream");
            let mut model = StreamModel {
                filter_state: parent.filter_state.clone(),
                ..StreamModel::default()
            };
            model.headers[REQUEST] = parent.headers[REQUEST].clone();
            for (ns, key, value) in endpoint {
                model.endpoint_metadata.insert(
                    (ns.as_bytes().to_vec(), key.as_bytes().to_vec()),
                    value.as_bytes().to_vec(),
                );
            }
            w.streams.insert(pointer.addr(), model);
            Self(pointer)
        })
    }

    fn read<R>(self, f: impl FnOnce(&mut StreamModel) -> R) -> R {
        with(|w| f(w.stream(self.0).expect("a stream of the fake")))
    }

    /// The module's filter on this stream (set when `filter_new` made it).
    pub fn attach(self, module: FilterModule, config: FilterConfigEnvoy) {
        self.read(|s| {
            s.module = Some(module);
            s.config = Some(config.addr());
        });
    }

    pub fn headers(self, map: usize) -> HeaderList {
        self.read(|s| s.headers[map].clone())
    }

    /// Every value of a header.
    pub fn header_values(self, map: usize, name: &str) -> Vec<Vec<u8>> {
        self.read(|s| {
            s.headers[map]
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
                .map(|(_, v)| v.clone())
                .collect()
        })
    }

    /// A header's one value, as text (`None` when absent).
    pub fn header(self, map: usize, name: &str) -> Option<String> {
        let values = self.header_values(map, name);
        assert!(values.len() <= 1, "{name} has several values: {values:?}");
        values
            .first()
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// Sets the headers of a map, as Envoy received them.
    pub fn set_headers(self, map: usize, headers: &[(&str, &[u8])]) {
        self.read(|s| s.headers[map] = owned(headers));
    }

    /// Sets a map to what another stream's filters passed on.
    pub fn copy_headers(self, map: usize, headers: HeaderList) {
        self.read(|s| s.headers[map] = headers);
    }

    /// What went on to the next filter: the request (0) or response (1) body.
    pub fn forwarded_body(self, direction: usize) -> Vec<u8> {
        self.read(|s| s.bodies[direction].forwarded.clone())
    }

    /// The body Envoy still buffers for the filter.
    pub fn buffered_body(self, direction: usize) -> Vec<u8> {
        self.read(|s| s.bodies[direction].buffered.concat())
    }

    /// Runs a body hook with `chunks` as the received chunk (one buffer
    /// each), then does what its status says: buffered, or passed on with
    /// what Envoy buffered before.
    pub fn body_hook(self, direction: usize, chunks: &[&[u8]], hook: impl FnOnce() -> u32) -> u32 {
        self.read(|s| {
            s.bodies[direction].received = Some(chunks.iter().map(|c| c.to_vec()).collect());
        });
        let status = hook();
        self.read(|s| {
            let body = &mut s.bodies[direction];
            let received = body.received.take().unwrap_or_default();
            if status == abi::STOP {
                body.buffered.extend(received);
            } else {
                let buffered = std::mem::take(&mut body.buffered);
                body.forwarded
                    .extend(buffered.into_iter().chain(received).flatten());
            }
        });
        status
    }

    /// A filter-state value (`None` when unset).
    pub fn filter_state(self, key: &str) -> Option<Vec<u8>> {
        self.read(|s| s.filter_state.borrow().values.get(key.as_bytes()).cloned())
    }

    /// Sets filter state as another filter would have.
    pub fn set_filter_state(self, key: &str, value: &[u8]) {
        self.read(|s| {
            s.filter_state
                .borrow_mut()
                .values
                .insert(key.as_bytes().to_vec(), value.to_vec())
        });
    }

    /// Every write of a filter-state key the module asked for: value and
    /// whether Envoy stored it.
    pub fn filter_state_writes(self, key: &str) -> Vec<(Vec<u8>, bool)> {
        self.read(|s| {
            s.filter_state
                .borrow()
                .writes
                .iter()
                .filter(|(k, _, _)| k == key.as_bytes())
                .map(|(_, v, stored)| (v.clone(), *stored))
                .collect()
        })
    }

    pub fn dynamic_metadata(self, ns: &str, key: &str) -> Option<String> {
        self.read(|s| {
            s.dynamic_metadata
                .get(&(ns.as_bytes().to_vec(), key.as_bytes().to_vec()))
                .map(|v| String::from_utf8_lossy(v).into_owned())
        })
    }

    /// The events committed to this filter's schedulers since last asked
    /// (Envoy runs each as `on_http_filter_scheduled` on the worker), and
    /// how many of its schedulers are still alive.
    pub fn scheduled_events(self) -> (Vec<u64>, usize) {
        with(|w| {
            let mine = w
                .filter_schedulers
                .values_mut()
                .filter(|s| s.filter == self.0.addr());
            let (mut events, mut alive) = (Vec::new(), 0);
            for scheduler in mine {
                events.append(&mut scheduler.commits);
                alive += 1;
            }
            (events, alive)
        })
    }

    /// The callouts this stream's filter made, in order.
    pub fn callouts(self) -> Vec<FilterCallout> {
        self.read(|s| s.callouts.clone())
    }

    /// How often the module resumed decoding (a paused request).
    pub fn decoding_continued(self) -> usize {
        self.read(|s| s.decoding_continued)
    }

    /// How often the module resumed encoding (a paused response).
    pub fn encoding_continued(self) -> usize {
        self.read(|s| s.encoding_continued)
    }

    pub fn replies(self) -> Vec<LocalReply> {
        self.read(|s| s.replies.clone())
    }

    pub fn resets(self) -> Vec<(u32, Vec<u8>)> {
        self.read(|s| s.resets.clone())
    }

    pub fn route_cache_clears(self) -> usize {
        self.read(|s| s.route_cache_clears)
    }

    /// How often the module asked Envoy for a body's size on this stream.
    pub fn body_size_asks(self) -> usize {
        self.read(|s| s.body_size_asks)
    }

    /// From now on Envoy reports more headers than memory can hold.
    pub fn report_absurd_header_count(self) {
        self.read(|s| s.absurd_header_count = true);
    }
}
