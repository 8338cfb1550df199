//! The least a two-role proxy-wasm filter like ours can cost, for
//! `make bench`: the same plugin shape as the gateway (one module, an HCM
//! filter and a router upstream filter, one VM) and the same buffering, with
//! no work of its own. The edge role holds the headers until the whole body
//! is in and reads it; the upstream role reads the body and writes it back,
//! as a translation must. Responses pass untouched.
//!
//! What plain Envoy plus this costs is the floor of any filter built this
//! way; the gateway's cost above it is ours to shrink.
//!
//! With the plugin configuration `probe`, the upstream role also times the
//! host calls the gateway makes: each once per request, as a request makes
//! it, into `wasm_floor.first_host_call_ns;call=<name>`, then [`REPEAT`]
//! times in a row into `wasm_floor.host_call_ns;call=<name>` (ns per call):
//! what a host call costs inside Envoy, first and warm.
//!
//! With `replay` (both roles), it makes the gateway's host calls instead,
//! with none of its work, as its sessions recorded them: see [`replay`].
//!
//! With `crash` (TESTS ONLY, never in a benchmark or a shipped config), the
//! module panics in `on_http_request_headers` when the request carries the
//! header `x-crash-test`; with `panic = "abort"` that traps and kills the VM.
//! The gateway itself must never be crashable; this mode exists only so that
//! tests/test_envoy_hardening.py can prove that the shipped
//! `failure_policy: FAIL_RELOAD` reloads a dead VM and that the alerting
//! signal docs/src/operations/vm-failures.md documents
//! (`wasm.<plugin name>.vm_reload_success` and Envoy's log line) really
//! appears.

use std::rc::Rc;
use std::time::{Duration, SystemTime};

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel, MetricType};

mod replay;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::default()) });
}}

const REPEAT: u32 = 10;

/// Where the gateway reads an attempt's provider: the endpoint's metadata.
const PROVIDER_METADATA: [&str; 5] = [
    "xds",
    "upstream_host_metadata",
    "filter_metadata",
    "llm",
    "provider",
];

#[derive(Default)]
struct Root {
    upstream: bool,
    probe: bool,
    /// The `replay` mode's script.
    replay: Option<Rc<replay::Script>>,
    crash: bool,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        self.upstream = self
            .get_property(vec!["plugin_root_id"])
            .is_some_and(|id| id == b"llm_upstream");
        let configuration = self.get_plugin_configuration().unwrap_or_default();
        self.probe = configuration == b"probe";
        self.crash = configuration == b"crash";
        if configuration == b"replay" {
            match replay::Script::parse() {
                Ok(script) => self.replay = Some(Rc::new(script)),
                Err(e) => {
                    let _ = hostcalls::log(LogLevel::Error, &format!("wasm-floor replay: {e}"));
                    return false;
                }
            }
        }
        true
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        if let Some(script) = &self.replay {
            return Some(Box::new(replay::Replay::new(
                Rc::clone(script),
                self.upstream,
            )));
        }
        Some(Box::new(BufferBody {
            write_back: self.upstream,
            probe: self.upstream && self.probe,
            crash: self.crash,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct BufferBody {
    write_back: bool,
    probe: bool,
    /// Test-only `crash` mode (see the crate docs).
    crash: bool,
}

impl Context for BufferBody {}

impl HttpContext for BufferBody {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        if self.crash && self.get_http_request_header_bytes("x-crash-test").is_some() {
            // Deliberate: the tests' stand-in for a filter bug that kills the VM
            // (only in the test-only `crash` mode, see the crate docs).
            #[allow(clippy::panic)]
            {
                panic!("x-crash-test: deliberate crash (wasm-floor `crash` mode, tests only)");
            }
        }
        if self.probe {
            // Each call once, as a request makes it, then warm, in a row.
            probe_host_calls(self, "first_host_call_ns", 1);
            probe_host_calls(self, "host_call_ns", REPEAT);
        }
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

fn now() -> SystemTime {
    hostcalls::get_current_time().unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Runs `call` REPEAT times and records the mean ns per call.
/// Records the mean ns per call of `repeat` calls into `wasm_floor.<histogram>;call=<name>`
/// (one clock read, about 0.3 µs, included).
fn time(histogram: &str, repeat: u32, name: &str, mut call: impl FnMut()) {
    let started = now();
    for _ in 0..repeat {
        call();
    }
    let spent = now().duration_since(started).unwrap_or(Duration::ZERO);
    let histogram = format!("wasm_floor.{histogram};call={name}");
    if let Ok(id) = hostcalls::define_metric(MetricType::Histogram, &histogram) {
        let _ = hostcalls::record_metric(id, (spent.as_nanos() / u128::from(repeat)) as u64);
    }
}

fn probe_host_calls(ctx: &mut BufferBody, histogram: &str, repeat: u32) {
    time(histogram, repeat, "get_current_time", || {
        let _ = now();
    });
    time(histogram, repeat, "get_header", || {
        let _ = ctx.get_http_request_header("content-type");
    });
    time(histogram, repeat, "get_header_absent", || {
        let _ = ctx.get_http_request_header("x-absent");
    });
    time(histogram, repeat, "get_headers", || {
        let _ = ctx.get_http_request_headers();
    });
    time(histogram, repeat, "set_header", || {
        ctx.set_http_request_header("x-probe", Some("value"));
    });
    time(histogram, repeat, "remove_header", || {
        ctx.set_http_request_header("x-probe", None);
    });
    time(histogram, repeat, "set_property", || {
        ctx.set_property(vec!["wasm_floor_probe"], Some(b"value"));
    });
    time(histogram, repeat, "get_property", || {
        let _ = ctx.get_property(vec!["wasm_floor_probe"]);
    });
    time(histogram, repeat, "get_property_endpoint_metadata", || {
        let _ = ctx.get_property(PROVIDER_METADATA.to_vec());
    });
    if let Ok(id) = hostcalls::define_metric(MetricType::Counter, "wasm_floor.probe") {
        time(histogram, repeat, "increment_metric", || {
            let _ = hostcalls::increment_metric(id, 1);
        });
    }
}
