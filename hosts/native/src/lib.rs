//! The gateway inside Envoy 1.40 as a dynamic module (`libllm_gateway.so`):
//! the native host over the core crate (`llm-gateway-core`), beside the
//! wasm host (`hosts/wasm`), with the same configuration document and the
//! same two roles, chosen by the filter's `filter_name`:
//! - `llm_edge`: HCM filter before the router;
//! - `llm_upstream`: router upstream filter, once per attempt.
//!
//! The only code that talks to the dynamic-module ABI ([`abi`], written
//! from Envoy 1.40's `abi.h`). Every hook runs inside `catch_unwind`: a
//! panic never unwinds into Envoy; it is logged, and the request it
//! happened in is reset (the `.so` is built with `panic = "unwind"`, the
//! `native` profile, for that).
//!
//! Threads: a filter config is created on the main thread and shared by
//! every worker; each worker parses its own copy of the configuration on
//! its first request (the core's sessions hold an `Rc<Config>`, as each
//! wasm VM holds its own), and a request's two roles run on one worker, so
//! they share the core's in-memory exchange as in one wasm VM.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;

use llm_gateway_core::config::Config;
use llm_gateway_core::session::attempt::Attempt;
use llm_gateway_core::session::discovery;
use llm_gateway_core::session::edge::{self, Edge};
use llm_gateway_core::session::google_token::{self, TokenFetcher};
use llm_gateway_core::session::host::{unix_seconds, Flow};
use llm_gateway_core::session::Session;

pub mod abi;
mod body;
mod callouts;
pub mod host;
mod logging;
pub mod metrics;
pub mod shared;
mod tokens;
mod unused_hooks;
mod wake;

use logging::*;
use tokens::*;

use abi::{
    EnvoyBuffer, EnvoyHeader, FilterConfigEnvoy, FilterConfigModule, FilterEnvoy, FilterModule,
    ModuleBuffer,
};
use host::{NativeHost, RootHost, Stream};

pub const EDGE_ROLE: &str = "llm_edge";
pub const UPSTREAM_ROLE: &str = "llm_upstream";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    Edge,
    Upstream,
}

/// One filter config (one role's filter in one Envoy listener or cluster):
/// what every worker's requests need from it.
pub struct FilterConfig {
    role: Role,
    /// The configuration document, parsed again by each worker.
    document: Vec<u8>,
    loaded_at: u64,
    id: u64,
    pub metrics: metrics::Metrics,
}

/// Configs alive (their workers' parsed copies may be kept).
fn live() -> std::sync::MutexGuard<'static, HashSet<u64>> {
    static LIVE: OnceLock<Mutex<HashSet<u64>>> = OnceLock::new();
    LIVE.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

thread_local! {
    /// This worker's attempts (upstream filters) not yet ended, by their
    /// request's handoff: the edge ends them when the response ends (the
    /// attempts' records are final then: the edge publishes the span
    /// attributes and keeps them for its metrics) and when its stream
    /// completes. Envoy destroys an upstream request it reset (a per-try
    /// timeout, a refused connection, the losing attempts of a hedge)
    /// later, after the response went out (the filter's `destroy` hook
    /// comes from its deferred destructor), so the attempt Envoy gave up
    /// on last would be missing from the request's route and metrics.
    static ATTEMPTS: RefCell<HashMap<Vec<u8>, Vec<usize>>> = RefCell::new(HashMap::new());
    /// This worker's parsed configurations, by config id.
    static CONFIGS: RefCell<HashMap<u64, Rc<Config>>> = RefCell::new(HashMap::new());
    /// Main thread: each upstream config's Google token fetches.
    static ROOTS: RefCell<HashMap<u64, Root>> = RefCell::new(HashMap::new());
}

impl FilterConfig {
    /// This worker's copy of the configuration.
    fn parsed(&self) -> Option<Rc<Config>> {
        CONFIGS.with(|configs| {
            let mut configs = configs.borrow_mut();
            if let Some(config) = configs.get(&self.id) {
                return Some(config.clone());
            }
            let mut config = Config::parse(&self.document, env).ok()?;
            config.loaded_at = self.loaded_at;
            let config = Rc::new(config);
            let live = live();
            configs.retain(|id, _| live.contains(id));
            configs.insert(self.id, config.clone());
            Some(config)
        })
    }
}

// ------------------------------------------------------------ module init

