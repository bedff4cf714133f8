//! The comparator's own server sessions: one connection per side, one consistent snapshot
//! each, fixed session settings, text-protocol queries whose values are HEX text.
//!
//! Every wait is bounded: connecting by the connect timeout, each query by the query
//! timeout. A query that times out drops its connection (the session's read view goes
//! with it); the caller resumes from its cursor on new sessions.
use super::column::Attributes;
use super::diff::{FieldDetail, KeyHash};
use super::index::{self, Index};
use super::key::{Key, KeyCols};
use super::sql::{chunk_sql, detail_sql, Column};
use kernel::error::{from_mysql, DefiniteCode, Error, Result};
use kernel::position::BinlogPos;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Pool, Row, Value};
use std::future::Future;
use std::time::Duration;

/// Statements every comparator session runs first, on both sides alike: TIMESTAMP is
/// rendered in UTC whatever the server's zone, and the SQL mode is fixed so that no
/// server-wide mode (PAD_CHAR_TO_FULL_LENGTH, ORACLE, NO_BACKSLASH_ESCAPES) changes what a
/// value reads as on one side only.
pub const SESSION_SETUP: &[&str] = &[
    "SET NAMES utf8mb4",
    "SET SESSION time_zone = '+00:00'",
    "SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'",
    "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    // super::sql::DIGEST_MAX_BYTES (a test holds them equal).
    "SET SESSION group_concat_max_len = 8388608",
];

/// ER_CUT_VALUE_GROUP_CONCAT: a chunk string longer than `group_concat_max_len` was cut.
const CUT_BY_GROUP_CONCAT: u16 = 1260;

/// A raw text-protocol row: each value NULL or its bytes.
type TextRow = Vec<Option<Vec<u8>>>;

/// Runs `fut` within `limit`; a timeout is transient.
async fn timed<T>(
    limit: Duration,
    what: &str,
    fut: impl Future<Output = std::result::Result<T, mysql_async::Error>>,
) -> Result<T> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r.map_err(|e| from_mysql(what, &e)),
        Err(_) => Err(Error::transient(format!(
            "{what}: no answer within {limit:?}"
        ))),
    }
}

fn text_row(row: Row) -> std::result::Result<TextRow, String> {
    row.unwrap()
        .into_iter()
        .map(|v| match v {
            Value::NULL => Ok(None),
            Value::Bytes(b) => Ok(Some(b)),
            other => Err(format!("unexpected non-text value {other:?}")),
        })
        .collect()
}

fn malformed(what: &str, why: impl std::fmt::Display) -> Error {
    Error::definite(DefiniteCode::Preparation, format!("{what}: {why}"))
}

/// The error of a hashing statement the server warned about.
fn warned(what: &str, warning: &str) -> Error {
    Error::definite(
        DefiniteCode::Preparation,
        format!(
            "{what}: the server warned while hashing the rows ({warning}), so the comparison \
             cannot trust them; if a value is over half of max_allowed_packet, raise \
             max_allowed_packet on both servers above twice the largest value"
        ),
    )
}

/// A chunk's count and sum or digest from its one row (None for an empty chunk).
fn chunk_sum(what: &str, rows: &[TextRow]) -> Result<ChunkSum> {
    let row = rows.first().ok_or_else(|| malformed(what, "no row"))?;
    let count = int::<u64>(row.first().and_then(Option::as_ref)).map_err(|e| malformed(what, e))?;
    let sum = row.get(1).cloned().flatten();
    Ok(ChunkSum { rows: count, sum })
}

fn utf8(b: &[u8]) -> std::result::Result<&str, String> {
    std::str::from_utf8(b).map_err(|_| format!("not UTF-8: {}", hex::encode(b)))
}

fn int<T: std::str::FromStr>(v: Option<&Vec<u8>>) -> std::result::Result<T, String> {
    let b = v.ok_or("unexpected NULL")?;
    let s = utf8(b)?;
    s.parse().map_err(|_| format!("not an integer: {s:?}"))
}

/// A chunk summed or digested on the server: its row count and the exact sum of its row
/// hashes or the digest of its rows (never compared with each other).
#[derive(Debug, PartialEq, Eq)]
pub struct ChunkSum {
    pub rows: u64,
    pub sum: Option<Vec<u8>>,
}

/// One side's session: a connection inside its consistent snapshot.
pub struct Session {
    side: &'static str,
    conn: Conn,
    query_timeout: Duration,
}

