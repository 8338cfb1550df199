//! Every proxy-wasm host call the filter makes, declared here rather than
//! taken from the SDK's wrappers: those turn header names and values into
//! `String` (one non-UTF-8 byte panics, which kills the VM for every later
//! request) and panic on any host status they do not expect. Here headers
//! are bytes, lengths are checked, and a failed call is an `Err` of the
//! host's status the caller decides about. Nothing in this module can panic.
//!
//! The SDK is still used for its dispatcher (the `proxy_on_*` exports that
//! call our `HttpContext`s) and its allocator (`proxy_on_memory_allocate`,
//! which the host uses for the buffers returned here: each is a `Vec` with
//! capacity equal to its length, taken back with `Vec::from_raw_parts`).

use std::ptr::{null, null_mut};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use llm_gateway_core::headers::Headers;
use llm_gateway_core::session::host::status::{EMPTY, NOT_FOUND};

const OK: u32 = 0;

/// A host call's status as a `Result`.
fn checked(status: u32) -> Result<(), u32> {
    if status == OK {
        Ok(())
    } else {
        Err(status)
    }
}

#[link(wasm_import_module = "env")]
extern "C" {
    fn proxy_log(level: u32, message_data: *const u8, message_size: usize) -> u32;
    fn proxy_get_current_time_nanoseconds(return_time: *mut u64) -> u32;
    fn proxy_get_buffer_bytes(
        buffer_type: u32,
        start: usize,
        max_size: usize,
        return_buffer_data: *mut *mut u8,
        return_buffer_size: *mut usize,
    ) -> u32;
    fn proxy_set_buffer_bytes(
        buffer_type: u32,
        start: usize,
        size: usize,
        buffer_data: *const u8,
        buffer_size: usize,
    ) -> u32;
    fn proxy_get_header_map_pairs(
        map_type: u32,
        return_map_data: *mut *mut u8,
        return_map_size: *mut usize,
    ) -> u32;
    fn proxy_get_header_map_value(
        map_type: u32,
        key_data: *const u8,
        key_size: usize,
        return_value_data: *mut *mut u8,
        return_value_size: *mut usize,
    ) -> u32;
    fn proxy_replace_header_map_value(
        map_type: u32,
        key_data: *const u8,
        key_size: usize,
        value_data: *const u8,
        value_size: usize,
    ) -> u32;
    fn proxy_remove_header_map_value(map_type: u32, key_data: *const u8, key_size: usize) -> u32;
    fn proxy_get_property(
        path_data: *const u8,
        path_size: usize,
        return_value_data: *mut *mut u8,
        return_value_size: *mut usize,
    ) -> u32;
    fn proxy_set_property(
        path_data: *const u8,
        path_size: usize,
        value_data: *const u8,
        value_size: usize,
    ) -> u32;
    #[allow(clippy::too_many_arguments)]
    fn proxy_send_local_response(
        status_code: u32,
        status_code_details_data: *const u8,
        status_code_details_size: usize,
        body_data: *const u8,
        body_size: usize,
        headers_data: *const u8,
        headers_size: usize,
        grpc_status: i32,
    ) -> u32;
    fn proxy_define_metric(
        metric_type: u32,
        name_data: *const u8,
        name_size: usize,
        return_id: *mut u32,
    ) -> u32;
    fn proxy_increment_metric(metric_id: u32, offset: i64) -> u32;
    fn proxy_record_metric(metric_id: u32, value: u64) -> u32;
    fn proxy_get_shared_data(
        key_data: *const u8,
        key_size: usize,
        return_value_data: *mut *mut u8,
        return_value_size: *mut usize,
        return_cas: *mut u32,
    ) -> u32;
    fn proxy_set_shared_data(
        key_data: *const u8,
        key_size: usize,
        value_data: *const u8,
        value_size: usize,
        cas: u32,
    ) -> u32;
    fn proxy_close_stream(stream_type: u32) -> u32;
    fn proxy_continue_stream(stream_type: u32) -> u32;
    fn proxy_set_effective_context(context_id: u32) -> u32;
    fn proxy_set_tick_period_milliseconds(period: u32) -> u32;
}

