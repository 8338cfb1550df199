//! The core's [`Host`] over the dynamic-module ABI: one request's (or
//! attempt's) filter ([`NativeHost`]), and the filter config's own for the
//! Google token fetches on the main thread ([`RootHost`]).
//!
//! Properties are mapped to what the ABI offers:
//! - one-segment names (`llm_handoff`, `llm_log`, `llm_tokens`, ...) are
//!   filter state under `wasm.<name>`, the key the wasm host's
//!   `set_property` gives them, so the shipped access-log formats
//!   (`%FILTER_STATE(wasm.llm_log:PLAIN)%`) and rate-limit `hits_addend`s
//!   read the same keys with either host;
//! - `xds.upstream_host_metadata.filter_metadata.llm.<key>`: the attempt's
//!   endpoint metadata;
//! - `response.code_details`, `response.flags`,
//!   `upstream.request_attempt_count`: Envoy's attributes where the ABI
//!   implements them; `response.code_details` otherwise from the last local
//!   reply this filter saw (`on_http_filter_local_reply`).

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use llm_gateway_core::headers::Headers;
use llm_gateway_core::session::host::status::{BAD_ARGUMENT, INTERNAL_FAILURE, UNIMPLEMENTED};
use llm_gateway_core::session::host::{Buffer, Host, HostCall, HostError, Map, Phase};
use llm_gateway_core::session::HANDOFF_PROPERTY;

use crate::abi::{self, EnvoyBuffer, EnvoyHeader, FilterConfigEnvoy, FilterEnvoy, ModuleBuffer};
use crate::body::{self, BodyView};
use crate::callouts::{self, Caller};
use crate::metrics::Kind;
use crate::shared;
use crate::FilterConfig;

/// A local reply the session asked for, sent once its hook returned (a
/// local reply runs the response through the filter chain at once,
/// this filter included: sent from inside the session it would re-enter it).
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    pub details: String,
}

/// What a request's filter and its session's host share.
pub struct Stream {
    pub envoy: FilterEnvoy,
    /// Edge role: request headers changed in this hook (the route must be
    /// chosen again: `x-llm-cluster`).
    pub edge: bool,
    pub request_headers_changed: Cell<bool>,
    /// A body hook of this direction returned "stop and buffer": Envoy
    /// holds the earlier chunks in its buffered body.
    pub buffering: [Cell<bool>; 2],
    /// Inside a body hook of this direction (the received chunk exists).
    pub in_body: [Cell<bool>; 2],
    /// The body's parts and size as Envoy gave them in the running body hook
    /// of this direction, until the body is replaced: the hook's size, the
    /// session's reads and its replacement ask the same questions.
    pub body_view: [Cell<Option<BodyView>>; 2],
    pub reply: RefCell<Option<Reply>>,
    pub reset: Cell<bool>,
    /// `response.code_details` of the last local reply (Envoy's or ours).
    pub local_reply_details: RefCell<Option<Vec<u8>>>,
    /// The request's handoff (the edge wrote it, an attempt read it): what
    /// ties a request's attempts to its edge filter (`lib.rs`, `ATTEMPTS`).
    pub handoff: RefCell<Option<Vec<u8>>>,
    /// The response's headers came: a callout answered now resumes the
    /// response (encoding), not the request.
    pub responding: Cell<bool>,
}

impl Stream {
    pub fn new(envoy: FilterEnvoy, edge: bool) -> Self {
        Self {
            envoy,
            edge,
            request_headers_changed: Cell::new(false),
            buffering: [Cell::new(false), Cell::new(false)],
            in_body: [Cell::new(false), Cell::new(false)],
            body_view: [Cell::new(None), Cell::new(None)],
            reply: RefCell::new(None),
            reset: Cell::new(false),
            local_reply_details: RefCell::new(None),
            handoff: RefCell::new(None),
            responding: Cell::new(false),
        }
    }

    /// A body hook of direction `d` begins (`running`) or ends: what was
    /// learnt of the body before is forgotten either way.
    pub fn body_hook(&self, d: usize, running: bool) {
        if let Some(flag) = self.in_body.get(d) {
            flag.set(running);
        }
        self.forget_body(d);
    }

    fn forget_body(&self, d: usize) {
        if let Some(view) = self.body_view.get(d) {
            view.set(None);
        }
    }
}

#[derive(Clone)]
pub struct NativeHost {
    pub stream: Rc<Stream>,
    pub config: Arc<FilterConfig>,
}

