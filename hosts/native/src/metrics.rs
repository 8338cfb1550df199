//! Envoy stats from the filter, with real labels: the ABI defines each
//! metric with its label names when the filter config is created (later
//! definitions are refused: Envoy freezes stat creation), so the core's
//! metrics are listed here, under the same base names the wasm host uses
//! (`llm_gateway.requests`, `gen_ai.client.token.usage`, ...). With
//! `metrics_namespace: wasmcustom` (what `scripts/gateway.py` sets) the
//! Prometheus names and labels are the wasm host's after its `stats_tags`.
//!
//! Label values are cleaned as `metering::metric_name` cleans them for the
//! wasm host (empty: `none`; separators, spaces and controls: `_`; at most
//! 64 characters), so both hosts report the same series.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::abi::{self, FilterConfigEnvoy, FilterEnvoy, ModuleBuffer};
use llm_gateway_core::session::host::status::{BAD_ARGUMENT, NOT_FOUND};
use llm_gateway_core::session::host::Phase;

#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric the core records: kind, base name, label names (in the
/// order the core passes them).
pub const CATALOGUE: &[(Kind, &str, &[&str])] = &[
    (
        Kind::Counter,
        "llm_gateway.requests",
        &[
            "group",
            "provider",
            "model",
            "status",
            "code",
            "key",
            "surface",
            "operation",
        ],
    ),
    (
        Kind::Counter,
        "llm_gateway.attempts",
        &["group", "provider", "model", "status", "code"],
    ),
    (
        Kind::Counter,
        "gen_ai.client.token.usage",
        &[
            "token_type",
            "provider",
            "model",
            "group",
            "key",
            "operation",
        ],
    ),
    (
        Kind::Counter,
        "llm_gateway.cost_micro_usd",
        &["provider", "model", "group", "key"],
    ),
    (Kind::Counter, "llm_gateway.failovers", &["group"]),
    (Kind::Counter, "llm_gateway.content_filtered", &["provider"]),
    (Kind::Counter, "llm_gateway.usage_estimated", &["provider"]),
    (
        Kind::Counter,
        "llm_gateway.client_disconnects",
        &["provider"],
    ),
    (
        Kind::Counter,
        "llm_gateway.rate_limit",
        &["key", "group", "scope", "limit", "decision"],
    ),
    (
        Kind::Counter,
        "llm_gateway.budget_alert",
        &["key", "group", "scope", "limit"],
    ),
    (
        Kind::Gauge,
        "llm_gateway.rate_limit_remaining",
        &["key", "group", "scope", "limit"],
    ),
    (
        Kind::Counter,
        "llm_gateway.cache_requests",
        &["group", "status"],
    ),
    (
        Kind::Counter,
        "llm_gateway.cache_saved_micro_usd",
        &["group"],
    ),
    (
        Kind::Gauge,
        "llm_gateway.cache_hit_ratio_permille",
        &["group"],
    ),
    (
        Kind::Counter,
        "llm_gateway.cache_semantic",
        &["group", "outcome"],
    ),
    (Kind::Gauge, "llm_gateway.cache_bytes", &["group"]),
    (Kind::Gauge, "llm_gateway.cache_entries", &["group"]),
    (
        Kind::Counter,
        "llm_gateway.diagnostics_requests",
        &["outcome"],
    ),
    (Kind::Gauge, "llm_gateway.response_store_bytes", &[]),
    (Kind::Gauge, "llm_gateway.discovery_models", &["provider"]),
    (Kind::Gauge, "llm_gateway.discovery_failures", &["provider"]),
    (
        Kind::Gauge,
        "llm_gateway.discovery_retired",
        &["provider", "model"],
    ),
    (Kind::Gauge, "llm_gateway.response_store_entries", &[]),
    (
        Kind::Counter,
        "llm_gateway.shared_state",
        &["op", "outcome"],
    ),
    (
        Kind::Counter,
        "llm_gateway.context_fitting",
        &["group", "outcome"],
    ),
    (
        Kind::Histogram,
        "gen_ai.server.request.duration_ms",
        &["provider", "model", "group"],
    ),
    (
        Kind::Histogram,
        "gen_ai.server.time_to_first_token_ms",
        &["provider", "model"],
    ),
    (
        Kind::Histogram,
        "gen_ai.server.time_per_output_token_us",
        &["provider", "model"],
    ),
    (Kind::Histogram, OVERHEAD, &["phase"]),
];

