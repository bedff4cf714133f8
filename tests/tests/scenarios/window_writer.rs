//! DESIGN §5 under a concurrent writer: 200 000 rows, inserts, updates, deletes, key
//! changes into and out of ranges, and one 30 000-row UPDATE while the windows run. Every
//! window's FINAL equals the range's state at HIGH (checked by replaying L independently),
//! T, J and the range chain agree, every FINAL page is applied exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::hooks::HookFuture;
use backfill_tests::bf::table::window::WindowHooks;
use backfill_tests::case::*;
use backfill_tests::*;
use kernel::ids::{Attempt, JobId, WindowId};
use kernel::range::KeyRange;
use kernel::value::SqlValue;
use mysql_async::prelude::Queryable;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const ROWS: i64 = 200_000;

/// DML inside each window's range right after LOW (between LOW and HIGH), and the
/// 30 000-row UPDATE once.
struct Inject {
    url: String,
    plan: Vec<KeyRange>,
    started: Arc<AtomicBool>,
    next_key: AtomicU64,
}

impl Inject {
    /// The keys of window range `r` the hook's statements use (kept from the writer).
    fn keys(r: &KeyRange) -> [i64; 4] {
        let int = |b: &Option<kernel::range::Bound>| b.as_ref().and_then(|b| b.as_i64());
        let lo = int(&r.lower).unwrap_or(0);
        let top = int(&r.upper).unwrap_or(lo + 10);
        [lo + 3, lo + 5, lo + 7, top - 1]
    }

    async fn run(&self, w: WindowId) {
        self.started.store(true, Ordering::SeqCst);
        let r = self.plan[w.0 as usize].clone();
        let [leaves, reinserted, moved_far, updated] = Inject::keys(&r);
        let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&self.url).unwrap())
            .await
            .unwrap();
        let fresh = 1_000_000 + self.next_key.fetch_add(10, Ordering::SeqCst) as i64;
        // Fresh keys outside this range (the last range is open above: use negative keys,
        // which belong to the first range, for it).
        let outside = |k: i64| if r.upper.is_some() { ROWS + k } else { -k };
        let (out_of_range, enters) = (outside(100_000 + fresh), outside(300_000 + fresh));
        // Every statement finds its row: these keys exist before each run (the fill, and
        // the statements below put each back) and the writer never touches them. Each
        // must change exactly one row.
        let stmts = [
            // a key leaves the range
            format!("UPDATE t SET id = {out_of_range} WHERE id = {leaves}"),
            // another enters it: inserted outside, then moved into the key that left
            format!("INSERT INTO t VALUES ({enters}, 3, 'enters')"),
            format!("UPDATE t SET id = {leaves} WHERE id = {enters}"),
            // one is deleted and inserted again
            format!("DELETE FROM t WHERE id = {reinserted}"),
            format!("INSERT INTO t VALUES ({reinserted}, 1, 'ins')"),
            // one is updated twice
            format!("UPDATE t SET k = k + 1, v = 'upd' WHERE id = {updated}"),
            format!("UPDATE t SET k = k + 1 WHERE id = {updated}"),
            // one leaves for far away and a new row takes its key
            format!(
                "UPDATE t SET id = {} WHERE id = {moved_far}",
                outside(200_000 + fresh)
            ),
            format!("INSERT INTO t VALUES ({moved_far}, 4, 'back')"),
        ];
        for s in stmts {
            let n = exec_retrying(&mut c, &s).await;
            assert_eq!(n, 1, "{s}: changed {n} rows");
        }
        if w.0 == 2 {
            let n = exec_retrying(
                &mut c,
                "UPDATE t SET k = k + 1000 WHERE id > 30000 AND id <= 60000",
            )
            .await;
            assert!(n > 29_000, "the big UPDATE changed {n} rows");
        }
        c.disconnect().await.unwrap();
    }
}

/// Runs `sql`, again after an InnoDB deadlock (1213) or lock wait timeout (1205): with
/// read-ahead, the hooks of two windows and the writer run at once and may deadlock each
/// other on the source (a deadlocked transaction is rolled back whole).
async fn exec_retrying(c: &mut mysql_async::Conn, sql: &str) -> u64 {
    for _ in 0..20 {
        match c.query_drop(sql).await {
            Ok(()) => return c.affected_rows(),
            Err(mysql_async::Error::Server(e)) if e.code == 1213 || e.code == 1205 => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{sql}: {e}"),
        }
    }
    panic!("{sql}: still deadlocked after 20 tries");
}