#[link(wasm_import_module = "wasi_snapshot_preview1")]
extern "C" {
    fn random_get(buf: *mut u8, buf_len: usize) -> u16;
}

/// Fills `out` from the host's entropy (WASI `random_get`, which Envoy
/// implements for every VM); `Err` carries WASI's errno.
pub fn random(out: &mut [u8]) -> Result<(), u32> {
    // SAFETY: the pointer and length describe `out`, which outlives the call.
    match unsafe { random_get(out.as_mut_ptr(), out.len()) } {
        0 => Ok(()),
        errno => Err(u32::from(errno)),
    }
}

/// Which header map a call is about.
#[derive(Clone, Copy)]
pub enum Map {
    Request = 0,
    Response = 2,
    /// The answer to an HTTP callout, in `on_http_call_response`.
    HttpCallResponse = 6,
}

/// Which body buffer a call is about.
#[derive(Clone, Copy)]
pub enum Buffer {
    Request = 0,
    Response = 1,
    /// The answer to an HTTP callout, in `on_http_call_response`.
    HttpCallResponse = 4,
    PluginConfiguration = 7,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter = 0,
    Gauge = 1,
    Histogram = 2,
}

/// Takes ownership of a buffer the host allocated for us.
///
/// # Safety
/// `data` is null or was allocated by the SDK's `proxy_on_memory_allocate`
/// with exactly `size` bytes, and is handed over to us by the host.
unsafe fn owned(data: *mut u8, size: usize) -> Option<Vec<u8>> {
    if data.is_null() {
        None
    } else {
        // SAFETY: as the function's contract says.
        Some(unsafe { Vec::from_raw_parts(data, size, size) })
    }
}

/// A property path as the ABI wants it: segments separated by NUL.
fn property_path(path: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.iter().map(|s| s.len() + 1).sum());
    for (i, segment) in path.iter().enumerate() {
        if i > 0 {
            out.push(0);
        }
        out.extend_from_slice(segment.as_bytes());
    }
    out
}

pub fn log(level: log::Level, message: &str) {
    let level = match level {
        log::Level::Trace => 0,
        log::Level::Debug => 1,
        log::Level::Info => 2,
        log::Level::Warn => 3,
        log::Level::Error => 4,
    };
    // SAFETY: the pointer and length describe `message`.
    unsafe {
        proxy_log(level, message.as_ptr(), message.len());
    }
}

/// The host's clock; the epoch if the host will not say.
pub fn now() -> SystemTime {
    let mut nanos: u64 = 0;
    // SAFETY: `nanos` outlives the call.
    let status = unsafe { proxy_get_current_time_nanoseconds(&mut nanos) };
    if status == OK {
        UNIX_EPOCH + Duration::from_nanos(nanos)
    } else {
        UNIX_EPOCH
    }
}

/// `size` bytes of a body buffer from `start` (empty when there is none).
pub fn body(buffer: Buffer, start: usize, size: usize) -> Result<Vec<u8>, u32> {
    let (mut data, mut len) = (null_mut(), 0);
    // SAFETY: the out-pointers outlive the call; the host allocates `data`.
    unsafe {
        match proxy_get_buffer_bytes(buffer as u32, start, size, &mut data, &mut len) {
            OK => Ok(owned(data, len).unwrap_or_default()),
            NOT_FOUND | EMPTY => Ok(Vec::new()),
            status => Err(status),
        }
    }
}

/// Replaces `size` bytes of a body buffer from `start` with `data`.
pub fn set_body(buffer: Buffer, start: usize, size: usize, data: &[u8]) -> Result<(), u32> {
    // SAFETY: the pointer and length describe `data`.
    checked(unsafe {
        proxy_set_buffer_bytes(buffer as u32, start, size, data.as_ptr(), data.len())
    })
}

