//! The module graph of `ledger/src` has no cycle (issue 13: "none in ledger/"). This test
//! reads every source file, draws an edge `a -> b` for each `crate::b`, `crate::{b, ..}`,
//! `super::b` and (in a `mod.rs`) child `b::` reference outside comments, and fails
//! naming the first cycle it finds. A cycle is what `parts_plan <-> parts` and
//! `apply <-> dml` were: two files that can only be read, changed and tested together.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`parts::txn`, `apply`) -> the modules it references.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The module a source file defines, from its path relative to `src`.
fn module_of(rel: &str) -> String {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    stem.replace('/', "::")
}

/// The identifiers of a path starting right after `crate::` / `super::`, one per
/// alternative of a `{..}` group (only its first segment: enough to name a module).
fn heads(rest: &str) -> Vec<Vec<String>> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut path = Vec::new();
    let mut s = rest;
    loop {
        if let Some(group) = s.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            return group[..end]
                .split(',')
                .map(|alt| {
                    let mut p = path.clone();
                    let first = ident(alt.trim());
                    if !first.is_empty() {
                        p.push(first);
                    }
                    p
                })
                .collect();
        }
        let seg = ident(s);
        if seg.is_empty() {
            break;
        }
        s = &s[seg.len()..];
        path.push(seg);
        match s.strip_prefix("::") {
            Some(more) => s = more,
            None => break,
        }
    }
    vec![path]
}

/// Draws the graph of `files` (path relative to `src` -> contents).
fn graph(files: &BTreeMap<String, String>) -> Graph {
    let modules: BTreeSet<String> = files.keys().map(|f| module_of(f)).collect();
    // The longest prefix of `path` that is a module of this crate.
    let resolve = |path: &[String]| {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].join("::"))
            .find(|m| modules.contains(m))
    };
    let mut out = Graph::new();
    for (file, text) in files {
        let me = module_of(file);
        if me == "lib" || me == "main" {
            continue;
        }
        let segs: Vec<String> = me.split("::").map(str::to_owned).collect();
        let dir_module = file.ends_with("mod.rs");
        let mut refs: Vec<Vec<String>> = Vec::new();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            for (i, _) in code.match_indices("crate::") {
                refs.extend(heads(&code[i + "crate::".len()..]));
            }
            for (i, _) in code.match_indices("super::") {
                if code[..i].ends_with("super::") {
                    continue; // counted with the first `super::` of its chain
                }
                let mut rest = &code[i..];
                let mut base = &segs[..];
                while let Some(r) = rest.strip_prefix("super::") {
                    base = &base[..base.len().saturating_sub(1)];
                    rest = r;
                }
                for h in heads(rest) {
                    refs.push(base.iter().cloned().chain(h).collect());
                }
            }
            if dir_module {
                for (i, _) in code.match_indices("::") {
                    let before = &code[..i];
                    let word: String = before
                        .chars()
                        .rev()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    let preceded = before[..before.len() - word.len()].ends_with("::");
                    if !word.is_empty() && !preceded {
                        refs.push(segs.iter().cloned().chain([word]).collect());
                    }
                }
            }
        }
        let edges = out.entry(me.clone()).or_default();
        for r in refs {
            if let Some(to) = resolve(&r) {
                if to != me && to != "lib" {
                    edges.insert(to);
                }
            }
        }
    }
    out
}

/// The first cycle of `g` (as `a -> b -> a`), if any.
fn cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        at: &str,
        state: &mut BTreeMap<String, bool>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(at.to_owned(), false);
        stack.push(at.to_owned());
        for next in g.get(at).into_iter().flatten() {
            match state.get(next) {
                Some(false) => {
                    let from = stack.iter().position(|m| m == next).unwrap_or(0);
                    let mut c = stack[from..].to_vec();
                    c.push(next.clone());
                    return Some(c);
                }
                Some(true) => {}
                None => {
                    if let Some(c) = visit(g, next, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(at.to_owned(), true);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if !state.contains_key(m) {
            if let Some(c) = visit(g, m, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn read_tree(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
    let entries = std::fs::read_dir(dir).expect("reading ledger/src");
    for e in entries {
        let path = e.expect("a directory entry").path();
        if path.is_dir() {
            read_tree(&path, root, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            let rel = path.strip_prefix(root).expect("under src");
            let rel = rel.to_string_lossy().replace('\\', "/");
            out.insert(rel, std::fs::read_to_string(&path).expect("a source file"));
        }
    }
}

fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(f, t)| ((*f).to_owned(), (*t).to_owned()))
        .collect()
}

#[test]
fn ledger_modules_import_each_other_without_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = BTreeMap::new();
    read_tree(&root, &root, &mut sources);
    let g = graph(&sources);
    assert!(
        g.contains_key("parts::txn") && g.contains_key("apply"),
        "{g:?}"
    );
    if let Some(c) = cycle(&g) {
        panic!(
            "ledger/src modules import each other in a circle: {}",
            c.join(" -> ")
        );
    }
}

#[test]
fn the_checker_finds_a_deliberate_cycle() {
    // apply <-> dml as it was: Limits in apply, Dml in dml.
    let bad = files(&[
        ("apply.rs", "use crate::dml::Dml;\n"),
        ("dml.rs", "use crate::apply::Limits; // bounds\n"),
        ("plan.rs", "// use crate::apply::Plan; only a comment\n"),
    ]);
    let c = cycle(&graph(&bad)).expect("a cycle");
    assert_eq!(c, ["apply", "dml", "apply"]);
    // Groups, super:: and a directory module's children resolve to modules.
    let ok = files(&[
        (
            "parts/mod.rs",
            "use crate::{apply, plan::Step};\nuse txn::Ended;\n",
        ),
        (
            "parts/txn.rs",
            "use super::super::apply::X;\nuse crate::plan;\n",
        ),
        ("apply.rs", "pub use crate::plan::{Plan, Step};\n"),
        ("plan.rs", "use kernel::Error;\n"),
    ]);
    let g = graph(&ok);
    assert_eq!(cycle(&g), None);
    let edges = |m: &str| g[m].iter().cloned().collect::<Vec<_>>();
    assert_eq!(edges("parts"), ["apply", "parts::txn", "plan"]);
    assert_eq!(edges("parts::txn"), ["apply", "plan"]);
    // A child importing its parent back closes a circle too.
    let back = files(&[
        ("parts/mod.rs", "mod txn;\nuse txn::Ended;\n"),
        ("parts/txn.rs", "use super::Mode;\n"),
    ]);
    assert_eq!(
        cycle(&graph(&back)),
        Some(vec!["parts".into(), "parts::txn".into(), "parts".into()])
    );
}
