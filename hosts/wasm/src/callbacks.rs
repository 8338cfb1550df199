//! The proxy-wasm callbacks of both roles: each is handed to the request's
//! session (`session::edge`, `session::attempt`), which holds every decision.

use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::Action;

use llm_gateway_core::session::host::Flow;
use llm_gateway_core::session::Session;

/// One request's (or attempt's) proxy-wasm context around its session.
pub struct SessionContext<S>(pub S);

fn action(flow: Flow) -> Action {
    match flow {
        Flow::Continue => Action::Continue,
        Flow::Pause => Action::Pause,
    }
}

impl<S: Session> Context for SessionContext<S> {
    fn on_done(&mut self) -> bool {
        self.0.on_done();
        true
    }
}

impl<S: Session> HttpContext for SessionContext<S> {
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