/// Every header of a map, as bytes.
pub fn headers(map: Map) -> Result<Headers, u32> {
    let (mut data, mut len) = (null_mut(), 0);
    // SAFETY: the out-pointers outlive the call; the host allocates `data`.
    let serialized = unsafe {
        checked(proxy_get_header_map_pairs(map as u32, &mut data, &mut len))?;
        owned(data, len).unwrap_or_default()
    };
    Ok(Headers::deserialize(&serialized))
}

/// One header's value, as bytes.
pub fn header(map: Map, name: &str) -> Option<Vec<u8>> {
    let (mut data, mut len) = (null_mut(), 0);
    // SAFETY: the pointer and length describe `name`; the out-pointers
    // outlive the call; the host allocates `data`.
    unsafe {
        if proxy_get_header_map_value(map as u32, name.as_ptr(), name.len(), &mut data, &mut len)
            != OK
        {
            return None;
        }
        owned(data, len)
    }
}

/// Sets (replacing) or, with `None`, removes a header.
pub fn set_header(map: Map, name: &[u8], value: Option<&[u8]>) -> Result<(), u32> {
    // SAFETY: the pointers and lengths describe `name` and `value`.
    checked(unsafe {
        match value {
            Some(v) => proxy_replace_header_map_value(
                map as u32,
                name.as_ptr(),
                name.len(),
                v.as_ptr(),
                v.len(),
            ),
            None => proxy_remove_header_map_value(map as u32, name.as_ptr(), name.len()),
        }
    })
}

/// A property; `Ok(None)` when it is not set.
pub fn property(path: &[&str]) -> Result<Option<Vec<u8>>, u32> {
    let path = property_path(path);
    let (mut data, mut len) = (null_mut(), 0);
    // SAFETY: the pointer and length describe `path`; the out-pointers
    // outlive the call; the host allocates `data`.
    unsafe {
        match proxy_get_property(path.as_ptr(), path.len(), &mut data, &mut len) {
            OK => Ok(owned(data, len)),
            NOT_FOUND => Ok(None),
            status => Err(status),
        }
    }
}

pub fn set_property(path: &[&str], value: Option<&[u8]>) -> Result<(), u32> {
    let path = property_path(path);
    let (data, len) = value.map_or((null(), 0), |v| (v.as_ptr(), v.len()));
    // SAFETY: the pointers and lengths describe `path` and `value`.
    checked(unsafe { proxy_set_property(path.as_ptr(), path.len(), data, len) })
}

/// Answers the request ourselves (Envoy's local reply), with `details` as
/// the response code details Envoy logs (`%RESPONSE_CODE_DETAILS%`).
pub fn send_response(
    status: u16,
    headers: &[(&str, &[u8])],
    body: &[u8],
    details: &str,
) -> Result<(), u32> {
    let headers = Headers::serialize(headers);
    // SAFETY: every pointer and length describes a live slice.
    checked(unsafe {
        proxy_send_local_response(
            u32::from(status),
            details.as_ptr(),
            details.len(),
            body.as_ptr(),
            body.len(),
            headers.as_ptr(),
            headers.len(),
            -1,
        )
    })
}

/// Resets the HTTP stream (`proxy_close_stream` of the response: Envoy
/// resets the stream after the callback returns).
pub fn reset_stream() -> Result<(), u32> {
    const HTTP_RESPONSE: u32 = 1;
    // SAFETY: a plain value.
    checked(unsafe { proxy_close_stream(HTTP_RESPONSE) })
}

/// Makes context `id` the one the next calls act on (a root context acting
/// on an HTTP context's stream); BadArgument for a context that is gone.
pub fn set_effective_context(id: u32) -> Result<(), u32> {
    // SAFETY: a plain value.
    checked(unsafe { proxy_set_effective_context(id) })
}

/// Resumes the effective context's paused request (`proxy_continue_stream`).
pub fn resume_request() -> Result<(), u32> {
    const HTTP_REQUEST: u32 = 0;
    // SAFETY: a plain value.
    checked(unsafe { proxy_continue_stream(HTTP_REQUEST) })
}

/// Resumes the effective context's paused response, with what Envoy
/// buffered of it meanwhile.
pub fn resume_response() -> Result<(), u32> {
    const HTTP_RESPONSE: u32 = 1;
    // SAFETY: a plain value.
    checked(unsafe { proxy_continue_stream(HTTP_RESPONSE) })
}