fn map(m: Map) -> u32 {
    match m {
        Map::Request => abi::REQUEST_HEADER,
        Map::Response => abi::RESPONSE_HEADER,
    }
}

fn direction(b: Buffer) -> usize {
    match b {
        Buffer::Request => 0,
        Buffer::Response => 1,
    }
}

/// The dynamic-metadata namespace of the span attributes on this host:
/// tracing tags read `%DYNAMIC_METADATA(llm_gateway:llm_request_model)%`
/// where the wasm host's read `%FILTER_STATE(wasm.llm_request_model:PLAIN)%`.
const SPAN_NAMESPACE: &str = "llm_gateway";

/// The filter-state key of a one-segment property.
pub fn state_key(name: &str) -> String {
    format!("wasm.{name}")
}

impl NativeHost {
    fn envoy(&self) -> FilterEnvoy {
        self.stream.envoy
    }

    /// Appends bytes `[start, end)` of the body made of `parts` to `out`,
    /// copying each byte once, straight from Envoy's chunks.
    fn read_range(&self, parts: [Option<u32>; 2], start: usize, end: usize, out: &mut Vec<u8>) {
        let mut at = 0usize;
        for part in parts.into_iter().flatten() {
            if at >= end {
                return;
            }
            // SAFETY: the filter is live; the chunk array has the size Envoy
            // reported; each chunk is Envoy's until this hook returns.
            unsafe {
                let n = abi::envoy_dynamic_module_callback_http_get_body_chunks_size(
                    self.envoy(),
                    part,
                );
                if n == 0 {
                    continue;
                }
                let mut chunks = vec![EnvoyBuffer::NULL; n];
                if !abi::envoy_dynamic_module_callback_http_get_body_chunks(
                    self.envoy(),
                    part,
                    chunks.as_mut_ptr(),
                ) {
                    continue;
                }
                for chunk in chunks {
                    if at >= end {
                        return;
                    }
                    if chunk.ptr.is_null() {
                        continue;
                    }
                    let bytes = std::slice::from_raw_parts(chunk.ptr, chunk.length);
                    let lo = start.saturating_sub(at).min(bytes.len());
                    let hi = end.saturating_sub(at).min(bytes.len());
                    out.extend_from_slice(bytes.get(lo..hi).unwrap_or_default());
                    at += bytes.len();
                }
            }
        }
    }

    fn metric(
        &self,
        kind: Kind,
        base: &str,
        labels: &[(&str, &str)],
        value: u64,
    ) -> Result<(), HostError> {
        self.config
            .metrics
            .emit(self.envoy(), kind, base, labels, value)
            .map_err(|s| HostError::new(HostCall::Metric, s))
    }

    fn attribute_string(&self, id: u32) -> Option<Vec<u8>> {
        let mut out = EnvoyBuffer::NULL;
        // SAFETY: the filter is live; the result is copied before returning.
        unsafe {
            abi::envoy_dynamic_module_callback_http_filter_get_attribute_string(
                self.envoy(),
                id,
                &mut out,
            )
            .then(|| out.to_vec())
        }
    }

    fn attribute_int(&self, id: u32) -> Option<u64> {
        let mut out = 0u64;
        // SAFETY: the filter is live; `out` outlives the call.
        unsafe {
            abi::envoy_dynamic_module_callback_http_filter_get_attribute_int(
                self.envoy(),
                id,
                &mut out,
            )
            .then_some(out)
        }
    }

    fn filter_state(&self, key: &str) -> Option<Vec<u8>> {
        let mut out = EnvoyBuffer::NULL;
        // SAFETY: the filter is live; the result is copied before returning.
        unsafe {
            abi::envoy_dynamic_module_callback_http_get_filter_state_bytes(
                self.envoy(),
                ModuleBuffer::of(key.as_bytes()),
                &mut out,
            )
            .then(|| out.to_vec())
        }
    }
}

