//! What a session sees as a body on this host: Envoy's buffered chunks
//! and the chunk a body hook received, and what a body hook learnt of them
//! (asked of Envoy once per hook, until the body is replaced).

use std::cell::Cell;

use crate::abi;
use crate::host::Stream;

const RECEIVED: [u32; 2] = [abi::RECEIVED_REQUEST_BODY, abi::RECEIVED_RESPONSE_BODY];
const BUFFERED: [u32; 2] = [abi::BUFFERED_REQUEST_BODY, abi::BUFFERED_RESPONSE_BODY];

/// What a body hook's body is made of: its parts (see [`parts`]) and their
/// total size.
#[derive(Clone, Copy)]
pub struct BodyView {
    pub parts: [Option<u32>; 2],
    pub total: usize,
}

/// The body of direction `d` as the session sees it: inside a body hook,
/// asked of Envoy once until it is replaced.
pub fn view(stream: &Stream, d: usize) -> BodyView {
    let in_body = stream.in_body.get(d).is_some_and(Cell::get);
    let cached = stream.body_view.get(d).filter(|_| in_body);
    if let Some(view) = cached.and_then(Cell::get) {
        return view;
    }
    let parts = parts(stream, d);
    let view = BodyView {
        parts,
        total: size_of_parts(stream, parts),
    };
    if let Some(cell) = cached {
        cell.set(Some(view));
    }
    view
}

/// The body types that make up what the session sees as the body:
/// Envoy's buffered chunks (while this filter buffers, unless the received
/// chunk is that very buffer, resumed by an earlier filter), then the chunk
/// just received (inside a body hook). (An array, not a `Vec`: asked on
/// every body read and size.)
fn parts(stream: &Stream, d: usize) -> [Option<u32>; 2] {
    let in_body = stream.in_body.get(d).is_some_and(Cell::get);
    let buffering = stream.buffering.get(d).is_some_and(Cell::get);
    // SAFETY: the filter is live while its hooks run.
    let received_is_buffered = in_body
        && unsafe {
            if d == 0 {
                abi::envoy_dynamic_module_callback_http_received_buffered_request_body(stream.envoy)
            } else {
                abi::envoy_dynamic_module_callback_http_received_buffered_response_body(
                    stream.envoy,
                )
            }
        };
    let buffered = ((buffering || !in_body) && !received_is_buffered)
        .then(|| BUFFERED.get(d).copied())
        .flatten();
    let received = in_body.then(|| RECEIVED.get(d).copied()).flatten();
    [buffered, received]
}

/// The size of the body a session sees in direction `d` (0: request).
pub fn body_size_of(stream: &Stream, d: usize) -> usize {
    view(stream, d).total
}

/// The size of the body made of `parts`.
fn size_of_parts(stream: &Stream, parts: [Option<u32>; 2]) -> usize {
    parts
        .into_iter()
        .flatten()
        // SAFETY: the filter is live while its hooks run.
        .map(|t| unsafe { abi::envoy_dynamic_module_callback_http_get_body_size(stream.envoy, t) })
        .sum()
}
