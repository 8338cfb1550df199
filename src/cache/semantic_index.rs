//! A group's semantic index: the vectors of its cached prompts, beside the
//! exact cache's entries, searched by brute force.
//!
//! One value of the proxy's shared data per group (`llm_semantic:<group>`),
//! which every worker shares, written with compare-and-swap:
//! - a head: magic, the vectors' dimensions, how many records;
//! - records of [`REC_HEAD`] + dimensions bytes each: the entry's
//!   partition (`semantic::Prompt::partition`), its exact request key, when
//!   it expires, when it was last given, its vector's norm, and the vector
//!   itself, unit length quantised to one signed byte a component (cosine
//!   similarity survives it to about 0.01).
//!
//! Bounded by construction: at most `max_entries` records and `max_bytes`
//! bytes (the smaller), vectors of at most [`MAX_DIMENSIONS`]. A new
//! record takes an expired one's place, else the least recently given
//! one's. Vectors of other dimensions than the index's (the embedding
//! model changed) start the index afresh. A lookup reads the whole value
//! and compares its partition's records: its cost is measured at 10,000
//! records (`benches/core.rs`, BENCHMARKS.md).

use super::key::RequestKey;
use super::semantic::Settings;
use crate::shared_state::cas::{SetResult, SharedStore, MAX_CAS_ATTEMPTS};
use crate::shared_state::{protocol, Key};

/// The longest vector kept (the state service's bound too).
pub const MAX_DIMENSIONS: usize = protocol::MAX_DIMENSIONS;

const MAGIC: &[u8; 4] = b"SEM1";
const HEAD: usize = 12;
/// A record before its vector: partition, request key, expiry, last use, norm.
pub const REC_HEAD: usize = Key::LEN + 32 + 8 + 8 + 4;
const SCALE: f32 = 127.0;

/// A vector as the index keeps it: unit length, a signed byte a component.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantized {
    components: Vec<i8>,
    norm: f32,
}

impl Quantized {
    /// `vector` quantised, or `None` when it is empty, too long or zero.
    pub fn of(vector: &[f32]) -> Option<Self> {
        if vector.is_empty() || vector.len() > MAX_DIMENSIONS {
            return None;
        }
        let length = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if !(length.is_finite() && length > 0.0) {
            return None;
        }
        let components: Vec<i8> = vector
            .iter()
            .map(|x| (x / length * SCALE).round().clamp(-SCALE, SCALE) as i8)
            .collect();
        let norm = norm(&components);
        (norm > 0.0).then_some(Self { components, norm })
    }

    pub fn dimensions(&self) -> usize {
        self.components.len()
    }

    /// A vector as the state service's protocol carries it (one signed
    /// byte a component), or `None` when it is not one (empty, too long,
    /// zero).
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if !protocol::is_vector(bytes) {
            return None;
        }
        let components: Vec<i8> = bytes.iter().map(|&b| b as i8).collect();
        let norm = norm(&components);
        (norm > 0.0).then_some(Self { components, norm })
    }

    /// Its bytes as the state service's protocol carries them.
    pub fn to_bytes(&self) -> Vec<u8> {
        protocol::vector_body(&self.components)
    }

    /// Its length (of the quantised components).
    pub fn norm(&self) -> f32 {
        self.norm
    }

    /// The cosine similarity with a vector kept as bytes (of `norm`), or
    /// `None` when their dimensions differ or either is zero.
    pub fn similarity(&self, vector: &[u8], norm: f32) -> Option<f32> {
        if vector.len() != self.components.len() {
            return None;
        }
        let similarity = dot(&self.components, vector) as f32 / (self.norm * norm);
        similarity.is_finite().then_some(similarity)
    }
}

fn norm(components: &[i8]) -> f32 {
    let sum: i32 = components
        .iter()
        .map(|&c| i32::from(c) * i32::from(c))
        .sum();
    (sum as f32).sqrt()
}

/// The dot product of a query and a record's vector, in lanes of 32 so
/// the compiler vectorises it (about 3x a plain sum, measured natively).
fn dot(a: &[i8], b: &[u8]) -> i32 {
    const LANES: usize = 32;
    let product = |(&x, &y): (&i8, &u8)| i32::from(x) * i32::from(y as i8);
    let (whole_a, whole_b) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: i32 = (whole_a.remainder().iter())
        .zip(whole_b.remainder())
        .map(product)
        .sum();
    let mut lanes = [0i32; LANES];
    for (x, y) in whole_a.zip(whole_b) {
        for (lane, pair) in lanes.iter_mut().zip(x.iter().zip(y)) {
            *lane += product(pair);
        }
    }
    tail + lanes.iter().sum::<i32>()
}

