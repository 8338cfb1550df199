//! Envoy 1.40's dynamic-module ABI (`abi.h`, version string "v0.2.0"),
//! written by hand: only the types and callbacks this host uses. Every
//! callback named here must be exported by the pinned Envoy binary
//! (`tests/test_native_host.py` checks the `.so`'s undefined symbols
//! against `nm -D` of it); a signature changed under an unchanged name
//! would not be caught by that, so the bindings follow the exact minor's
//! header and the `.so` is built per Envoy minor.

#![allow(non_camel_case_types)]

use std::ffi::c_void;

/// The ABI version this module was written against (Envoy compares the
/// strings: a mismatch is only a warning, so it is also tested).
pub const ABI_VERSION: &[u8] = b"v0.2.0\0";

pub type FilterConfigEnvoy = *mut c_void;
pub type FilterConfigModule = *const c_void;
pub type FilterEnvoy = *mut c_void;
pub type FilterModule = *const c_void;
pub type ConfigScheduler = *mut c_void;

/// A buffer Envoy owns (valid until the hook returns or a setter runs).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyBuffer {
    pub ptr: *const u8,
    pub length: usize,
}

impl EnvoyBuffer {
    pub const NULL: Self = Self {
        ptr: std::ptr::null(),
        length: 0,
    };

    /// The bytes, copied.
    ///
    /// # Safety
    /// `ptr` is null or points at `length` readable bytes.
    pub unsafe fn to_vec(self) -> Vec<u8> {
        if self.ptr.is_null() || self.length == 0 {
            Vec::new()
        } else {
            // SAFETY: as the function's contract says.
            unsafe { std::slice::from_raw_parts(self.ptr, self.length) }.to_vec()
        }
    }
}

/// A buffer the module owns, lent to Envoy for the call.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ModuleBuffer {
    pub ptr: *const u8,
    pub length: usize,
}

