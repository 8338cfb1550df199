//! Every callback `abi.rs` declares, defined over the fake's model: here
//! the process's and configs' (log, metrics, schedulers, callouts), in
//! `stream.rs` a stream's. Each is written with [`callback!`], which also
//! makes the compiler check that its signature is the declared one.

use std::ffi::c_void;

use super::{buffers, config_schedulers, with, FilterScheduler, HeaderList, LocalReply, Recorded};
use super::{Stream, RESPONSE};
use crate::abi::{
    self, ConfigScheduler, EnvoyBuffer, EnvoyHeader, FilterConfigEnvoy, FilterEnvoy, FilterModule,
    ModuleBuffer, ModuleHeader,
};
use crate::metrics::Kind;

/// `envoy_dynamic_module_type_metrics_result` (abi.h).
const METRIC_NOT_FOUND: u32 = 1;
const METRIC_INVALID_LABELS: u32 = 2;
const METRIC_FROZEN: u32 = 3;

/// Defines one callback under its ABI name, and fails to compile unless
/// `abi.rs` declares it with this very signature.
macro_rules! callback {
    (fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        #[no_mangle]
        unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? $body
        const _: unsafe extern "C" fn($($ty),*) $(-> $ret)? = abi::$name;
    };
}

mod stream;

/// The bytes a module buffer lends.
///
/// # Safety
/// `b` is null or points at `length` bytes live for the call.
unsafe fn bytes<'a>(b: ModuleBuffer) -> &'a [u8] {
    if b.ptr.is_null() {
        &[]
    } else {
        // SAFETY: as the function's contract says.
        unsafe { std::slice::from_raw_parts(b.ptr, b.length) }
    }
}

/// The module's array of `n` buffers, each copied.
///
/// # Safety
/// `p` is null or points at `n` buffers, each valid as for [`bytes`].
unsafe fn strings(p: *const ModuleBuffer, n: usize) -> Vec<String> {
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: as the function's contract says.
    let all = unsafe { std::slice::from_raw_parts(p, n) };
    all.iter()
        // SAFETY: as the function's contract says.
        .map(|b| String::from_utf8_lossy(unsafe { bytes(*b) }).into_owned())
        .collect()
}

/// # Safety
/// `p` is null or points at `n` headers whose buffers are live.
unsafe fn module_headers(p: *const ModuleHeader, n: usize) -> HeaderList {
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: as the function's contract says.
    let all = unsafe { std::slice::from_raw_parts(p, n) };
    all.iter()
        .map(|h| {
            // SAFETY: as the function's contract says.
            unsafe {
                (
                    bytes(ModuleBuffer {
                        ptr: h.key_ptr,
                        length: h.key_length,
                    })
                    .to_vec(),
                    bytes(ModuleBuffer {
                        ptr: h.value_ptr,
                        length: h.value_length,
                    })
                    .to_vec(),
                )
            }
        })
        .collect()
}

/// Writes `value` where the module asked (nothing for a null pointer).
///
/// # Safety
/// `p` is null or valid for a write of `T`.
unsafe fn put<T>(p: *mut T, value: T) {
    if !p.is_null() {
        // SAFETY: as the function's contract says.
        unsafe { p.write(value) };
    }
}

fn buffer_of(value: &[u8]) -> EnvoyBuffer {
    EnvoyBuffer {
        ptr: value.as_ptr(),
        length: value.len(),
    }
}

// ------------------------------------------------------------------ logging

callback! {
    fn envoy_dynamic_module_callback_log(level: u32, message: ModuleBuffer) {
        let message = String::from_utf8_lossy(unsafe { bytes(message) }).into_owned();
        with(|w| w.log.push((level, message)));
    }
}

callback! {
    fn envoy_dynamic_module_callback_log_enabled(_level: u32) -> bool {
        true
    }
}

// ------------------------------------------------------------------ metrics

/// Defines a metric while its config is being created (else frozen).
unsafe fn define(
    config: FilterConfigEnvoy,
    kind: Kind,
    name: ModuleBuffer,
    labels: *const ModuleBuffer,
    labels_length: usize,
    id: *mut usize,
) -> u32 {
    let name = String::from_utf8_lossy(unsafe { bytes(name) }).into_owned();
    let labels = unsafe { strings(labels, labels_length) };
    let defined = with(|w| {
        if !w.defining.contains(&config.addr()) {
            return None;
        }
        w.metrics.push(super::MetricDefinition {
            config: config.addr(),
            kind,
            name,
            labels,
        });
        Some(w.metrics.len() - 1)
    });
    match defined {
        Some(index) => {
            unsafe { put(id, index) };
            abi::METRICS_SUCCESS
        }
        None => METRIC_FROZEN,
    }
}

