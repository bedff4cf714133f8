//! The layer rule of ARCHITECTURE.md, checked on the source text (unit tests only, so it
//! holds in CI and not only on the day it was drawn).
//!
//! Every `crate::a::b` path (and `super::x`) in a file is an edge from the file's module
//! to the longest known module the path names. Two rules:
//! * Layers: at the crate root each top-level module has a layer ([`LAYERS`]); an edge
//!   never goes to a higher layer, and a new top-level module must be given one.
//! * No circles: in every folder, the edges between its direct children (a child's whole
//!   subtree counts as the child) form no cycle. Edges between a module and its own
//!   ancestors or descendants are not sibling edges and are not checked.
//!
//! The same circle check runs over `ledger/src`.
#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Layer of each top-level module of bootstrap (lower imports nothing higher).
const LAYERS: [(&str, u8); 10] = [
    ("io", 0),
    ("store", 0),
    ("seams", 0),
    ("install", 1),
    ("table", 1),
    ("supervisor", 2),
    ("verify", 2),
    ("present", 3),
    ("cli", 4),
    ("demo", 4),
];

/// Module path of a file relative to `src/`: `a/mod.rs` -> `a`, `a/b.rs` -> `a::b`,
/// `lib.rs`/`main.rs` -> `` (the root).
fn module_of(rel: &str) -> String {
    let rel = rel.trim_end_matches(".rs");
    let parts: Vec<&str> = rel
        .split('/')
        .filter(|p| !matches!(*p, "mod" | "lib" | "main"))
        .collect();
    parts.join("::")
}

/// Lower-case path segments starting at `s` (stops at a type, `{`, `*` or anything else).
fn segments(s: &str) -> (Vec<String>, &str) {
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        let n = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        if n == 0 {
            break;
        }
        out.push(rest[..n].to_string());
        rest = &rest[n..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    (out, rest)
}

/// The items of a `{ ... }` group at the start of `s` (top-level commas only).
fn group_items(s: &str) -> Vec<&str> {
    let Some(body) = s.strip_prefix('{') else {
        return Vec::new();
    };
    let (mut depth, mut start, mut items) = (0i32, 0usize, Vec::new());
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(body[start..i].trim());
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(body[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

/// Every module path a file's code refers to through `crate::` or `super::`.
fn referenced(module: &str, text: &str) -> Vec<Vec<String>> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let parent: Vec<String> = module
        .split("::")
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let mut out = Vec::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
        let mut base = base;
        if prefix == "super::" {
            // A file's `super` is its parent module.
            base.pop();
        }
        for (i, _) in code.match_indices(prefix) {
            let before = code[..i].chars().last();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let (segs, rest) = segments(&code[i + prefix.len()..]);
            let mut head = base.clone();
            head.extend(segs);
            let items = group_items(rest);
            for item in &items {
                let (more, _) = segments(item);
                let mut p = head.clone();
                p.extend(more.into_iter().filter(|s| s != "self"));
                out.push(p);
            }
            if items.is_empty() {
                out.push(head);
            }
        }
    }
    out
}

/// Every `.rs` file under `root/dir`, with its path relative to `root` (`/`-separated)
/// and its text, sorted by path (also the walk of `crate::cli::words`).
pub(crate) fn rust_files(root: &Path, dir: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.join(dir)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read source dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(root).expect("under the root");
                let rel = rel.to_string_lossy().replace('\\', "/");
                out.push((rel, std::fs::read_to_string(&p).expect("read source")));
            }
        }
    }
    out.sort();
    out
}

/// Modules of a source tree, keyed by module path, with their text.
fn read_tree(src: &Path) -> BTreeMap<String, String> {
    rust_files(src, "")
        .into_iter()
        // This checker's own fixtures are text, not imports.
        .filter(|(rel, _)| rel != "layers.rs")
        .map(|(rel, text)| (module_of(&rel), text))
        .collect()
}

/// Module-level edges: (from, to), `to` the longest known module a path names.
fn edges(tree: &BTreeMap<String, String>) -> BTreeSet<(String, String)> {
    let known: BTreeSet<&String> = tree.keys().collect();
    let mut out = BTreeSet::new();
    for (m, text) in tree {
        for path in referenced(m, text) {
            let to = (0..=path.len())
                .rev()
                .map(|n| path[..n].join("::"))
                .find(|p| known.contains(p))
                .unwrap_or_default();
            if !to.is_empty() && &to != m {
                out.insert((m.clone(), to));
            }
        }
    }
    out
}

