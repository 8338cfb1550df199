//! The architecture, checked: which top-level modules of the core crate
//! (`src/`) may use which. Client surfaces and vendor dialects meet only in
//! the neutral model; neither knows the other or the configuration; and no
//! two modules use each other (directly or around a loop); the byte and
//! text formats (`formats/`) use no other module. That the core
//! knows no proxy is the compiler's to check: it has no proxy-wasm
//! dependency (the wasm host is its own crate, `hosts/wasm`).
//! The operations' neutral model names no client API, and the sessions
//! use no wire format and match no call's operation, nor name one; the
//! sessions and the response cache name no member of a client surface's
//! state. And no file
//! of the core, the hosts (`hosts/*/src`) or the mock (`mock/src`) has
//! more than `MAX_LINES` lines of non-test code.
//!
//! Each file is read whole, less its test code: items under `#[cfg(test)]`
//! (found by a small lexer that knows strings, chars and comments) and the
//! files of modules declared `#[cfg(test)] mod name;`.

// Test code: unwrap and indexing are fine here.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const TEST_ATTR: &str = "#[cfg(test)]";
/// What starts an item that ends with `;` or a block, never at a `,`.
const ITEM_KEYWORDS: &[&str] = &[
    "fn ",
    "mod ",
    "impl",
    "struct ",
    "enum ",
    "trait ",
    "const ",
    "static ",
    "use ",
    "type ",
    "macro_rules!",
    "let ",
    "#[",
];

/// The end of the string, char or comment starting at `at`, or `None`
/// when `at` starts none of them.
fn skip_literal(code: &[u8], at: usize) -> Option<usize> {
    let rest = &code[at..];
    let closing = |from: usize, hashes: usize| {
        let mut i = from;
        while i < code.len() {
            match code[i] {
                b'\\' if hashes == 0 => i += 2,
                b'"' if code[i + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|&&c| c == b'#')
                    .count()
                    == hashes =>
                {
                    return i + 1 + hashes;
                }
                _ => i += 1,
            }
        }
        code.len()
    };
    if rest.starts_with(b"//") {
        return Some(
            rest.iter()
                .position(|&c| c == b'\n')
                .map_or(code.len(), |n| at + n),
        );
    }
    if rest.starts_with(b"/*") {
        return Some(
            at + 2
                + rest[2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(code.len(), |n| n + 2),
        );
    }
    // Raw and byte strings: r"..", r#".."#, b"..", br#".."#.
    let prefix = rest.iter().take_while(|c| matches!(c, b'b' | b'r')).count();
    let raw = rest[..prefix].contains(&b'r');
    let hashes = rest[prefix..].iter().take_while(|&&c| c == b'#').count();
    let word_before = at > 0 && (code[at - 1].is_ascii_alphanumeric() || code[at - 1] == b'_');
    if !word_before && rest.get(prefix + hashes) == Some(&b'"') && (raw || hashes == 0) {
        return Some(closing(
            at + prefix + hashes + 1,
            if raw { hashes } else { 0 },
        ));
    }
    if rest[0] == b'\'' {
        // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
        if rest.get(1) == Some(&b'\\') {
            return Some(
                at + 2
                    + rest[2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map_or(0, |n| n + 1)
                    + 1,
            );
        }
        let ch = std::str::from_utf8(&rest[1..])
            .ok()
            .and_then(|s| s.chars().next());
        if let Some(ch) = ch {
            if rest.get(1 + ch.len_utf8()) == Some(&b'\'') {
                return Some(at + 2 + ch.len_utf8());
            }
        }
    }
    None
}

/// `code` without the items under `#[cfg(test)]`.
fn without_tests(code: &str) -> String {
    let bytes = code.as_bytes();
    let mut out = String::new();
    let mut at = 0;
    let mut kept = 0;
    while at < bytes.len() {
        if let Some(end) = skip_literal(bytes, at) {
            at = end.max(at + 1);
            continue;
        }
        if !code[at..].starts_with(TEST_ATTR) {
            at += 1;
            continue;
        }
        out.push_str(&code[kept..at]);
        // The item: to its `;`, or to the `}` that closes its first `{`; a
        // field or an arm also to its `,` (an item's commas are inside
        // `<..>`, which the lexer cannot tell from operators).
        let mut depth = 0usize;
        at += TEST_ATTR.len();
        let head = code[at..].trim_start();
        let head = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|p| head.strip_prefix(p))
            .unwrap_or(head);
        let ends_at_comma = !ITEM_KEYWORDS.iter().any(|k| head.starts_with(k));
        while at < bytes.len() {
            if let Some(end) = skip_literal(bytes, at) {
                at = end.max(at + 1);
                continue;
            }
            match bytes[at] {
                b'{' | b'(' | b'[' => depth += 1,
                // The end of the block the item is in (a field's attribute).
                b'}' | b')' | b']' if depth == 0 => break,
                b'}' if depth == 1 => {
                    at += 1;
                    break;
                }
                b'}' | b')' | b']' => depth -= 1,
                b';' if depth == 0 => {
                    at += 1;
                    break;
                }
                b',' if depth == 0 && ends_at_comma => {
                    at += 1;
                    break;
                }
                _ => {}
            }
            at += 1;
        }
        kept = at;
    }
    out.push_str(&code[kept.min(code.len())..]);
    out
}

/// The files of the modules `file` declares as `#[cfg(test)] mod name;`.
fn test_module_files(file: &Path, code: &str) -> Vec<PathBuf> {
    let dir = match file.file_name().unwrap().to_str().unwrap() {
        "mod.rs" | "lib.rs" | "main.rs" => file.parent().unwrap().to_owned(),
        _ => file.with_extension(""),
    };
    let mut files = Vec::new();
    for (at, _) in code.match_indices(TEST_ATTR) {
        let decl = code[at + TEST_ATTR.len()..].trim_start();
        // Past a visibility (`pub(super) mod tests;`).
        let decl = match decl.strip_prefix("pub") {
            Some(rest) if rest.starts_with('(') => rest.split_once(')').map_or(rest, |r| r.1),
            Some(rest) => rest,
            None => decl,
        }
        .trim_start();
        if let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.split_once(';')) {
            let name = name.0.trim();
            files.push(dir.join(format!("{name}.rs")));
            files.push(dir.join(name).join("mod.rs"));
        }
    }
    files
}

