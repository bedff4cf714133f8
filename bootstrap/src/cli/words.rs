//! Plain words where an operator reads (issue 39): no design letter of DESIGN §2 (J, T,
//! L, D, B, F, K) stands alone in operator-facing text. Operators read "the journal",
//! "the target ledger", "the change log", "the capture position", "the start position
//! (B)", "the final fence (F)", "the cancel point (K)"; the letter may follow the words in
//! parentheses. Checked on the source text and on the program's own help (unit tests
//! only, like `crate::layers`), over:
//! * every string literal outside test code in `bootstrap/src`, `kernel/src` and
//!   `ledger/src` (errors, pause reasons, log messages, status text, metrics help: all of
//!   it reaches an operator sooner or later, and a literal no operator reads costs only a
//!   few words). Test code is an item under `#[cfg(test)]`, a module file declared under
//!   it (with its folder) and a file that starts with `#![cfg(test)]`;
//! * the rendered `--help` of `backfill` and of every subcommand (the clap doc comments);
//! * `runbooks/*.md`, `docs/*.md` and `README.md`, outside code blocks and code spans.
//!
//! A letter is fine when it is part of a longer word or identifier, quoted as code
//! (`` `B` ``, `'B'` in SQL), a unit right after a number or a placeholder (`{b}B`), or
//! alone in parentheses after the words (`(B)`; in markdown also a group of letters such
//! as the interval `(B, F]`). A few one-letter literals are codes, not words: [`CODES`].
#![cfg(test)]

use super::Cli;
use crate::layers::rust_files;
use clap::CommandFactory;
use std::path::{Path, PathBuf};

/// The design letters.
const LETTERS: &str = "JTLDBFK";

/// One-letter literals that are codes an operator never reads as a word: (file, literal,
/// why). Each must still exist (a stale entry fails).
const CODES: [(&str, &str, &str); 3] = [
    (
        "kernel/src/control.rs",
        "B F K",
        "the control table's `kind` column values",
    ),
    (
        "kernel/src/schema_change/parse.rs",
        "B",
        "SQL's b'0101' literal prefix",
    ),
    (
        "bootstrap/src/present/status/fleet.rs",
        "K",
        "the KiB unit of human_bytes",
    ),
];

/// The design letters that stand alone in `text` (see the module doc), in order. With
/// `groups`, a bracket group of several letters (`(B, F]`) is fine too; else only `(B)`.
fn standalone_in(text: &str, groups: bool) -> Vec<char> {
    let c: Vec<char> = text.chars().collect();
    let word = |x: char| x.is_alphanumeric() || x == '_';
    let mut out = Vec::new();
    for i in 0..c.len() {
        let ch = c[i];
        if !LETTERS.contains(ch) {
            continue;
        }
        let prev = i.checked_sub(1).map(|j| c[j]);
        let next = c.get(i + 1).copied();
        if prev.is_some_and(word) || next.is_some_and(word) {
            continue;
        }
        if matches!(prev, Some('`' | '\'')) && next == prev {
            continue;
        }
        if prev.is_some_and(|p| p.is_ascii_digit() || p == '}' || p == '-') {
            continue;
        }
        let open = c[..i].iter().rposition(|x| "()[]".contains(*x));
        let close = c[i + 1..]
            .iter()
            .position(|x| "()[]".contains(*x))
            .map(|k| i + 1 + k);
        if let (Some(o), Some(e)) = (open, close) {
            let inner = &c[o + 1..e];
            let letters_only = if groups {
                inner
                    .iter()
                    .all(|x| LETTERS.contains(*x) || " ,.".contains(*x))
            } else {
                inner.len() == 1
            };
            if "([".contains(c[o]) && ")]".contains(c[e]) && letters_only {
                continue;
            }
        }
        out.push(ch);
    }
    out
}

/// [`standalone_in`] for program text: only `(B)` after the words.
fn standalone(text: &str) -> Vec<char> {
    standalone_in(text, false)
}

/// A string literal of a source file: its line, its text (`\n` and `\t` read as spaces, a
/// line continuation removed as Rust does) and whether it is in test code.
#[derive(Debug)]
struct Lit {
    line: usize,
    text: String,
    test: bool,
}

/// What one source file holds: its literals and the `mod x;` files it declares under
/// `#[cfg(test)]`.
#[derive(Debug, Default)]
struct Lexed {
    lits: Vec<Lit>,
    test_mods: Vec<String>,
}