impl Session {
    /// The session's connection (inside its snapshot).
    pub fn conn(&mut self) -> &mut Conn {
        &mut self.conn
    }

    /// Connects and applies [`SESSION_SETUP`].
    pub async fn connect(
        side: &'static str,
        pool: &Pool,
        connect_timeout: Duration,
        query_timeout: Duration,
    ) -> Result<Session> {
        let what = format!("connecting to the {side}");
        let conn = timed(connect_timeout, &what, pool.get_conn()).await?;
        let mut s = Session {
            side,
            conn,
            query_timeout,
        };
        for stmt in SESSION_SETUP {
            s.drop_query(stmt).await?;
        }
        Ok(s)
    }

    async fn drop_query(&mut self, sql: &str) -> Result<()> {
        let what = format!("{} session: {sql}", self.side);
        timed(self.query_timeout, &what, self.conn.query_drop(sql)).await
    }

    /// Runs a text-protocol query and returns its rows as bytes.
    async fn rows(&mut self, what: &str, sql: String) -> Result<Vec<TextRow>> {
        let what = format!("{} {what}", self.side);
        let conn = &mut self.conn;
        let rows = timed(self.query_timeout, &what, async move {
            conn.query_iter(sql).await?.map_and_drop(text_row).await
        })
        .await?;
        rows.into_iter()
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| malformed(&what, e))
    }

    /// The table's columns from `information_schema`, in definition order. Read before the
    /// snapshot opens (the dictionary is not versioned by read views). An empty list means
    /// the table does not exist or is not visible to this user.
    pub async fn columns(&mut self, db: &str, table: &str) -> Result<Vec<Column>> {
        let what = format!("{} reading the columns of {db}.{table}", self.side);
        let conn = &mut self.conn;
        let rows = timed(self.query_timeout, &what, async move {
            conn.exec_iter(
                "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, COLLATION_NAME, \
                 CHARACTER_SET_NAME, COLUMN_DEFAULT, EXTRA, GENERATION_EXPRESSION \
                 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? \
                 ORDER BY ORDINAL_POSITION",
                (db, table),
            )
            .await?
            .map_and_drop(text_row)
            .await
        })
        .await?;
        rows.into_iter()
            .map(|r| column_of(r?))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| malformed(&what, e))
    }

    /// The table's indexes from `information_schema.STATISTICS` (read before the snapshot
    /// opens, as [`Session::columns`]).
    pub async fn indexes(&mut self, db: &str, table: &str) -> Result<Vec<Index>> {
        let what = format!("{} reading the indexes of {db}.{table}", self.side);
        let conn = &mut self.conn;
        let rows = timed(self.query_timeout, &what, async move {
            conn.exec_iter(index::STATISTICS_SQL, (db, table))
                .await?
                .map_and_drop(text_row)
                .await
        })
        .await?;
        let rows = rows
            .into_iter()
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| malformed(&what, e))?;
        index::of_rows(&rows).map_err(|e| malformed(&what, e))
    }

    /// Opens the consistent snapshot and returns its binlog position when the server
    /// reports one (MariaDB `binlog_snapshot_file/position`; `None` on MySQL or without a
    /// binlog).
    pub async fn open_snapshot(&mut self) -> Result<Option<BinlogPos>> {
        self.drop_query("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            .await?;
        let rows = self
            .rows(
                "reading the snapshot position",
                "SHOW STATUS LIKE 'binlog_snapshot_%'".into(),
            )
            .await?;
        let mut file = None;
        let mut pos = None;
        for r in rows {
            let (Some(Some(name)), Some(value)) = (r.first(), r.get(1)) else {
                continue;
            };
            match name.to_ascii_lowercase().as_slice() {
                b"binlog_snapshot_file" => {
                    file = value
                        .as_deref()
                        .and_then(|v| utf8(v).ok())
                        .map(str::to_string)
                }
                b"binlog_snapshot_position" => pos = int::<u64>(value.as_ref()).ok(),
                _ => {}
            }
        }
        Ok(match (file, pos) {
            (Some(f), Some(p)) if !f.is_empty() => Some(BinlogPos::new(f, p)),
            _ => None,
        })
    }

    /// The next `limit` keys after `last` with their row hashes.
    pub async fn chunk(
        &mut self,
        qualified: &str,
        key: &KeyCols,
        columns: &[&Column],
        last: Option<&Key>,
        limit: usize,
    ) -> Result<Vec<KeyHash>> {
        let what = format!("{} reading a chunk of {qualified}", self.side);
        let sql =
            chunk_sql(qualified, key, columns, last, limit).map_err(|e| malformed(&what, e))?;
        let rows = self.rows("reading a chunk", sql).await?;
        self.no_warning(&what).await?;
        rows.into_iter()
            .map(|r| key_hash(key, &r))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| malformed(&what, e))
    }

    /// Fails when the last query warned: a value whose HEX is over `max_allowed_packet`
    /// is NULL with a warning, and a row hash without it would compare equal whatever it
    /// holds.
    async fn no_warning(&mut self, what: &str) -> Result<()> {
        match self.first_warning().await? {
            None => Ok(()),
            Some(w) => Err(warned(what, &w.1)),
        }
    }

    /// The code and text of the last statement's first warning, if it warned.
    async fn first_warning(&mut self) -> Result<Option<(u16, String)>> {
        if self.conn.get_warnings() == 0 {
            return Ok(None);
        }
        let first = self
            .rows("reading its warning", "SHOW WARNINGS LIMIT 1".into())
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        let code = int::<u16>(first.get(1).and_then(Option::as_ref)).unwrap_or(0);
        let text = first
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_deref().unwrap_or_default()).into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        Ok(Some((code, text)))
    }

    /// The count and hash sum of the rows with `last < key <= bound` (`sum_sql`); the
    /// sum as the server's exact decimal text, None for no row. A warning fails it as it
    /// fails [`Session::chunk`] (a hash input over `max_allowed_packet` is NULL, which SUM
    /// would skip).
    pub async fn sum(
        &mut self,
        qualified: &str,
        key: &KeyCols,
        columns: &[&Column],
        range: (Option<&Key>, Option<&Key>),
    ) -> Result<ChunkSum> {
        let sql = super::sql::sum_sql(qualified, key, columns, range.0, range.1);
        let (what, rows, warning) = self.summary("summing", qualified, sql).await?;
        match warning {
            None => chunk_sum(&what, &rows),
            Some((_, w)) => Err(warned(&what, &w)),
        }
    }

    /// The count and digest of the rows with `last < key <= bound` (`digest_sql`), the
    /// digest None for no row; None when the chunk string was longer than
    /// `DIGEST_MAX_BYTES` (the server cut it: the answer says nothing, compare by
    /// [`Session::sum`]). Any other warning fails it as it fails [`Session::sum`].
    pub async fn digest(
        &mut self,
        qualified: &str,
        key: &KeyCols,
        columns: &[&Column],
        range: (Option<&Key>, Option<&Key>),
    ) -> Result<Option<ChunkSum>> {
        let sql = super::sql::digest_sql(qualified, key, columns, range.0, range.1);
        let (what, rows, warning) = self.summary("digesting", qualified, sql).await?;
        match warning {
            None => chunk_sum(&what, &rows).map(Some),
            Some((CUT_BY_GROUP_CONCAT, _)) => Ok(None),
            Some((_, w)) => Err(warned(&what, &w)),
        }
    }

    /// Runs one chunk summary (`sql`, built by the caller): what it was for the errors,
    /// its rows and the statement's first warning.
    async fn summary(
        &mut self,
        doing: &str,
        qualified: &str,
        sql: std::result::Result<String, String>,
    ) -> Result<(String, Vec<TextRow>, Option<(u16, String)>)> {
        let what = format!("{} {doing} a chunk of {qualified}", self.side);
        let sql = sql.map_err(|e| malformed(&what, e))?;
        let rows = self.rows(&format!("{doing} a chunk"), sql).await?;
        let warning = self.first_warning().await?;
        Ok((what, rows, warning))
    }

    /// The `n`-th key after `last` (a skipped chunk's last key), None past the end.
    pub async fn nth_key(
        &mut self,
        qualified: &str,
        key: &KeyCols,
        last: Option<&Key>,
        n: usize,
    ) -> Result<Option<Key>> {
        let what = format!("{} stepping over a chunk of {qualified}", self.side);
        let sql =
            super::sql::nth_key_sql(qualified, key, last, n).map_err(|e| malformed(&what, e))?;
        let rows = self.rows("stepping over a chunk", sql).await?;
        rows.first()
            .map(|r| key.read(r))
            .transpose()
            .map_err(|e| malformed(&what, e))
    }

    /// Per-column details of the rows with the given keys, in key order.
    pub async fn details(
        &mut self,
        qualified: &str,
        key: &KeyCols,
        columns: &[&Column],
        keys: &[Key],
        preview: usize,
    ) -> Result<Vec<(Key, Vec<FieldDetail>)>> {
        let what = format!("{} reading differing rows of {qualified}", self.side);
        let sql =
            detail_sql(qualified, key, columns, keys, preview).map_err(|e| malformed(&what, e))?;
        self.rows("reading differing rows", sql)
            .await?
            .into_iter()
            .map(|r| detail_row(key, &r, columns.len()))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| malformed(&what, e))
    }

    /// Ends the read-only snapshot transaction.
    pub async fn finish(mut self) -> Result<()> {
        self.drop_query("COMMIT").await
    }
}