fn split(m: &str) -> Vec<&str> {
    m.split("::").filter(|s| !s.is_empty()).collect()
}

/// The sibling edge an edge makes: (folder, child a, child b), or None when one end is an
/// ancestor of the other.
fn sibling(from: &str, to: &str) -> Option<(String, String, String)> {
    let (a, b) = (split(from), split(to));
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == a.len() || common == b.len() {
        return None;
    }
    Some((
        a[..common].join("::"),
        a[common].to_string(),
        b[common].to_string(),
    ))
}

/// A cycle in a directed graph, if any (depth-first search).
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = path.iter().position(|p| p == m).unwrap_or(0);
                    let mut c = path[at..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, g, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// Every violation of the two rules (with `layers`, the root's layer rule too).
fn violations(tree: &BTreeMap<String, String>, layers: Option<&[(&str, u8)]>) -> Vec<String> {
    let mut out = Vec::new();
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let layer = |m: &str| layers.and_then(|l| l.iter().find(|(n, _)| *n == m).map(|x| x.1));
    for (from, to) in edges(tree) {
        let Some((folder, a, b)) = sibling(&from, &to) else {
            continue;
        };
        if folder.is_empty() && layers.is_some() {
            match (layer(&a), layer(&b)) {
                (Some(la), Some(lb)) if la < lb => {
                    out.push(format!("upward import: {from} (L{la}) uses {to} (L{lb})"))
                }
                (None, _) => out.push(format!("top-level module `{a}` has no layer")),
                (_, None) => out.push(format!("top-level module `{b}` has no layer")),
                _ => {}
            }
        }
        let g = graphs.entry(folder).or_default();
        g.entry(a).or_default().insert(b);
    }
    for (folder, g) in &graphs {
        if let Some(c) = find_cycle(g) {
            let at = if folder.is_empty() {
                "the crate root"
            } else {
                folder
            };
            out.push(format!("import circle in {at}: {}", c.join(" -> ")));
        }
    }
    out
}

fn tree_of(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|(p, t)| (module_of(p), (*t).to_string()))
        .collect()
}

#[test]
fn bootstrap_keeps_its_layers_and_has_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let v = violations(&read_tree(&src), Some(&LAYERS));
    assert!(v.is_empty(), "bootstrap/src:\n{}", v.join("\n"));
}

#[test]
fn ledger_has_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ledger/src");
    let v = violations(&read_tree(&src), None);
    assert!(v.is_empty(), "ledger/src:\n{}", v.join("\n"));
}

#[test]
fn the_checker_finds_an_upward_import_and_a_circle() {
    let bad = tree_of(&[
        ("lib.rs", "pub mod table; pub mod present; pub mod io;"),
        ("table/mod.rs", "pub mod a; pub mod b;"),
        (
            "table/a.rs",
            "use crate::table::b::X;\nuse crate::io::connect;",
        ),
        ("table/b.rs", "use crate::present::status::{self, Y};"),
        (
            "table/c.rs",
            "use super::a; // crate::present in a comment is no edge",
        ),
        ("present/mod.rs", "pub mod status;"),
        ("present/status.rs", "use crate::table::{a::Z, b};"),
        ("io/mod.rs", ""),
    ]);
    let v = violations(&bad, Some(&LAYERS));
    assert!(
        v.contains(&"upward import: table::b (L1) uses present::status (L3)".to_string()),
        "{v:?}"
    );
    assert!(
        v.iter()
            .any(|s| s.starts_with("import circle in the crate root")),
        "{v:?}"
    );
    assert_eq!(v.len(), 2, "{v:?}");
    let ok = tree_of(&[
        ("table/a.rs", "use crate::table::b::X;"),
        ("table/b.rs", "use crate::io::x;"),
        ("table/c.rs", "use super::a;"),
        ("io/mod.rs", ""),
    ]);
    assert!(violations(&ok, Some(&LAYERS)).is_empty());
    let circle = tree_of(&[("a.rs", "use crate::b::X;"), ("b.rs", "use crate::a;")]);
    let v = violations(&circle, None);
    assert_eq!(v, ["import circle in the crate root: a -> b -> a"]);
}

#[test]
fn unknown_top_level_modules_must_get_a_layer() {
    let t = tree_of(&[("newthing.rs", "use crate::io::x;"), ("io/mod.rs", "")]);
    let v = violations(&t, Some(&LAYERS));
    assert_eq!(v, ["top-level module `newthing` has no layer"]);
}