/// Envoy loads the module: the logger and the panic hook (a panic is
/// logged where it happened, then caught at the hook's edge).
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    let _ = catch_unwind(|| {
        let _ = log::set_logger(&LOGGER);
        log::set_max_level(log::LevelFilter::Info);
        std::panic::set_hook(Box::new(|info| {
            envoy_log(log::Level::Error, &format!("llm gateway: panic: {info}"));
        }));
    });
    abi::ABI_VERSION.as_ptr().cast()
}

// --------------------------------------------------------- filter configs

/// # Safety
/// Envoy's contract: `name` and `config` point at live bytes for the call.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    config_envoy: FilterConfigEnvoy,
    name: EnvoyBuffer,
    config: EnvoyBuffer,
) -> FilterConfigModule {
    // SAFETY: as the function's contract says.
    let (name, document) = unsafe { (name.to_vec(), config.to_vec()) };
    catch_unwind(AssertUnwindSafe(|| {
        config_new(config_envoy, &name, document)
    }))
    .ok()
    .flatten()
    .map_or(std::ptr::null(), |config| {
        Box::into_raw(Box::new(config)).cast()
    })
}

fn config_new(
    config_envoy: FilterConfigEnvoy,
    name: &[u8],
    document: Vec<u8>,
) -> Option<Arc<FilterConfig>> {
    let name = String::from_utf8_lossy(name).into_owned();
    let role = match name.as_str() {
        EDGE_ROLE => Role::Edge,
        UPSTREAM_ROLE => Role::Upstream,
        other => {
            log::error!(
                "llm gateway: filter_name '{other}' is neither '{EDGE_ROLE}' nor '{UPSTREAM_ROLE}'; configuration rejected"
            );
            return None;
        }
    };
    let root_host = RootHost(config_envoy);
    let mut config = match Config::parse(&document, env) {
        Ok(config) => config,
        Err(e) => {
            log::error!("llm gateway ({name}): {e}; configuration rejected");
            return None;
        }
    };
    let loaded_at = unix_seconds(&root_host);
    config.loaded_at = loaded_at;
    log::info!(
        "llm gateway ({name}, native): configured {} providers, {} model groups",
        config.providers.len(),
        config.model_groups.len()
    );
    if role == Role::Edge {
        edge::prepare(&root_host, &config);
        if config.self_calls.is_some() {
            llm_gateway_core::session::self_call::prepare(&root_host);
        }
    } else {
        google_token::configured(&root_host, &config);
    }
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    // Vertex AI providers whose tokens the gateway obtains, and the model
    // lists model discovery reads: the upstream role fetches them on the
    // main thread, on a tick.
    let fetches = role == Role::Upstream
        && (config.discovery.is_some()
            || config.providers.values().any(|p| {
                p.settings::<llm_gateway_core::dialects::transport::vertex::Settings>()
                    .is_some_and(|s| s.credentials.managed())
            }));
    if fetches {
        let ticker = Ticker::start(config_envoy);
        if ticker.is_none() {
            log::error!(
                "llm gateway ({name}): no scheduler: Google access tokens and model lists will not be fetched"
            );
        }
        ROOTS.with(|roots| {
            roots.borrow_mut().insert(
                id,
                Root {
                    config: Rc::new(config),
                    tokens: TokenFetcher::default(),
                    discovery: discovery::Fetcher::default(),
                    ticker,
                },
            )
        });
    }
    live().insert(id);
    Some(Arc::new(FilterConfig {
        role,
        document,
        loaded_at,
        id,
        // SAFETY: this runs inside `config_new` for `config_envoy`.
        metrics: unsafe { metrics::Metrics::define(config_envoy) },
    }))
}

/// The config a module pointer names.
///
/// # Safety
/// `ptr` is null or one `config_new` returned and Envoy has not destroyed.
unsafe fn filter_config<'a>(ptr: FilterConfigModule) -> Option<&'a Arc<FilterConfig>> {
    // SAFETY: as the function's contract says.
    unsafe { ptr.cast::<Arc<FilterConfig>>().as_ref() }
}

/// # Safety
/// `config` was returned by `config_new`; Envoy destroys it once.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(
    config: FilterConfigModule,
) {
    if config.is_null() {
        return;
    }
    // SAFETY: as the function's contract says.
    let config = unsafe { Box::from_raw(config.cast::<Arc<FilterConfig>>().cast_mut()) };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        live().remove(&config.id);
        if let Some(mut root) = ROOTS.with(|roots| roots.borrow_mut().remove(&config.id)) {
            if let Some(ticker) = root.ticker.take() {
                ticker.stop();
            }
        }
        drop(config);
    }));
}

