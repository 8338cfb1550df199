//! The book (docs/src/) checked in `cargo test`, which every change runs:
//! its configuration examples parsed by the configuration parser itself
//! (`Config::parse`, what `on_configure` runs), so a page cannot show a
//! configuration the gateway refuses; every code block marked for what it
//! is; every page in SUMMARY.md; every link, anchor and repository path
//! resolved; the performance page quoting only numbers BENCHMARKS.md holds;
//! the README short. What needs Envoy or a running gateway (Envoy YAML
//! validated, examples run) is `tests/test_docs.py`'s. A code block's info
//! string says what it is (docs/src/development/docs.md):
//!
//! - ```` ```json,config ````: a whole filter configuration;
//! - ```` ```json,config=<path> ```` (or `<path>@<envoy yaml>`): a fragment,
//!   the members of the object at `<path>` (`.` the top level, else a dotted
//!   path such as `providers`), written as members (`"name": {...}, ...`) or
//!   as one object; merged into a base configuration (objects member by
//!   member, anything else replaced), the filter configuration of
//!   `envoy/gateway.yaml` or of the shipped Envoy YAML named after `@`, and
//!   the result is parsed.
//!
//! - ```` ```json,wire ````: parsed as JSON here; the other kinds in
//!   `tests/test_docs.py`.
//!
//! Every repository path a page (or the README) names in backticks,
//! `envoy/gateway.yaml`, `scripts/gateway.py`, exists: a change that moves
//! or removes a file fails `cargo test` here until the book follows it.

// Test code: unwrap and indexing are fine here.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::fs;
use std::path::{Path, PathBuf};

use llm_gateway_core::config::Config;
use serde_json::{Map, Value};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The service-account key a `credentials: "service_account"` provider's
/// `api_key_env` reads (a key pair made for the tests, granting nothing).
const TEST_SERVICE_ACCOUNT: &str = "tests/fixtures/TEST-ONLY-vertex-service-account.json";
/// What every other `api_key_env` reads.
const DUMMY_KEY: &str = "docs-test-key";

/// A fenced code block of a page.
struct Block {
    file: PathBuf,
    line: usize,
    info: String,
    text: String,
}

fn pages(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            pages(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// The fenced blocks of a page, indented ones (in list items) included.
fn blocks(file: &Path) -> Vec<Block> {
    let text = fs::read_to_string(file).unwrap();
    let mut found = Vec::new();
    let mut open: Option<(usize, usize, String, Vec<&str>)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((i + 1, indent, info.trim().to_string(), Vec::new()));
                }
            }
            Some((start, fence_indent, info, lines)) => {
                if trimmed == "```" {
                    found.push(Block {
                        file: file.to_path_buf(),
                        line: *start,
                        info: std::mem::take(info),
                        text: lines.join("\n"),
                    });
                    open = None;
                } else {
                    let strip = indent.min(*fence_indent);
                    lines.push(&line[strip..]);
                }
            }
        }
    }
    assert!(
        open.is_none(),
        "{}: a code block is never closed",
        file.display()
    );
    found
}

/// The filter configuration a shipped Envoy YAML carries (the block scalar
/// after `value: &llm_config |`).
fn base_config(envoy_yaml: &str) -> Result<Value, String> {
    let yaml = fs::read_to_string(Path::new(ROOT).join(envoy_yaml))
        .map_err(|e| format!("{envoy_yaml}: {e}"))?;
    let mut lines = yaml
        .lines()
        .skip_while(|l| !l.contains("value: &llm_config |"));
    let anchor = lines
        .next()
        .ok_or_else(|| format!("{envoy_yaml} has no `value: &llm_config |`"))?;
    let outer = anchor.len() - anchor.trim_start().len();
    let json: Vec<&str> = lines
        .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > outer)
        .collect();
    serde_json::from_str(&json.join("\n")).map_err(|e| format!("{envoy_yaml}: {e}"))
}

