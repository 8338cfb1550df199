//! The least a two-role proxy-wasm filter like ours can cost, for
//! `make bench`: the same plugin shape as the gateway (one module, an HCM
//! filter and a router upstream filter, one VM) and the same buffering, with
//! no work of its own. The edge role holds the headers until the whole body
//! is in and reads it; the upstream role reads the body and writes it back,
//! as a translation must. Responses pass untouched.
//!
//! What plain Envoy plus this costs is the floor of any filter built this
//! way; the gateway's cost above it is ours to shrink.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root { upstream: false }) });
}}

struct Root {
    upstream: bool,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        self.upstream = self
            .get_property(vec!["plugin_root_id"])
            .is_some_and(|id| id == b"llm_upstream");
        true
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(BufferBody {
            write_back: self.upstream,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct BufferBody {
    write_back: bool,
}

impl Context for BufferBody {}

impl HttpContext for BufferBody {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        if end_of_stream {
            Action::Continue
        } else {
            Action::Pause
        }
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        if !end_of_stream {
            return Action::Pause;
        }
        let body = self.get_http_request_body(0, size).unwrap_or_default();
        if self.write_back {
            self.set_http_request_body(0, size, &body);
        }
        Action::Continue
    }
}
