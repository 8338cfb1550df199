//! The upstream role's proxy-wasm callbacks: each hands the call to the
//! attempt session (`session::attempt`), which holds every decision.

use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::Action;

use super::WasmHost;
use crate::session::attempt::Attempt;
use crate::session::host::Flow;

pub struct UpstreamContext(pub Attempt<WasmHost>);

fn action(flow: Flow) -> Action {
    match flow {
        Flow::Continue => Action::Continue,
        Flow::Pause => Action::Pause,
    }
}

impl Context for UpstreamContext {}

impl HttpContext for UpstreamContext {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        action(self.0.on_request_headers(end_of_stream))
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        action(self.0.on_request_body(size, end_of_stream))
    }

    fn on_http_response_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        action(self.0.on_response_headers(end_of_stream))
    }

    fn on_http_response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        action(self.0.on_response_body(size, end_of_stream))
    }
}