fn column_of(r: TextRow) -> std::result::Result<Column, String> {
    let text = |i: usize| -> std::result::Result<Option<String>, String> {
        match r.get(i) {
            Some(Some(b)) => Ok(Some(utf8(b)?.to_string())),
            Some(None) => Ok(None),
            None => Err(format!("column {i} is absent")),
        }
    };
    let need = |i: usize| text(i)?.ok_or_else(|| format!("column {i} is NULL"));
    let attrs = Attributes {
        charset: text(5)?,
        default: text(6)?,
        extra: text(7)?.unwrap_or_default().to_ascii_lowercase(),
        generation: text(8)?,
    };
    Ok(Column::new(
        need(0)?,
        &need(1)?,
        &need(2)?,
        need(3)?.eq_ignore_ascii_case("YES"),
        text(4)?,
    )
    .with_attrs(attrs))
}

fn key_hash(key: &KeyCols, r: &TextRow) -> std::result::Result<KeyHash, String> {
    let k = key.read(r)?;
    let hex_hash = r
        .get(key.width())
        .and_then(Option::as_ref)
        .ok_or("row hash is NULL")?;
    let mut hash = [0u8; 32];
    hex::decode_to_slice(hex_hash, &mut hash)
        .map_err(|e| format!("row hash of key {k} is not 64 hex digits: {e}"))?;
    Ok(KeyHash { key: k, hash })
}

