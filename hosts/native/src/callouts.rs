//! HTTP callouts over the ABI: a request's own (its filter's callout,
//! answered on its worker to `on_http_filter_http_callout_done` and handed
//! to its session, `Session::on_callout`) and a filter config's (the main
//! thread's Google token fetches, `tokens.rs`), with the one reading of
//! what Envoy answers both.
//!
//! Envoy cancels a filter's callouts when it destroys the filter: no
//! answer comes to a request that ended.

use super::*;

use llm_gateway_core::headers::Headers;
use llm_gateway_core::session::host::status::{BAD_ARGUMENT, INTERNAL_FAILURE};
use llm_gateway_core::session::host::{CalloutAnswer, HostCall, HostError, MAX_CALLOUT_BODY};

/// Who makes a callout, and so gets its answer.
#[derive(Clone, Copy)]
pub(crate) enum Caller {
    /// A request's (or attempt's) filter.
    Filter(FilterEnvoy),
    /// A filter config, on the main thread.
    Config(FilterConfigEnvoy),
}

/// Sends a callout to `cluster` (`headers` include `:method`, `:path` and
/// `:authority`, which Envoy requires); its id is the token.
pub(crate) fn send(
    caller: Caller,
    cluster: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
    timeout_ms: u32,
) -> Result<u32, HostError> {
    let raw: Vec<abi::ModuleHeader> = headers
        .iter()
        .map(|(n, v)| abi::ModuleHeader::of(n.as_bytes(), v))
        .collect();
    let mut id = 0u64;
    let (cluster, body, timeout) = (
        ModuleBuffer::of(cluster.as_bytes()),
        ModuleBuffer::of(body),
        u64::from(timeout_ms),
    );
    // SAFETY: the filter (or config) is live, as its hook (or the session
    // host it lends) is running; the buffers outlive the call.
    let result = unsafe {
        match caller {
            Caller::Filter(filter) => abi::envoy_dynamic_module_callback_http_filter_http_callout(
                filter,
                &mut id,
                cluster,
                raw.as_ptr(),
                raw.len(),
                body,
                timeout,
            ),
            Caller::Config(config) => {
                abi::envoy_dynamic_module_callback_http_filter_config_http_callout(
                    config,
                    &mut id,
                    cluster,
                    raw.as_ptr(),
                    raw.len(),
                    body,
                    timeout,
                )
            }
        }
    };
    match result {
        // Envoy hands its answer back under the id truncated to 32 bits.
        abi::CALLOUT_INIT_SUCCESS => {
            u32::try_from(id).map_err(|_| HostError::new(HostCall::HttpCall, INTERNAL_FAILURE))
        }
        abi::CALLOUT_INIT_CLUSTER_NOT_FOUND => {
            Err(HostError::new(HostCall::HttpCall, BAD_ARGUMENT))
        }
        _ => Err(HostError::new(HostCall::HttpCall, INTERNAL_FAILURE)),
    }
}

/// What Envoy answered a callout, copied: its status, headers and at most
/// `limit + 1` bytes of its body (one more than `limit`: it was longer).
pub(crate) struct Answer {
    pub status: Option<u16>,
    pub headers: Headers,
    pub body: Vec<u8>,
}

/// Reads a callout-done hook's arguments; `None` when the callout failed
/// (reset, or an answer over Envoy's buffer limit).
///
/// # Safety
/// Envoy's contract for the hook: the arrays hold the given counts, and
/// each buffer is readable, for the call.
pub(crate) unsafe fn read(
    result: u32,
    headers: *const EnvoyHeader,
    headers_size: usize,
    body_chunks: *const EnvoyBuffer,
    body_chunks_size: usize,
    limit: usize,
) -> Option<Answer> {
    if result != abi::CALLOUT_SUCCESS {
        return None;
    }
    let mut answer = Answer {
        status: None,
        headers: Headers::default(),
        body: Vec::new(),
    };
    // SAFETY: as the function's contract says.
    unsafe {
        if !headers.is_null() {
            for h in std::slice::from_raw_parts(headers, headers_size) {
                let name = EnvoyBuffer {
                    ptr: h.key_ptr,
                    length: h.key_length,
                }
                .to_vec();
                let value = EnvoyBuffer {
                    ptr: h.value_ptr,
                    length: h.value_length,
                }
                .to_vec();
                if name == b":status" {
                    answer.status = std::str::from_utf8(&value)
                        .ok()
                        .and_then(|s| s.parse::<u16>().ok());
                }
                answer.headers.0.push((name, value));
            }
        }
        if !body_chunks.is_null() {
            for chunk in std::slice::from_raw_parts(body_chunks, body_chunks_size) {
                answer.body.extend(chunk.to_vec());
                if answer.body.len() > limit {
                    answer.body.truncate(limit.saturating_add(1));
                    break;
                }
            }
        }
    }
    Some(answer)
}

/// A request's callout answered: its session gets the answer, and what it
/// paused goes on when the session says so (once the hook let go of it):
/// the response once its headers came, else the request.
///
/// # Safety
/// Envoy's contract: `filter` is live; the arrays hold the given counts.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    filter_envoy: FilterEnvoy,
    filter: FilterModule,
    callout_id: u64,
    result: u32,
    headers: *const EnvoyHeader,
    headers_size: usize,
    body_chunks: *const EnvoyBuffer,
    body_chunks_size: usize,
) {
    // SAFETY: as the function's contract says.
    let read = unsafe {
        read(
            result,
            headers,
            headers_size,
            body_chunks,
            body_chunks_size,
            MAX_CALLOUT_BODY,
        )
    };
    let answer = read.map_or(CalloutAnswer::Failed, |a| {
        CalloutAnswer::answered(a.status, a.headers, a.body)
    });
    let token = u32::try_from(callout_id).unwrap_or(u32::MAX);
    let mut goes_on = false;
    let status = run(filter, None, |session| {
        let flow = session.on_callout(token, answer);
        goes_on = flow == Flow::Continue;
        flow
    });
    // Not when the session answered or reset the request instead.
    if !goes_on || status != abi::CONTINUE {
        return;
    }
    match stream_of(filter).filter(|stream| stream.responding.get()) {
        // The response goes on with what Envoy buffered of it meanwhile,
        // which this filter no longer holds.
        Some(stream) => {
            if let Some(buffering) = stream.buffering.get(1) {
                buffering.set(false);
            }
            // SAFETY: the filter is live (Envoy called its hook).
            unsafe {
                abi::envoy_dynamic_module_callback_http_filter_continue_encoding(filter_envoy)
            };
        }
        // SAFETY: as above.
        None => unsafe {
            abi::envoy_dynamic_module_callback_http_filter_continue_decoding(filter_envoy)
        },
    }
}