/// The Rust files under `root` and their text, less the files of test
/// modules.
fn non_test_files(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut texts: BTreeMap<PathBuf, String> = files
        .into_iter()
        .map(|f| {
            let text = fs::read_to_string(&f).unwrap();
            (f, text)
        })
        .collect();
    let test_only: BTreeSet<PathBuf> = texts
        .iter()
        .flat_map(|(f, text)| test_module_files(f, text))
        .collect();
    texts.retain(|path, _| {
        !test_only
            .iter()
            .any(|t| path.starts_with(t.with_extension("")) || path == t)
    });
    texts
}

/// Top-level module → the top-level modules its non-test code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in &non_test_files(&src) {
        let rel = path.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_owned();
        if module == "lib" {
            continue;
        }
        let code = without_tests(text);
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
    graph
}

#[test]
fn test_code_is_cut_out_and_only_test_code() {
    let code = r##"use crate::a;
#[cfg(test)]
fn helper(a: Result<(u8, u8), E>) { let s = "}"; let c = '}'; let r = r#"{"x":"}"#; crate::b::f(); }
fn after<'a>(x: &'a str) { crate::c::g(x) } // crate::d in a comment
#[cfg(test)]
use crate::e;
#[cfg(test)]
mod tests { fn t() { crate::f::h(); } }
struct S { #[cfg(test)] probe: crate::g::P }
"##;
    let kept = without_tests(code);
    assert!(
        kept.contains("crate::a") && kept.contains("crate::c::g"),
        "{kept}"
    );
    assert!(kept.contains("struct S {"), "{kept}");
    for gone in ["crate::b", "crate::e", "crate::f", "crate::g"] {
        assert!(!kept.contains(gone), "{gone} in {kept}");
    }
    let files = test_module_files(Path::new("/s/session/edge.rs"), "#[cfg(test)]\nmod tests;");
    assert!(files.contains(&PathBuf::from("/s/session/edge/tests.rs")));
    let files = test_module_files(
        Path::new("/s/d/mod.rs"),
        "#[cfg(test)]\npub(super) mod tests;",
    );
    assert!(files.contains(&PathBuf::from("/s/d/tests.rs")));
    let files = test_module_files(Path::new("/s/c/capture.rs"), "#[cfg(test)]\nmod tests;");
    assert!(files.contains(&PathBuf::from("/s/c/capture/tests.rs")));
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
        ("model", &["surfaces", "dialects", "config", "provider"]),
        ("surfaces", &["dialects", "config", "provider"]),
        ("dialects", &["surfaces", "config"]),
    ];
    for (module, never) in forbidden {
        let uses = &graph[*module];
        for other in *never {
            assert!(!uses.contains(*other), "{module} uses {other}");
        }
    }
    // The check sees the code: the dialects do use the model.
    assert!(graph["dialects"].contains("model"));
}

