//! The definite/transient error split (STYLE §2).
//!
//! A *definite* error is caused by data or configuration: retrying cannot help, so it is
//! recorded (in J, as a pause reason) and shown to the operator with the object it concerns
//! and the fix. A *transient* error is an I/O or connection problem: it is retried within a
//! bounded budget, and a write whose outcome it leaves unknown is resolved by reading
//! evidence, never by guessing. Server error codes are classified in ONE place,
//! [`classify_server_code`]; no code matches on error strings.
use serde::{Deserialize, Serialize};
use std::fmt;

/// Server error numbers the kernel reacts to.
pub mod codes {
    pub const ER_CON_COUNT_ERROR: u16 = 1040;
    /// Galera: "WSREP has not yet prepared node for application use" (a node joining,
    /// or outside the primary component). The same number is ER_UNKNOWN_COM_ERROR.
    pub const ER_WSREP_NOT_READY: u16 = 1047;
    pub const ER_ACCESS_DENIED: u16 = 1045;
    pub const ER_BAD_DB: u16 = 1049;
    pub const ER_SERVER_SHUTDOWN: u16 = 1053;
    pub const ER_DUP_ENTRY: u16 = 1062;
    pub const ER_TABLEACCESS_DENIED: u16 = 1142;
    pub const ER_NO_SUCH_TABLE: u16 = 1146;
    pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
    pub const ER_LOCK_DEADLOCK: u16 = 1213;
    pub const ER_SPECIFIC_ACCESS_DENIED: u16 = 1227;
    pub const ER_MASTER_FATAL_READING_BINLOG: u16 = 1236;
    pub const ER_QUERY_INTERRUPTED: u16 = 1317;
    pub const ER_CONNECTION_KILLED: u16 = 1927;
    pub const ER_SLAVE_SAME_ID: u16 = 4052;
    pub const CR_SERVER_GONE: u16 = 2006;
    pub const CR_SERVER_LOST: u16 = 2013;
}

/// The class of a server error number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerClass {
    /// Retry within budget (lost connection, deadlock or Galera certification failure,
    /// lock wait, a Galera node not ready, shutdown, kill).
    Transient,
    /// A duplicate key: for ledger writes this is how AlreadyCommitted is detected.
    Duplicate,
    /// Missing privilege: definite, the fix is a GRANT.
    Privilege,
    /// Missing object: definite.
    Missing,
    /// Any other server error: definite.
    Other,
}

/// Classifies a server error number (the single place that does so).
pub fn classify_server_code(code: u16) -> ServerClass {
    use codes::*;
    match code {
        ER_CON_COUNT_ERROR | ER_WSREP_NOT_READY | ER_SERVER_SHUTDOWN | ER_LOCK_WAIT_TIMEOUT
        | ER_LOCK_DEADLOCK | ER_QUERY_INTERRUPTED | ER_CONNECTION_KILLED | CR_SERVER_GONE
        | CR_SERVER_LOST => ServerClass::Transient,
        ER_DUP_ENTRY => ServerClass::Duplicate,
        ER_ACCESS_DENIED | ER_TABLEACCESS_DENIED | ER_SPECIFIC_ACCESS_DENIED => {
            ServerClass::Privilege
        }
        ER_NO_SUCH_TABLE | ER_BAD_DB => ServerClass::Missing,
        _ => ServerClass::Other,
    }
}

/// What kind of definite failure this is. Stable: stored in J and shown by `status`, and
/// each code has a runbook section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DefiniteCode {
    /// An install precondition (DESIGN §9) is not met.
    Precondition,
    /// The command or configuration is wrong (bad flag, unknown job).
    Usage,
    /// A table-map or DDL contradicts the sealed schema.
    SchemaChanged,
    /// The binlog position to resume from no longer exists.
    BinlogPurged,
    /// The source is another server or its binlog history was reset/restored.
    LineageChanged,
    /// The same ledger key with different bytes.
    EvidenceConflict,
    /// Stored evidence failed verification (audit).
    EvidenceCorrupt,
    /// A quota (material bytes) is exhausted.
    CapacityExhausted,
    /// The target explicitly rejected a write.
    TargetRejected,
    /// A connection or statement release could not be confirmed.
    ReleaseUnconfirmed,
    /// A stale owner (old fencing token) tried to write.
    Fenced,
    /// The source binlog carries something the reader cannot capture safely.
    Uncapturable,
    /// Preparing an operation failed definitely (a server error other than the ones
    /// with their own code).
    Preparation,
    /// A bug in backfill (a task panicked): keep the log for a report.
    Internal,
    /// A journal (J) record the step needs is missing from the state store.
    JournalMissing,
    /// A job failed transiently too many times in a row (its last error is named).
    RetriesExhausted,
    /// A periodic verify (`serve --verify-every`) found the STREAMING target differing
    /// from the source at a pinned point (the first differing keys are named). Added
    /// last: J records written before it keep their codes.
    VerifyFailed,
}