fn detail_row(
    key: &KeyCols,
    r: &TextRow,
    columns: usize,
) -> std::result::Result<(Key, Vec<FieldDetail>), String> {
    let k = key.read(r)?;
    let w = key.width();
    if r.len() != w + 3 * columns {
        return Err(format!("key {k}: {} values for {columns} columns", r.len()));
    }
    let fields = r[w..]
        .chunks(3)
        .map(|f| match &f[0] {
            None => Ok(FieldDetail::Null),
            Some(digest) => Ok(FieldDetail::Value {
                digest: utf8(digest)?.to_string(),
                len: int::<u64>(f[1].as_ref())?,
                head: hex::decode(f[2].as_deref().unwrap_or_default())
                    .map_err(|e| format!("key {k}: preview is not hex: {e}"))?,
            }),
        })
        .collect::<std::result::Result<_, String>>()?;
    Ok((k, fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }

    #[test]
    fn rows_parse_or_name_the_problem() {
        let cols = [Column::new(
            "id".into(),
            "bigint",
            "bigint(20)",
            false,
            None,
        )];
        let key = KeyCols::of("t", &cols, &["id"]).expect("key");
        let h = "ab".repeat(32);
        let k = key_hash(&key, &vec![v("-7"), v(&h)]).expect("valid");
        assert_eq!((k.key, k.hash[0]), (Key::of_i64(-7), 0xab));
        assert!(key_hash(&key, &vec![v("x"), v(&h)]).is_err());
        assert!(key_hash(&key, &vec![v("1"), None]).is_err());
        let (k, f) = detail_row(
            &key,
            &vec![v("3"), None, None, None, v("dd"), v("2"), v("6100")],
            2,
        )
        .expect("valid");
        assert_eq!(k, Key::of_i64(3));
        assert_eq!(f[0], FieldDetail::Null);
        assert_eq!(
            f[1],
            FieldDetail::Value {
                digest: "dd".into(),
                len: 2,
                head: vec![0x61, 0]
            }
        );
        assert!(detail_row(&key, &vec![v("3"), None], 2).is_err());
    }
}
