//! Envoy stats from the filter: counters and histograms whose names carry
//! their labels (`base;label=value;...`, see `metering::metric_name`), split
//! into Prometheus labels by the `stats_tags` in the shipped Envoy configs.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::abi::{self, MetricKind};
use llm_gateway_core::metering::{metric_name, MetricParts};
use llm_gateway_core::session::host::status::BAD_ARGUMENT;
use llm_gateway_core::session::host::Phase;

thread_local! {
    /// Metric ids by a hash of kind, base name and raw labels: defining a
    /// metric is a host call, and building its name on every request costs
    /// more than hashing what it is made of.
    static IDS: RefCell<HashMap<u64, Cached, BuildHasherDefault<Prehashed>>> =
        RefCell::new(HashMap::default());
}

/// Distinct label combinations we keep ids for; beyond it, ids are not cached
/// (Envoy still counts), so a label explosion cannot grow this map forever.
const MAX_CACHED: usize = 4096;

struct Cached {
    id: u32,
    /// What the hash was made of, to tell a collision from a hit.
    parts: Vec<u8>,
}

/// A metric's id; `Err`: the host's status defining it.
fn id(metric_type: MetricKind, base: &str, labels: &[(&str, &str)]) -> Result<u32, u32> {
    let kind = match metric_type {
        MetricKind::Counter => b'c',
        MetricKind::Gauge => b'g',
        MetricKind::Histogram => b'h',
    };
    let parts = MetricParts::new(kind, base, labels);
    let key = parts.hash();
    IDS.with(|ids| {
        if let Some(cached) = ids.borrow().get(&key) {
            if parts.matches(&cached.parts) {
                return Ok(cached.id);
            }
        }
        let id = abi::define_metric(metric_type, &metric_name(base, labels))?;
        let mut ids = ids.borrow_mut();
        if ids.len() < MAX_CACHED && !ids.contains_key(&key) {
            ids.insert(
                key,
                Cached {
                    id,
                    parts: parts.flatten(),
                },
            );
        }
        Ok(id)
    })
}

/// The map's keys are hashes already.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

pub fn count(base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), u32> {
    if value == 0 {
        return Ok(());
    }
    abi::increment_metric(id(MetricKind::Counter, base, labels)?, value)
}

/// Sets a gauge (one stat for every VM: the last value set wins).
pub fn gauge(base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), u32> {
    abi::record_metric(id(MetricKind::Gauge, base, labels)?, value)
}

pub fn record(base: &str, labels: &[(&str, &str)], value: u64) -> Result<(), u32> {
    abi::record_metric(id(MetricKind::Histogram, base, labels)?, value)
}

const PHASES: [&str; 5] = ["admit", "request", "chunk", "response", "log"];

/// Records gateway overhead in microseconds. On the per-chunk path, so the
/// phases' ids are kept apart from the map (no name to build per chunk).
pub fn overhead(phase: Phase, micros: u64) -> Result<(), u32> {
    thread_local! {
        static PHASE_IDS: RefCell<[Option<u32>; PHASES.len()]> =
            const { RefCell::new([None; PHASES.len()]) };
    }
    let index = phase as usize;
    let id = PHASE_IDS.with(|ids| {
        let mut ids = ids.borrow_mut();
        let (Some(slot), Some(phase)) = (ids.get_mut(index), PHASES.get(index)) else {
            return Err(BAD_ARGUMENT);
        };
        if let Some(id) = *slot {
            return Ok(id);
        }
        let name = metric_name("llm_gateway.overhead_us", &[("phase", phase)]);
        let id = abi::define_metric(MetricKind::Histogram, &name)?;
        *slot = Some(id);
        Ok(id)
    })?;
    abi::record_metric(id, micros)
}
