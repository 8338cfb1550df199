//! The architecture, checked: which top-level modules of `src/` may use
//! which. Client surfaces and vendor dialects meet only in the neutral
//! model; neither knows the other, the configuration or the host glue;
//! nothing but the glue knows proxy-wasm (`host`); and
//! no two modules use each other (directly or around a loop).

// Test code: unwrap and indexing are fine here.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Top-level module → the top-level modules its non-test code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(&src).unwrap();
            let first = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            let module = first.trim_end_matches(".rs").to_owned();
            if module == "lib" || module == "main" {
                continue;
            }
            let text = fs::read_to_string(&path).unwrap();
            // What tests use, and comments, do not count.
            let code: String = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            let uses = graph.entry(module.clone()).or_default();
            for (at, _) in code.match_indices("crate::") {
                let name: String = code[at + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name != module && !name.is_empty() {
                    uses.insert(name);
                }
            }
        }
    }
    graph
}

#[test]
fn no_module_uses_itself_around_a_loop() {
    let graph = graph();
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        let here = path.last().unwrap().clone();
        for next in graph.get(&here).into_iter().flatten() {
            if let Some(at) = path.iter().position(|m| m == next) {
                panic!("import cycle: {} -> {next}", path[at..].join(" -> "));
            }
            if done.insert(next.clone()) {
                path.push(next.clone());
                visit(graph, path, done);
                path.pop();
            }
        }
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if done.insert(module.clone()) {
            visit(&graph, &mut vec![module.clone()], &mut done);
        }
    }
}

#[test]
fn surfaces_and_dialects_meet_only_in_the_model() {
    let graph = graph();
    let forbidden: &[(&str, &[&str])] = &[
        (
            "model",
            &["surfaces", "dialects", "config", "host", "provider"],
        ),
        ("surfaces", &["dialects", "config", "host", "provider"]),
        ("dialects", &["surfaces", "config", "host"]),
    ];
    for (module, never) in forbidden {
        let uses = &graph[*module];
        for other in *never {
            assert!(!uses.contains(*other), "{module} uses {other}");
        }
    }
    // Only the glue knows proxy-wasm: nothing uses it.
    for (module, uses) in &graph {
        assert!(!uses.contains("host"), "{module} uses host");
    }
    // The check sees the code: the dialects do use the model.
    assert!(graph["dialects"].contains("model"));
}