const OVERHEAD: &str = "llm_gateway.overhead_us";
/// The most label names a metric of [`CATALOGUE`] has (`llm_gateway.requests`).
const MAX_LABELS: usize = 8;
const PHASES: [&str; 5] = ["admit", "request", "chunk", "response", "log"];

struct Defined {
    kind: Kind,
    labels: &'static [&'static str],
    id: usize,
}

/// One filter config's metric ids (defined in `config_new`).
#[derive(Default)]
pub struct Metrics {
    by_base: HashMap<&'static str, Vec<Defined>>,
    overhead: Option<usize>,
}

impl Metrics {
    /// Defines every metric of [`CATALOGUE`]; one Envoy refuses is logged
    /// and left out (recording it is then an error the core logs once).
    ///
    /// # Safety
    /// `config` is the config Envoy handed to the running `config_new`.
    pub unsafe fn define(config: FilterConfigEnvoy) -> Self {
        let mut metrics = Self::default();
        for &(kind, base, labels) in CATALOGUE {
            let names: Vec<ModuleBuffer> = labels
                .iter()
                .map(|l| ModuleBuffer::of(l.as_bytes()))
                .collect();
            let mut id = 0usize;
            let define = match kind {
                Kind::Counter => {
                    abi::envoy_dynamic_module_callback_http_filter_config_define_counter
                }
                Kind::Gauge => abi::envoy_dynamic_module_callback_http_filter_config_define_gauge,
                Kind::Histogram => {
                    abi::envoy_dynamic_module_callback_http_filter_config_define_histogram
                }
            };
            // SAFETY: as the function's contract says; the buffers outlive
            // the call.
            let result = unsafe {
                define(
                    config,
                    ModuleBuffer::of(base.as_bytes()),
                    names.as_ptr(),
                    names.len(),
                    &mut id,
                )
            };
            if result != abi::METRICS_SUCCESS {
                log::warn!("llm gateway: Envoy refused metric {base} (result {result})");
                continue;
            }
            if base == OVERHEAD {
                metrics.overhead = Some(id);
            }
            metrics
                .by_base
                .entry(base)
                .or_default()
                .push(Defined { kind, labels, id });
        }
        metrics
    }

    fn find(&self, kind: Kind, base: &str, labels: &[(&str, &str)]) -> Option<usize> {
        self.by_base.get(base)?.iter().find_map(|d| {
            (d.kind == kind
                && d.labels.len() == labels.len()
                && d.labels.iter().zip(labels).all(|(a, (b, _))| a == b))
            .then_some(d.id)
        })
    }

