//! `backfill verify`: an independent row-by-row, field-by-field comparison of a source
//! table and its target (DESIGN §11 I1, §13).
//!
//! # Why it is independent
//!
//! I1 says the target equals the source "checked by a comparator that does not share the
//! pipeline's decoding". The pipeline reads rows and binlog events as `mysql_common`
//! values and re-encodes them; a bug there (a shifted DATETIME, a lost trailing 0x00, a
//! rounded DECIMAL) would be invisible to a check that decodes through the same code. This
//! module never decodes a value. Each server renders every value itself, as the hex of
//! its exact bytes, and only digests and hex text cross the wire (text protocol, no
//! prepared statements for row data). Nothing here uses the sealed schema, the codec, the
//! pages or the ledger: it reads the column list from `information_schema` of both sides
//! and reports a definition difference as a difference of its own: a column missing on
//! one side, or differing in its type (length, signedness, ENUM members), nullability,
//! character set, collation, default, EXTRA (`auto_increment`, `on update`, INVISIBLE,
//! generated) or generation expression (`column.rs`), and an index missing on one side
//! or differing in its columns, their order and prefix lengths, or its uniqueness
//! (`index.rs`, which also argues the one uniqueness difference the design makes). Such
//! a difference makes the report not clean whatever the rows say.
//!
//! The key is the one thing verify reads as a value, and only to order and pair rows.
//! Rows are merged by the job's key columns (given by name, in index order) and each
//! row's sort key is built from what its own server computed in the same SELECT
//! (`verify/key.rs`, [`KeyCols`]): for CHAR/VARCHAR the server's
//! `WEIGHT_STRING(col AS CHAR(n))`; for DECIMAL, TIME, ENUM and SET a fixed-width text
//! the server computes (shifted decimal digits, `HEX(col + 0)`); for integers the
//! server's decimal text, encoded by [`kernel::key::encode`]; for binary and fixed-width
//! temporal columns the server's bytes. The last key goes back into the next chunk's range seek as typed SQL literals.
//! None of this decides whether two rows are equal: pairing only chooses which rows are
//! compared, and the key columns are hashed like every other column, so a pair the
//! server calls one key but whose bytes differ ('ab' and 'AB' under a `_ci` collation,
//! 'k' and 'k ' under PAD SPACE) is a differing row that names the key column. A sort key
//! that disagreed with the server's `ORDER BY` is refused (each chunk's sort keys must be
//! strictly increasing after the cursor), so it cannot silently skip rows; the worst a
//! wrong sort key can do is stop the walk with an error or report one key as a missing
//! and an extra key: a false difference, never a false equality.
//!
//! # Why the hashing is exact
//!
//! For every compared column the server computes `CAST(col AS BINARY)` (see
//! [`value_expr`]) and the row hash is
//! `SHA2(CONCAT_WS(0x1f, IF(col IS NULL, 'NULL', HEX(bytes)), ...), 256)`. HEX emits only
//! `0-9A-F`, so the separator and the word `NULL` cannot be produced by a value: the
//! encoding is injective and two rows hash alike only if every column is byte-equal.
//! Numbers and temporal values skip the HEX: their text is never empty and is made of
//! digits, signs, `.`, `e`, `:`, `-` and space, so it cannot hold the separator or spell
//! `NULL` either (`sql.rs`, `plain_text`).
//! Per type, measured on MariaDB 10.11:
//! * CHAR/VARCHAR/TEXT/ENUM/SET/JSON (MariaDB: LONGTEXT): the stored bytes, so trailing
//!   spaces, case and Unicode normalization differences all count (a `=` comparison
//!   under a PAD SPACE or `_ci` collation would hide them). CHAR(n) values are read
//!   without their pad spaces by the server on both sides, as they are stored.
//! * BINARY/VARBINARY/BLOB: the bytes; BINARY(n) keeps its trailing 0x00.
//! * NULL versus '': `'NULL'` versus the empty HEX.
//! * DECIMAL: its text with the declared scale (`-1.500`). Plain `HEX(decimal)` would be
//!   the value rounded to a BIGINT, which is why `CAST(.. AS BINARY)` is used.
//! * DATETIME(6)/TIME(n)/DATE: their text with every fractional digit, never shifted.
//! * TIMESTAMP(6): its text in the session zone, which both sessions set to `+00:00`, so
//!   the same instant written under different session zones compares equal and a
//!   different instant does not.
//! * DOUBLE: the server's shortest round-trip text (`0.30000000000000004` vs `0.3`),
//!   which is injective on doubles. FLOAT: widened to DOUBLE first, exactly, because a
//!   FLOAT's own text has about 6 digits (1.0000001 and 1.0000002 both print `1`).
//!   Caveat: the text form is the server's, so a source and a target on server versions
//!   that print doubles differently report a false difference (never a false equality);
//!   `-0` and `0` print alike and compare equal.
//! * BIT: its raw bytes. Integers and YEAR: their decimal text.
//!
//! Both sessions run the same [`SESSION_SETUP`] (UTC zone, fixed SQL mode).
//!
//! # Pinning
//!
//! The source read view is `START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY` under
//! REPEATABLE READ, and its binlog position (MariaDB `binlog_snapshot_file/position`) is
//! recorded in the report. [`pin_source`] opens it and returns a [`PinnedSource`] whose
//! [`PinnedSource::snapshot_position`] lets the caller drive the target's apply to exactly
//! that position and pause it there; [`PinnedSource::compare`] then opens the target's own
//! consistent snapshot and walks. At a quiescent point [`verify`] does both at once. On
//! MySQL the position is not reported (`None`): the caller must pin by other means (a
//! brief lock around the snapshot start, later issue). A long walk holds both read views
//! open (InnoDB keeps undo for them); split it with `max_chunks` and the cursor.
//!
//! # Walk and memory
//!
//! Keys are walked in chunks of `chunk_size`: each side answers "the next keys after the
//! cursor, ordered by the server" (a range-seek predicate of [`kernel::key::sql`] with the
//! cursor's values as typed literals, `ORDER BY` the key columns) and [`plan_step`]
//! compares up to the smaller last key of the full chunks. Rows whose hashes differ get one more query per side for
//! per-column digests, lengths and a short preview, in batches of at most
//! [`DETAIL_BATCH`] keys. At most the two chunks of one step are held, plus one detail batch.
//! Before any row is read, a chunk is compared by its count and digest on each server
//! (`sql::digest_sql`: the SHA-256 of its encoded rows in key order; `sql::sum_sql`, a
//! sum of per-row hashes, once a chunk is too long to digest): an equal chunk sends two
//! values per side and no key. The source reads the next chunk's bound in the same
//! snapshot while the target is still digesting.
//!
//! # Resuming
//!
//! A [`VerifyCursor`] holds the last key compared and the counts so far; it advances only
//! after a whole step succeeded, so after an error it is still a valid resume point.
//! Persist it (serde; `VCUR` v2 with [`VerifyCursor::encode`], which holds the last key
//! as typed values with its sort key; v1 cursors of integer keys still decode) and pass it
//! back to continue after its key.
pub mod activation;
mod column;
mod diff;
mod index;
mod key;
pub mod pinned;
mod read;
mod report;
pub mod sample;
mod sql;
mod walk;