/// Records a value of a metric the filter's config defined.
unsafe fn emit(
    filter: FilterEnvoy,
    kind: Kind,
    id: usize,
    values: *const ModuleBuffer,
    values_length: usize,
    value: u64,
) -> u32 {
    let values = unsafe { strings(values, values_length) };
    with(|w| {
        let config = w.stream(filter).and_then(|s| s.config);
        let Some(metric) = w
            .metrics
            .get(id)
            .filter(|m| Some(m.config) == config && m.kind == kind)
        else {
            return METRIC_NOT_FOUND;
        };
        if metric.labels.len() != values.len() {
            return METRIC_INVALID_LABELS;
        }
        let recorded = Recorded {
            kind,
            name: metric.name.clone(),
            labels: metric.labels.iter().cloned().zip(values).collect(),
            value,
        };
        w.recorded.push(recorded);
        abi::METRICS_SUCCESS
    })
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_config_define_counter(
        config: FilterConfigEnvoy,
        name: ModuleBuffer,
        label_names: *const ModuleBuffer,
        label_names_length: usize,
        id: *mut usize,
    ) -> u32 {
        unsafe { define(config, Kind::Counter, name, label_names, label_names_length, id) }
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_config_define_gauge(
        config: FilterConfigEnvoy,
        name: ModuleBuffer,
        label_names: *const ModuleBuffer,
        label_names_length: usize,
        id: *mut usize,
    ) -> u32 {
        unsafe { define(config, Kind::Gauge, name, label_names, label_names_length, id) }
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_config_define_histogram(
        config: FilterConfigEnvoy,
        name: ModuleBuffer,
        label_names: *const ModuleBuffer,
        label_names_length: usize,
        id: *mut usize,
    ) -> u32 {
        unsafe { define(config, Kind::Histogram, name, label_names, label_names_length, id) }
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_increment_counter(
        filter: FilterEnvoy,
        id: usize,
        label_values: *const ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32 {
        unsafe { emit(filter, Kind::Counter, id, label_values, label_values_length, value) }
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_set_gauge(
        filter: FilterEnvoy,
        id: usize,
        label_values: *const ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32 {
        unsafe { emit(filter, Kind::Gauge, id, label_values, label_values_length, value) }
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_record_histogram_value(
        filter: FilterEnvoy,
        id: usize,
        label_values: *const ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32 {
        unsafe { emit(filter, Kind::Histogram, id, label_values, label_values_length, value) }
    }
}

// --------------------------------------------------------------- schedulers

callback! {
    fn envoy_dynamic_module_callback_http_filter_scheduler_new(filter: FilterEnvoy) -> *mut c_void {
        with(|w| {
            let pointer = super::new_pointer();
            let scheduler = FilterScheduler {
                filter: filter.addr(),
                commits: Vec::new(),
            };
            w.filter_schedulers.insert(pointer.addr(), scheduler);
            pointer
        })
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler: *mut c_void) {
        with(|w| w.filter_schedulers.remove(&scheduler.addr()));
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_scheduler_commit(
        scheduler: *mut c_void,
        event_id: u64,
    ) {
        with(|w| {
            if let Some(scheduler) = w.filter_schedulers.get_mut(&scheduler.addr()) {
                scheduler.commits.push(event_id);
            }
        });
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_continue_encoding(filter: FilterEnvoy) {
        // The paused response goes on with the body Envoy buffered.
        with(|w| {
            if let Some(stream) = w.stream(filter) {
                stream.encoding_continued += 1;
                let body = &mut stream.bodies[1];
                let buffered = std::mem::take(&mut body.buffered);
                body.forwarded.extend(buffered.into_iter().flatten());
            }
        });
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_continue_decoding(filter: FilterEnvoy) {
        // The paused request goes on with the body Envoy buffered.
        with(|w| {
            if let Some(stream) = w.stream(filter) {
                stream.decoding_continued += 1;
                let body = &mut stream.bodies[0];
                let buffered = std::mem::take(&mut body.buffered);
                body.forwarded.extend(buffered.into_iter().flatten());
            }
        });
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_config_scheduler_new(
        _config: FilterConfigEnvoy,
    ) -> ConfigScheduler {
        let pointer = with(|w| {
            let pointer = super::new_pointer();
            w.config_schedulers.push(pointer.addr());
            pointer
        });
        config_schedulers().insert(pointer.addr(), Vec::new());
        pointer
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_config_scheduler_delete(
        scheduler: ConfigScheduler,
    ) {
        config_schedulers().remove(&scheduler.addr());
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_config_scheduler_commit(
        scheduler: ConfigScheduler,
        event_id: u64,
    ) {
        if let Some(commits) = config_schedulers().get_mut(&scheduler.addr()) {
            commits.push(event_id);
        }
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_config_http_callout(
        _config: FilterConfigEnvoy,
        callout_id: *mut u64,
        cluster: ModuleBuffer,
        headers: *const ModuleHeader,
        headers_size: usize,
        _body: ModuleBuffer,
        _timeout_ms: u64,
    ) -> u32 {
        let callout = unsafe { (bytes(cluster).to_vec(), module_headers(headers, headers_size)) };
        let id = with(|w| {
            w.callouts.push(callout);
            w.callouts.len() as u64
        });
        unsafe { put(callout_id, id) };
        abi::CALLOUT_INIT_SUCCESS
    }
}

callback! {
    fn envoy_dynamic_module_callback_http_filter_http_callout(
        filter: FilterEnvoy,
        callout_id: *mut u64,
        cluster: ModuleBuffer,
        headers: *const ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        timeout_ms: u64,
    ) -> u32 {
        let headers = unsafe { module_headers(headers, headers_size) };
        // Envoy refuses a callout without these (`MissingRequiredHeaders`).
        let has = |name: &[u8]| headers.iter().any(|(n, _)| n == name);
        if !(has(b":method") && has(b":path") && has(b":authority")) {
            return abi::CALLOUT_INIT_MISSING_REQUIRED_HEADERS;
        }
        let callout = super::FilterCallout {
            id: 0,
            cluster: unsafe { bytes(cluster) }.to_vec(),
            headers,
            body: unsafe { bytes(body) }.to_vec(),
            timeout_ms,
        };
        let id = with(|w| {
            w.next_callout += 1;
            let id = w.next_callout;
            if let Some(stream) = w.stream(filter) {
                stream.callouts.push(super::FilterCallout { id, ..callout });
            }
            id
        });
        unsafe { put(callout_id, id) };
        abi::CALLOUT_INIT_SUCCESS
    }
}