impl DefiniteCode {
    /// The snake_case name used in status, metrics labels and runbooks.
    pub fn as_str(self) -> &'static str {
        match self {
            DefiniteCode::Precondition => "precondition",
            DefiniteCode::Usage => "usage",
            DefiniteCode::SchemaChanged => "schema_changed",
            DefiniteCode::BinlogPurged => "binlog_purged",
            DefiniteCode::LineageChanged => "lineage_changed",
            DefiniteCode::EvidenceConflict => "evidence_conflict",
            DefiniteCode::EvidenceCorrupt => "evidence_corrupt",
            DefiniteCode::CapacityExhausted => "capacity_exhausted",
            DefiniteCode::TargetRejected => "target_rejected",
            DefiniteCode::ReleaseUnconfirmed => "release_unconfirmed",
            DefiniteCode::Fenced => "fenced",
            DefiniteCode::Uncapturable => "uncapturable",
            DefiniteCode::Preparation => "preparation",
            DefiniteCode::Internal => "internal",
            DefiniteCode::JournalMissing => "journal_missing",
            DefiniteCode::RetriesExhausted => "retries_exhausted",
            DefiniteCode::VerifyFailed => "verify_failed",
        }
    }
}

/// A definite error: the code plus a message that names the object and the fix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definite {
    pub code: DefiniteCode,
    pub message: String,
}

impl fmt::Display for Definite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

/// Every kernel-level failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Data or configuration: do not retry; record and show.
    #[error("{0}")]
    Definite(Definite),
    /// I/O or connection: retry within a bounded budget. Keeps the server error it came
    /// from, when there was one.
    #[error("transient: {message}")]
    Transient {
        message: String,
        #[source]
        source: Option<Cause>,
    },
}

/// The error a transient failure came from: the server's error number (None when the
/// client lost the connection or gave up) and its redacted text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{text}")]
pub struct Cause {
    pub code: Option<u16>,
    pub text: String,
}

/// Result with the kernel error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A definite error with a message that names the object and the fix.
    pub fn definite(code: DefiniteCode, message: impl Into<String>) -> Error {
        Error::Definite(Definite {
            code,
            message: message.into(),
        })
    }

    /// A transient error.
    pub fn transient(message: impl Into<String>) -> Error {
        Error::Transient {
            message: message.into(),
            source: None,
        }
    }

    /// A transient error that keeps the error it came from.
    pub fn transient_from(message: impl Into<String>, cause: Cause) -> Error {
        Error::Transient {
            message: message.into(),
            source: Some(cause),
        }
    }

    /// True for errors worth retrying.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Transient { .. })
    }

    /// What a transient error came from, if known.
    pub fn cause(&self) -> Option<&Cause> {
        match self {
            Error::Transient { source, .. } => source.as_ref(),
            Error::Definite(_) => None,
        }
    }

    /// The definite part, if any.
    pub fn as_definite(&self) -> Option<&Definite> {
        match self {
            Error::Definite(d) => Some(d),
            Error::Transient { .. } => None,
        }
    }
}

/// The server error number of an sqlx error, if it came from the server.
pub fn sqlx_server_code(e: &sqlx::Error) -> Option<u16> {
    let db = e.as_database_error()?;
    db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .map(|m| m.number())
}

/// The server error number of a mysql_async error, if it came from the server.
pub fn mysql_server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

/// The server refuses a connection without TLS (MariaDB 4036, MySQL 3159).
pub const SECURE_TRANSPORT_REQUIRED: [u16; 2] = [4036, 3159];

fn from_code(code: Option<u16>, what: &str, text: String) -> Error {
    if code.is_some_and(|c| SECURE_TRANSPORT_REQUIRED.contains(&c)) {
        return Error::definite(
            DefiniteCode::Usage,
            format!("{what}: {text}: {}", crate::tls::REQUIRE_TLS_FIX),
        );
    }
    match code.map(classify_server_code) {
        None | Some(ServerClass::Transient) => Error::transient_from(
            format!("{what}: {text}"),
            Cause {
                code,
                text: text.clone(),
            },
        ),
        Some(ServerClass::Privilege) => Error::definite(
            DefiniteCode::Preparation,
            format!("{what}: {text} (grant the missing privilege: see runbooks/install.md)"),
        ),
        Some(_) => Error::definite(DefiniteCode::Preparation, format!("{what}: {text}")),
    }
}