pub use diff::{field_diffs, merge_join, plan_step, FieldDetail, KeyDiff, KeyHash, Merge, Step};
pub use key::{Key, KeyCol, KeyCols, KeyKind};
pub use read::SESSION_SETUP;
pub use report::{Examples, FieldDiff, FieldValue, PreviewKind, Report, Tally, VerifyCursor};
pub use sql::{value_expr, Column};

use kernel::error::{DefiniteCode, Error, Result};
use kernel::position::BinlogPos;
use kernel::redact::redact_url;
use kernel::schema::quote_ident;
use mysql_async::Pool;
use read::Session;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use walk::{Side, Walk};

/// Keys whose details are fetched in one query.
pub const DETAIL_BATCH: usize = 500;

/// One side of the comparison: a pool and a table.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub pool: Pool,
    pub database: String,
    pub table: String,
}

impl Endpoint {
    /// An endpoint on an existing pool.
    pub fn new(pool: Pool, database: impl Into<String>, table: impl Into<String>) -> Endpoint {
        Endpoint {
            pool,
            database: database.into(),
            table: table.into(),
        }
    }

    /// An endpoint on a new pool for `url` (`mysql://user:pass@host:port[/db]`).
    pub fn from_url(url: &str, database: &str, table: &str) -> Result<Endpoint> {
        let opts = kernel::tls::mysql_opts(url).map_err(|e| {
            Error::definite(
                DefiniteCode::Usage,
                format!("invalid server URL {}: {e}", redact_url(url)),
            )
        })?;
        Ok(Endpoint::new(Pool::new(opts), database, table))
    }

    /// `db`.`table`, quoted.
    pub fn qualified(&self) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.database),
            quote_ident(&self.table)
        )
    }
}

