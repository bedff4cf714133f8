//! The program's own documentation (issue 39): the `--help` of `backfill` and of every
//! subcommand names no source path (an operator has no source tree), `backfill completions
//! bash` is a completion script naming every subcommand, and `backfill man` is a roff page
//! naming every subcommand (`backfill man serve`: serve's own page). All through the real
//! program, so what is checked is what an operator gets.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::backfill;
use backfill_tests::bf::cli::Cli;
use clap::CommandFactory;

fn names_no_source_path(what: &str, text: &str) {
    for bad in ["crate::", "src/", ".rs"] {
        assert!(
            !text.contains(bad),
            "`{what}` names a source path (`{bad}`):\n{text}"
        );
    }
}

#[test]
fn help_names_no_source_path_and_completions_and_man_name_every_subcommand() {
    let subs: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    assert!(subs.len() >= 13, "{subs:?}");
    for flag in ["--help", "-h"] {
        let top = backfill(&[flag]);
        assert_eq!(top.code, 0, "{}", top.all());
        assert!(top.stdout.contains("Usage: backfill"), "{}", top.stdout);
        names_no_source_path(&format!("backfill {flag}"), &top.all());
        for sub in &subs {
            let r = backfill(&[sub, flag]);
            assert_eq!(r.code, 0, "backfill {sub} {flag}: {}", r.all());
            assert!(
                r.stdout.contains(&format!("Usage: backfill {sub}")),
                "{}",
                r.stdout
            );
            names_no_source_path(&format!("backfill {sub} {flag}"), &r.all());
        }
    }

    let bash = backfill(&["completions", "bash"]);
    assert_eq!(bash.code, 0, "{}", bash.all());
    assert!(bash.stdout.contains("complete -F"), "{}", bash.stdout);
    for sub in &subs {
        assert!(
            bash.stdout.contains(sub.as_str()),
            "{sub} in\n{}",
            bash.stdout
        );
    }

    let man = backfill(&["man"]);
    assert_eq!(man.code, 0, "{}", man.all());
    assert!(man.stdout.contains(".TH backfill "), "{}", man.stdout);
    for sub in &subs {
        // roff writes a `-` as `\-`.
        let roff = sub.replace('-', "\\-");
        assert!(man.stdout.contains(&roff), "{roff} in\n{}", man.stdout);
    }
    let serve = backfill(&["man", "serve"]);
    assert_eq!(serve.code, 0, "{}", serve.all());
    assert!(
        serve.stdout.contains(".TH backfill-serve ") && serve.stdout.contains("metrics\\-addr"),
        "{}",
        serve.stdout
    );
    let unknown = backfill(&["man", "nope"]);
    assert_eq!(unknown.code, 2, "{}", unknown.all());
}
