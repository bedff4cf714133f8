//! The source control table (DESIGN §2): the service writes intents (B, LOW, HIGH, F, K)
//! into it so that each appears in the binlog at an exact position. The reader recognises
//! these rows in the stream; every intent carries job, generation, kind, window, attempt and
//! a random nonce so a late intent of another attempt or generation never satisfies a
//! waiter.
//!
//! The table lives in its own schema on the source, created by `install`.
use crate::schema::quote_ident;

/// Default schema of the control table on the source.
pub const DEFAULT_SCHEMA: &str = "backfill_control";
/// Name of the control table.
pub const TABLE: &str = "intents";

/// The DDL creating the control schema and table (idempotent).
pub fn create_statements(schema: &str) -> [String; 2] {
    let s = quote_ident(schema);
    [
        format!("CREATE DATABASE IF NOT EXISTS {s}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {s}.{t} (
                id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                job_id BIGINT UNSIGNED NOT NULL,
                generation BIGINT UNSIGNED NOT NULL,
                kind VARCHAR(8) NOT NULL,
                window_id INT UNSIGNED NULL,
                attempt INT UNSIGNED NULL,
                nonce BIGINT UNSIGNED NOT NULL,
                written_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
            ) ENGINE=InnoDB",
            t = quote_ident(TABLE)
        ),
    ]
}

/// Creates the control schema and table on the source if missing.
pub async fn ensure_control_table(conn: &mut mysql_async::Conn, schema: &str) -> crate::Result<()> {
    use mysql_async::prelude::Queryable;
    for sql in create_statements(schema) {
        conn.query_drop(sql).await.map_err(|e| {
            crate::error::from_mysql(&format!("creating control table in `{schema}`"), &e)
        })?;
    }
    Ok(())
}

/// The kind of an intent (DESIGN §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum IntentKind {
    /// Capture-ready: the table-generation is captured from here on.
    B,
    Low,
    High,
    /// Final fence.
    F,
    /// Cancellation fence: the table-generation is no longer captured after it.
    K,
}

impl IntentKind {
    /// The text stored in the control table's `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            IntentKind::B => "B",
            IntentKind::Low => "LOW",
            IntentKind::High => "HIGH",
            IntentKind::F => "F",
            IntentKind::K => "K",
        }
    }

    /// Parses the `kind` column.
    pub fn parse(s: &str) -> Option<IntentKind> {
        Some(match s {
            "B" => IntentKind::B,
            "LOW" => IntentKind::Low,
            "HIGH" => IntentKind::High,
            "F" => IntentKind::F,
            "K" => IntentKind::K,
            _ => return None,
        })
    }
}

/// One intent row.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Intent {
    pub job: crate::ids::JobId,
    pub generation: crate::ids::Generation,
    pub kind: IntentKind,
    pub window: Option<crate::ids::WindowId>,
    pub attempt: Option<crate::ids::Attempt>,
    pub nonce: crate::ids::Nonce,
}

/// An intent as the reader saw it in the binlog.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IntentSeen {
    pub intent: Intent,
    /// Start position of the rows event that carried it.
    pub at: crate::position::BinlogPos,
    /// True when it arrived after its generation's K (DESIGN §8): no barrier.
    pub obsolete: bool,
}

/// Column order of the control table (see [`create_statements`]).
pub const COLUMNS: [&str; 8] = [
    "id",
    "job_id",
    "generation",
    "kind",
    "window_id",
    "attempt",
    "nonce",
    "written_at",
];

impl Intent {
    /// A new intent with a fresh random nonce.
    pub fn new(
        job: crate::ids::JobId,
        generation: crate::ids::Generation,
        kind: IntentKind,
        window: Option<crate::ids::WindowId>,
        attempt: Option<crate::ids::Attempt>,
    ) -> Intent {
        Intent {
            job,
            generation,
            kind,
            window,
            attempt,
            nonce: crate::ids::Nonce::random(),
        }
    }