/// How a run walks and reports.
#[derive(Clone, Debug)]
pub struct VerifyOptions {
    /// Keys per chunk (default 10 000).
    pub chunk_size: usize,
    /// Examples kept per kind of difference (default 20).
    pub max_examples: usize,
    /// Bytes of each differing value shown (default 64).
    pub preview_bytes: usize,
    /// Stop after this many chunks in this run (resume with the cursor); `None`: walk to
    /// the end.
    pub max_chunks: Option<u64>,
    /// Bound on getting a connection (default 30 s).
    pub connect_timeout: Duration,
    /// Bound on each query (default 10 min).
    pub query_timeout: Duration,
    /// Stops the walk between chunks; the report then says `complete: false`.
    pub cancel: CancellationToken,
    /// Compare only a seeded sample of the chunks (`sample`); `None`: every chunk.
    pub sample: Option<sample::Sample>,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            chunk_size: 10_000,
            max_examples: 20,
            preview_bytes: 64,
            max_chunks: None,
            connect_timeout: Duration::from_secs(30),
            query_timeout: Duration::from_secs(600),
            cancel: CancellationToken::new(),
            sample: None,
        }
    }
}

/// The source side, inside its consistent snapshot.
pub struct PinnedSource {
    session: Session,
    name: String,
    columns: Vec<Column>,
    indexes: Vec<index::Index>,
    key: KeyCols,
    snapshot: Option<BinlogPos>,
    options: VerifyOptions,
}

/// Opens the source's consistent snapshot. `key` names the table's key columns in index
/// order (DESIGN §14: its PRIMARY KEY, or the NOT NULL UNIQUE key the job sealed).
pub async fn pin_source(
    source: &Endpoint,
    key: &[&str],
    options: &VerifyOptions,
) -> Result<PinnedSource> {
    if options.chunk_size == 0 {
        return Err(Error::definite(
            DefiniteCode::Usage,
            "verify chunk size must be at least 1",
        ));
    }
    let name = source.qualified();
    let mut session = Session::connect(
        "source",
        &source.pool,
        options.connect_timeout,
        options.query_timeout,
    )
    .await?;
    let columns = session.columns(&source.database, &source.table).await?;
    let indexes = session.indexes(&source.database, &source.table).await?;
    let key = KeyCols::of(&name, &columns, key)?;
    let snapshot = session.open_snapshot().await?;
    unchanged_definition(&mut session, source, (&columns, &indexes)).await?;
    Ok(PinnedSource {
        session,
        name,
        columns,
        indexes,
        key,
        snapshot,
        options: options.clone(),
    })
}

/// Fails (transient: run again) when the source's definition changed while its snapshot
/// opened. The dictionary is not versioned by read views, so it is read before the
/// snapshot opens and again after: equal both times, no DDL came between the read and the
/// snapshot's position P, and the definition compared is the one in force at P (the target
/// is replayed to P, DDLs included). Without this an `ADD INDEX` committed in that gap
/// would be reported as an index only on the target.
async fn unchanged_definition(
    session: &mut Session,
    source: &Endpoint,
    (columns, indexes): (&[Column], &[index::Index]),
) -> Result<()> {
    let (db, table) = (&source.database, &source.table);
    if session.columns(db, table).await? == columns && session.indexes(db, table).await? == indexes
    {
        return Ok(());
    }
    Err(Error::transient(format!(
        "the definition of {} changed while verify opened its snapshot (a DDL just ran); \
         run verify again",
        source.qualified()
    )))
}

/// The target's key columns: the source's names, and the same types and collations (keys
/// ordered differently on the two sides cannot be merged).
fn target_key(name: &str, columns: &[Column], source: &KeyCols) -> Result<KeyCols> {
    let names = source.names();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let key = KeyCols::of(name, columns, &names)?;
    for (s, t) in source.0.iter().zip(&key.0) {
        if s.kind != t.kind {
            return Err(Error::definite(
                DefiniteCode::Usage,
                format!(
                    "key column `{}` is {:?} on the source but {:?} on the target: keys \
                     ordered differently cannot be merged; make the definitions equal",
                    s.name, s.kind, t.kind
                ),
            ));
        }
    }
    Ok(key)
}

impl PinnedSource {
    /// The binlog position of the source read view (MariaDB), to drive the target to.
    pub fn snapshot_position(&self) -> Option<&BinlogPos> {
        self.snapshot.as_ref()
    }

