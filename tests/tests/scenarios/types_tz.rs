//! The table of every type of issue 15 item 2 ([`backfill_tests::typed`]) between a source
//! server whose default time zone is +08:00 and a target server at -05:00 whose global
//! sql_mode forbids zero dates (NO_ZERO_DATE, NO_ZERO_IN_DATE): the real `backfill serve`
//! copies it under a writer during the windows and while STREAMING. TIMESTAMP(6) values
//! land as the same instants, DATETIME(6) values as the same calendar text, zero dates as
//! they are (the target write sessions run their own mode): 0 missing, 0 extra, 0
//! differing, audit PASS, the product's verify clean.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::Case;
use backfill_tests::harness::{Server, ServerOpts};
use backfill_tests::keyed::{self, Serving};
use backfill_tests::typed;
use std::time::{Duration, Instant};

fn servers() -> (&'static Server, &'static Server) {
    let source = Server::start_private(ServerOpts::source().config("default-time-zone=+08:00"));
    let target = Server::start_private(
        ServerOpts::target()
            .config("default-time-zone=-05:00")
            .config(
                "sql_mode=STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE,NO_ENGINE_SUBSTITUTION",
            ),
    );
    (backfill_tests::leak(source), backfill_tests::leak(target))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_between_time_zones_and_a_zero_date_refusing_target_stream_exactly() {
    let t0 = Instant::now();
    let (source, target) = servers();
    // The target server itself refuses a zero date; the copy must not.
    let refused = target.try_sql(
        "CREATE DATABASE z; CREATE TABLE z.d (d DATE); INSERT INTO z.d VALUES ('0000-00-00')",
    );
    assert!(
        refused.is_err(),
        "the target accepted a zero date: {refused:?}"
    );
    let c =
        Case::of_table_between((source, target), "tytz", typed::DDL, &typed::fill(), 30, 10).await;
    let w = typed::writing(&c);
    let serve = ["--replay-batch-rows", "40", "--apply-streams", "2"];
    let mut child = Serving(keyed::serve_child(&c, &serve, ""));
    keyed::wait_streaming(&c, &mut child.0).await;
    let mut writes = w.stop().await;
    keyed::wait_clean(&c, &["id"], Duration::from_secs(60)).await;
    let w = typed::writing(&c);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    writes += w.stop().await;
    // A row of known values, written in the source's +08:00 session, no writer after it.
    source.sql_in(&c.sdb, &typed::insert_as(100_000, 2));
    let d = keyed::wait_clean(&c, &["id"], Duration::from_secs(60)).await;
    drop(child);
    keyed::assert_audit_passes(&c);
    keyed::assert_verify_clean(&c);
    // Row 100000 was written in +08:00 as '2000-02-29 12:34:56.123456': at -05:00 the target
    // shows that instant 13 hours earlier, and the DATETIME the same text on both.
    let sql = "SELECT ts, dt, d FROM t WHERE id = 100000";
    let (s, t) = (source.sql_in(&c.sdb, sql), target.sql_in(&c.tdb, sql));
    assert_eq!(
        s.trim(),
        "2000-02-29 12:34:56.123456\t9999-12-31 23:59:59.999999\t9999-12-31"
    );
    assert_eq!(
        t.trim(),
        "2000-02-28 23:34:56.123456\t9999-12-31 23:59:59.999999\t9999-12-31"
    );
    let zero = "SELECT COUNT(*) FROM t WHERE d = '0000-00-00' OR dt LIKE '2024-00-00%'";
    assert_eq!(source.sql_in(&c.sdb, zero), target.sql_in(&c.tdb, zero));
    eprintln!(
        "types across zones: {writes} writes, {} rows, 0/0/0, {:?}",
        d.rows,
        t0.elapsed()
    );
}
