//! The proxy-wasm callbacks of both roles: each hands the call to its
//! session (`session::edge`, `session::attempt`), which holds every decision.

use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::Action;

use super::WasmHost;
use crate::session::attempt::Attempt;
use crate::session::edge::Edge;
use crate::session::host::Flow;

/// The edge role: the HCM filter before the router.
pub struct EdgeContext(pub Edge<WasmHost>);

/// The upstream role: the router's upstream filter, once per attempt.
pub struct AttemptContext(pub Attempt<WasmHost>);

fn action(flow: Flow) -> Action {
    match flow {
        Flow::Continue => Action::Continue,
        Flow::Pause => Action::Pause,
    }
}

impl Context for EdgeContext {}

impl HttpContext for EdgeContext {
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

    fn on_log(&mut self) {
        self.0.on_log();
    }
}

impl Context for AttemptContext {}

impl HttpContext for AttemptContext {
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