    /// Places the snapshot position in `stream`'s current lineage epoch
    /// (`kernel::log::live_position`), so it orders against L after a repoint.
    pub async fn place_in_stream(&mut self, pool: &sqlx::MySqlPool, stream: &str) -> Result<()> {
        if let Some(p) = self.snapshot.take() {
            let conn = self.session.conn();
            self.snapshot = Some(kernel::log::live_position(pool, stream, conn, p).await?);
        }
        Ok(())
    }

    /// Opens the target's snapshot and walks from `cursor`, which advances chunk by chunk
    /// (on error it still holds the last complete step).
    pub async fn compare(self, target: &Endpoint, cursor: &mut VerifyCursor) -> Result<Report> {
        let started = Instant::now();
        let o = &self.options;
        let tname = target.qualified();
        let mut tsession =
            Session::connect("target", &target.pool, o.connect_timeout, o.query_timeout).await?;
        let tcolumns = tsession.columns(&target.database, &target.table).await?;
        let tkey = target_key(&tname, &tcolumns, &self.key)?;
        let tindexes = tsession.indexes(&target.database, &target.table).await?;
        let (pairs, mut schema_differences) = sql::pair_columns(&self.columns, &tcolumns);
        schema_differences.extend(index::differences(
            &self.indexes,
            &tindexes,
            &self.key.names(),
        ));
        let target_snapshot = tsession.open_snapshot().await?;
        let mut walk = Walk {
            source: Side {
                session: self.session,
                qualified: self.name.clone(),
                key: self.key.clone(),
                columns: pairs.iter().map(|p| &self.columns[p.0]).collect(),
            },
            target: Side {
                session: tsession,
                qualified: tname.clone(),
                key: tkey,
                columns: pairs.iter().map(|p| &tcolumns[p.1]).collect(),
            },
            names: pairs
                .iter()
                .map(|p| self.columns[p.0].name.clone())
                .collect(),
            options: o,
            skipped: 0,
            summed: 0,
            sums_only: false,
            ahead: None,
        };
        let complete = walk.run(cursor).await?;
        let (skipped_chunks, summed_chunks) = (walk.skipped, walk.summed);
        let names = walk.names;
        walk.source.session.finish().await?;
        walk.target.session.finish().await?;
        let t = &cursor.tally;
        tracing::info!(
            source = %self.name,
            target = %tname,
            complete,
            chunks = t.chunks,
            summed_chunks,
            missing = t.missing.count,
            extra = t.extra.count,
            differing_fields = t.differing_fields.count,
            schema_differences = schema_differences.len(),
            "verify walked"
        );
        Ok(Report {
            source: self.name,
            target: tname,
            key: self.key.names(),
            columns: names,
            schema_differences,
            source_snapshot: self.snapshot,
            target_snapshot,
            complete,
            elapsed_ms: millis(started.elapsed()),
            cursor: cursor.clone(),
            skipped_chunks,
            summed_chunks,
        })
    }
}

/// Pins the source and compares at once: for a quiescent point.
pub async fn verify(
    source: &Endpoint,
    target: &Endpoint,
    key: &[&str],
    options: &VerifyOptions,
    cursor: &mut VerifyCursor,
) -> Result<Report> {
    pin_source(source, key, options)
        .await?
        .compare(target, cursor)
        .await
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, data_type: &str, column_type: &str, coll: Option<&str>) -> Column {
        Column::new(
            name.into(),
            data_type,
            column_type,
            false,
            coll.map(Into::into),
        )
    }

    #[test]
    fn the_target_key_must_order_like_the_sources() {
        let s = [
            col("id", "bigint", "bigint(20)", None),
            col("s", "varchar", "varchar(5)", Some("utf8mb4_general_ci")),
        ];
        let key = KeyCols::of("s", &s, &["ID", "s"]).expect("valid");
        assert_eq!(key.names(), ["id", "s"]);
        assert_eq!(target_key("t", &s, &key).expect("same"), key);
        let other = [
            col("id", "bigint", "bigint(20)", None),
            col("s", "varchar", "varchar(5)", Some("utf8mb4_bin")),
        ];
        let e = target_key("t", &other, &key).expect_err("another collation");
        assert_eq!(e.as_definite().map(|d| d.code), Some(DefiniteCode::Usage));
        assert!(e.to_string().contains("key column `s`"), "{e}");
        let unsigned = [
            col("id", "bigint", "bigint(20) unsigned", None),
            s[1].clone(),
        ];
        assert!(target_key("t", &unsigned, &key).is_err());
        assert!(
            target_key("t", &s[..1], &key).is_err(),
            "a key column is missing"
        );
    }
}
