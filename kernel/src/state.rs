//! The state store: a MySQL/MariaDB schema holding L, D, J, the range chain, the material
//! registry, jobs and commands (DESIGN §2). Reached through sqlx; its migrations are
//! embedded in the binary and applied on first use, under sqlx's migration lock, so two
//! processes starting at once cannot both migrate.
//!
//! Migration numbers are allotted by owner so that parallel work cannot collide:
//! 0001-0009 jobs, generations, schemas, plans, commands (install); 0010-0019 L and D
//! (capture); 0020-0039 J, range chain, materials (ledger); 0040+ later issues.
//!
//! The state store may be a Galera cluster ([`failover`]). sqlx's migration lock is
//! `GET_LOCK`, which holds on one node only: processes that open the same host list try
//! the nodes in the same order and so migrate through the same node, under one lock.
use crate::error::{from_sqlx, Error, Result};
use crate::redact::redact_url;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use std::str::FromStr;
use std::time::Duration;

pub mod failover;

/// The embedded migrations.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Options for opening the state store.
#[derive(Clone, Debug)]
pub struct StateOptions {
    pub max_connections: u32,
    pub connect_timeout: Duration,
}

impl Default for StateOptions {
    fn default() -> Self {
        StateOptions {
            max_connections: 8,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// Opens the state store at `url` (its path names the schema), creating the schema if it
/// does not exist and applying every pending migration. A URL naming several hosts
/// (`mysql://u:p@h1:p1,h2:p2/db`, the nodes of a Galera cluster) opens on the first that
/// answers a short probe and keeps future connections on a live node ([`failover`]).
pub async fn open(url: &str, opts: &StateOptions) -> Result<MySqlPool> {
    let urls = failover::split_hosts(url)
        .map_err(|m| Error::definite(crate::error::DefiniteCode::Usage, m))?;
    let hosts = urls
        .iter()
        .map(|u| MySqlConnectOptions::from_str(u).map_err(|e| bad_url(url, &e)))
        .collect::<Result<Vec<_>>>()?;
    let Some(db) = hosts[0].get_database().map(str::to_string) else {
        return Err(Error::definite(
            crate::error::DefiniteCode::Usage,
            format!(
                "state store URL {} names no schema; add one, e.g. .../backfill_state",
                redact_url(url)
            ),
        ));
    };
    let current = match hosts.len() {
        1 => 0,
        _ => failover::first_live(&hosts).await.map_err(|why| {
            Error::transient(format!(
                "no node of state store {} answers: {why}",
                redact_url(url)
            ))
        })?,
    };
    let connect = hosts[current].clone();
    ensure_schema(&urls[current], connect.clone().database(""), &db, opts).await?;
    let pool = MySqlPoolOptions::new()
        .max_connections(opts.max_connections)
        .acquire_timeout(opts.connect_timeout)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| Box::pin(ping_if_idle(conn, meta)))
        .after_release(|conn, _| Box::pin(settle_on_release(conn)))
        .after_connect(|conn, _| Box::pin(failover::set_session(conn)))
        .connect_with(connect)
        .await
        .map_err(|e| {
            from_sqlx(
                &format!("connecting to state store {}", redact_url(url)),
                &e,
            )
        })?;
    MIGRATOR
        .run(&pool)
        .await
        .map_err(|e| Error::transient(format!("migrating state store {}: {e}", redact_url(url))))?;
    if hosts.len() > 1 {
        failover::spawn_watch(pool.clone(), hosts, current);
    }
    Ok(pool)
}

/// A pooled connection idle this long is pinged before it is handed out again.
pub const PING_IF_IDLE: Duration = Duration::from_secs(1);

/// The check before a pooled connection is handed out: a ping only when it sat idle for
/// [`PING_IF_IDLE`] or more (sqlx's default pings before EVERY use: measured at 200
/// tables, ~250 pings a table on the state store, one round trip per statement more).
///
/// Why skipping the ping of a connection used within the last second is safe: a ping never
/// promised the connection would survive to the statement (the server can go between the
/// two), so every caller already takes a failed statement as a transient or uncertain
/// outcome and resolves it from the evidence (I4). The ping after idleness keeps what it
/// is good for: a connection the server or a failover closed meanwhile is replaced before
/// use instead of failing its first statement (an error or `false` closes it, and sqlx
/// takes another).
async fn ping_if_idle(
    conn: &mut sqlx::MySqlConnection,
    meta: sqlx::pool::PoolConnectionMetadata,
) -> std::result::Result<bool, sqlx::Error> {
    use sqlx::Connection as _;
    if meta.idle_for >= PING_IF_IDLE {
        conn.ping().await?;
    }
    Ok(true)
}

/// How long a connection given back to the pool may take to settle (read the answers of
/// statements still owed to it) before it is closed instead.
pub const RELEASE_SETTLE: Duration = Duration::from_secs(5);

/// The check when a connection is given back, before sqlx's own ping on release.
///
/// Why: sqlx 0.9's statements are not cancel-safe, and its release ping has no bound
/// (upstream sqlx issue 4349). A statement future dropped mid-flight (a task aborted, a
/// `select!` that lost) can leave the connection waiting for an answer the server will
/// never send; the ping on release then waits forever and keeps the pool's permit, and
/// `Pool::close` waits for every permit: serve's stop hung 23 minutes so. Here the
/// connection first settles (sqlx's `flush`: send what is buffered, read every answer
/// still owed) within [`RELEASE_SETTLE`]; one that does not is closed without further
/// I/O (an `Err` makes sqlx close it hard) and the pool opens another when needed. A
/// settled connection owes nothing, so the ping after it is one round trip the server
/// answers. Nothing is lost by closing: the dropped statement's outcome was already
/// unknown to its caller, which resolves it from the evidence (I4).
async fn settle_on_release(
    conn: &mut sqlx::MySqlConnection,
) -> std::result::Result<bool, sqlx::Error> {
    use sqlx::Connection as _;
    match tokio::time::timeout(RELEASE_SETTLE, conn.flush()).await {
        Ok(r) => r.map(|()| true),
        Err(_) => {
            tracing::warn!(
                secs = RELEASE_SETTLE.as_secs(),
                "a state-store connection given back mid-statement did not settle in time: closed"
            );
            Err(sqlx::Error::PoolTimedOut)
        }
    }
}

/// The schema a state URL names (one host or several), if any.
pub fn database_of(url: &str) -> Option<String> {
    let first = failover::split_hosts(url).ok()?.into_iter().next()?;
    MySqlConnectOptions::from_str(&first)
        .ok()?
        .get_database()
        .map(str::to_string)
}

async fn ensure_schema(
    url: &str,
    opts: MySqlConnectOptions,
    db: &str,
    o: &StateOptions,
) -> Result<()> {
    use sqlx::ConnectOptions;
    let mut conn = tokio::time::timeout(o.connect_timeout, opts.connect())
        .await
        .map_err(|_| {
            Error::transient(format!(
                "connecting to state store server for `{db}`: timed out"
            ))
        })?
        .map_err(|e| {
            let err = from_sqlx(&format!("connecting to state store server for `{db}`"), &e);
            crate::tls::with_plain_hint(url, crate::error::sqlx_server_code(&e), false, err)
        })?;
    let sql = format!(
        "CREATE DATABASE IF NOT EXISTS {}",
        crate::schema::quote_ident(db)
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut conn)
        .await
        .map_err(|e| from_sqlx(&format!("creating state schema `{db}`"), &e))?;
    Ok(())
}

fn bad_url(url: &str, e: &sqlx::Error) -> Error {
    Error::definite(
        crate::error::DefiniteCode::Usage,
        format!("state store URL {} is not valid: {e}", redact_url(url)),
    )
}