// ----------------------------------------------------------------- filters

struct Inner {
    session: Box<dyn Session>,
    /// A hook panicked: the request was reset; nothing more runs.
    failed: bool,
    /// `on_done` ran.
    done: bool,
}

/// One request's (edge) or attempt's (upstream) filter.
struct Filter {
    stream: Rc<Stream>,
    role: Role,
    inner: RefCell<Inner>,
    /// Listed in `ATTEMPTS` under this key (the handoff when listed).
    registered: RefCell<Option<Vec<u8>>>,
}

/// # Safety
/// Envoy's contract: `config` was returned by `config_new` and is live.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_new(
    config: FilterConfigModule,
    filter_envoy: FilterEnvoy,
) -> FilterModule {
    // SAFETY: as the function's contract says.
    let Some(config) = (unsafe { filter_config(config) }) else {
        return std::ptr::null();
    };
    catch_unwind(AssertUnwindSafe(|| {
        let parsed = config.parsed()?;
        let stream = Rc::new(Stream::new(filter_envoy, config.role == Role::Edge));
        let host = NativeHost {
            stream: stream.clone(),
            config: config.clone(),
        };
        let session: Box<dyn Session> = match config.role {
            Role::Edge => Box::new(Edge::new(host, parsed)),
            Role::Upstream => Box::new(Attempt::new(host, parsed)),
        };
        Some(Filter {
            stream,
            role: config.role,
            inner: RefCell::new(Inner {
                session,
                failed: false,
                done: false,
            }),
            registered: RefCell::new(None),
        })
    }))
    .ok()
    .flatten()
    .map_or(std::ptr::null(), |filter| {
        Box::into_raw(Box::new(filter)).cast()
    })
}

/// The filter a module pointer names.
///
/// # Safety
/// `ptr` is null or one `filter_new` returned that Envoy has not destroyed.
unsafe fn filter<'a>(ptr: FilterModule) -> Option<&'a Filter> {
    // SAFETY: as the function's contract says.
    unsafe { ptr.cast::<Filter>().as_ref() }
}

fn status(flow: Flow) -> u32 {
    match flow {
        Flow::Continue => abi::CONTINUE,
        Flow::Pause => abi::STOP,
    }
}

/// Runs one session callback: caught if it panics, then what it left to
/// do once it returned (the route cache, a local reply, a reset), with no
/// borrow of the filter held, since each of those may re-enter it.
fn run(ptr: FilterModule, body: Option<usize>, call: impl FnOnce(&mut dyn Session) -> Flow) -> u32 {
    // SAFETY: Envoy passes the pointer `filter_new` returned, live until destroy.
    let Some(filter) = (unsafe { filter(ptr) }) else {
        return abi::CONTINUE;
    };
    let stream = filter.stream.clone();
    let outcome = {
        let Ok(mut inner) = filter.inner.try_borrow_mut() else {
            // Re-entered while the session runs: leave the stream alone.
            return abi::CONTINUE;
        };
        if inner.failed {
            return abi::CONTINUE;
        }
        if let Some(d) = body {
            if let Some(in_body) = stream.in_body.get(d) {
                in_body.set(true);
            }
        }
        // The body view `body_size` left is kept: the same hook.
        let result = catch_unwind(AssertUnwindSafe(|| call(inner.session.as_mut())));
        let waits = result.is_ok() && inner.session.waiting();
        wake::register_if_waiting(ptr, &stream, waits);
        if let Some(d) = body {
            stream.body_hook(d, false);
        }
        match result {
            Ok(flow) => {
                if let Some(buffering) = body.and_then(|d| stream.buffering.get(d)) {
                    buffering.set(flow == Flow::Pause);
                }
                status(flow)
            }
            Err(_) => {
                inner.failed = true;
                stream.reply.borrow_mut().take();
                stream.reset.set(true);
                abi::STOP
            }
        }
    };
    register_attempt(filter, ptr);
    finish(&stream, outcome)
}

