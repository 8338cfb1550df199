use super::*;
use crate::cache::semantic::Settings;
use crate::shared_state::cas::tests::MemoryStore;
use crate::shared_state::Namespace;

fn settings(max_entries: u32, max_bytes: u64) -> Settings {
    serde_json::from_value(serde_json::json!({
        "embedding_group": "embed",
        "max_entries": max_entries,
        "max_bytes": max_bytes,
    }))
    .unwrap()
}

fn partition(name: &str) -> Key {
    Key::new("test", &Namespace::of_key(name), b"rest")
}

fn request(n: u8) -> RequestKey {
    RequestKey([n; 32])
}

/// A unit vector along axis `axis` tilted toward axis 1 by `tilt`.
fn vector(axis: usize, tilt: f32) -> Quantized {
    let mut v = vec![0.0f32; 8];
    v[axis] = 1.0;
    v[1] += tilt;
    Quantized::of(&v).unwrap()
}

#[test]
fn the_closest_vector_of_the_partition_is_found_above_the_threshold() {
    let shared = MemoryStore::default();
    let index = Index::new(&shared, "g", &settings(10, 1 << 20));
    let p = partition("alice");
    assert!(index.insert(&p, &request(1), &vector(0, 0.0), (100, 200)));
    assert!(index.insert(&p, &request(2), &vector(2, 0.0), (100, 200)));
    // Close to the first (cosine 0.995), far from the second.
    let found = index.lookup(&p, &vector(0, 0.1), 0.95, 101).unwrap();
    assert_eq!(found.request, request(1));
    assert!((found.similarity - 0.995).abs() < 0.01, "{found:?}");
    // Not close enough to either: no hit.
    assert_eq!(index.lookup(&p, &vector(3, 0.0), 0.5, 101), None);
    // Above a lower threshold, found with what it scored.
    let tilted = index.lookup(&p, &vector(0, 1.0), 0.5, 101).unwrap();
    assert!((tilted.similarity - 0.707).abs() < 0.01, "{tilted:?}");
}

#[test]
fn another_partition_or_an_expired_record_is_never_found() {
    let shared = MemoryStore::default();
    let index = Index::new(&shared, "g", &settings(10, 1 << 20));
    assert!(index.insert(
        &partition("alice"),
        &request(1),
        &vector(0, 0.0),
        (100, 200)
    ));
    assert_eq!(
        index.lookup(&partition("bob"), &vector(0, 0.0), 0.5, 101),
        None
    );
    // Another group's index is another value.
    let other = Index::new(&shared, "h", &settings(10, 1 << 20));
    assert_eq!(
        other.lookup(&partition("alice"), &vector(0, 0.0), 0.5, 101),
        None
    );
    assert!(index
        .lookup(&partition("alice"), &vector(0, 0.0), 0.5, 199)
        .is_some());
    assert_eq!(
        index.lookup(&partition("alice"), &vector(0, 0.0), 0.5, 200),
        None
    );
}