impl ModuleBuffer {
    pub fn of(bytes: &[u8]) -> Self {
        Self {
            ptr: bytes.as_ptr(),
            length: bytes.len(),
        }
    }
    pub const NULL: Self = Self {
        ptr: std::ptr::null(),
        length: 0,
    };
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ModuleHeader {
    pub key_ptr: *const u8,
    pub key_length: usize,
    pub value_ptr: *const u8,
    pub value_length: usize,
}

impl ModuleHeader {
    pub fn of(key: &[u8], value: &[u8]) -> Self {
        Self {
            key_ptr: key.as_ptr(),
            key_length: key.len(),
            value_ptr: value.as_ptr(),
            value_length: value.len(),
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyHeader {
    pub key_ptr: *const u8,
    pub key_length: usize,
    pub value_ptr: *const u8,
    pub value_length: usize,
}

impl EnvoyHeader {
    pub const NULL: Self = Self {
        key_ptr: std::ptr::null(),
        key_length: 0,
        value_ptr: std::ptr::null(),
        value_length: 0,
    };
}

/// `envoy_dynamic_module_type_http_header_type`.
pub const REQUEST_HEADER: u32 = 0;
pub const RESPONSE_HEADER: u32 = 2;

/// `envoy_dynamic_module_type_http_body_type`.
pub const RECEIVED_REQUEST_BODY: u32 = 0;
pub const BUFFERED_REQUEST_BODY: u32 = 1;
pub const RECEIVED_RESPONSE_BODY: u32 = 2;
pub const BUFFERED_RESPONSE_BODY: u32 = 3;

/// `envoy_dynamic_module_type_log_level`.
pub const LOG_TRACE: u32 = 0;
pub const LOG_DEBUG: u32 = 1;
pub const LOG_INFO: u32 = 2;
pub const LOG_WARN: u32 = 3;
pub const LOG_ERROR: u32 = 4;

/// `envoy_dynamic_module_type_metrics_result`.
pub const METRICS_SUCCESS: u32 = 0;

/// `envoy_dynamic_module_type_metadata_source`.
pub const METADATA_HOST: u32 = 3;

/// `envoy_dynamic_module_type_attribute_id` (the ones read here).
pub const ATTRIBUTE_RESPONSE_CODE_DETAILS: u32 = 16;
pub const ATTRIBUTE_RESPONSE_FLAGS: u32 = 17;
pub const ATTRIBUTE_SOURCE_ADDRESS: u32 = 24;
pub const ATTRIBUTE_UPSTREAM_REQUEST_ATTEMPT_COUNT: u32 = 53;

/// `envoy_dynamic_module_type_http_callout_init_result`.
pub const CALLOUT_INIT_SUCCESS: u32 = 0;
pub const CALLOUT_INIT_MISSING_REQUIRED_HEADERS: u32 = 1;
pub const CALLOUT_INIT_CLUSTER_NOT_FOUND: u32 = 2;
/// `envoy_dynamic_module_type_http_callout_result`.
pub const CALLOUT_SUCCESS: u32 = 0;
pub const CALLOUT_RESET: u32 = 1;

/// `envoy_dynamic_module_type_http_filter_stream_reset_reason`.
pub const RESET_LOCAL: u32 = 0;

/// Hook statuses: `Continue` is 0 for every kind; headers'
/// `StopIteration` and bodies' `StopIterationAndBuffer` are 1.
pub const CONTINUE: u32 = 0;
pub const STOP: u32 = 1;

extern "C" {
    pub fn envoy_dynamic_module_callback_log(level: u32, message: ModuleBuffer);
    pub fn envoy_dynamic_module_callback_log_enabled(level: u32) -> bool;

    pub fn envoy_dynamic_module_callback_http_filter_config_define_counter(
        config: FilterConfigEnvoy,
        name: ModuleBuffer,
        label_names: *const ModuleBuffer,
        label_names_length: usize,
        id: *mut usize,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_config_define_gauge(
        config: FilterConfigEnvoy,
        name: ModuleBuffer,
        label_names: *const ModuleBuffer,
        label_names_length: usize,
        id: *mut usize,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_config_define_histogram(
        config: FilterConfigEnvoy,
        name: ModuleBuffer,
        label_names: *const ModuleBuffer,
        label_names_length: usize,
        id: *mut usize,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_increment_counter(
        filter: FilterEnvoy,
        id: usize,
        label_values: *const ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_set_gauge(
        filter: FilterEnvoy,
        id: usize,
        label_values: *const ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_record_histogram_value(
        filter: FilterEnvoy,
        id: usize,
        label_values: *const ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;

    pub fn envoy_dynamic_module_callback_http_get_header(
        filter: FilterEnvoy,
        header_type: u32,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
        index: usize,
        optional_size: *mut usize,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_get_headers_size(
        filter: FilterEnvoy,
        header_type: u32,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_headers(
        filter: FilterEnvoy,
        header_type: u32,
        result: *mut EnvoyHeader,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_set_header(
        filter: FilterEnvoy,
        header_type: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;

    pub fn envoy_dynamic_module_callback_http_send_response(
        filter: FilterEnvoy,
        status_code: u32,
        headers: *const ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        details: ModuleBuffer,
    );

    pub fn envoy_dynamic_module_callback_http_get_body_chunks_size(
        filter: FilterEnvoy,
        body_type: u32,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_body_chunks(
        filter: FilterEnvoy,
        body_type: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_get_body_size(
        filter: FilterEnvoy,
        body_type: u32,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_append_body(
        filter: FilterEnvoy,
        body_type: u32,
        data: ModuleBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_drain_body(
        filter: FilterEnvoy,
        body_type: u32,
        number_of_bytes: usize,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_received_buffered_request_body(
        filter: FilterEnvoy,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_received_buffered_response_body(
        filter: FilterEnvoy,
    ) -> bool;

    pub fn envoy_dynamic_module_callback_http_get_metadata_string(
        filter: FilterEnvoy,
        source: u32,
        ns: ModuleBuffer,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
    ) -> bool;
    /// Returns nothing in 1.40 (no stream info: silently not set).
    pub fn envoy_dynamic_module_callback_http_set_dynamic_metadata_string(
        filter: FilterEnvoy,
        ns: ModuleBuffer,
        key: ModuleBuffer,
        value: ModuleBuffer,
    );
    pub fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
        filter: FilterEnvoy,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_get_filter_state_bytes(
        filter: FilterEnvoy,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_filter_get_attribute_string(
        filter: FilterEnvoy,
        attribute: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_filter_get_attribute_int(
        filter: FilterEnvoy,
        attribute: u32,
        result: *mut u64,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_clear_route_cache(filter: FilterEnvoy);
    pub fn envoy_dynamic_module_callback_http_filter_reset_stream(
        filter: FilterEnvoy,
        reason: u32,
        details: ModuleBuffer,
    );

    pub fn envoy_dynamic_module_callback_http_filter_scheduler_new(
        filter: FilterEnvoy,
    ) -> *mut c_void;
    pub fn envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler: *mut c_void);
    pub fn envoy_dynamic_module_callback_http_filter_scheduler_commit(
        scheduler: *mut c_void,
        event_id: u64,
    );
    pub fn envoy_dynamic_module_callback_http_filter_continue_decoding(filter: FilterEnvoy);
    pub fn envoy_dynamic_module_callback_http_filter_continue_encoding(filter: FilterEnvoy);
    pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_new(
        config: FilterConfigEnvoy,
    ) -> ConfigScheduler;
    pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_delete(
        scheduler: ConfigScheduler,
    );
    pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_commit(
        scheduler: ConfigScheduler,
        event_id: u64,
    );
    pub fn envoy_dynamic_module_callback_http_filter_http_callout(
        filter: FilterEnvoy,
        callout_id: *mut u64,
        cluster: ModuleBuffer,
        headers: *const ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        timeout_ms: u64,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_config_http_callout(
        config: FilterConfigEnvoy,
        callout_id: *mut u64,
        cluster: ModuleBuffer,
        headers: *const ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        timeout_ms: u64,
    ) -> u32;
}
