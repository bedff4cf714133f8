//! T: the target ledger tables in the TARGET schema (DESIGN §2, §3.5).
//!
//! | table | one row per | written with |
//! |---|---|---|
//! | `_backfill_ledger_owner` | table-generation: its fencing token | [`claim`] |
//! | `_backfill_ledger_pages` | FINAL page credential (window, page, attempt, blake3) | [`crate::apply::apply_page`] |
//! | `_backfill_ledger_cursor` | table-generation: last replayed group, sub-cursor | [`crate::apply::apply_groups`] |
//! | `_backfill_ledger_activation` | table-generation: activation credential | [`write_activation`] |
//! | `_backfill_ledger_cursor_parts` | table-generation and key partition p >= 1: that partition's replay cursor | [`crate::parts::apply_groups_parts`] |
//!
//! Each apply transaction first reads the owner row under a shared lock and refuses a stale
//! token; a new owner's [`claim`] needs the exclusive lock, so it waits for in-flight
//! applies of the old owner and every later one of them is refused. These shared locks
//! are on the TARGET server, never in the state store: a Galera state store (DESIGN §18)
//! does not change them; a Galera *target* is not supported (its shared locks would hold
//! on one node only). Target sessions run
//! with `time_zone = '+00:00'` ([`session_init`]), so TIMESTAMP values land exactly, and
//! with [`TARGET_SQL_MODE`], so zero dates land as they are.
use crate::util::{digest_col, my, my_is_dup};
use kernel::codec::{self, DecodeError, Versioned};
use kernel::error::DefiniteCode;
use kernel::ids::{Attempt, Digest, Generation, JobId, PageNo, WindowId};
use kernel::position::BinlogPos;
use kernel::schema::{quote_ident, SealedSchema};
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use serde::{Deserialize, Serialize};

/// Names of the T tables.
pub const OWNER: &str = "_backfill_ledger_owner";
pub const PAGES: &str = "_backfill_ledger_pages";
pub const CURSOR: &str = "_backfill_ledger_cursor";
pub const ACTIVATION: &str = "_backfill_ledger_activation";
pub const CURSOR_PARTS: &str = "_backfill_ledger_cursor_parts";
/// The schema versions applied to the target (DESIGN §16, [`crate::schema`]).
pub const SCHEMA: &str = "_backfill_ledger_schema";

/// The sql_mode of every target session: strict (a value the target would convert is
/// refused, never stored changed), without NO_ZERO_DATE / NO_ZERO_IN_DATE (a source's
/// '0000-00-00' and '2024-00-15' are values to copy; a target server whose global mode has
/// them would refuse them), with NO_AUTO_VALUE_ON_ZERO (a 0 in an AUTO_INCREMENT column
/// is the value 0, not "the next id"), and with backslash escapes.
pub const TARGET_SQL_MODE: &str = "STRICT_ALL_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION";

/// Statements every target session runs on connect: one SET of the time zone and the
/// sql_mode (one round trip; a target connection is opened per write, so each counts).
/// `autocommit = 1` comes with every data-plane session's `SET NAMES`
/// ([`kernel::names::SET_NAMES_BINARY`]).
pub fn session_init() -> Vec<String> {
    vec![format!(
        "SET time_zone = '+00:00', SESSION sql_mode = '{TARGET_SQL_MODE}'"
    )]
}

/// Connection options for the target: `url` plus [`session_init`], and `SET NAMES binary`
/// on every session ([`kernel::names`]): values are written as their columns' own bytes.
pub fn target_opts(url: &str) -> Result<Opts> {
    let o = kernel::tls::mysql_opts(url).map_err(|e| {
        Error::definite(
            DefiniteCode::Usage,
            format!(
                "target URL {} is not valid: {e}",
                kernel::redact::redact_url(url)
            ),
        )
    })?;
    Ok(OptsBuilder::from_opts(kernel::names::binary_names(o))
        .init(session_init())
        .stmt_cache_size(64)
        .into())
}

/// Everything an apply needs to know about the table it writes.
#[derive(Clone, Debug)]
pub struct TargetCtx {
    pub job: JobId,
    pub generation: Generation,
    /// The target table's sealed schema (same columns as the source); its `database` is
    /// the target schema that also holds T.
    pub schema: SealedSchema,
    /// The table's key with the source server's weights of the changes being applied
    /// (DESIGN §14): the caller asks them before handing a batch to replay.
    pub keyer: kernel::key::Keyer,
    /// The fencing token of the lease this process holds.
    pub token: u64,
    /// Replay applies only the changes whose key lies in this range (a key-changing
    /// update's delete by its old key, its upsert by its new one); None: every key. Set
    /// only for the catch-up before a schema change reaches the target during the windows
    /// (DESIGN §16): the keys of the windows already in the target take their changes up
    /// to the DDL, the others are read after it. T's cursor and group digests are the
    /// whole groups' either way.
    pub within: Option<kernel::range::KeyRange>,
}

