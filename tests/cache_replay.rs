//! Golden files of the response cache's replays: each entry of
//! `golden/cache/entries/*.json` (what the cache keeps of an answer), as a
//! hit gives it to a client of each API, whole and streamed:
//! `golden/cache/<api>/<entry>.txt`. `GOLDEN_UPDATE=1 cargo test --test
//! cache_replay` rewrites them; review the diff.

// Test code: unwrap and indexing are fine here.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use std::fs;
use std::path::Path;

use llm_gateway_core::cache::entry::Entry;
use llm_gateway_core::cache::replay;
use llm_gateway_core::model::Api;
use llm_gateway_core::surfaces::SurfaceState;

#[test]
fn every_entry_replays_in_every_api() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/cache");
    let update = std::env::var_os("GOLDEN_UPDATE").is_some();
    let mut failures = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(root.join("entries"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    assert!(entries.len() >= 3);
    for path in entries {
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let entry = Entry::decode(&fs::read(&path).unwrap()).expect("an entry of this build");
        for api in Api::ALL {
            let origin = replay::origin(&entry, "req-golden", 1_733_000_100);
            let whole = replay::whole(api, &entry, &origin, &SurfaceState::default());
            let whole: serde_json::Value = serde_json::from_slice(&whole).unwrap();
            let stream = replay::stream(
                api,
                &entry,
                origin,
                "req-golden",
                true,
                &SurfaceState::default(),
            );
            let actual = format!(
                "whole:\n{}\n\nstream:\n{}",
                serde_json::to_string_pretty(&whole).unwrap(),
                String::from_utf8(stream).unwrap()
            );
            let out = root.join(api.name()).join(format!("{name}.txt"));
            if update {
                fs::create_dir_all(out.parent().unwrap()).unwrap();
                fs::write(&out, &actual).unwrap();
            } else if fs::read_to_string(&out).unwrap_or_default() != actual {
                failures.push(out.display().to_string());
            }
        }
    }
    assert!(
        failures.is_empty(),
        "changed (GOLDEN_UPDATE=1 rewrites them): {failures:#?}"
    );
}