/// A record found by a lookup.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Found {
    /// The exact cache's key of the entry it stands for.
    pub request: RequestKey,
    pub similarity: f32,
}

/// The index as it is read: its bytes, parsed lazily.
struct Read {
    bytes: Vec<u8>,
    dimensions: usize,
    count: usize,
}

impl Read {
    fn parse(bytes: Vec<u8>) -> Option<Self> {
        if bytes.get(..4) != Some(&MAGIC[..]) {
            return None;
        }
        let word = |at: usize| -> Option<usize> {
            let b = <[u8; 4]>::try_from(bytes.get(at..at + 4)?).ok()?;
            Some(u32::from_le_bytes(b) as usize)
        };
        let (dimensions, count) = (word(4)?, word(8)?);
        let size = HEAD + count * (REC_HEAD + dimensions);
        (dimensions <= MAX_DIMENSIONS && bytes.len() == size).then_some(Self {
            bytes,
            dimensions,
            count,
        })
    }

    fn empty(dimensions: usize) -> Self {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&(dimensions as u32).to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        Self {
            bytes,
            dimensions,
            count: 0,
        }
    }

    fn size(&self) -> usize {
        REC_HEAD + self.dimensions
    }

    fn record(&self, n: usize) -> &[u8] {
        let at = HEAD + n * self.size();
        self.bytes.get(at..at + self.size()).unwrap_or_default()
    }

    fn record_mut(&mut self, n: usize) -> &mut [u8] {
        let (at, size) = (HEAD + n * self.size(), self.size());
        self.bytes.get_mut(at..at + size).unwrap_or_default()
    }

    fn set_count(&mut self, count: usize) {
        self.count = count;
        if let Some(field) = self.bytes.get_mut(8..12) {
            field.copy_from_slice(&(count as u32).to_le_bytes());
        }
    }
}

fn u64_at(record: &[u8], at: usize) -> u64 {
    record
        .get(at..at + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, u64::from_le_bytes)
}

const AT_REQUEST: usize = Key::LEN;
const AT_EXPIRES: usize = AT_REQUEST + 32;
const AT_USED: usize = AT_EXPIRES + 8;
const AT_NORM: usize = AT_USED + 8;

/// One group's index in the proxy's shared data.
pub struct Index<'s, S: SharedStore> {
    shared: &'s S,
    name: Vec<u8>,
    max_entries: usize,
    max_bytes: u64,
}

impl<'s, S: SharedStore> Index<'s, S> {
    /// `group`'s index, bounded as `settings` say.
    pub fn new(shared: &'s S, group: &str, settings: &Settings) -> Self {
        Self {
            shared,
            name: format!("llm_semantic:{group}").into_bytes(),
            max_entries: settings.max_entries as usize,
            max_bytes: settings.max_bytes,
        }
    }

    /// Records of `dimensions` the bounds allow.
    fn capacity(&self, dimensions: usize) -> usize {
        let by_bytes = self.max_bytes.saturating_sub(HEAD as u64) / (REC_HEAD + dimensions) as u64;
        self.max_entries
            .min(usize::try_from(by_bytes).unwrap_or(usize::MAX))
    }

    fn read(&self) -> Option<(Option<Read>, u32)> {
        match self.shared.get(&self.name).ok()? {
            Some((bytes, cas)) => Some((Read::parse(bytes), cas)),
            None => Some((None, 0)),
        }
    }

    /// The live record of `partition` most similar to `query`, when it is
    /// at least `threshold`; marked as given now (one try: losing it to
    /// another worker's write costs only its place in the eviction order).
    pub fn lookup(
        &self,
        partition: &Key,
        query: &Quantized,
        threshold: f32,
        now: u64,
    ) -> Option<Found> {
        let (read, cas) = self.read()?;
        let mut read = read?;
        let (n, found) = best(&read, partition, query, now)?;
        if found.similarity < threshold {
            return None;
        }
        if let Some(used) = read.record_mut(n).get_mut(AT_USED..AT_USED + 8) {
            used.copy_from_slice(&now.to_le_bytes());
        }
        let _ = self.shared.set(&self.name, &read.bytes, cas);
        Some(found)
    }

