//! The semantic cache's vectors in Redis, searched by brute force here.
//!
//! One Redis hash per partition (`llm-state-vec:{store}:{partition}`: the
//! gateway's hash of a namespace and everything of a request but its
//! prompt's text), one field per vector: its id (the exact cache's key of
//! the entry it stands for, 32 bytes), and a record of [`HEAD`] bytes
//! (version, when it expires, its norm) before the vector, one signed byte
//! a component, as the gateway quantised it (`Quantized`).
//!
//! A search reads its partition's hash and compares every live vector of
//! the query's dimensions: a search never sees another partition's, so
//! never another key's or group's. A partition holds at most
//! `--max-vectors`: past it, the expired and then the soonest to expire
//! go first. The hash expires (Redis's own `PEXPIRE`) with its longest
//! lived vector.

use llm_gateway_core::cache::semantic_index::Quantized;

/// The record's version byte.
const VERSION: u8 = 1;
/// version, expires at (ms), norm.
const HEAD: usize = 1 + 8 + 4;

/// One vector as Redis keeps it.
pub fn encode(vector: &Quantized, expires_ms: u64) -> Vec<u8> {
    let bytes = vector.to_bytes();
    let mut out = Vec::with_capacity(HEAD + bytes.len());
    out.push(VERSION);
    out.extend_from_slice(&expires_ms.to_be_bytes());
    out.extend_from_slice(&vector.norm().to_be_bytes());
    out.extend_from_slice(&bytes);
    out
}

/// A record's expiry, norm and vector (`None`: not one of ours).
fn decode(record: &[u8]) -> Option<(u64, f32, &[u8])> {
    let (&version, rest) = record.split_first()?;
    let (expires, rest) = rest.split_first_chunk::<8>()?;
    let (norm, vector) = rest.split_first_chunk::<4>()?;
    (version == VERSION && !vector.is_empty()).then_some((
        u64::from_be_bytes(*expires),
        f32::from_be_bytes(*norm),
        vector,
    ))
}

/// The id of the live vector of `records` (id, record) most similar to
/// `query`, and how similar, when at least `threshold`.
pub fn best(
    records: &[(Vec<u8>, Vec<u8>)],
    query: &Quantized,
    threshold: f32,
    now_ms: u64,
) -> Option<([u8; 32], f32)> {
    let mut best: Option<(&[u8], f32)> = None;
    for (id, record) in records {
        let Some((expires, norm, vector)) = decode(record) else {
            continue;
        };
        if expires <= now_ms {
            continue;
        }
        let Some(similarity) = query.similarity(vector, norm) else {
            continue;
        };
        if best.is_none_or(|(_, s)| similarity > s) {
            best = Some((id, similarity));
        }
    }
    let (id, similarity) = best.filter(|(_, s)| *s >= threshold)?;
    Some((<[u8; 32]>::try_from(id).ok()?, similarity))
}

/// The ids to delete so that at most `max` of `records` are left: the
/// expired (and unreadable) ones, then the soonest to expire.
pub fn evicted(records: &[(Vec<u8>, Vec<u8>)], max: usize, now_ms: u64) -> Vec<Vec<u8>> {
    let mut live: Vec<(u64, &Vec<u8>)> = Vec::with_capacity(records.len());
    let mut out = Vec::new();
    for (id, record) in records {
        match decode(record) {
            Some((expires, _, _)) if expires > now_ms => live.push((expires, id)),
            _ => out.push(id.clone()),
        }
    }
    if live.len() > max {
        live.sort_by_key(|(expires, _)| *expires);
        let over = live.len() - max;
        out.extend(live.into_iter().take(over).map(|(_, id)| id.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit vector along axis `axis` tilted toward axis 1 by `tilt`.
    fn vector(axis: usize, tilt: f32) -> Quantized {
        let mut v = vec![0.0f32; 8];
        v[axis] = 1.0;
        v[1] += tilt;
        Quantized::of(&v).unwrap()
    }

    fn record(id: u8, vector: &Quantized, expires_ms: u64) -> (Vec<u8>, Vec<u8>) {
        (vec![id; 32], encode(vector, expires_ms))
    }

    #[test]
    fn the_closest_live_vector_at_least_the_threshold_is_found() {
        let records = [
            record(1, &vector(0, 0.0), 1000),
            record(2, &vector(2, 0.0), 1000),
            record(3, &vector(0, 0.05), 10),
        ];
        // Closest to 3 (expired), then to 1 (cosine about 0.995).
        let (id, similarity) = best(&records, &vector(0, 0.06), 0.95, 100).unwrap();
        assert_eq!(id, [1; 32]);
        assert!(similarity > 0.99 && similarity <= 1.0, "{similarity}");
        // Below the threshold: none.
        assert_eq!(best(&records, &vector(0, 0.06), 0.999_9, 100), None);
        // Far from all: none.
        assert_eq!(best(&records, &vector(4, 0.0), 0.5, 100), None);
        // Before 3 expired, 3 is the closest.
        assert_eq!(
            best(&records, &vector(0, 0.06), 0.95, 5).unwrap().0,
            [3; 32]
        );
    }

    #[test]
    fn other_dimensions_and_foreign_records_are_skipped() {
        let long = Quantized::of(&[1.0f32; 16]).unwrap();
        let records = [
            record(1, &long, 1000),
            (vec![2; 32], b"not a record".to_vec()),
            (vec![3; 5], encode(&vector(0, 0.0), 1000)),
        ];
        // A short id is not one of ours either: nothing to give.
        assert_eq!(best(&records, &vector(0, 0.0), 0.5, 100), None);
        let (id, _) = best(&records, &long, 0.5, 100).unwrap();
        assert_eq!(id, [1; 32]);
    }

    #[test]
    fn a_record_reads_back() {
        let v = vector(3, 0.2);
        let record = encode(&v, 42);
        let (expires, norm, bytes) = decode(&record).unwrap();
        assert_eq!((expires, norm, bytes), (42, v.norm(), &v.to_bytes()[..]));
        assert_eq!(decode(&encode(&v, 42)[..HEAD]), None);
    }

    #[test]
    fn past_the_bound_the_expired_then_the_soonest_to_expire_go() {
        let v = vector(0, 0.0);
        let records = [
            record(1, &v, 300),
            record(2, &v, 50),
            record(3, &v, 200),
            record(4, &v, 400),
            (vec![5; 32], b"junk".to_vec()),
        ];
        let mut gone = evicted(&records, 2, 100);
        gone.sort();
        assert_eq!(gone, [vec![2; 32], vec![3; 32], vec![5; 32]]);
        // Within the bound: only the expired and the unreadable.
        let mut gone = evicted(&records, 10, 100);
        gone.sort();
        assert_eq!(gone, [vec![2; 32], vec![5; 32]]);
    }
}