#[test]
fn the_formats_know_no_domain_module() {
    // Byte and text formats sit below everything: any module may use them,
    // they use none (a format that needs the model belongs to `wire/`).
    let graph = graph();
    assert!(graph["formats"].is_empty(), "{:?}", graph["formats"]);
    assert!(graph["wire"].contains("formats"));
}

/// Test modules are placed one way: where Rust looks for a module. A
/// module's tests are its child module (`tests`, or one per topic, as
/// `edge.rs`'s `batch_tests`), inline (`#[cfg(test)] mod tests { .. }`)
/// or, when long, the file of `#[cfg(test)] mod tests;` at the module's
/// own path: `foo/tests.rs` for `foo.rs` and `foo/mod.rs` alike. No
/// `#[path]` puts one elsewhere (a `foo_tests.rs` beside `foo.rs`), so a
/// reader, rust-analyzer and this file's `test_module_files` all find a
/// module's tests where its `mod` line says. Checked over the core, the
/// hosts and the mock, test code included.
#[test]
fn test_modules_are_where_rust_looks_for_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("src"), root.join("mock/src")];
    for host in fs::read_dir(root.join("hosts")).unwrap() {
        dirs.push(host.unwrap().path().join("src"));
    }
    let mut elsewhere = Vec::new();
    for dir in &dirs {
        let mut stack = vec![dir.clone()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && fs::read_to_string(&path).unwrap().contains("#[path")
                {
                    elsewhere.push(path.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
    }
    assert!(
        elsewhere.is_empty(),
        "a module placed by #[path]: {elsewhere:#?}"
    );
}

/// The most lines of non-test code a file may have, in the core, the hosts
/// and the mock.
const MAX_LINES: usize = 700;

#[test]
fn no_file_has_more_than_max_lines_of_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("src"), root.join("mock/src")];
    for host in fs::read_dir(root.join("hosts")).unwrap() {
        dirs.push(host.unwrap().path().join("src"));
    }
    let long: Vec<String> = dirs
        .iter()
        .flat_map(|dir| non_test_files(dir))
        .map(|(path, text)| (path, without_tests(&text).lines().count()))
        .filter(|(_, lines)| *lines > MAX_LINES)
        .map(|(path, lines)| format!("{}: {lines}", path.display()))
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:#?}");
}

/// The identifiers of `code` (outside its comments, strings and chars).
fn identifiers(code: &str) -> BTreeSet<String> {
    let bytes = code.as_bytes();
    let mut words = BTreeSet::new();
    let mut at = 0;
    while at < bytes.len() {
        if let Some(end) = skip_literal(bytes, at) {
            at = end.max(at + 1);
            continue;
        }
        // Bytes, not `str` slices: `at` may sit inside a non-ASCII char.
        let word: Vec<u8> = bytes[at..]
            .iter()
            .copied()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
            .collect();
        let len = word.len();
        if len > 0 {
            words.insert(String::from_utf8(word).unwrap());
        }
        at += len.max(1);
    }
    words
}

/// The client APIs' names, as identifiers would spell them.
const CLIENT_APIS: [&str; 3] = ["openai", "anthropic", "gemini"];

/// The neutral model of the operations that are not generations: the
/// embeddings operation's, and the native calls' (`Call`, `CallOp`).
const NEUTRAL_OPERATIONS: [&str; 2] = ["src/model/embed.rs", "src/model/call.rs"];

/// The operations' neutral model names no client API: no identifier of
/// its non-test code does (the shape of an answer, a call's path, is its
/// surface's own).
#[test]
fn the_operations_neutral_model_names_no_client_api() {
    for neutral in NEUTRAL_OPERATIONS {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(neutral);
        let code = without_tests(&fs::read_to_string(&file).unwrap());
        let named: Vec<String> = identifiers(&code)
            .into_iter()
            .filter(|w| {
                let w = w.to_ascii_lowercase();
                CLIENT_APIS.iter().any(|api| w.contains(api))
            })
            .collect();
        assert!(named.is_empty(), "{neutral} names client APIs: {named:?}");
    }
    // The check sees identifiers, not comments or strings.
    let words = identifiers("enum Shape { GeminiOne } // OpenAi\nfn f() { \"Anthropic\" }");
    assert!(words.contains("GeminiOne") && !words.contains("OpenAi"));
    assert!(!words.contains("Anthropic"));
}

