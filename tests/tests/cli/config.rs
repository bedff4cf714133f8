//! `--config FILE` (issue 8): the file's settings apply, a flag overrides the file, an
//! unknown key or a bad file is a usage error (exit 2) that never echoes a password.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::backfill;

#[test]
fn config_file_applies_and_flags_override_it() {
    let target = harness::shared_target();
    let db = target.fresh_db("cfg_state");
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        format!(
            "state = \"{}\"\nformat = \"json\"\nread_windows = 2\n",
            target.url_db(&db)
        ),
    )
    .unwrap();
    let g = good.to_str().unwrap();
    let (code, out) = backfill(&["status", "--config", g]).code_all();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("\"jobs\""), "format from the file: {out}");
    let (code, out) = backfill(&["status", "--config", g, "--format", "text"]).code_all();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no jobs installed"), "the flag wins: {out}");
    let (code, out) = backfill(&[
        "status",
        "--config",
        g,
        "--state",
        "mysql://u:cfgPw5566@127.0.0.1:1/x",
    ])
    .code_all();
    assert_eq!(
        code, 1,
        "the flag's (unreachable) state store is used: {out}"
    );
    assert!(!out.contains("cfgPw5566"), "{out}");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "read_window = 2\n").unwrap();
    let (code, out) = backfill(&["status", "--config", bad.to_str().unwrap()]).code_all();
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("unknown key `read_window`"), "{out}");
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "state = \"mysql://u:cfgPw5566@h/s\nx").unwrap();
    let (code, out) = backfill(&["status", "--config", broken.to_str().unwrap()]).code_all();
    assert_eq!(code, 2, "{out}");
    assert!(!out.contains("cfgPw5566"), "{out}");
    let (code, out) = backfill(&["status", "--config", "/no/such/file.toml"]).code_all();
    assert_eq!(code, 2, "{out}");
}