    /// Keeps `vector` for the entry of `request` in `partition`, until
    /// `expires`: its own record again when it has one, else a free place,
    /// an expired record's, or the least recently given one's. `false`
    /// when it could not (the proxy failed, other workers kept winning).
    pub fn insert(
        &self,
        partition: &Key,
        request: &RequestKey,
        vector: &Quantized,
        (now, expires): (u64, u64),
    ) -> bool {
        let dimensions = vector.dimensions();
        let capacity = self.capacity(dimensions);
        if capacity == 0 {
            return false;
        }
        for _ in 0..MAX_CAS_ATTEMPTS {
            let Some((read, cas)) = self.read() else {
                return false;
            };
            let mut index = match read {
                Some(read) if read.dimensions == dimensions => read,
                _ => Read::empty(dimensions),
            };
            let n = place(&index, partition, request, now, capacity);
            if n == index.count {
                index.bytes.resize(index.bytes.len() + index.size(), 0);
                index.set_count(n + 1);
            }
            let mut record = Vec::with_capacity(index.size());
            record.extend_from_slice(partition.as_bytes());
            record.extend_from_slice(request.as_bytes());
            record.extend_from_slice(&expires.to_le_bytes());
            record.extend_from_slice(&now.to_le_bytes());
            record.extend_from_slice(&vector.norm.to_le_bytes());
            record.extend(vector.components.iter().map(|&c| c as u8));
            let slot = index.record_mut(n);
            if slot.len() != record.len() {
                return false;
            }
            slot.copy_from_slice(&record);
            match self.shared.set(&self.name, &index.bytes, cas) {
                SetResult::Done => return true,
                SetResult::CasMismatch => continue,
                SetResult::Failed => return false,
            }
        }
        false
    }

    /// Records and bytes held now (`None`: unreadable).
    pub fn usage(&self) -> Option<(usize, usize)> {
        let (read, _) = self.read()?;
        Some(read.map_or((0, 0), |r| (r.count, r.bytes.len())))
    }
}

/// Where a new record for `request` in `partition` goes: its own, a new
/// one while there is room, an expired one, the least recently given.
fn place(index: &Read, partition: &Key, request: &RequestKey, now: u64, capacity: usize) -> usize {
    let mut oldest = (u64::MAX, 0);
    for n in 0..index.count.min(capacity) {
        let record = index.record(n);
        if record.get(..Key::LEN) == Some(&partition.as_bytes()[..])
            && record.get(AT_REQUEST..AT_EXPIRES) == Some(&request.as_bytes()[..])
        {
            return n;
        }
        let used = if u64_at(record, AT_EXPIRES) <= now {
            0
        } else {
            u64_at(record, AT_USED)
        };
        if used < oldest.0 {
            oldest = (used, n);
        }
    }
    if index.count < capacity {
        index.count
    } else {
        oldest.1
    }
}

/// The live record of `partition` most similar to `query`.
fn best(index: &Read, partition: &Key, query: &Quantized, now: u64) -> Option<(usize, Found)> {
    if index.dimensions != query.dimensions() {
        return None;
    }
    let mut best: Option<(usize, f32)> = None;
    for n in 0..index.count {
        let record = index.record(n);
        if record.get(..Key::LEN) != Some(&partition.as_bytes()[..])
            || u64_at(record, AT_EXPIRES) <= now
        {
            continue;
        }
        let norm = record
            .get(AT_NORM..REC_HEAD)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0.0, f32::from_le_bytes);
        let vector = record.get(REC_HEAD..).unwrap_or_default();
        let Some(similarity) = query.similarity(vector, norm) else {
            continue;
        };
        if best.is_none_or(|(_, s)| similarity > s) {
            best = Some((n, similarity));
        }
    }
    let (n, similarity) = best?;
    let mut request = [0u8; 32];
    request.copy_from_slice(index.record(n).get(AT_REQUEST..AT_EXPIRES)?);
    Some((
        n,
        Found {
            request: RequestKey(request),
            similarity,
        },
    ))
}

#[cfg(test)]
mod tests;