/// An attempt that read its request's handoff is listed under it (once).
fn register_attempt(filter: &Filter, ptr: FilterModule) {
    if filter.role != Role::Upstream || filter.registered.borrow().is_some() {
        return;
    }
    let Some(key) = filter.stream.handoff.borrow().clone() else {
        return;
    };
    ATTEMPTS.with(|a| {
        a.borrow_mut()
            .entry(key.clone())
            .or_default()
            .push(ptr as usize)
    });
    *filter.registered.borrow_mut() = Some(key);
}

/// Takes a destroyed attempt off the list, under the key it was listed by.
fn unregister_attempt(filter: &Filter, ptr: FilterModule) {
    let Some(key) = filter.registered.borrow_mut().take() else {
        return;
    };
    ATTEMPTS.with(|a| {
        let mut attempts = a.borrow_mut();
        if let Some(list) = attempts.get_mut(&key) {
            list.retain(|p| *p != ptr as usize);
            if list.is_empty() {
                attempts.remove(&key);
            }
        }
    });
}

/// Ends the attempts of the edge filter's request still alive.
fn end_attempts(edge: &Filter) {
    let Some(key) = edge.stream.handoff.borrow().clone() else {
        return;
    };
    let attempts = ATTEMPTS
        .with(|a| a.borrow().get(&key).cloned())
        .unwrap_or_default();
    for attempt in attempts {
        end(attempt as FilterModule, false);
    }
}

fn finish(stream: &Stream, outcome: u32) -> u32 {
    if stream.edge && stream.request_headers_changed.replace(false) {
        // The edge set `x-llm-cluster`: the route is chosen again.
        // SAFETY: the filter is live (its hook is running).
        unsafe { abi::envoy_dynamic_module_callback_http_clear_route_cache(stream.envoy) };
    }
    let reply = stream.reply.borrow_mut().take();
    if let Some(reply) = reply {
        let headers: Vec<abi::ModuleHeader> = reply
            .headers
            .iter()
            .map(|(n, v)| abi::ModuleHeader::of(n.as_bytes(), v))
            .collect();
        *stream.local_reply_details.borrow_mut() = Some(reply.details.clone().into_bytes());
        // SAFETY: the filter is live; the buffers outlive the call. Nothing
        // of the filter is touched after it (it may end the stream).
        unsafe {
            abi::envoy_dynamic_module_callback_http_send_response(
                stream.envoy,
                u32::from(reply.status),
                headers.as_ptr(),
                headers.len(),
                ModuleBuffer::of(&reply.body),
                ModuleBuffer::of(reply.details.as_bytes()),
            )
        };
        return abi::STOP;
    }
    if stream.reset.replace(false) {
        // SAFETY: as above.
        unsafe {
            abi::envoy_dynamic_module_callback_http_filter_reset_stream(
                stream.envoy,
                abi::RESET_LOCAL,
                ModuleBuffer::of(b"llm_gateway_reset"),
            )
        };
        return abi::STOP;
    }
    outcome
}