pub fn define_metric(kind: MetricKind, name: &str) -> Result<u32, u32> {
    let mut id = 0;
    // SAFETY: the pointer and length describe `name`; `id` outlives the call.
    checked(unsafe { proxy_define_metric(kind as u32, name.as_ptr(), name.len(), &mut id) })?;
    Ok(id)
}

pub fn increment_metric(id: u32, offset: u64) -> Result<(), u32> {
    // SAFETY: plain values.
    checked(unsafe { proxy_increment_metric(id, i64::try_from(offset).unwrap_or(i64::MAX)) })
}

pub fn record_metric(id: u32, value: u64) -> Result<(), u32> {
    // SAFETY: plain values.
    checked(unsafe { proxy_record_metric(id, value) })
}

/// Calls the root context's `on_tick` every `period` (0: never).
pub fn set_tick_period(period: Duration) -> Result<(), u32> {
    let ms = u32::try_from(period.as_millis()).unwrap_or(u32::MAX);
    // SAFETY: a plain value.
    checked(unsafe { proxy_set_tick_period_milliseconds(ms) })
}

/// An HTTP call to Envoy cluster `cluster`, answered later to the calling
/// (root) context's `on_http_call_response` under the returned token.
/// The SDK's wrapper is used here, as it alone registers the token with
/// its dispatcher (which otherwise panics on the answer); it panics only
/// on a status Envoy's `httpCall` does not return (it answers OK,
/// BadArgument for an unknown cluster or missing pseudo-header, or
/// InternalFailure). Header names and values must be UTF-8 (ours are
/// ASCII): any other is refused here as BadArgument.
pub fn http_call(
    cluster: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
    timeout: Duration,
) -> Result<u32, u32> {
    const BAD_ARGUMENT: u32 = 2;
    let mut pairs = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        pairs.push((*name, std::str::from_utf8(value).map_err(|_| BAD_ARGUMENT)?));
    }
    let body = (!body.is_empty()).then_some(body);
    proxy_wasm::hostcalls::dispatch_http_call(cluster, pairs, body, Vec::new(), timeout)
        .map_err(|status| status as u32)
}

/// A shared-data entry (shared by every VM of this `vm_id` in the process,
/// i.e. every worker) and its CAS token; `Ok(None)` when absent.
pub fn shared_data(key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, u32> {
    let (mut data, mut len, mut cas) = (null_mut(), 0, 0);
    // SAFETY: the pointer and length describe `key`; the out-pointers
    // outlive the call; the host allocates `data`.
    unsafe {
        match proxy_get_shared_data(key.as_ptr(), key.len(), &mut data, &mut len, &mut cas) {
            OK => Ok(Some((owned(data, len).unwrap_or_default(), cas))),
            NOT_FOUND => Ok(None),
            status => Err(status),
        }
    }
}

/// Writes a shared-data entry if its CAS token is still `cas` (0:
/// unconditionally); a stale token is the status `CAS_MISMATCH`.
pub fn set_shared_data(key: &[u8], value: &[u8], cas: u32) -> Result<(), u32> {
    // SAFETY: the pointers and lengths describe `key` and `value`.
    checked(unsafe {
        proxy_set_shared_data(key.as_ptr(), key.len(), value.as_ptr(), value.len(), cas)
    })
}

/// The `log` crate's sink: Envoy's log, through [`log`].
struct Logger;

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            log(record.level(), &record.args().to_string());
        }
    }

    fn flush(&self) {}
}

static LOGGER: Logger = Logger;

/// Routes `log::info!` and friends to Envoy's log, and logs a panic (should
/// one ever happen) before the VM aborts, so it can be found and alerted on.
pub fn init_logging() {
    // Fails only when a logger is set already: then that one stays.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(log::LevelFilter::Info);
    std::panic::set_hook(Box::new(|info| {
        log(log::Level::Error, &format!("llm gateway: panic: {info}"));
    }));
}