/// Classifies an sqlx error raised while doing `what`.
pub fn from_sqlx(what: &str, e: &sqlx::Error) -> Error {
    from_code(
        sqlx_server_code(e),
        what,
        crate::redact::redact_text(&e.to_string()),
    )
}

/// Classifies a mysql_async error of a write into the target table: a server error that is
/// neither transient nor a missing privilege means the target refused the rows
/// ([`DefiniteCode::TargetRejected`]), never a generic preparation failure and never a
/// skip: the message carries the server's error number, SQLSTATE and message as the
/// server sent them (e.g. `server error 1406 (22001): Data too long for column 'v' at row
/// 2`, a target column narrowed by hand) and the fix. The caller's transaction is rolled
/// back, so nothing of it and nothing after it is applied.
pub fn from_target_write(what: &str, e: &mysql_async::Error) -> Error {
    let code = mysql_server_code(e);
    let text = crate::redact::redact_text(&e.to_string());
    match (e, code.map(classify_server_code)) {
        (mysql_async::Error::Server(s), Some(ServerClass::Other | ServerClass::Duplicate)) => {
            Error::definite(
                DefiniteCode::TargetRejected,
                format!(
                    "{what}: the target server refused the write (server error {} ({}): {}); \
                 fix: make the target table's definition the source's again (`backfill \
                 verify` names differing columns; runbooks/target-tampered.md), then \
                 `backfill resume`",
                    s.code,
                    s.state,
                    crate::redact::redact_text(&s.message)
                ),
            )
        }
        _ => from_code(code, what, text),
    }
}

/// Classifies a mysql_async error raised while doing `what`.
pub fn from_mysql(what: &str, e: &mysql_async::Error) -> Error {
    from_code(
        mysql_server_code(e),
        what,
        crate::redact::redact_text(&e.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_is_total_and_stable() {
        assert_eq!(classify_server_code(1213), ServerClass::Transient);
        assert_eq!(classify_server_code(1205), ServerClass::Transient);
        // Galera: a certification failure surfaces as 1213, a node not ready as 1047.
        assert_eq!(classify_server_code(1047), ServerClass::Transient);
        assert_eq!(classify_server_code(2013), ServerClass::Transient);
        assert_eq!(classify_server_code(1062), ServerClass::Duplicate);
        assert_eq!(classify_server_code(1227), ServerClass::Privilege);
        assert_eq!(classify_server_code(1146), ServerClass::Missing);
        assert_eq!(classify_server_code(1064), ServerClass::Other);
    }

    #[test]
    fn a_transient_error_keeps_its_cause() {
        let e = from_code(Some(1213), "COMMIT", "deadlock".into());
        assert!(e.is_transient());
        let c = e.cause().expect("cause kept");
        assert_eq!((c.code, c.text.as_str()), (Some(1213), "deadlock"));
        let src = std::error::Error::source(&e).map(|s| s.to_string());
        assert_eq!(src.as_deref(), Some("deadlock"));
        assert_eq!(Error::transient("x").cause(), None);
    }

    fn server(code: u16) -> mysql_async::Error {
        mysql_async::Error::Server(mysql_async::ServerError {
            code,
            message: "Incorrect string value".into(),
            state: "HY000".into(),
        })
    }

    #[test]
    fn a_refused_target_write_names_the_server_error() {
        let e = from_target_write("writing rows into t.x", &server(1366));
        let d = e.as_definite().expect("definite");
        assert_eq!(d.code, DefiniteCode::TargetRejected);
        assert_eq!(
            d.message,
            "writing rows into t.x: the target server refused the write (server error 1366 \
             (HY000): Incorrect string value); fix: make the target table's definition the \
             source's again (`backfill verify` names differing columns; \
             runbooks/target-tampered.md), then `backfill resume`"
        );
        assert!(from_target_write("w", &server(1213)).is_transient());
        let p = from_target_write("w", &server(1142));
        assert_eq!(
            p.as_definite().map(|d| d.code),
            Some(DefiniteCode::Preparation)
        );
    }

    #[test]
    fn new_codes_append_and_keep_the_old_encodings() {
        // Codes are stored in J with postcard (variant index): new ones go last.
        let old = postcard::to_allocvec(&DefiniteCode::Preparation).expect("encode");
        assert_eq!(old, [12]);
        let new = postcard::to_allocvec(&DefiniteCode::JournalMissing).expect("encode");
        assert_eq!(new, [14]);
        assert_eq!(DefiniteCode::Internal.as_str(), "internal");
    }

    #[test]
    fn no_code_means_transient_and_privilege_names_the_fix() {
        assert!(from_code(None, "x", "io".into()).is_transient());
        let e = from_code(Some(1227), "SHOW MASTER STATUS", "denied".into());
        assert!(e.to_string().contains("grant"));
    }
}
