//! Lost COMMIT answers on a REAL connection (issue 7, DESIGN §8) against real MariaDB.
//! The job's target URL points at a small TCP proxy in front of the target server. While
//! armed, the proxy lets a page's COMMIT reach the server, reads the server's answer, and
//! then closes the client's socket instead of forwarding it: the page is committed, and
//! the client only sees its connection lost during COMMIT, so the outcome is genuinely
//! unknown to it (no test seam in the service). Three such outcomes are resolved from T
//! automatically; the fourth pauses the table (`release_unconfirmed`); `resume` starts a
//! new execution and the table completes with every row inserted exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::{install, InstallRequest, TableName};
use backfill_tests::case::*;
use backfill_tests::oracle::Mark;
use backfill_tests::*;
use kernel::error::DefiniteCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;

/// A proxy to `upstream` that drops the connection after the answer to the next `armed`
/// page COMMITs (a COMMIT on a connection that wrote a T page credential).
struct Proxy {
    port: u16,
    armed: Arc<AtomicU32>,
    dropped: Arc<AtomicU32>,
}

async fn proxy(upstream: u16) -> Proxy {
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
            tokio::spawn(relay(client, server, a.clone(), d.clone()));
        }
    });
    Proxy {
        port,
        armed,
        dropped,
    }
}

/// Relays one connection. Client packets are framed (3-byte length, 1-byte sequence) so
/// the COMMIT of a page transaction can be recognised; server bytes pass through until a
/// drop is due, then both sockets close.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    armed: Arc<AtomicU32>,
    dropped: Arc<AtomicU32>,
) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let drop_next_answer = Arc::new(AtomicBool::new(false));
    let flag = drop_next_answer.clone();
    let upstream = async move {
        let mut wrote_credential = false;
        loop {
            let mut head = [0u8; 4];
            cr.read_exact(&mut head).await?;
            let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
            let mut body = vec![0u8; len];
            cr.read_exact(&mut body).await?;
            if let Some((&cmd, text)) = body.split_first() {
                let sql = String::from_utf8_lossy(text).to_ascii_uppercase();
                if (cmd == COM_QUERY || cmd == COM_STMT_PREPARE)
                    && sql.starts_with("INSERT INTO")
                    && sql.contains("_BACKFILL_LEDGER_PAGES")
                {
                    wrote_credential = true;
                }
                if cmd == COM_QUERY && sql.trim() == "COMMIT" && wrote_credential {
                    wrote_credential = false;
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
    let p = proxy(harness::shared_target().port()).await;
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