impl TargetCtx {
    pub(crate) fn t(&self, table: &str) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.schema.database),
            quote_ident(table)
        )
    }

    /// `job_id = J AND generation = G`, as integer literals (exact). The hot reads of T are
    /// text statements with it: most run on a fresh connection, where a prepared
    /// statement costs a PREPARE round trip before its EXECUTE.
    fn of_job(&self) -> String {
        format!(
            "job_id = {} AND generation = {}",
            self.job.0, self.generation.0
        )
    }

    pub fn who(&self) -> String {
        format!(
            "job {} {} (target {})",
            self.job,
            self.generation,
            self.schema.qualified()
        )
    }
}

/// Creates the T tables in `db` if they are missing (idempotent).
pub async fn ensure_ledger_tables(conn: &mut Conn, db: &str) -> Result<()> {
    let q = |t: &str| format!("{}.{}", quote_ident(db), quote_ident(t));
    let ddl = [
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
                job_id BIGINT UNSIGNED NOT NULL, generation BIGINT UNSIGNED NOT NULL,
                target_table VARCHAR(64) NOT NULL, token BIGINT UNSIGNED NOT NULL,
                PRIMARY KEY (job_id, generation)) ENGINE=InnoDB",
            q(OWNER)
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
                job_id BIGINT UNSIGNED NOT NULL, generation BIGINT UNSIGNED NOT NULL,
                window_id INT UNSIGNED NOT NULL, page_no INT UNSIGNED NOT NULL,
                attempt INT UNSIGNED NOT NULL, digest BINARY(32) NOT NULL,
                row_count INT UNSIGNED NOT NULL, token BIGINT UNSIGNED NOT NULL,
                PRIMARY KEY (job_id, generation, window_id, page_no)) ENGINE=InnoDB",
            q(PAGES)
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
                job_id BIGINT UNSIGNED NOT NULL, generation BIGINT UNSIGNED NOT NULL,
                file VARCHAR(255) NOT NULL, pos BIGINT UNSIGNED NOT NULL,
                gtid VARCHAR(128) NULL, rows_done INT UNSIGNED NOT NULL,
                group_digest BINARY(32) NOT NULL, token BIGINT UNSIGNED NOT NULL,
                PRIMARY KEY (job_id, generation)) ENGINE=InnoDB",
            q(CURSOR)
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
                job_id BIGINT UNSIGNED NOT NULL, generation BIGINT UNSIGNED NOT NULL,
                credential BLOB NOT NULL, digest BINARY(32) NOT NULL,
                PRIMARY KEY (job_id, generation)) ENGINE=InnoDB",
            q(ACTIVATION)
        ),
        // Key-partitioned replay (crate::parts): one cursor per partition p >= 1 under the
        // scheme of `parts` partitions; partition 0 is the main cursor above.
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
                job_id BIGINT UNSIGNED NOT NULL, generation BIGINT UNSIGNED NOT NULL,
                part INT UNSIGNED NOT NULL, parts INT UNSIGNED NOT NULL,
                file VARCHAR(255) NOT NULL, pos BIGINT UNSIGNED NOT NULL,
                gtid VARCHAR(128) NULL, rows_done INT UNSIGNED NOT NULL,
                group_digest BINARY(32) NOT NULL, token BIGINT UNSIGNED NOT NULL,
                PRIMARY KEY (job_id, generation, part)) ENGINE=InnoDB",
            q(CURSOR_PARTS)
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (
                job_id BIGINT UNSIGNED NOT NULL, generation BIGINT UNSIGNED NOT NULL,
                version INT UNSIGNED NOT NULL, fingerprint BINARY(32) NOT NULL,
                file VARCHAR(255) NOT NULL, pos BIGINT UNSIGNED NOT NULL,
                token BIGINT UNSIGNED NOT NULL,
                PRIMARY KEY (job_id, generation, version)) ENGINE=InnoDB",
            q(SCHEMA)
        ),
    ];
    for sql in ddl {
        conn.query_drop(sql)
            .await
            .map_err(my(&format!("creating the target ledger tables in `{db}`")))?;
    }
    Ok(())
}