/// The sessions write and read no wire format (a client API's requests and
/// answers are its surface's, `crate::surfaces`; a vendor's its dialect's)
/// and tell no call apart by its operation (`CallOp`): they ask the call
/// (`Call::has_body`, `Call::stored_response`...) and its surface
/// (`Surface::embeddings_part`...).
#[test]
fn the_sessions_name_no_wire_format_nor_call_operation() {
    let graph = graph();
    assert!(
        !graph["session"].contains("wire"),
        "src/session/ uses crate::wire"
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/session");
    let matching: Vec<String> = non_test_files(&src)
        .into_iter()
        .filter(|(_, text)| identifiers(&without_tests(text)).contains("CallOp"))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(
        matching.is_empty(),
        "match a call's operation: {matching:?}"
    );
}

/// The operations' names (`Call::operation_name`), as string literals.
const OPERATION_NAMES: [&str; 3] = ["\"embeddings\"", "\"count_tokens\"", "\"stored_response\""];

/// The sessions know no operation by name either: they ask the call
/// neutral questions (`Call::splits_into_parts`...) and carry its name
/// only to the metrics and the log, never comparing it.
#[test]
fn the_sessions_name_no_operation() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut named = Vec::new();
    for (path, text) in non_test_files(&root.join("src/session")) {
        let code = without_tests(&text);
        let file = path.strip_prefix(root).unwrap().display().to_string();
        for name in OPERATION_NAMES {
            if code.contains(name) {
                named.push(format!("{file}: {name}"));
            }
        }
    }
    assert!(named.is_empty(), "an operation, named: {named:#?}");
}

/// A client surface's state is its own type (`model::surface_state`): the
/// sessions and the response cache carry it and ask it neutral questions
/// (`SurfaceState::stores_answer`...), naming none of its members, neither
/// as identifiers nor as JSON member names.
const SURFACE_STATE_IDENTIFIERS: [&str; 3] = ["Echo", "json_array", "JSON_ARRAY"];
const SURFACE_STATE_MEMBERS: [&str; 3] = [
    "\"store\"",
    "\"previous_response_id\"",
    "\"gemini.json_array\"",
];
/// The cache key leaves Chat Completions' `store` out of the neutral
/// request's `extra` (a member of the request, not of a surface's state).
const NAMED_ELSEWHERE: [(&str, &str); 1] = [("src/cache/key.rs", "\"store\"")];

#[test]
fn the_sessions_and_the_cache_name_no_member_of_a_surfaces_state() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut named = Vec::new();
    for dir in ["src/session", "src/cache"] {
        for (path, text) in non_test_files(&root.join(dir)) {
            let code = without_tests(&text);
            let file = path.strip_prefix(root).unwrap().display().to_string();
            let words = identifiers(&code);
            for word in SURFACE_STATE_IDENTIFIERS {
                if words.contains(word) {
                    named.push(format!("{file}: {word}"));
                }
            }
            for member in SURFACE_STATE_MEMBERS {
                if code.contains(member) && !NAMED_ELSEWHERE.contains(&(file.as_str(), member)) {
                    named.push(format!("{file}: {member}"));
                }
            }
        }
    }
    assert!(named.is_empty(), "a surface's state, named: {named:#?}");
}

/// The neutral model has no wire shape: no type of `src/model/` is written
/// or read by serde (a client API's shape is its surface's, in
/// `crate::wire`), but a model list (`listing.rs`: the lists kept in shared
/// data are the gateway's own format) and the strict reader itself
/// (`json.rs`).
const SERDE_IN_THE_MODEL: [&str; 2] = ["src/model/listing.rs", "src/model/json.rs"];

#[test]
fn the_neutral_model_has_no_wire_shape() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shaped: Vec<String> = non_test_files(&root.join("src/model"))
        .into_iter()
        .map(|(path, text)| (path.strip_prefix(root).unwrap().display().to_string(), text))
        .filter(|(file, _)| !SERDE_IN_THE_MODEL.contains(&file.as_str()))
        .filter(|(_, text)| {
            let words = identifiers(&without_tests(text));
            words.contains("Serialize") || words.contains("Deserialize")
        })
        .map(|(file, _)| file)
        .collect();
    assert!(shaped.is_empty(), "serde shapes in the model: {shaped:?}");
}