impl Host for NativeHost {
    fn headers(&self, m: Map) -> Result<Headers, HostError> {
        // SAFETY: the filter is live; the array has the size Envoy reported;
        // names and values are copied before any setter runs.
        unsafe {
            let n = abi::envoy_dynamic_module_callback_http_get_headers_size(self.envoy(), map(m));
            let mut raw = vec![EnvoyHeader::NULL; n];
            if n > 0
                && !abi::envoy_dynamic_module_callback_http_get_headers(
                    self.envoy(),
                    map(m),
                    raw.as_mut_ptr(),
                )
            {
                return Err(HostError::new(HostCall::Headers, INTERNAL_FAILURE));
            }
            Ok(Headers(
                raw.into_iter()
                    .map(|h| {
                        (
                            EnvoyBuffer {
                                ptr: h.key_ptr,
                                length: h.key_length,
                            }
                            .to_vec(),
                            EnvoyBuffer {
                                ptr: h.value_ptr,
                                length: h.value_length,
                            }
                            .to_vec(),
                        )
                    })
                    .collect(),
            ))
        }
    }

    fn header(&self, m: Map, name: &str) -> Option<Vec<u8>> {
        let mut out = EnvoyBuffer::NULL;
        // SAFETY: the filter is live; the value is copied at once.
        unsafe {
            abi::envoy_dynamic_module_callback_http_get_header(
                self.envoy(),
                map(m),
                ModuleBuffer::of(name.as_bytes()),
                &mut out,
                0,
                std::ptr::null_mut(),
            )
            .then(|| out.to_vec())
        }
    }

    fn set_header(&self, m: Map, name: &[u8], value: Option<&[u8]>) -> Result<(), HostError> {
        // An empty value would remove the header (the ABI's null value):
        // proxy-wasm sets it empty, which no session relies on.
        let value = value.map_or(ModuleBuffer::NULL, ModuleBuffer::of);
        // SAFETY: the filter is live; the buffers outlive the call.
        let ok = unsafe {
            abi::envoy_dynamic_module_callback_http_set_header(
                self.envoy(),
                map(m),
                ModuleBuffer::of(name),
                value,
            )
        };
        if !ok {
            return Err(HostError::new(HostCall::SetHeader, INTERNAL_FAILURE));
        }
        if m == Map::Request && self.stream.edge {
            self.stream.request_headers_changed.set(true);
        }
        Ok(())
    }

    fn body(&self, b: Buffer, start: usize, size: usize) -> Result<Vec<u8>, HostError> {
        let BodyView { parts, total } = body::view(&self.stream, direction(b));
        // Sized by Envoy's count, bounded by what the chunks hold.
        let mut out = Vec::with_capacity(size.min(total.saturating_sub(start)));
        let end = start.saturating_add(size);
        if start < end {
            self.read_range(parts, start, end, &mut out);
        }
        Ok(out)
    }

    fn set_body(&self, b: Buffer, start: usize, size: usize, data: &[u8]) -> Result<(), HostError> {
        let d = direction(b);
        let fail = |s| HostError::new(HostCall::SetBody, s);
        let BodyView { parts, total } = body::view(&self.stream, d);
        // The body changes (or is left half drained): asked of Envoy again.
        self.stream.forget_body(d);
        // The sessions replace the whole body (or chunk) they read; a
        // partial replacement is spliced from a copy.
        let replacement = if start == 0 && size >= total {
            Cow::Borrowed(data)
        } else {
            // From the view taken above, not `self.body` (which would ask
            // Envoy again and keep the answer past this change).
            let mut all = Vec::with_capacity(total);
            self.read_range(parts, 0, total, &mut all);
            let end = start.saturating_add(size).min(all.len());
            if start > end {
                return Err(fail(BAD_ARGUMENT));
            }
            all.splice(start..end, data.iter().copied());
            Cow::Owned(all)
        };
        // SAFETY: the filter is live; the data outlives the calls.
        unsafe {
            for part in parts.into_iter().flatten() {
                if !abi::envoy_dynamic_module_callback_http_drain_body(
                    self.envoy(),
                    part,
                    usize::MAX,
                ) {
                    return Err(fail(INTERNAL_FAILURE));
                }
            }
            // Into the received chunk inside a body hook (it passes on, or
            // joins the buffer); else into the buffered body.
            let target = parts
                .into_iter()
                .flatten()
                .last()
                .ok_or(fail(INTERNAL_FAILURE))?;
            if !replacement.is_empty()
                && !abi::envoy_dynamic_module_callback_http_append_body(
                    self.envoy(),
                    target,
                    ModuleBuffer::of(&replacement),
                )
            {
                return Err(fail(INTERNAL_FAILURE));
            }
        }
        Ok(())
    }