/// `fragment` merged into `base`: objects member by member, anything else replaced.
fn merge(base: &mut Value, fragment: Value) {
    match (base, fragment) {
        (Value::Object(base), Value::Object(fragment)) => {
            for (key, value) in fragment {
                match base.get_mut(&key) {
                    Some(old) => merge(old, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, fragment) => *base = fragment,
    }
}

/// A fragment's members: `"a": {...}, "b": ...` or `{...}`.
fn fragment_members(block: &Block) -> Result<Map<String, Value>, String> {
    let text = block.text.trim();
    let text = if text.starts_with('{') {
        text.to_string()
    } else {
        format!("{{{text}}}")
    };
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("not an object's members".into()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// The fragment merged at `path` of the base configuration.
fn with_fragment(
    path: &str,
    envoy_yaml: &str,
    members: Map<String, Value>,
) -> Result<Value, String> {
    let mut config = base_config(envoy_yaml)?;
    let mut at = &mut config;
    for key in path.split('.').filter(|k| !k.is_empty()) {
        at = at
            .as_object_mut()
            .ok_or_else(|| format!("`{key}` of `{path}` is inside no object"))?
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !at.is_object() {
        return Err(format!("`{path}` of the base configuration is no object"));
    }
    merge(at, Value::Object(members));
    Ok(config)
}

/// The environment the parser reads `api_key_env` from: the test
/// service-account key for the providers that take one, else a dummy key.
fn environment(config: &Value) -> impl Fn(&str) -> Option<String> {
    let service_account: Vec<String> = config["providers"]
        .as_object()
        .into_iter()
        .flat_map(|providers| providers.values())
        .filter(|p| p["credentials"] == "service_account")
        .filter_map(|p| p["api_key_env"].as_str().map(str::to_string))
        .collect();
    let key = fs::read_to_string(Path::new(ROOT).join(TEST_SERVICE_ACCOUNT)).unwrap();
    move |name| {
        Some(if service_account.iter().any(|n| n == name) {
            key.clone()
        } else {
            DUMMY_KEY.to_string()
        })
    }
}

fn check(block: &Block) -> Result<(), String> {
    let config = match block.info.split_once('=') {
        None => serde_json::from_str(&block.text).map_err(|e| format!("not JSON: {e}"))?,
        Some((_, at)) => {
            let (path, envoy_yaml) = at.split_once('@').unwrap_or((at, "envoy/gateway.yaml"));
            let path = if path == "." { "" } else { path };
            with_fragment(path, envoy_yaml, fragment_members(block)?)?
        }
    };
    let bytes = serde_json::to_vec(&config).unwrap();
    Config::parse(&bytes, environment(&config)).map(drop)
}

fn config_blocks() -> Vec<Block> {
    let mut files = Vec::new();
    pages(&Path::new(ROOT).join("docs/src"), &mut files);
    files
        .iter()
        .flat_map(|f| blocks(f))
        .filter(|b| b.info == "json,config" || b.info.starts_with("json,config="))
        .collect()
}

#[test]
fn every_configuration_example_in_the_book_is_accepted_by_the_parser() {
    let blocks = config_blocks();
    // The book has configuration examples on many pages: finding few means
    // the convention changed under this test, not that all is well.
    assert!(
        blocks.len() >= 20,
        "only {} configuration examples found",
        blocks.len()
    );
    let refused: Vec<String> = blocks
        .iter()
        .filter_map(|b| {
            check(b).err().map(|e| {
                let file = b.file.strip_prefix(ROOT).unwrap_or(&b.file);
                format!("{}:{} ({}): {e}", file.display(), b.line, b.info)
            })
        })
        .collect();
    assert!(
        refused.is_empty(),
        "refused examples:\n{}",
        refused.join("\n")
    );
}

#[test]
fn a_refused_fragment_fails_the_check() {
    // The check can fail: a provider with a dialect the parser does not know.
    let block = Block {
        file: PathBuf::from("example.md"),
        line: 1,
        info: "json,config=providers".into(),
        text: r#""p": {"dialect": "no-such-dialect"}"#.into(),
    };
    let err = check(&block).unwrap_err();
    assert!(err.contains("no-such-dialect"), "{err}");
    // A fragment merges into the base configuration; `@` names another base.
    let ok = Block {
        info: "json,config=.".into(),
        text: r#""default_model_group": "mock-anthropic""#.into(),
        ..block
    };
    check(&ok).unwrap();
    let elsewhere = Block {
        info: "json,config=model_groups@envoy/failover.yaml".into(),
        text: r#""g": {"candidates": [{"cluster": "c", "provider": "openai"}]}"#.into(),
        ..ok
    };
    check(&elsewhere).unwrap();
    let unknown_provider = Block {
        info: "json,config=model_groups".into(),
        ..elsewhere
    };
    assert!(check(&unknown_provider).is_err());
}

/// Where the repository's own paths start (a path under `target/` or
/// `dist/` is a build output, not checked).
const REPO_DIRS: &[&str] = &[
    "src/",
    "hosts/",
    "mock/",
    "tests/",
    "scripts/",
    "envoy/",
    "benches/",
    "ratelimit/",
    "docs/",
    ".ci/",
];
const REPO_FILES: &[&str] = &[
    "Makefile",
    "BENCHMARKS.md",
    "Cargo.toml",
    "rust-toolchain.toml",
    "README.md",
];

/// The repository paths a page names in backticks: tokens of a code span
/// that start with a top-level directory (placeholders and globs apart).
fn repo_paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 0 || span.contains('\n') {
            continue;
        }
        for token in span.split_whitespace() {
            let token = token.trim_end_matches([',', '.', ';', ':', ')']);
            let placeholder =
                token.contains(['*', '<', '>', '{', '}', '…', '|']) || token.contains("...");
            if !placeholder
                && (REPO_DIRS.iter().any(|d| token.starts_with(d)) || REPO_FILES.contains(&token))
            {
                found.push(token.to_string());
            }
        }
    }
    found
}

#[test]
fn every_repository_path_the_book_names_exists() {
    let mut files = Vec::new();
    pages(&Path::new(ROOT).join("docs/src"), &mut files);
    files.push(Path::new(ROOT).join("README.md"));
    let named: usize = files
        .iter()
        .map(|f| repo_paths(&fs::read_to_string(f).unwrap()).len())
        .sum();
    assert!(
        named >= 100,
        "only {named} repository paths named: the check checks little"
    );
    let mut missing: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let text = fs::read_to_string(file).unwrap();
            let page = file
                .strip_prefix(ROOT)
                .unwrap_or(file)
                .display()
                .to_string();
            repo_paths(&text)
                .into_iter()
                .filter(|path| !Path::new(ROOT).join(path).exists())
                .map(move |path| format!("{page}: {path}"))
        })
        .collect();
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "the book names paths that do not exist (moved? update the page):\n{}",
        missing.join("\n")
    );
    // The check can fail.
    assert_eq!(
        repo_paths("see `src/no_such_file.rs`, `target/x`"),
        ["src/no_such_file.rs"]
    );
}

// ---- The book's structure ---------------------------------------------------

/// What a code block's info string may say (docs/src/development/docs.md).
const KINDS: &[&str] = &[
    "json,config",
    "json,wire",
    "yaml",
    "yaml,envoy",
    "yaml,envoy=pieces",
    "sh,run",
    "python,run",
    "sh",
    "python",
    "text",
    "toml",
    "rust",
    "js",
    "console",
];

fn all_pages() -> Vec<PathBuf> {
    let mut files = Vec::new();
    pages(&Path::new(ROOT).join("docs/src"), &mut files);
    files
}

fn shown(file: &Path) -> String {
    file.strip_prefix(ROOT)
        .unwrap_or(file)
        .display()
        .to_string()
}

#[test]
fn every_code_block_says_what_it_is() {
    let blocks: Vec<Block> = all_pages().iter().flat_map(|f| blocks(f)).collect();
    let unmarked: Vec<String> = blocks
        .iter()
        .filter(|b| !KINDS.contains(&b.info.as_str()) && !b.info.starts_with("json,config="))
        .map(|b| format!("{}:{}: ```{}", shown(&b.file), b.line, b.info))
        .collect();
    assert!(
        unmarked.is_empty(),
        "mark each code block as docs/src/development/docs.md says \
         (json,config / json,config=<path> / json,wire / yaml,envoy=pieces / sh,run / text ...):\n{}",
        unmarked.join("\n")
    );
    let wire: Vec<&Block> = blocks.iter().filter(|b| b.info == "json,wire").collect();
    assert!(wire.len() >= 3, "only {} json,wire examples", wire.len());
    for block in wire {
        let whole = serde_json::from_str::<Value>(&block.text).is_ok();
        let lines = || {
            block
                .text
                .lines()
                .all(|l| serde_json::from_str::<Value>(l).is_ok())
        };
        assert!(
            whole || lines(),
            "{}:{}: not JSON",
            shown(&block.file),
            block.line
        );
    }
}

/// A page's text without its fenced blocks and code spans.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, s)| s)
        .collect()
}

