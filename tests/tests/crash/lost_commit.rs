//! Lost COMMIT answers on a REAL connection (issue 7, DESIGN §8) against real MariaDB.
//! The job's target URL points at a small TCP proxy in front of the target server. While
//! armed, the proxy lets a page's COMMIT reach the server, reads the server's answer, and
//! then closes the client's socket instead of forwarding it: the page is committed, and
//! the client only sees its connection lost during COMMIT, so the outcome is genuinely
//! unknown to it (no test seam in the service). Three such outcomes are resolved from T
//! automatically; the fourth pauses the table (`release_unconfirmed`); `resume` starts a
//! new execution and the table completes with every row inserted exactly once. The same
//! for the replay of (B, F] and STREAMING: a cursor transaction's answer lost is resolved
//! from T's cursor, and the exactly-once oracle finds no change applied twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::{install, InstallRequest, TableName};
use backfill_tests::bf::table::replay::ReplayConfig;
use backfill_tests::case::*;
use backfill_tests::keyed;
use backfill_tests::oracle::Mark;
use backfill_tests::serving;
use backfill_tests::workload::Workload;
use backfill_tests::*;
use kernel::error::DefiniteCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;

/// Which target transactions' COMMIT answers the proxy drops while armed: those that wrote
/// a T page credential (a window's page) or T's cursor (a replay or STREAMING batch).
#[derive(Clone, Copy)]
enum Commits {
    Pages,
    Cursor,
}

impl Commits {
    /// The statement (upper case) writes this kind's T row.
    fn writes(self, sql: &str) -> bool {
        let write = sql.starts_with("INSERT INTO") || sql.starts_with("UPDATE");
        let table = match self {
            Commits::Pages => "_BACKFILL_LEDGER_PAGES`",
            Commits::Cursor => "_BACKFILL_LEDGER_CURSOR`",
        };
        write && sql.contains(table)
    }
}

/// A proxy to `upstream` that drops the connection after the answer to the next `armed`
/// COMMITs of the kind `which`.
struct Proxy {
    port: u16,
    armed: Arc<AtomicU32>,
    dropped: Arc<AtomicU32>,
}

async fn proxy(upstream: u16, which: Commits) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let armed = Arc::new(AtomicU32::new(0));
    let dropped = Arc::new(AtomicU32::new(0));
    let (a, d) = (armed.clone(), dropped.clone());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                continue;
            };
            tokio::spawn(relay(client, server, which, a.clone(), d.clone()));
        }
    });
    Proxy {
        port,
        armed,
        dropped,
    }
}

/// Relays one connection. Client packets are framed (3-byte length, 1-byte sequence) so
/// the COMMIT of a page (or cursor) transaction can be recognised; server bytes pass
/// through until a drop is due, then both sockets close.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    which: Commits,
    armed: Arc<AtomicU32>,
    dropped: Arc<AtomicU32>,
) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let drop_next_answer = Arc::new(AtomicBool::new(false));
    let flag = drop_next_answer.clone();
    let upstream = async move {
        let mut wrote = false;
        loop {
            let mut head = [0u8; 4];
            cr.read_exact(&mut head).await?;
            let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
            let mut body = vec![0u8; len];
            cr.read_exact(&mut body).await?;
            if let Some((&cmd, text)) = body.split_first() {
                let sql = String::from_utf8_lossy(text).to_ascii_uppercase();
                if (cmd == COM_QUERY || cmd == COM_STMT_PREPARE) && which.writes(sql.trim_start()) {
                    wrote = true;
                }
                if cmd == COM_QUERY && sql.trim() == "ROLLBACK" {
                    wrote = false;
                }
                if cmd == COM_QUERY && sql.trim() == "COMMIT" && wrote {
                    wrote = false;
                    let take = armed
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
                    if take.is_ok() {
                        // Set before the COMMIT is forwarded: the next server bytes are
                        // its answer.
                        flag.store(true, Ordering::SeqCst);
                    }
                }
            }
            sw.write_all(&head).await?;
            sw.write_all(&body).await?;
        }
        #[allow(unreachable_code)]
        Ok::<(), std::io::Error>(())
    };
    let downstream = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = sr.read(&mut buf).await?;
            if n == 0 {
                return Ok::<(), std::io::Error>(());
            }
            if drop_next_answer.load(Ordering::SeqCst) {
                // The server answered the COMMIT; the client never hears it.
                dropped.fetch_add(1, Ordering::SeqCst);
                return Ok(());
            }
            cw.write_all(&buf[..n]).await?;
        }
    };
    tokio::select! {
        _ = upstream => {}
        _ = downstream => {}
    }
}