    fn property(&self, path: &[&str]) -> Result<Option<Vec<u8>>, HostError> {
        // A dotted `xds.` name is split; any other path is read as given
        // (no copy: properties are read a few times per request).
        let split: Vec<&str>;
        let path = match path {
            [one] if one.starts_with("xds.") => {
                split = one.split('.').collect();
                split.as_slice()
            }
            _ => path,
        };
        Ok(match path {
            ["response", "code_details"] => self
                .attribute_string(abi::ATTRIBUTE_RESPONSE_CODE_DETAILS)
                .or_else(|| self.stream.local_reply_details.borrow().clone()),
            ["response", "flags"] => self
                .attribute_int(abi::ATTRIBUTE_RESPONSE_FLAGS)
                .map(|v| v.to_le_bytes().to_vec()),
            ["source", "address"] => self.attribute_string(abi::ATTRIBUTE_SOURCE_ADDRESS),
            ["upstream", "request_attempt_count"] => self
                .attribute_int(abi::ATTRIBUTE_UPSTREAM_REQUEST_ATTEMPT_COUNT)
                .map(|v| v.to_le_bytes().to_vec()),
            ["xds", "upstream_host_metadata", "filter_metadata", ns, key] => {
                let mut out = EnvoyBuffer::NULL;
                // SAFETY: the filter is live; the value is copied at once.
                unsafe {
                    abi::envoy_dynamic_module_callback_http_get_metadata_string(
                        self.envoy(),
                        abi::METADATA_HOST,
                        ModuleBuffer::of(ns.as_bytes()),
                        ModuleBuffer::of(key.as_bytes()),
                        &mut out,
                    )
                    .then(|| out.to_vec())
                }
            }
            [name] => {
                let value = self.filter_state(&state_key(name));
                if *name == HANDOFF_PROPERTY && value.is_some() {
                    self.stream.handoff.borrow_mut().clone_from(&value);
                }
                value
            }
            _ => None,
        })
    }

    fn set_property(&self, path: &[&str], value: Option<&[u8]>) -> Result<(), HostError> {
        let [name] = path else {
            return Err(HostError::new(HostCall::SetProperty, UNIMPLEMENTED));
        };
        let key = state_key(name);
        let value = value.unwrap_or_default();
        if *name == HANDOFF_PROPERTY {
            *self.stream.handoff.borrow_mut() = Some(value.to_vec());
        }
        // Envoy stores it read-only: a second write of another value is
        // refused (and would be an Envoy bug report); the same one is a no-op.
        if let Some(current) = self.filter_state(&key) {
            return if current == value {
                Ok(())
            } else {
                Err(HostError::new(HostCall::SetProperty, BAD_ARGUMENT))
            };
        }
        // SAFETY: the filter is live; the buffers outlive the call.
        let ok = unsafe {
            abi::envoy_dynamic_module_callback_http_set_filter_state_bytes(
                self.envoy(),
                ModuleBuffer::of(key.as_bytes()),
                ModuleBuffer::of(value),
            )
        };
        if ok {
            Ok(())
        } else {
            Err(HostError::new(HostCall::SetProperty, INTERNAL_FAILURE))
        }
    }