#[test]
fn the_bounds_hold_and_the_least_recently_given_goes_first() {
    let shared = MemoryStore::default();
    let index = Index::new(&shared, "g", &settings(3, 1 << 20));
    let p = partition("alice");
    for n in 0..3u8 {
        let now = 100 + u64::from(n);
        assert!(index.insert(
            &p,
            &request(n),
            &vector(usize::from(n) + 2, 0.0),
            (now, 1000)
        ));
    }
    // Request 0's record is given now: request 1's is the least recently given.
    assert!(index.lookup(&p, &vector(2, 0.0), 0.9, 110).is_some());
    assert!(index.insert(&p, &request(9), &vector(6, 0.0), (111, 1000)));
    assert_eq!(index.usage(), Some((3, HEAD + 3 * (REC_HEAD + 8))));
    assert_eq!(index.lookup(&p, &vector(3, 0.0), 0.9, 112), None, "evicted");
    for (axis, n) in [(2, 0), (4, 2), (6, 9)] {
        let found = index.lookup(&p, &vector(axis, 0.0), 0.9, 112).unwrap();
        assert_eq!(found.request, request(n));
    }
    // The same entry again takes its own record.
    assert!(index.insert(&p, &request(9), &vector(7, 0.0), (113, 1000)));
    assert_eq!(index.usage().unwrap().0, 3);
    assert_eq!(
        index.lookup(&p, &vector(7, 0.0), 0.9, 114).unwrap().request,
        request(9)
    );
    // An expired record goes before any live one.
    assert!(index.insert(&p, &request(5), &vector(5, 0.0), (120, 121)));
    assert!(index.insert(&p, &request(6), &vector(1, 0.0), (130, 1000)));
    assert_eq!(
        index.lookup(&p, &vector(7, 0.0), 0.9, 131).unwrap().request,
        request(9)
    );
    // max_bytes bounds it too: two records of 8 dimensions.
    let small = Index::new(
        &shared,
        "s",
        &settings(100, (HEAD + 2 * (REC_HEAD + 8)) as u64),
    );
    for n in 0..5u8 {
        assert!(small.insert(&p, &request(n), &vector(usize::from(n), 0.0), (100, 1000)));
    }
    assert_eq!(small.usage().unwrap().0, 2);
}

#[test]
fn vectors_of_other_dimensions_start_the_index_afresh() {
    let shared = MemoryStore::default();
    let index = Index::new(&shared, "g", &settings(10, 1 << 20));
    let p = partition("alice");
    assert!(index.insert(&p, &request(1), &vector(0, 0.0), (100, 1000)));
    let longer = Quantized::of(&[1.0; 16]).unwrap();
    assert_eq!(index.lookup(&p, &longer, 0.1, 101), None);
    assert!(index.insert(&p, &request(2), &longer, (100, 1000)));
    assert_eq!(index.usage(), Some((1, HEAD + REC_HEAD + 16)));
    assert_eq!(index.lookup(&p, &vector(0, 0.0), 0.1, 101), None);
    // Nothing worth keeping: empty, zero, too long, not finite.
    assert!(Quantized::of(&[]).is_none());
    assert!(Quantized::of(&[0.0; 4]).is_none());
    assert!(Quantized::of(&vec![1.0; MAX_DIMENSIONS + 1]).is_none());
    assert!(Quantized::of(&[f32::NAN, 1.0]).is_none());
    // A value that is not an index is read as none, and replaced.
    shared.raw_set(b"llm_semantic:x", b"garbage");
    let x = Index::new(&shared, "x", &settings(10, 1 << 20));
    assert_eq!(x.lookup(&p, &longer, 0.1, 101), None);
    assert!(x.insert(&p, &request(1), &longer, (100, 1000)));
    assert!(x.lookup(&p, &longer, 0.99, 101).is_some());
}

#[test]
fn a_failing_proxy_finds_and_stores_nothing() {
    let shared = MemoryStore::default();
    let index = Index::new(&shared, "g", &settings(10, 1 << 20));
    let p = partition("alice");
    assert!(index.insert(&p, &request(1), &vector(0, 0.0), (100, 1000)));
    shared.unreadable.set(true);
    assert_eq!(index.lookup(&p, &vector(0, 0.0), 0.5, 101), None);
    assert!(!index.insert(&p, &request(2), &vector(2, 0.0), (100, 1000)));
    assert_eq!(index.usage(), None);
}

#[test]
fn the_dot_product_in_lanes_is_the_plain_sum() {
    for len in [0, 1, 31, 32, 33, 100, 1536] {
        let a: Vec<i8> = (0..len).map(|i| ((i * 37) % 255) as u8 as i8).collect();
        let b: Vec<u8> = (0..len).map(|i| ((i * 91) % 256) as u8).collect();
        let plain: i32 = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| i32::from(x) * i32::from(y as i8))
            .sum();
        assert_eq!(dot(&a, &b), plain, "{len}");
    }
}
