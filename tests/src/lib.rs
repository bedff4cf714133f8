//! The one support module of the end-to-end suites (`tests/tests/{cli,crash,scenarios}`):
//! the `backfill` program under test ([`bin`]), polling ([`wait_for`]), server-side
//! comparisons ([`checksum`], [`table_digest`]), the window/serve test world
//! ([`case::Case`]), the install test tables ([`install::Tables`]), the ledger-built finish
//! world ([`world::World`]), captured log events ([`logs`]) and the lock every test that
//! runs `serve` in this process holds ([`in_process`]); tables of every key shape driven
//! through the real program ([`keyed`]), tables of every charset ([`charsets`]) and their
//! independent comparison ([`compare`]), and the 50-table schema of bulk install ([`bulk`]).
#![allow(clippy::unwrap_used, clippy::expect_used)]
pub use harness;

pub mod bf;
pub mod bin;
pub mod bulk;
pub mod case;
pub mod charsets;
pub mod compare;
pub mod demo;
pub mod install;
pub mod keyed;
pub mod logs;
pub mod oracle;
pub mod scrape;
pub mod serving;
pub mod typed;
pub mod workload;
pub mod world;

pub use bin::{backfill, command, Run};

use std::time::{Duration, Instant};

/// How long [`wait_for`] and its kin wait before failing the test.
pub const WAIT_LIMIT: Duration = Duration::from_secs(120);

/// Polls `ok` every 100 ms until it holds; fails the test after [`WAIT_LIMIT`].
pub async fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    wait_until(what, || ok().then_some(())).await
}

/// [`wait_for`] with an async condition.
pub async fn wait_for_async(what: &str, mut ok: impl AsyncFnMut() -> bool) {
    let until = Instant::now() + WAIT_LIMIT;
    while !ok().await {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `f` every 20 ms until it gives a value; fails the test after [`WAIT_LIMIT`].
pub async fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + WAIT_LIMIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `CHECKSUM TABLE` of `db.table` as the server prints it.
pub fn checksum(server: &harness::Server, db: &str, table: &str) -> String {
    let out = server.sql_in(db, &format!("CHECKSUM TABLE {table}"));
    out.split('\t').nth(1).unwrap_or("").trim().to_string()
}

/// A digest of `db.table` computed by the server alone, independent of any decoding by
/// the pipeline (or by this crate): every row as the exact rendering of each of `columns`
/// that [`compare`] uses (the hex of the value's bytes: a DECIMAL's text with its scale,
/// a DOUBLE's shortest round-trip text, a FLOAT through its exact widening to DOUBLE, the
/// type read from `information_schema`; NULL kept apart from any value), in key order,
/// folded into one SHA2 by the server, with the row count. Two servers holding the same
/// rows give the same answer; plain `HEX()` would round a DECIMAL or FLOAT to an integer.
pub fn table_digest(
    server: &harness::Server,
    db: &str,
    table: &str,
    key: &str,
    columns: &[&str],
) -> String {
    let types = server.sql(&format!(
        "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = '{table}'"
    ));
    let type_of = |c: &str| {
        types
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .find(|(n, _)| *n == c)
            .map(|(_, t)| t.to_string())
            .unwrap_or_else(|| panic!("{db}.{table} has no column {c}"))
    };
    let exprs: Vec<String> = columns
        .iter()
        .map(|c| compare::value_expr(c, &type_of(c)))
        .collect();
    server.sql_in(db, &digest_of(table, key, &exprs))
}

/// The statement of [`table_digest`] (one row: count, digest) for a table without FLOAT
/// columns (their type is not known here: [`table_digest`] widens them).
pub fn digest_sql(table: &str, key: &str, columns: &[&str]) -> String {
    let exprs: Vec<String> = columns.iter().map(|c| compare::hex_expr(c)).collect();
    digest_of(table, key, &exprs)
}

/// Count and SHA2 of the rows of `table` rendered as `exprs` (each `N` for NULL), in key
/// order.
fn digest_of(table: &str, key: &str, exprs: &[String]) -> String {
    let row = exprs
        .iter()
        .map(|e| format!("CONCAT('v', {e})"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SET SESSION group_concat_max_len = 1 << 30; \
         SELECT COUNT(*), IFNULL(SHA2(GROUP_CONCAT(CONCAT_WS(',', {row}) ORDER BY `{key}` \
         SEPARATOR ';'), 256), '-') FROM `{table}`"
    )
}

/// Held by every test that runs `serve` (or arms a test seam, or reads the admission
/// snapshot or a counter) in this process: those are process-wide, and the tests of one
/// binary run on parallel threads. Taking it also clears the captured log events.
pub async fn in_process() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let g = LOCK.lock().await;
    logs::clear();
    reset_process_seams();
    g
}

/// What an earlier test of this process may have left: an admission slot holding its
/// serve's pools (holds stay there after that serve ended), armed seams, gated or failing
/// KILL confirmations, injected lost commit answers. Their hit counters keep counting:
/// tests compare them with their value before arming.
fn reset_process_seams() {
    use bf::seams;
    serving::forget();
    seams::kills::open_kills();
    seams::kills::fail_confirmations(0);
    seams::lost_commits::inject_lost_commit_answers(0);
    seams::task_panic::arm(kernel::ids::JobId(0));
    seams::read_panic::arm(kernel::ids::JobId(0), kernel::ids::WindowId(0));
    seams::activation_gate::arm(kernel::ids::JobId(0)).close();
}

/// Leaks a private server so tests can hold it as `&'static` (the harness watchdog still
/// removes it when the test binary exits).
pub fn leak(server: harness::Server) -> &'static harness::Server {
    Box::leak(Box::new(server))
}

/// Logs to the test's output (RUST_LOG, default warn) and captures INFO and above for
/// [`logs`].
pub fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_test_writer()
                .with_filter(filter),
        )
        .with(logs::Capture.with_filter(tracing_subscriber::filter::LevelFilter::INFO))
        .try_init();
}