    /// Recognises an inserted control-table row (values in [`COLUMNS`] order, as the
    /// binlog gives them). None for a row that is not a well-formed intent.
    pub fn from_row(row: &[crate::value::SqlValue]) -> Option<Intent> {
        use crate::value::SqlValue;
        if row.len() != COLUMNS.len() {
            return None;
        }
        let uint = |v: &SqlValue| -> Option<u64> {
            match v {
                SqlValue::UInt(u) => Some(*u),
                SqlValue::Int(i) => Some(*i as u64),
                _ => None,
            }
        };
        let opt_u32 = |v: &SqlValue| -> Option<Option<u32>> {
            match v {
                SqlValue::Null => Some(None),
                v => uint(v).and_then(|u| u32::try_from(u).ok()).map(Some),
            }
        };
        let kind = match &row[3] {
            SqlValue::Bytes(b) => IntentKind::parse(std::str::from_utf8(b).ok()?)?,
            _ => return None,
        };
        Some(Intent {
            job: crate::ids::JobId(uint(&row[1])?),
            generation: crate::ids::Generation(uint(&row[2])?),
            kind,
            window: opt_u32(&row[4])?.map(crate::ids::WindowId),
            attempt: opt_u32(&row[5])?.map(crate::ids::Attempt),
            nonce: crate::ids::Nonce(uint(&row[6])?),
        })
    }
}

/// Writes `intent` into the control table (autocommit: it is its own binlog group).
pub async fn write_intent(
    conn: &mut mysql_async::Conn,
    schema: &str,
    intent: &Intent,
) -> crate::Result<()> {
    use mysql_async::prelude::Queryable;
    // A text statement: every value is an integer or one of the fixed ASCII kind names,
    // so the literals are exact, and a marker costs one round trip, not a PREPARE and an
    // EXECUTE (markers are written on fresh or reset connections, where nothing is cached).
    let opt = |v: Option<u32>| v.map_or_else(|| "NULL".to_string(), |v| v.to_string());
    let sql = format!(
        "INSERT INTO {}.{} (job_id, generation, kind, window_id, attempt, nonce) \
         VALUES ({}, {}, '{}', {}, {}, {})",
        quote_ident(schema),
        quote_ident(TABLE),
        intent.job.0,
        intent.generation.0,
        intent.kind.as_str(),
        opt(intent.window.map(|w| w.0)),
        opt(intent.attempt.map(|a| a.0)),
        intent.nonce.0,
    );
    conn.query_drop(sql).await.map_err(|e| {
        crate::error::from_mysql(
            &format!(
                "writing {} intent into `{schema}`.{TABLE}",
                intent.kind.as_str()
            ),
            &e,
        )
    })
}

#[cfg(test)]
mod intent_tests {
    use super::*;
    use crate::ids::*;
    use crate::value::SqlValue;

    #[test]
    fn recognises_a_binlog_row() {
        let row = vec![
            SqlValue::Int(7),
            SqlValue::UInt(3),
            SqlValue::UInt(2),
            SqlValue::Bytes(b"LOW".to_vec()),
            SqlValue::UInt(4),
            SqlValue::UInt(1),
            SqlValue::UInt(u64::MAX),
            SqlValue::Bytes(b"1709210096.789012".to_vec()),
        ];
        let i = Intent::from_row(&row).expect("an intent");
        assert_eq!(i.job, JobId(3));
        assert_eq!(i.generation, Generation(2));
        assert_eq!(i.kind, IntentKind::Low);
        assert_eq!(i.window, Some(WindowId(4)));
        assert_eq!(i.attempt, Some(Attempt(1)));
        assert_eq!(i.nonce, Nonce(u64::MAX));
        let mut b = row.clone();
        b[3] = SqlValue::Bytes(b"B".to_vec());
        b[4] = SqlValue::Null;
        b[5] = SqlValue::Null;
        let i = Intent::from_row(&b).expect("a B intent");
        assert_eq!((i.kind, i.window, i.attempt), (IntentKind::B, None, None));
        b[3] = SqlValue::Bytes(b"X".to_vec());
        assert_eq!(Intent::from_row(&b), None);
        assert_eq!(Intent::from_row(&row[..7]), None);
    }
}