fn fenced(ctx: &TargetCtx, now: Option<u64>) -> Error {
    Error::definite(
        DefiniteCode::Fenced,
        match now {
            Some(t) => format!(
                "{}: fencing token {} is stale in the target ledger (the target owner row holds {t}); another process owns this table: stop writing",
                ctx.who(),
                ctx.token
            ),
            None => format!("{}: the target ledger has no owner row; claim the target before applying", ctx.who()),
        },
    )
}

/// Records this process as the owner of the table-generation in T. The token only grows:
/// a claim with an older token than T's is refused (`fenced`).
pub async fn claim(conn: &mut Conn, ctx: &TargetCtx) -> Result<()> {
    let what = format!("claiming the target ledger for {}", ctx.who());
    conn.exec_drop(
        format!(
            "INSERT INTO {} (job_id, generation, target_table, token) VALUES (?, ?, ?, ?)
             ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))",
            ctx.t(OWNER)
        ),
        (ctx.job.0, ctx.generation.0, &ctx.schema.table, ctx.token),
    )
    .await
    .map_err(my(&what))?;
    let row: Option<(u64, String)> = conn
        .exec_first(
            format!(
                "SELECT token, target_table FROM {} WHERE job_id = ? AND generation = ?",
                ctx.t(OWNER)
            ),
            (ctx.job.0, ctx.generation.0),
        )
        .await
        .map_err(my(&what))?;
    match row {
        Some((t, table)) if t == ctx.token && table == ctx.schema.table => Ok(()),
        Some((t, table)) if t == ctx.token => Err(Error::definite(
            DefiniteCode::EvidenceConflict,
            format!(
                "{}: the target ledger's owner row names target table `{table}`",
                ctx.who()
            ),
        )),
        other => Err(fenced(ctx, other.map(|r| r.0))),
    }
}

/// Inside an apply transaction, before any other write: refuses a stale token.
pub(crate) async fn check_owner(
    tx: &mut mysql_async::Transaction<'_>,
    ctx: &TargetCtx,
) -> Result<()> {
    let now: Option<u64> = tx
        .query_first(format!(
            "SELECT token FROM {} WHERE {} LOCK IN SHARE MODE",
            ctx.t(OWNER),
            ctx.of_job()
        ))
        .await
        .map_err(my("checking the target owner"))?;
    if now != Some(ctx.token) {
        return Err(fenced(ctx, now));
    }
    Ok(())
}

/// A FINAL page credential as T holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageCredential {
    pub window: WindowId,
    pub page: PageNo,
    pub attempt: Attempt,
    pub digest: Digest,
    pub rows: u32,
}

/// Every page credential of a table-generation, in (window, page) order.
pub async fn page_credentials(conn: &mut Conn, ctx: &TargetCtx) -> Result<Vec<PageCredential>> {
    let rows: Vec<(u32, u32, u32, Vec<u8>, u32)> = conn
        .query(format!(
            "SELECT window_id, page_no, attempt, digest, row_count FROM {} WHERE {} ORDER BY window_id, page_no",
            ctx.t(PAGES),
            ctx.of_job()
        ))
        .await
        .map_err(my("reading target ledger page credentials"))?;
    rows.into_iter()
        .map(|(w, p, a, d, n)| {
            Ok(PageCredential {
                window: WindowId(w),
                page: PageNo(p),
                attempt: Attempt(a),
                digest: digest_col(&d, "target ledger page credential")?,
                rows: n,
            })
        })
        .collect()
}

/// The credential of one page, read under a shared lock so an in-flight transaction that
/// wrote it is waited for (used to resolve an unknown outcome).
pub(crate) async fn page_credential_locked(
    conn: &mut Conn,
    ctx: &TargetCtx,
    window: WindowId,
    page: PageNo,
) -> Result<Option<PageCredential>> {
    let mut tx = conn
        .start_transaction(Default::default())
        .await
        .map_err(my("reading a target ledger page credential"))?;
    let row: Option<(u32, Vec<u8>, u32)> = tx
        .exec_first(
            format!(
                "SELECT attempt, digest, row_count FROM {} WHERE job_id = ? AND generation = ? AND window_id = ? AND page_no = ? LOCK IN SHARE MODE",
                ctx.t(PAGES)
            ),
            (ctx.job.0, ctx.generation.0, window.0, page.0),
        )
        .await
        .map_err(my("reading a target ledger page credential"))?;
    tx.commit()
        .await
        .map_err(my("reading a target ledger page credential"))?;
    row.map(|(a, d, n)| {
        Ok(PageCredential {
            window,
            page,
            attempt: Attempt(a),
            digest: digest_col(&d, "target ledger page credential")?,
            rows: n,
        })
    })
    .transpose()
}