/// The literal's text with `\n`, `\t` read as a space and a line continuation removed.
fn unescape(raw: &str) -> String {
    let mut out = String::new();
    let mut it = raw.chars().peekable();
    while let Some(ch) = it.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match it.next() {
            Some('n' | 't' | 'r') => out.push(' '),
            Some('\n') => {
                while it.peek().is_some_and(|x| x.is_whitespace()) {
                    it.next();
                }
            }
            Some(x) => out.push(x),
            None => {}
        }
    }
    out
}

/// Splits Rust source into its string literals, skipping comments, and marks the items
/// under `#[cfg(test)]` (an item ends at its `;` or at the `}` matching its first `{`).
fn lex(src: &str) -> Lexed {
    let s: Vec<char> = src.chars().collect();
    let mut out = Lexed::default();
    let (mut i, mut line, mut depth) = (0usize, 1usize, 0usize);
    // The depth at which a `#[cfg(test)]` item started, before and after its `{`.
    let mut pending: Option<usize> = None;
    let mut test_at: Option<usize> = None;
    let whole = src.lines().any(|l| l.trim() == "#![cfg(test)]");
    let at = |i: usize, p: &str| s[i..].iter().take(p.len()).copied().eq(p.chars());
    let mut item = String::new();
    while i < s.len() {
        let ch = s[i];
        let in_test = whole || test_at.is_some();
        if at(i, "//") {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if at(i, "/*") {
            let mut nest = 0;
            while i < s.len() {
                if at(i, "/*") {
                    nest += 1;
                    i += 2;
                } else if at(i, "*/") {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    line += usize::from(s[i] == '\n');
                    i += 1;
                }
            }
            continue;
        }
        let ident_before = i > 0 && (s[i - 1].is_alphanumeric() || s[i - 1] == '_');
        if !ident_before && (ch == 'r' || ch == 'b') {
            // A raw string: r"..", r#".."#, br"..".
            let mut j = i + usize::from(ch == 'b');
            if s.get(j) == Some(&'r') {
                j += 1;
                let hashes = s[j..].iter().take_while(|x| **x == '#').count();
                if s.get(j + hashes) == Some(&'"') {
                    let end: String = std::iter::once('"')
                        .chain("#".repeat(hashes).chars())
                        .collect();
                    let open = j + hashes;
                    let mut k = open + 1;
                    while k < s.len() && !at(k, &end) {
                        k += 1;
                    }
                    let text: String = s[open + 1..k.min(s.len())].iter().collect();
                    out.lits.push(Lit {
                        line,
                        text: text.clone(),
                        test: in_test,
                    });
                    line += text.matches('\n').count();
                    i = k + end.len();
                    continue;
                }
            }
        }
        if ch == '"' {
            let mut k = i + 1;
            while k < s.len() && s[k] != '"' {
                k += if s[k] == '\\' { 2 } else { 1 };
            }
            let body: String = s[i + 1..k.min(s.len())].iter().collect();
            out.lits.push(Lit {
                line,
                text: unescape(&body),
                test: in_test,
            });
            line += body.matches('\n').count();
            i = k + 1;
            continue;
        }
        if ch == '\'' {
            // A char literal ('x', '\n', '\u{..}'); otherwise a lifetime.
            let close = if s.get(i + 1) == Some(&'\\') {
                s.get(i + 3..)
                    .and_then(|r| r.iter().position(|x| *x == '\''))
                    .map(|k| i + 3 + k)
            } else {
                (s.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            i = close.map_or(i + 1, |k| k + 1);
            continue;
        }
        if at(i, "#[cfg(test)]") {
            pending = Some(depth);
            item.clear();
            i += "#[cfg(test)]".len();
            continue;
        }
        match ch {
            '{' => {
                if pending == Some(depth) && test_at.is_none() {
                    test_at = Some(depth);
                    pending = None;
                }
                depth += 1;
            }
            '}' => {
                depth = depth.saturating_sub(1);
                if test_at == Some(depth) {
                    test_at = None;
                }
            }
            ';' if pending == Some(depth) => {
                let words: Vec<&str> = item.split_whitespace().collect();
                if let [.., "mod", name] = words.as_slice() {
                    out.test_mods.push((*name).to_string());
                }
                pending = None;
            }
            '\n' => line += 1,
            _ => {}
        }
        if pending.is_some() {
            item.push(ch);
        }
        i += 1;
    }
    out
}

/// The folder in which the `mod x;` of file `rel` finds `x.rs` or `x/mod.rs`.
fn child_dir(rel: &str) -> String {
    let (dir, file) = rel.rsplit_once('/').unwrap_or(("", rel));
    match file {
        "mod.rs" | "lib.rs" | "main.rs" => dir.to_string(),
        f => format!("{dir}/{}", f.trim_end_matches(".rs")),
    }
}

/// The literal `what` of file `rel` is a [`CODES`] entry.
fn is_code(rel: &str, what: &str) -> bool {
    CODES
        .iter()
        .any(|(f, lits, _)| *f == rel && lits.split(' ').any(|l| l == what))
}

/// `file:line: "text"` for every operator-facing literal of `dirs` with a lone letter.
fn source_findings(root: &Path, dirs: &[&str]) -> Vec<String> {
    let files: Vec<(String, String)> = dirs.iter().flat_map(|d| rust_files(root, d)).collect();
    let lexed: Vec<(String, Lexed)> = files.iter().map(|(r, t)| (r.clone(), lex(t))).collect();
    // Module files (and their folders) declared under #[cfg(test)].
    let test_paths: Vec<String> = lexed
        .iter()
        .flat_map(|(rel, l)| {
            let dir = child_dir(rel);
            l.test_mods
                .iter()
                .flat_map(move |m| [format!("{dir}/{m}.rs"), format!("{dir}/{m}/")])
                .collect::<Vec<_>>()
        })
        .collect();
    let mut out = Vec::new();
    for (rel, l) in &lexed {
        if test_paths
            .iter()
            .any(|p| rel == p || rel.starts_with(p.as_str()))
        {
            continue;
        }
        for lit in l.lits.iter().filter(|x| !x.test) {
            if is_code(rel, &lit.text) {
                continue;
            }
            let lone = standalone(&lit.text);
            if !lone.is_empty() {
                out.push(format!("{rel}:{}: {:?} ({lone:?})", lit.line, lit.text));
            }
        }
    }
    out
}

/// `file:line: text` for every markdown line with a lone letter outside code: fenced
/// blocks and code spans (`` `B` ``, ``` ``a`b`` ```; a span may go on over the next lines
/// of its paragraph) are code names.
fn markdown_findings(rel: &str, md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    // The backquotes that opened a code span not closed yet on an earlier line.
    let mut open: Option<String> = None;
    for (n, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            open = None;
            continue;
        }
        if line.trim().is_empty() {
            open = None;
        }
        if fenced {
            continue;
        }
        let mut prose = String::new();
        let mut rest = line;
        loop {
            if let Some(fence) = &open {
                match rest.find(fence.as_str()) {
                    Some(e) => {
                        rest = &rest[e + fence.len()..];
                        open = None;
                    }
                    None => break,
                }
            }
            let Some(k) = rest.find('`') else {
                prose.push_str(rest);
                break;
            };
            prose.push_str(&rest[..k]);
            prose.push_str(" code ");
            let ticks = rest[k..].chars().take_while(|c| *c == '`').count();
            open = Some("`".repeat(ticks));
            rest = &rest[k + ticks..];
        }
        let lone = standalone_in(&prose, true);
        if !lone.is_empty() {
            out.push(format!("{rel}:{}: {line} ({lone:?})", n + 1));
        }
    }
    out
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("workspace root")
}

#[test]
fn operator_strings_name_no_design_letter_alone() {
    let v = source_findings(&workspace(), &["bootstrap/src", "kernel/src", "ledger/src"]);
    assert!(
        v.is_empty(),
        "a design letter stands alone in operator-facing text; write \"the journal\", \
         \"the target ledger\", \"the change log\", \"the capture position\", \"the start \
         position (B)\", \"the final fence (F)\", \"the cancel point (K)\":\n{}",
        v.join("\n")
    );
}

#[test]
fn every_code_entry_still_exists() {
    let root = workspace();
    for (file, lits, why) in CODES {
        let l = lex(&std::fs::read_to_string(root.join(file)).expect("read source"));
        for want in lits.split(' ') {
            assert!(
                l.lits.iter().any(|x| !x.test && x.text == want),
                "CODES: {file} has no literal {want:?} ({why}) any more"
            );
        }
    }
}

#[test]
fn help_names_no_design_letter_alone() {
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = Vec::new();
    let mut stack = vec![(String::from("backfill"), cmd)];
    while let Some((name, mut c)) = stack.pop() {
        let help = c.render_long_help().to_string();
        for line in help.lines().filter(|l| !standalone(l).is_empty()) {
            out.push(format!("`{name} --help`: {line}"));
        }
        for sub in c.get_subcommands() {
            stack.push((format!("{name} {}", sub.get_name()), sub.clone()));
        }
    }
    assert!(out.is_empty(), "{}", out.join("\n"));
}

#[test]
fn runbooks_and_docs_name_no_design_letter_alone() {
    let root = workspace();
    let mut files = vec![root.join("README.md")];
    for dir in ["runbooks", "docs"] {
        for e in std::fs::read_dir(root.join(dir))
            .expect("read dir")
            .flatten()
        {
            if e.path().extension().is_some_and(|x| x == "md") {
                files.push(e.path());
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for p in files {
        let rel = p.strip_prefix(&root).expect("under the workspace");
        let md = std::fs::read_to_string(&p).expect("read markdown");
        out.extend(markdown_findings(&rel.to_string_lossy(), &md));
    }
    assert!(
        out.is_empty(),
        "a design letter stands alone; write the plain words, the letter may follow in \
         parentheses (\"the journal (J)\"):\n{}",
        out.join("\n")
    );
}

#[test]
fn the_checker_finds_a_lone_letter_and_accepts_the_plain_words() {
    for bad in [
        "no J record",
        "T shows it was not committed",
        "J records B but L holds no B marker",
        "capture D",
        "T's cursor",
        "T credential w0p0",
        "L{}",
        "F is not written",
        "B..F",
        "up to K.",
        "(L record 4)",
        "replaying (B, F]",
    ] {
        assert!(!standalone(bad).is_empty(), "{bad:?} passes");
    }
    for good in [
        "no journal record",
        "the start position (B)",
        "CANCELLED(K)",
        "`B` and 'B' are code",
        "512B, {b}B, 40K",
        "DESIGN §7, LOW/HIGH, RAW/FINAL, w3p0, mysql-bin.000001",
        "A sealed window",
        "--windows-only -D",
    ] {
        assert_eq!(standalone(good), Vec::<char>::new(), "{good:?} fails");
    }
    let interval = "the replay from the start position to the final fence (B, F]";
    assert_eq!(standalone_in(interval, true), Vec::<char>::new());
    assert_eq!(standalone_in(interval, false), vec!['B', 'F']);
}

#[test]
fn the_lexer_keeps_test_code_and_comments_out() {
    let src = r###"
// no J record (a comment)
/* T's cursor /* nested */ still a comment */
fn f() -> &'static str {
    let c = 'J';
    "no J record"
}
#[cfg(test)]
mod tests;
#[cfg(test)]
mod inline {
    fn g() { let s = "T's cursor"; }
}
fn h() { let r = r#"capture D "quoted""#; let m = "a \
                 K"; }
"###;
    let l = lex(src);
    let lits: Vec<(usize, &str, bool)> = l
        .lits
        .iter()
        .map(|x| (x.line, x.text.as_str(), x.test))
        .collect();
    assert_eq!(
        lits,
        vec![
            (6, "no J record", false),
            (12, "T's cursor", true),
            (14, "capture D \"quoted\"", false),
            (14, "a K", false),
        ]
    );
    assert_eq!(l.test_mods, vec!["tests".to_string()]);
    assert_eq!(
        child_dir("kernel/src/capture/assemble/mod.rs"),
        "kernel/src/capture/assemble"
    );
    assert_eq!(
        child_dir("bootstrap/src/table/fence.rs"),
        "bootstrap/src/table/fence"
    );
    let md = "The journal (J), `J` and\n```\nJ\n```\nJ's head, ``a `L` b``, `a\nK` L\n\n`T\n\nD\n";
    assert_eq!(
        markdown_findings("x.md", md),
        vec![
            "x.md:5: J's head, ``a `L` b``, `a (['J'])".to_string(),
            "x.md:6: K` L (['L'])".to_string(),
            "x.md:10: D (['D'])".to_string(),
        ]
    );
}