/// Like `Case::new`, with the job's target URL through the proxy.
async fn case_via(proxy_port: u16) -> Case {
    init_tracing();
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let marks = (Mark::now(source), Mark::now(target));
    let sdb = source.fresh_db("lost_s");
    let ctl = source.fresh_db("lost_c");
    let tdb = target.fresh_db("lost_t");
    source.sql_in(&sdb, DDL);
    target.sql_in(&tdb, DDL);
    fill(source, &sdb, 600);
    let state_db = format!("{tdb}_state");
    let mut req = InstallRequest::new(
        target.url_db(&state_db),
        source.url(),
        TableName::new(&sdb, "t"),
        // prefer_socket=false: mysql_async would otherwise move a local connection to the
        // server's Unix socket, around the proxy.
        format!("mysql://root@127.0.0.1:{proxy_port}?prefer_socket=false"),
        TableName::new(&tdb, "t"),
    );
    req.window_rows = 100;
    req.page_rows = 50;
    req.control_schema = ctl.clone();
    let done = install(&req)
        .await
        .unwrap_or_else(|e| panic!("install: {e}"));
    add_audit_triggers(target, &tdb);
    let pool = kernel::state::open(&target.url_db(&state_db), &Default::default())
        .await
        .unwrap();
    bf::store::commands::start(&pool, done.job_id)
        .await
        .unwrap();
    Case {
        source,
        target,
        sdb,
        tdb,
        ctl,
        state_db,
        data: tempfile::tempdir().unwrap(),
        job: done.job_id,
        generation: done.generation,
        pool,
        marks,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commits_whose_answer_is_lost_on_the_wire_recover_three_times_then_pause() {
    let _serial = in_process().await;
    let p = proxy(harness::shared_target().port(), Commits::Pages).await;
    let c = case_via(p.port).await;
    p.armed.store(4, Ordering::SeqCst);
    let out = c.serve(None).await;
    assert_eq!(
        p.dropped.load(Ordering::SeqCst),
        4,
        "four COMMIT answers lost"
    );
    assert!(out.starts_with("paused: release_unconfirmed"), "{out}");
    let head = c.head().await;
    let paused = head.paused.clone().expect("J records the pause");
    assert_eq!(paused.code, DefiniteCode::ReleaseUnconfirmed);
    let used = bf::table::target_write::used(&c.pool, c.job, c.generation)
        .await
        .unwrap();
    assert_eq!(used, 3, "three recovered from T, persisted");
    // Every lost COMMIT had landed on the server; none was applied a second time.
    let rows_before_resume = c.target_count();
    assert_eq!(c.audit_count(), rows_before_resume, "no row inserted twice");

    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
    let out = c.serve(None).await;
    assert_eq!(out, "windows_done");
    assert_eq!(c.target_count(), 600);
    assert_eq!(c.audit_count(), 600, "every row inserted exactly once");
    c.oracle().assert_pages_exactly_once();
    let snap = backfill_tests::serving::admission_snapshot().expect("serve registered admission");
    for kind in admission::PoolKind::ALL {
        let pool = snap.pool(kind);
        assert_eq!(pool.available, pool.capacity, "{kind}: {pool:?}");
        assert!(pool.holds.is_empty(), "{kind}: {pool:?}");
    }
}

/// Two cursor COMMIT answers lost in the replay of (B, F] under a writer, one more while
/// STREAMING: each is resolved from T's cursor (the transaction had committed), the
/// table reaches and stays STREAMING without a pause, and the oracle over both binlogs
/// finds every change after B applied exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replay_and_streaming_commits_whose_answer_is_lost_are_resolved_from_t_once() {
    let _serial = in_process().await;
    let p = proxy(harness::shared_target().port(), Commits::Cursor).await;
    let c = case_via(p.port).await;
    let w = Workload::start(c.source.url_db(&c.sdb), 600, 23);
    p.armed.store(2, Ordering::SeqCst);
    let mut cfg = c.serve_cfg();
    cfg.exit_when_idle = false;
    // Replay transactions of at most 1000 changes and 50 groups: several cursor COMMITs
    // in (B, F], and the replay still outruns the writer (at 100 changes or one group a
    // transaction it does not, in a debug build: the activation never catches up).
    cfg.finish = Some(ReplayConfig {
        batch_rows: 1000,
        batch_groups: 50,
        ..ReplayConfig::default()
    });
    let cancel = CancellationToken::new();
    let serve = tokio::spawn(serving::serve(cfg, cancel.clone()));
    c.wait_streaming(&[]).await;
    assert_eq!(
        p.dropped.load(Ordering::SeqCst),
        2,
        "two answers lost in replay"
    );
    // STREAMING, the writer still going: one more answer lost.
    p.armed.store(1, Ordering::SeqCst);
    wait_for("a STREAMING answer lost", || {
        p.dropped.load(Ordering::SeqCst) == 3
    })
    .await;
    let writes = w.stop().await;
    keyed::wait_clean(&c, &["id"], std::time::Duration::from_secs(120)).await;
    cancel.cancel();
    serve.await.unwrap().unwrap();
    let head = c.head().await;
    assert_eq!(head.paused, None);
    assert_eq!(head.phase, ledger::record::Phase::Streaming);
    let d = keyed::diff(&c, &["id"]);
    assert!(d.is_clean(), "{d}");
    let r = c.oracle();
    r.assert_exactly_once();
    assert!(r.cursor_txns > 3, "{r}");
    eprintln!(
        "lost cursor COMMIT answers: 3 resolved from T, {} writes, {} rows, oracle: {r}",
        writes.total(),
        d.rows
    );
}