/// T's replay cursor: the end of the last group applied, and for a group applied in
/// chunks the number of its changes applied so far (`rows_done`, 0 = the group is
/// complete). Counting changes, not chunks, keeps the sub-cursor valid when a restart
/// uses another chunk size (I3).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReplayCursor {
    pub end: kernel::change::GroupEnd,
    pub rows_done: u32,
    /// Digest of the group's changes for this table (see [`crate::apply::ReplayGroup`]).
    pub group_digest: Digest,
}

/// A cursor's stored columns `file, pos, gtid, rows_done, group_digest`, in that order
/// (the main cursor row and the part rows store it alike).
pub(crate) fn cursor_values(c: &ReplayCursor) -> [mysql_async::Value; 5] {
    [
        c.end.pos.file.clone().into(),
        c.end.pos.pos.into(),
        c.end.gtid.as_ref().map(|g| g.to_string()).into(),
        c.rows_done.into(),
        c.group_digest.0.to_vec().into(),
    ]
}

type CursorRow = (String, u64, Option<String>, u32, Vec<u8>);
type PartCursorRow = (u32, u32, String, u64, Option<String>, u32, Vec<u8>);

/// The read of T's main cursor row of `ctx` (under a share lock when `locked`).
fn cursor_sql(ctx: &TargetCtx, locked: bool) -> String {
    format!(
        "SELECT file, pos, gtid, rows_done, group_digest FROM {} WHERE {}{}",
        ctx.t(CURSOR),
        ctx.of_job(),
        if locked { " LOCK IN SHARE MODE" } else { "" }
    )
}

/// T's replay cursor of a table-generation; `locked` waits for an in-flight writer.
pub async fn replay_cursor(
    conn: &mut Conn,
    ctx: &TargetCtx,
    locked: bool,
) -> Result<Option<ReplayCursor>> {
    // One autocommitted text statement (every data-plane session sets autocommit = 1,
    // `kernel::names::SET_NAMES_BINARY`): it is its own transaction, and LOCK IN SHARE
    // MODE waits for a writer in flight exactly as it did inside START TRANSACTION ..
    // COMMIT. One round trip where the prepared read in a transaction took four on the
    // fresh connection most callers have.
    let row: Option<CursorRow> = conn
        .query_first(cursor_sql(ctx, locked))
        .await
        .map_err(my("reading the target ledger's cursor"))?;
    row.map(|r| cursor_of(ctx, r, "target ledger cursor"))
        .transpose()
}

fn cursor_of(ctx: &TargetCtx, row: CursorRow, what: &str) -> Result<ReplayCursor> {
    let (file, pos, gtid, rows_done, d) = row;
    let gtid = match gtid {
        None => None,
        Some(g) => Some(kernel::position::Gtid::parse(&g).ok_or_else(|| {
            Error::definite(
                DefiniteCode::EvidenceCorrupt,
                format!("{}: {what} GTID `{g}` does not parse", ctx.who()),
            )
        })?),
    };
    Ok(ReplayCursor {
        end: kernel::change::GroupEnd {
            pos: BinlogPos::new(file, pos),
            gtid,
        },
        rows_done,
        group_digest: digest_col(&d, what)?,
    })
}

/// One row of `_backfill_ledger_cursor_parts`: partition `part` (>= 1) of the scheme with
/// `parts` partitions has applied every change of its keys through `cursor`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PartRow {
    pub part: u32,
    pub parts: u32,
    pub cursor: ReplayCursor,
}