/// The body size the session is told of: what it will read.
fn body_size(ptr: FilterModule, d: usize) -> usize {
    // SAFETY: as in `run`.
    let Some(filter) = (unsafe { filter(ptr) }) else {
        return 0;
    };
    let Ok(inner) = filter.inner.try_borrow() else {
        return 0;
    };
    drop(inner);
    let stream = &filter.stream;
    // The hook begins here: its body view, kept for the session's reads.
    stream.body_hook(d, true);
    // The size is the same whatever the config (only the stream is read).
    let size = body::body_size_of(stream, d);
    if let Some(flag) = stream.in_body.get(d) {
        flag.set(false);
    }
    size
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    _filter_envoy: FilterEnvoy,
    filter: FilterModule,
    end_of_stream: bool,
) -> u32 {
    run(filter, None, |s| s.on_request_headers(end_of_stream))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    _filter_envoy: FilterEnvoy,
    filter: FilterModule,
    end_of_stream: bool,
) -> u32 {
    let size = body_size(filter, 0);
    run(filter, Some(0), |s| s.on_request_body(size, end_of_stream))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    _filter_envoy: FilterEnvoy,
    _filter: FilterModule,
) -> u32 {
    abi::CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    _filter_envoy: FilterEnvoy,
    filter: FilterModule,
    end_of_stream: bool,
) -> u32 {
    responding(filter);
    if end_of_stream {
        response_ends(filter);
    }
    run(filter, None, |s| s.on_response_headers(end_of_stream))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    _filter_envoy: FilterEnvoy,
    filter: FilterModule,
    end_of_stream: bool,
) -> u32 {
    if end_of_stream {
        response_ends(filter);
    }
    let size = body_size(filter, 1);
    run(filter, Some(1), |s| s.on_response_body(size, end_of_stream))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(
    _filter_envoy: FilterEnvoy,
    filter: FilterModule,
) -> u32 {
    response_ends(filter);
    abi::CONTINUE
}

/// The response's last part reaches a filter: at the edge, its request's
/// attempts still alive are ended first (see `ATTEMPTS`). The attempt
/// that answered has seen its response's end already (upstream filters
/// see a response before the router passes it on), so ending it records
/// nothing more; any other one was reset by Envoy.
/// The response's headers reached the filter: a callout answered from now
/// on resumes the response (`callouts.rs`).
fn responding(ptr: FilterModule) {
    // SAFETY: as in `run`.
    if let Some(filter) = unsafe { filter(ptr) } {
        filter.stream.responding.set(true);
    }
}

/// The stream a filter pointer names, while the filter lives.
pub(crate) fn stream_of(ptr: FilterModule) -> Option<Rc<Stream>> {
    // SAFETY: as in `run`.
    unsafe { filter(ptr) }.map(|filter| filter.stream.clone())
}

fn response_ends(ptr: FilterModule) {
    // SAFETY: as in `run`.
    if let Some(filter) = unsafe { filter(ptr) } {
        if filter.role == Role::Edge {
            end_attempts(filter);
        }
    }
}

/// The stream is done, before the access log: the edge's metrics and log
/// line (proxy-wasm's `on_log`), then the session's end (`on_done`).
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(
    _filter_envoy: FilterEnvoy,
    filter: FilterModule,
) {
    end(filter, true);
}

fn end(ptr: FilterModule, complete: bool) {
    // SAFETY: as in `run`.
    let Some(filter) = (unsafe { filter(ptr) }) else {
        return;
    };
    let edge = filter.role == Role::Edge;
    if edge && complete {
        end_attempts(filter);
    }
    let Ok(mut inner) = filter.inner.try_borrow_mut() else {
        return;
    };
    if inner.failed || inner.done {
        return;
    }
    inner.done = true;
    let result = catch_unwind(AssertUnwindSafe(|| {
        if edge && complete {
            inner.session.on_log();
        }
        inner.session.on_done();
    }));
    if result.is_err() {
        inner.failed = true;
    }
    // Replies and resets asked for now have no stream left to go to.
    filter.stream.reply.borrow_mut().take();
    filter.stream.reset.set(false);
}

/// # Safety
/// `filter` was returned by `filter_new`; Envoy destroys it once.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_destroy(filter: FilterModule) {
    if filter.is_null() {
        return;
    }
    // A stream that never completed (reset) still ends its session: the
    // upstream role's attempt records (wasm's `on_done`).
    end(filter, false);
    // SAFETY: as the function's contract says.
    let ptr = filter;
    let filter = unsafe { Box::from_raw(filter.cast::<Filter>().cast_mut()) };
    unregister_attempt(&filter, ptr);
    wake::forget(ptr);
    let _ = catch_unwind(AssertUnwindSafe(move || drop(filter)));
}

/// Envoy (or this filter) answers locally: its details stand in for
/// `response.code_details` where the ABI does not give that attribute.
///
/// # Safety
/// Envoy's contract: `filter` is live, `details` Envoy's for the call.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_local_reply(
    _filter_envoy: FilterEnvoy,
    filter: FilterModule,
    _response_code: u32,
    details: EnvoyBuffer,
    _reset_imminent: bool,
) -> u32 {
    // SAFETY: as in `run`; `details` is Envoy's for the call.
    if let Some(filter) = unsafe { filter_module(filter) } {
        // SAFETY: as above.
        let details = unsafe { details.to_vec() };
        if let Ok(mut slot) = filter.stream.local_reply_details.try_borrow_mut() {
            *slot = Some(details);
        }
    }
    abi::CONTINUE
}

/// # Safety
/// As [`filter`].
unsafe fn filter_module<'a>(ptr: FilterModule) -> Option<&'a Filter> {
    // SAFETY: as the function's contract says.
    unsafe { filter(ptr) }
}

// The native host's own tests, over a fake Envoy (test builds only).
#[cfg(test)]
mod fake_envoy;
#[cfg(test)]
mod tests;