impl WindowHooks for Inject {
    fn after_low(&self, _: JobId, w: WindowId, _: Attempt) -> HookFuture<'_> {
        Box::pin(self.run(w))
    }
}

/// A background writer: random single-row DML and small transactions until stopped, never
/// on a key of `reserved` (the hook's).
async fn writer(
    url: String,
    started: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    reserved: std::collections::HashSet<i64>,
) -> u64 {
    use rand::Rng;
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    let mut n = 0u64;
    let mut next = 5_000_000i64;
    while !stop.load(Ordering::SeqCst) {
        let (op, a, b): (u8, i64, i64) = {
            let mut r = rand::rng();
            (
                r.random_range(0..6),
                r.random_range(1..=ROWS + 20_000),
                r.random_range(1..=ROWS + 20_000),
            )
        };
        if [a, a + 1, b].iter().any(|k| reserved.contains(k)) {
            continue;
        }
        let sql = match op {
            0 => {
                next += 1;
                format!("INSERT INTO t VALUES ({next}, 0, 'new')")
            }
            1 => format!("INSERT IGNORE INTO t VALUES ({a}, 0, 'gap')"),
            2 => format!("UPDATE t SET k = k + 1, v = CONCAT('w', k) WHERE id = {a}"),
            3 => format!("DELETE FROM t WHERE id = {a}"),
            4 => format!("UPDATE IGNORE t SET id = {b} WHERE id = {a}"),
            _ => format!(
                "BEGIN; UPDATE t SET k = k - 1 WHERE id = {a}; UPDATE IGNORE t SET id = {b} WHERE id = {}; COMMIT",
                a + 1
            ),
        };
        exec_retrying(&mut c, &sql).await;
        n += 1;
        // A steady writer (a few hundred statements/s), not a flood: the capture of a
        // debug build must keep up for the markers to be awaited in time.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    let _ = c.disconnect().await;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn windows_under_a_concurrent_writer_seal_the_state_at_high() {
    let _serial = in_process().await;
    let t0 = std::time::Instant::now();
    let c = Case::new("ww", ROWS, 20_000, 5_000).await;
    let plan = c.plan().await;
    assert!(plan.len() >= 10, "plan has {} windows", plan.len());
    let started = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let url = c.source.url_db(&c.sdb);
    let hooks = Arc::new(Inject {
        url: url.clone(),
        plan: plan.clone(),
        started: started.clone(),
        next_key: AtomicU64::new(0),
    });
    let reserved: std::collections::HashSet<i64> = plan.iter().flat_map(Inject::keys).collect();
    // The hook's keys exist before B: those beyond the filled rows (in the range open
    // above) are inserted now, and are part of the state L is replayed over.
    let mut initial = filled_state(ROWS);
    for k in reserved.iter().copied().filter(|k| *k > ROWS) {
        c.source
            .sql_in(&c.sdb, &format!("INSERT INTO t VALUES ({k}, {k}, 'v{k}')"));
        initial.insert(
            k,
            vec![
                SqlValue::Int(k),
                SqlValue::Int(k),
                SqlValue::Bytes(format!("v{k}").into_bytes()),
            ],
        );
    }
    let w = tokio::spawn(writer(url, started, stop.clone(), reserved));
    let out = c.serve(Some(hooks)).await;
    stop.store(true, Ordering::SeqCst);
    let writes = w.await.unwrap();
    assert_eq!(out, "windows_done");
    eprintln!(
        "{} windows under {writes} concurrent writes in {:?}",
        plan.len(),
        t0.elapsed()
    );
    assert!(
        writes > 100,
        "the writer ran during the windows ({writes} statements)"
    );
    assert_final_is_state_at_high(&c, &initial).await;
    c.assert_evidence_agrees().await;
    assert_target_is_finals(&c).await;
    let finals: usize = c.final_rows().await.iter().map(|f| f.len()).sum();
    assert_eq!(
        c.audit_count(),
        finals as u64,
        "each FINAL row inserted exactly once"
    );
}