/// T's main cursor and every part row of the table-generation (in part order), read in
/// one transaction under share locks, so a writer still in flight is waited for.
pub async fn replay_cursors(
    conn: &mut Conn,
    ctx: &TargetCtx,
) -> Result<(Option<ReplayCursor>, Vec<PartRow>)> {
    let what = "reading the target ledger's replay cursors";
    let mut tx = conn
        .start_transaction(Default::default())
        .await
        .map_err(my(what))?;
    let main: Option<CursorRow> = tx
        .query_first(cursor_sql(ctx, true))
        .await
        .map_err(my(what))?;
    let parts: Vec<PartCursorRow> = match tx
        .query(format!(
            "SELECT part, parts, file, pos, gtid, rows_done, group_digest FROM {} WHERE {} ORDER BY part LOCK IN SHARE MODE",
            ctx.t(CURSOR_PARTS),
            ctx.of_job()
        ))
        .await
    {
        Ok(rows) => rows,
        // A target whose T predates partitioned replay: no part ever wrote a row (the
        // table is created before any part writes), so one connection works unchanged.
        Err(e) if is_missing_table(&e) => Vec::new(),
        Err(e) => return Err(my(what)(e)),
    };
    tx.commit().await.map_err(my(what))?;
    let main = main
        .map(|r| cursor_of(ctx, r, "target ledger cursor"))
        .transpose()?;
    let parts = parts
        .into_iter()
        .map(|(part, n, file, pos, gtid, rows_done, d)| {
            Ok(PartRow {
                part,
                parts: n,
                cursor: cursor_of(
                    ctx,
                    (file, pos, gtid, rows_done, d),
                    "target ledger part cursor",
                )?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((main, parts))
}

fn is_missing_table(e: &mysql_async::Error) -> bool {
    kernel::error::mysql_server_code(e) == Some(kernel::error::codes::ER_NO_SUCH_TABLE)
}

/// The activation credential (DESIGN §7): deterministic, binds generation, B, F, the
/// range-chain root and L's chain digest at F.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activation {
    pub job: JobId,
    pub generation: Generation,
    pub b: BinlogPos,
    pub f: BinlogPos,
    pub chain_root: Digest,
    pub l_digest: Digest,
}

impl Versioned for Activation {
    const KIND: [u8; 4] = *b"ACTV";
    const VERSION: u16 = 1;
}

impl Activation {
    /// Decodes a credential (every version this build has written).
    pub fn decode(bytes: &[u8]) -> Result<Activation, DecodeError> {
        codec::decode(bytes)
    }
}

/// Writes the activation credential in its own target transaction. Writing the same
/// credential again is AlreadyCommitted (returns false); a different one is a conflict.
pub async fn write_activation(conn: &mut Conn, ctx: &TargetCtx, a: &Activation) -> Result<bool> {
    let what = format!("writing the activation credential of {}", ctx.who());
    let bytes = codec::encode(a);
    let digest = Digest::of(&bytes);
    let mut tx = conn
        .start_transaction(Default::default())
        .await
        .map_err(my(&what))?;
    check_owner(&mut tx, ctx).await?;
    let r = tx
        .exec_drop(
            format!(
                "INSERT INTO {} (job_id, generation, credential, digest) VALUES (?, ?, ?, ?)",
                ctx.t(ACTIVATION)
            ),
            (ctx.job.0, ctx.generation.0, &bytes, &digest.0[..]),
        )
        .await;
    match r {
        Ok(()) => {
            tx.commit().await.map_err(my(&what))?;
            Ok(true)
        }
        Err(e) if my_is_dup(&e) => {
            drop(tx);
            match read_activation(conn, ctx).await? {
                Some(old) if &old == a => Ok(false),
                _ => Err(Error::definite(
                    DefiniteCode::EvidenceConflict,
                    format!(
                        "{what}: the target ledger already holds a different activation credential"
                    ),
                )),
            }
        }
        Err(e) => Err(my(&what)(e)),
    }
}

/// The activation credential in T, verified against its stored digest.
pub async fn read_activation(conn: &mut Conn, ctx: &TargetCtx) -> Result<Option<Activation>> {
    let row: Option<(Vec<u8>, Vec<u8>)> = conn
        .query_first(format!(
            "SELECT credential, digest FROM {} WHERE {}",
            ctx.t(ACTIVATION),
            ctx.of_job()
        ))
        .await
        .map_err(my("reading the activation credential"))?;
    let Some((bytes, d)) = row else {
        return Ok(None);
    };
    let corrupt = |m: String| {
        Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!("{}: activation credential {m}", ctx.who()),
        )
    };
    if Digest::of(&bytes) != digest_col(&d, "activation")? {
        return Err(corrupt(
            "does not hash to its stored digest (tampered)".into(),
        ));
    }
    let a = Activation::decode(&bytes).map_err(|e| corrupt(e.to_string()))?;
    if (a.job, a.generation) != (ctx.job, ctx.generation) {
        return Err(corrupt("names another job or generation".into()));
    }
    Ok(Some(a))
}