    /// Dynamic metadata (`SPAN_NAMESPACE`), which a later write replaces:
    /// filter state a module sets is read-only in 1.40, so a second write
    /// (the next attempt's, the edge's) would be refused and every span
    /// would show the first attempt's values. An attribute with no value
    /// is written empty (the ABI cannot remove a key), which a tag shows
    /// as no value.
    fn set_span_attribute(&self, name: &str, value: Option<&[u8]>) -> Result<(), HostError> {
        // SAFETY: the filter is live; the buffers outlive the call.
        unsafe {
            abi::envoy_dynamic_module_callback_http_set_dynamic_metadata_string(
                self.envoy(),
                ModuleBuffer::of(SPAN_NAMESPACE.as_bytes()),
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::of(value.unwrap_or_default()),
            );
        }
        Ok(())
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn send_response(
        &self,
        status: u16,
        headers: &[(&str, &[u8])],
        body: &[u8],
        details: &str,
    ) -> Result<(), HostError> {
        *self.stream.reply.borrow_mut() = Some(Reply {
            status,
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.to_vec()))
                .collect(),
            body: body.to_vec(),
            details: details.to_owned(),
        });
        Ok(())
    }

    fn count(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError> {
        if value == 0 {
            return Ok(());
        }
        self.metric(Kind::Counter, base, labels, value)
    }

    fn record(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError> {
        self.metric(Kind::Histogram, base, labels, value)
    }

    fn gauge(&self, base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), HostError> {
        self.metric(Kind::Gauge, base, labels, value)
    }

    fn shared_data(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, HostError> {
        Ok(shared::get(key))
    }

    fn set_shared_data(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), HostError> {
        shared::set(key, value, cas).map_err(|s| HostError::new(HostCall::SetSharedData, s))
    }

    fn overhead(&self, phase: Phase, micros: u64) -> Result<(), HostError> {
        self.config
            .metrics
            .overhead(self.envoy(), phase, micros)
            .map_err(|s| HostError::new(HostCall::Metric, s))
    }

    fn reset_stream(&self) -> Result<(), HostError> {
        self.stream.reset.set(true);
        Ok(())
    }

    fn http_call(
        &self,
        cluster: &str,
        headers: &[(&str, &[u8])],
        body: &[u8],
        timeout_ms: u32,
    ) -> Result<u32, HostError> {
        callouts::send(
            Caller::Filter(self.envoy()),
            cluster,
            headers,
            body,
            timeout_ms,
        )
    }

    fn random(&self, out: &mut [u8]) -> Result<(), HostError> {
        getrandom::getrandom(out).map_err(|_| HostError::new(HostCall::Random, INTERNAL_FAILURE))
    }
}

/// The filter config's host on the main thread: shared data, the clock and
/// HTTP callouts (the upstream role's Google token fetches). Nothing of a
/// request exists here.
#[derive(Clone, Copy)]
pub struct RootHost(pub FilterConfigEnvoy);

fn no_stream<T>(call: HostCall) -> Result<T, HostError> {
    Err(HostError::new(call, UNIMPLEMENTED))
}

impl Host for RootHost {
    fn headers(&self, _: Map) -> Result<Headers, HostError> {
        no_stream(HostCall::Headers)
    }
    fn header(&self, _: Map, _: &str) -> Option<Vec<u8>> {
        None
    }
    fn set_header(&self, _: Map, _: &[u8], _: Option<&[u8]>) -> Result<(), HostError> {
        no_stream(HostCall::SetHeader)
    }
    fn body(&self, _: Buffer, _: usize, _: usize) -> Result<Vec<u8>, HostError> {
        no_stream(HostCall::Body)
    }
    fn set_body(&self, _: Buffer, _: usize, _: usize, _: &[u8]) -> Result<(), HostError> {
        no_stream(HostCall::SetBody)
    }
    fn property(&self, _: &[&str]) -> Result<Option<Vec<u8>>, HostError> {
        Ok(None)
    }
    fn set_property(&self, _: &[&str], _: Option<&[u8]>) -> Result<(), HostError> {
        no_stream(HostCall::SetProperty)
    }
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
    fn send_response(
        &self,
        _: u16,
        _: &[(&str, &[u8])],
        _: &[u8],
        _: &str,
    ) -> Result<(), HostError> {
        no_stream(HostCall::SendResponse)
    }
    fn count(&self, _: &str, _: &[(&str, &str)], _: u64) -> Result<(), HostError> {
        no_stream(HostCall::Metric)
    }
    fn record(&self, _: &str, _: &[(&str, &str)], _: u64) -> Result<(), HostError> {
        no_stream(HostCall::Metric)
    }
    fn gauge(&self, _: &str, _: &[(&str, &str)], _: u64) -> Result<(), HostError> {
        no_stream(HostCall::Metric)
    }
    fn shared_data(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, HostError> {
        Ok(shared::get(key))
    }
    fn set_shared_data(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), HostError> {
        shared::set(key, value, cas).map_err(|s| HostError::new(HostCall::SetSharedData, s))
    }
    fn overhead(&self, _: Phase, _: u64) -> Result<(), HostError> {
        no_stream(HostCall::Metric)
    }
    fn reset_stream(&self) -> Result<(), HostError> {
        no_stream(HostCall::ResetStream)
    }
    fn http_call(
        &self,
        cluster: &str,
        headers: &[(&str, &[u8])],
        body: &[u8],
        timeout_ms: u32,
    ) -> Result<u32, HostError> {
        callouts::send(Caller::Config(self.0), cluster, headers, body, timeout_ms)
    }
    fn random(&self, out: &mut [u8]) -> Result<(), HostError> {
        getrandom::getrandom(out).map_err(|_| HostError::new(HostCall::Random, INTERNAL_FAILURE))
    }
}

/// How often the upstream role looks at the shared Google tokens.
pub const TOKEN_TICK: Duration = Duration::from_millis(500);
