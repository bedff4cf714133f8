//! Replay of (B, F] and activation count against `--target-writes` (issue 7, DESIGN §8)
//! against real MariaDB: with one target-write permit, while one table's finish holds it
//! (held before activation by a test seam), another table's FINAL page writes wait in the
//! admission queue and its target stays empty; once the finish is done both tables reach
//! STREAMING with their targets equal to the source and no permit left. With
//! `--apply-streams 2` the replay holds two permits (taken together) the same way.
//! `--apply-streams` above `--target-writes` is refused at start, naming both flags.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::install;
use backfill_tests::bf::table::replay::ReplayConfig;
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[test]
fn apply_streams_above_target_writes_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let o = backfill_tests::command()
            .args([
                "serve",
                "--state",
                "mysql://u:streamPw77@127.0.0.1:1/x",
                "--data-dir",
            ])
            .arg(dir.path())
            .args(extra)
            .env_remove("BACKFILL_CONFIG")
            .env_remove("BACKFILL_APPLY_STREAMS")
            .env_remove("BACKFILL_TARGET_WRITES")
            .output()
            .unwrap();
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.code().unwrap_or(-1), out)
    };
    let (code, out) = run(&["--apply-streams", "3", "--target-writes", "2"]);
    assert_eq!(code, 2, "a usage error: {out}");
    for part in [
        "--apply-streams 3",
        "--target-writes 2",
        "raise --target-writes",
    ] {
        assert!(out.contains(part), "names {part}: {out}");
    }
    assert!(!out.contains("streamPw77"), "{out}");
    // The default --target-writes is 2.
    let (code, out) = run(&["--apply-streams", "4"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--target-writes 2"), "{out}");
    // Out of 1..=16: refused by the parser.
    for bad in ["0", "17"] {
        let (code, out) = run(&["--apply-streams", bad, "--target-writes", "32"]);
        assert_eq!(code, 2, "--apply-streams {bad}: {out}");
        assert!(out.contains("--apply-streams"), "{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn page_writes_wait_while_replay_and_activation_hold_the_write_permits() {
    let _serial = in_process().await;
    // One test, run in turn: the activation seam is process-wide.
    finish_holds_its_permits("replay_permit", 1).await;
    finish_holds_its_permits("replay_permits2", 2).await;
}

/// With `streams` apply streams and as many target-write permits, the finish of one table
/// holds them all (taken together) while the other table's pages wait.
async fn finish_holds_its_permits(prefix: &str, streams: usize) {
    let c = Case::new(prefix, 300, 100, 50).await;
    let mut req = c.second_table(200);
    req.window_rows = 100;
    req.page_rows = 50;
    let other = install(&req).await.unwrap().job_id;

    let hits = bf::seams::activation_gate::hits();
    let gate = bf::seams::activation_gate::arm(c.job);
    let mut cfg = c.serve_cfg();
    cfg.finish = Some(ReplayConfig {
        apply_streams: streams,
        ..ReplayConfig::default()
    });
    cfg.limits.target_writes = streams as u32;
    let task = tokio::spawn(serve::serve(cfg, CancellationToken::new()));
    wait_for("the finish of the first table at activation", || {
        bf::seams::activation_gate::hits() > hits
    })
    .await;
    let w = write_pool();
    assert_eq!((w.capacity as usize, w.available), (streams, 0), "{w:?}");
    let mine = format!("job {} ", c.job);
    assert!(
        w.in_use.len() == streams
            && w.in_use.iter().all(|p| p.owner.starts_with(&mine)
                && p.owner
                    .contains("replay up to the final fence (F) and activation")),
        "the replay/activation holds every permit: {w:?}"
    );

    // The second table starts: its FINAL pages queue behind the replay's permit.
    bf::store::commands::start(&c.pool, other).await.unwrap();
    let theirs = format!("job {other} ");
    wait_for("a page write of the second table waiting", || {
        write_pool()
            .waiting
            .iter()
            .any(|q| q.owner.starts_with(&theirs))
    })
    .await;
    let rows = c.target.sql_in(&c.tdb, "SELECT COUNT(*) FROM t2");
    assert_eq!(rows, "0", "no page of the second table was written");
    let w = write_pool();
    assert!(w.in_use.len() <= streams && w.available == 0, "{w:?}");

    gate.close();
    let out = tokio::time::timeout(Duration::from_secs(300), task)
        .await
        .expect("serve did not become idle")
        .unwrap()
        .unwrap_or_else(|e| panic!("serve: {e}"));
    for job in [c.job, other] {
        let o = out.get(&job).cloned().unwrap_or_default();
        assert!(o.contains("Streaming"), "job {job}: {o}");
    }
    for t in ["t", "t2"] {
        assert_eq!(
            checksum(c.source, &c.sdb, t),
            checksum(c.target, &c.tdb, t),
            "{t}"
        );
    }
    let w = write_pool();
    assert!(
        w.available == w.capacity && w.in_use.is_empty() && w.holds.is_empty(),
        "{w:?}"
    );
}
