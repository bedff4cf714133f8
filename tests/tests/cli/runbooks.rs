//! Every command in a runbook exists (issue 8): each `backfill ...` line of a fenced code
//! block in runbooks/*.md (continuation lines joined) names a real subcommand, and every
//! `--flag` on it is a flag of that subcommand or a global one. Commands that are not
//! built yet must not appear in code blocks (the runbooks mark them in prose).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::cli::Cli;
use clap::CommandFactory;
use std::path::Path;

fn commands(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut cur = String::new();
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        let l = line.trim();
        if cur.is_empty() && !l.starts_with("backfill ") {
            continue;
        }
        cur.push_str(l.trim_end_matches('\\'));
        cur.push(' ');
        if !l.ends_with('\\') {
            out.push(std::mem::take(&mut cur));
        }
    }
    out
}

#[test]
fn every_runbook_command_and_flag_exists() {
    let cli = Cli::command();
    let global: Vec<String> = cli
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runbooks");
    let mut checked = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().and_then(|x| x.to_str()) != Some("md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for c in commands(&text) {
            let mut words = c.split_whitespace().skip(1);
            let sub = words.next().unwrap_or("");
            let Some(cmd) = cli.find_subcommand(sub) else {
                panic!("{}: `{c}` names no subcommand `{sub}`", path.display());
            };
            let flags: Vec<String> = cmd
                .get_arguments()
                .filter_map(|a| a.get_long().map(str::to_string))
                .chain(global.iter().cloned())
                .chain(["help".to_string()])
                .collect();
            for w in c.split_whitespace() {
                let w = w.trim_start_matches('[');
                if let Some(f) = w.strip_prefix("--") {
                    let f = f.split('=').next().unwrap_or("");
                    let f = f.trim_end_matches(']');
                    assert!(
                        flags.iter().any(|x| x == f),
                        "{}: `{c}`: `backfill {sub}` has no flag --{f}",
                        path.display()
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} runbook commands found");
}