    /// Adds to a counter, sets a gauge or records a histogram value.
    pub fn emit(
        &self,
        filter: FilterEnvoy,
        kind: Kind,
        base: &str,
        labels: &[(&str, &str)],
        value: u64,
    ) -> Result<(), u32> {
        let id = self.find(kind, base, labels).ok_or(NOT_FOUND)?;
        // On the stack: a request records five series or so, each with up
        // to MAX_LABELS values, and the heap had two vectors per series.
        let mut cleaned: [Cow<'_, str>; MAX_LABELS] = Default::default();
        for (slot, (_, v)) in cleaned.iter_mut().zip(labels) {
            *slot = clean(v);
        }
        let cleaned = cleaned.get(..labels.len()).ok_or(BAD_ARGUMENT)?;
        emit_id(filter, kind, id, cleaned, value)
    }

    pub fn overhead(&self, filter: FilterEnvoy, phase: Phase, micros: u64) -> Result<(), u32> {
        let id = self.overhead.ok_or(NOT_FOUND)?;
        let phase = PHASES.get(phase as usize).ok_or(BAD_ARGUMENT)?;
        emit_id(filter, Kind::Histogram, id, &[*phase], micros)
    }
}

fn emit_id<S: AsRef<str>>(
    filter: FilterEnvoy,
    kind: Kind,
    id: usize,
    values: &[S],
    value: u64,
) -> Result<(), u32> {
    let mut buffers = [ModuleBuffer::NULL; MAX_LABELS];
    for (buffer, v) in buffers.iter_mut().zip(values) {
        *buffer = ModuleBuffer::of(v.as_ref().as_bytes());
    }
    let buffers = buffers.get(..values.len()).ok_or(BAD_ARGUMENT)?;
    let call = match kind {
        Kind::Counter => abi::envoy_dynamic_module_callback_http_filter_increment_counter,
        Kind::Gauge => abi::envoy_dynamic_module_callback_http_filter_set_gauge,
        Kind::Histogram => abi::envoy_dynamic_module_callback_http_filter_record_histogram_value,
    };
    // SAFETY: `filter` is live (a hook of it is running); the buffers
    // outlive the call; the count matches the definition's label names.
    let result = unsafe { call(filter, id, buffers.as_ptr(), buffers.len(), value) };
    if result == abi::METRICS_SUCCESS {
        Ok(())
    } else {
        Err(BAD_ARGUMENT)
    }
}

/// The longest label value, in characters (the wasm host's limit too).
const MAX_LABEL_CHARS: usize = 64;

/// A label value as the wasm host writes it into the metric's name; most
/// values (group, provider, model, status names) are clean already and are
/// passed on as they are, without a copy.
pub fn clean(value: &str) -> Cow<'_, str> {
    if value.is_empty() {
        return Cow::Borrowed("none");
    }
    let plain = |b: &u8| b.is_ascii_graphic() && *b != b';' && *b != b'=';
    if value.len() <= MAX_LABEL_CHARS && value.bytes().all(|b| plain(&b)) {
        return Cow::Borrowed(value);
    }
    Cow::Owned(
        value
            .chars()
            .take(MAX_LABEL_CHARS)
            .map(|c| {
                if c == ';' || c == '=' || c.is_whitespace() || c.is_control() {
                    '_'
                } else {
                    c
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_cleaned_as_the_wasm_host_names_them() {
        assert_eq!(clean(""), "none");
        assert_eq!(clean("a;b=c d"), "a_b_c_d");
        assert_eq!(clean(&"x".repeat(80)).len(), 64);
        assert_eq!(clean(&"é".repeat(80)).chars().count(), 64);
        assert_eq!(clean("a\u{a0}b\tc"), "a_b_c");
        assert!(matches!(
            clean("mock-claude-sonnet"),
            Cow::Borrowed("mock-claude-sonnet")
        ));
        let name = llm_gateway_core::metering::metric_name("b", &[("l", "a;b=c d")]);
        assert_eq!(name, format!("b;l={}", clean("a;b=c d")));
    }

    /// `emit` holds a series' label values in arrays of MAX_LABELS.
    #[test]
    fn every_metric_fits_the_label_arrays() {
        let most = CATALOGUE.iter().map(|(_, _, l)| l.len()).max();
        assert_eq!(most, Some(MAX_LABELS));
    }

    /// Every metric base name the core's sessions record is in the
    /// catalogue (a metric cannot be defined once Envoy froze the config).
    #[test]
    fn the_catalogue_covers_every_metric_of_the_core() {
        fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, found);
                } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("tests.rs")
                {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    for piece in text.split('"').skip(1).step_by(2) {
                        let metric = (piece.starts_with("llm_gateway.")
                            || piece.starts_with("gen_ai."))
                            && piece
                                .chars()
                                .all(|c| c.is_ascii_lowercase() || c == '_' || c == '.');
                        if metric {
                            found.push(piece.to_owned());
                        }
                    }
                }
            }
        }
        let mut found = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../src/session"),
            &mut found,
        );
        assert!(found.len() > 10, "{found:?}");
        for name in found {
            assert!(
                CATALOGUE.iter().any(|(_, base, _)| *base == name),
                "{name} is not in the native host's metric catalogue"
            );
        }
    }
}