/// The targets of a page's Markdown links, `[text](target)`.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    prose
        .match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &prose[i + 2..];
            let end = rest.find([')', ' ', '\n'])?;
            (rest.as_bytes().get(end) == Some(&b')')).then(|| rest[..end].to_string())
        })
        .collect()
}

/// `{{#include path}}` and `{{#include path:anchor}}` put in, as mdBook does.
fn expanded(file: &Path) -> String {
    let text = fs::read_to_string(file).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let Some(spec) = line
            .trim()
            .strip_prefix("{{#include ")
            .and_then(|l| l.strip_suffix("}}"))
        else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let (path, anchor) = spec.split_once(':').unwrap_or((spec, ""));
        let included = fs::read_to_string(file.parent().unwrap().join(path))
            .unwrap_or_else(|e| panic!("{}: {{{{#include {path}}}}}: {e}", shown(file)));
        if anchor.is_empty() {
            out.push_str(&included);
            continue;
        }
        let start = format!("ANCHOR: {anchor} ");
        let end = format!("ANCHOR_END: {anchor} ");
        let inside = included
            .lines()
            .skip_while(|l| !l.contains(&start))
            .skip(1)
            .take_while(|l| !l.contains(&end));
        for l in inside {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// The id mdBook gives a heading: lowercase, markup and punctuation dropped,
/// spaces as dashes.
fn heading_id(title: &str) -> String {
    let mut text = String::new();
    let mut rest = title;
    // A link's text stays, its target goes.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](").zip(after.find(')')) {
            Some((mid, close)) if mid < close => {
                text.push_str(&after[..mid]);
                rest = &after[close + 1..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.to_lowercase()
        .replace(' ', "-")
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

fn anchors(file: &Path) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut fenced = false;
    for line in expanded(file).lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let title = line.trim_start_matches('#');
        if fenced || title.len() == line.len() || !title.starts_with(' ') {
            continue;
        }
        // A heading's second use of an id gets `-1`, the third `-2`...
        let base = heading_id(title.trim());
        let n = seen.entry(base.clone()).or_insert(0);
        ids.push(if *n == 0 { base } else { format!("{base}-{n}") });
        *n += 1;
    }
    ids
}

#[test]
fn every_link_resolves() {
    let mut files = all_pages();
    files.push(Path::new(ROOT).join("README.md"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        for target in links(&fs::read_to_string(file).unwrap()) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue; // a web page: not reachable from here
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{}: {target} (no such file)", shown(file)));
            } else if !anchor.is_empty() && !anchors(&resolved).iter().any(|id| id == anchor) {
                broken.push(format!("{}: {target} (no heading '{anchor}')", shown(file)));
            }
        }
    }
    assert!(checked >= 100, "only {checked} links checked");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert_eq!(
        heading_id("Where the gateway's cost goes (mock-anthropic)"),
        "where-the-gateways-cost-goes-mock-anthropic"
    );
    assert_eq!(heading_id("What `make run` serves"), "what-make-run-serves");
}

#[test]
fn every_page_is_in_the_summary_and_the_readme_points_into_the_book() {
    let docs = Path::new(ROOT).join("docs/src");
    let summary = fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let listed: Vec<PathBuf> = links(&summary).iter().map(|l| docs.join(l)).collect();
    let missing: Vec<String> = all_pages()
        .into_iter()
        .filter(|p| !p.ends_with("SUMMARY.md") && !listed.contains(p))
        .map(|p| shown(&p))
        .collect();
    assert!(missing.is_empty(), "pages not in SUMMARY.md: {missing:?}");
    let readme = fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines: move the detail into a page of the book"
    );
    let into_book = links(&readme)
        .iter()
        .filter(|l| listed.contains(&Path::new(ROOT).join(l)))
        .count();
    assert!(
        into_book >= 10,
        "the README links {into_book} pages of the book"
    );
}

// ---- Measured numbers come from BENCHMARKS.md -------------------------------

/// What a measured number is followed by (`78 µs`, `55%`, `160 MB`, `1.83x`).
const UNITS: &[&str] = &["µs", "ms", "%", "MB", "x", "req/s"];
/// The same with sizes in KB, which the performance page's method also
/// uses for its request bodies (1 KB and 100 KB: parameters, not results).
const UNITS_AND_KB: &[&str] = &["µs", "ms", "%", "MB", "KB", "x", "req/s"];

/// The measured-looking numbers of a text: a decimal (`0.81`), or a number
/// followed by one of `units`.
fn measured_numbers(text: &str, units: &[&str]) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_alphanumeric());
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
            i += 1;
        }
        let number: String = chars[start..i]
            .iter()
            .collect::<String>()
            .trim_end_matches('.')
            .to_string();
        let after: String = chars[i..].iter().take(6).collect();
        let after = after.trim_start();
        let decimal = number.contains('.');
        let unit = units.iter().any(|u| {
            after.starts_with(u) && !after[u.len()..].starts_with(|c: char| c.is_alphanumeric())
        });
        if decimal || unit {
            found.push(number);
        }
    }
    found
}

