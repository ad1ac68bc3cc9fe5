//! The two layers stay two layers (DESIGN.md, "The two layers"): the
//! machinery imports nothing from the store or the KV API, and the store and
//! the KV API name no machinery internal. In ordinary builds the compiler
//! already refuses the internals (their modules are private to
//! `machinery`); this catches the few items that are crate-visible for the
//! `--cfg loom` models and any `use` of a private path that a future change
//! might make visible.

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn files(sub: &str) -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(sub);
    let mut v = Vec::new();
    rust_files(&dir, &mut v);
    assert!(!v.is_empty(), "no sources under {}", dir.display());
    v.into_iter()
        .map(|p| {
            // Code only: doc links to the KV API in comments are fine.
            let s = fs::read_to_string(&p).unwrap();
            let code: Vec<&str> = s
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect();
            (p, code.join("\n"))
        })
        .collect()
}

#[test]
fn the_machinery_imports_nothing_from_the_store_or_the_kv_api() {
    for (p, s) in files("machinery") {
        for bad in ["crate::store", "crate::kv", "crate::Engine", "crate::Txn"] {
            assert!(!s.contains(bad), "{} names {bad}", p.display());
        }
    }
}

#[test]
fn the_store_and_the_kv_api_use_only_the_public_machinery_api() {
    const INTERNAL: &[&str] = &[
        "machinery::raw",
        "machinery::protocol",
        "machinery::snapshot",
        "machinery::version",
        "machinery::lockfree",
        "machinery::baseline",
        "machinery::manager",
        "machinery::txn",
        "machinery::loom_support",
        "MachineryImpl",
        "PreparedTable",
        ".machinery",
    ];
    let mut n = 0;
    for sub in ["store", "kv"] {
        for (p, s) in files(sub) {
            for bad in INTERNAL {
                assert!(
                    !s.contains(bad),
                    "{} names machinery internal {bad}",
                    p.display()
                );
            }
            n += s.matches("crate::machinery::").count();
        }
    }
    assert!(n > 0, "the store and the KV API should use the machinery");
}

/// The KV API's names at the crate root: the `kv` module itself, what the
/// root re-exports from it, and `with_machinery` (which re-exports its
/// generic forms).
const KV_API: &[&str] = &[
    "kv",
    "Engine",
    "Session",
    "OwnedSession",
    "Txn",
    "CommitError",
    "Cursor",
    "KeyRange",
    "RollbackReport",
    "Savepoint",
    "with_machinery",
];

/// The first segment of every path `code` names from the crate root:
/// `crate::a::b` gives `a`, `crate::{a, b::c}` gives `a` and `b`.
fn crate_roots(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.trim_start().strip_prefix('{') else {
            out.push(ident(rest));
            continue;
        };
        // The group's top-level items, up to its closing brace.
        let (mut depth, mut item) = (0, String::new());
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(ident(&item));
                    item.clear();
                    continue;
                }
                _ => {}
            }
            if depth == 0 || c != '{' {
                item.push(c);
            }
        }
        out.push(ident(&item));
    }
    out
}

#[test]
fn durability_imports_nothing_from_the_kv_api() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut named = 0;
    for (p, s) in files("durability") {
        // `super::` as many times as reaches the crate root from this file
        // is `crate::`.
        let rel = p.strip_prefix(&root).unwrap();
        let mut depth = rel.components().count();
        if rel.file_name().is_some_and(|n| n == "mod.rs") {
            depth -= 1;
        }
        let code = s.replace(&"super::".repeat(depth), "crate::");
        for name in crate_roots(&code) {
            assert!(
                !KV_API.contains(&name.as_str()),
                "{} names the KV API's {name}: durability sits below it",
                p.display()
            );
            named += 1;
        }
    }
    assert!(named > 0, "durability should name some crate paths");
}