/// Whether `text` holds `number` as a number of its own, or that number
/// with more digits a page rounded off: `78` in `(78)` or `78.4`, `3.4` in
/// `3.42`; not `78` in `1780` or `3.78`.
fn holds(text: &str, number: &str) -> bool {
    text.match_indices(number).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + number.len()..].chars().next();
        let longer_integer = !number.contains('.') && after.is_some_and(|c| c.is_ascii_digit());
        !before.is_some_and(|c| c.is_ascii_digit() || c == '.') && !longer_integer
    })
}

#[test]
fn the_performance_page_quotes_only_numbers_benchmarks_md_holds() {
    let page = fs::read_to_string(Path::new(ROOT).join("docs/src/performance/README.md")).unwrap();
    assert!(
        page.contains("{{#include ../../../BENCHMARKS.md:"),
        "the page includes BENCHMARKS.md's tables"
    );
    let own: String = page
        .lines()
        .filter(|l| !l.trim_start().starts_with("{{#include"))
        .collect::<Vec<_>>()
        .join("\n");
    let held = fs::read_to_string(Path::new(ROOT).join("BENCHMARKS.md")).unwrap();
    let stray: Vec<String> = measured_numbers(&prose(&own), UNITS)
        .into_iter()
        .filter(|n| !holds(&held, n))
        .collect();
    assert!(
        stray.is_empty(),
        "numbers typed on the performance page that BENCHMARKS.md does not hold: {stray:?}"
    );
    assert_eq!(
        measured_numbers("78 µs, 0.81, c=16, 55%, 3 rounds", UNITS),
        ["78", "0.81", "55"]
    );
}

/// Earlier measurements (docs/src/performance/history.md) quote runs as
/// they were committed: each number there is in some committed version of
/// BENCHMARKS.md (`git log -p`), so none is typed from memory. Without the
/// repository's history (no git, a shallow clone) there is nothing to
/// check against, and the test says so.
/// How Earlier measurements names the commit of a run whose tables were
/// not committed.
const QUOTED_FROM: &str = "quoted from the README of `";

#[test]
fn earlier_measurements_quote_committed_runs() {
    let history = std::process::Command::new("git")
        .args(["log", "-p", "--format=", "--", "BENCHMARKS.md"])
        .current_dir(ROOT)
        .output();
    let shallow = Path::new(ROOT).join(".git/shallow").exists();
    // Every line any version held was added once: the `+` lines of the
    // patches (not the hunk headers, whose line numbers are no measurements).
    let added = |patch: &str| -> String {
        patch
            .lines()
            .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let Ok(history) = history.map(|o| added(&String::from_utf8_lossy(&o.stdout))) else {
        eprintln!("no git: the earlier measurements are not checked");
        return;
    };
    if shallow || history.is_empty() {
        eprintln!("no history of BENCHMARKS.md here: the earlier measurements are not checked");
        return;
    }
    let page = fs::read_to_string(Path::new(ROOT).join("docs/src/performance/history.md")).unwrap();
    let mut checked = 0;
    let mut stray = Vec::new();
    for paragraph in page.split("\n\n") {
        // A run whose tables were never committed names the commit its
        // numbers were first written in: they are checked against that.
        let source = match paragraph.split_once(QUOTED_FROM) {
            Some((_, rest)) => {
                let commit = rest.split('`').next().unwrap_or_default();
                let shown = std::process::Command::new("git")
                    .args(["show", "--format=", commit])
                    .current_dir(ROOT)
                    .output()
                    .unwrap();
                assert!(shown.status.success(), "no commit {commit} here");
                added(&String::from_utf8_lossy(&shown.stdout))
            }
            None => history.clone(),
        };
        for number in measured_numbers(&prose(paragraph), UNITS_AND_KB) {
            checked += 1;
            if !holds(&source, &number) {
                stray.push(number);
            }
        }
    }
    assert!(checked >= 50, "only {checked} numbers found");
    assert!(
        stray.is_empty(),
        "numbers on Earlier measurements that no committed BENCHMARKS.md holds: {stray:?}"
    );
}
