//! Replay of a table's captured change groups into the target (DESIGN §6): every group of
//! the table in (B, F] before activation, then continuously after STREAMING.
//!
//! # Why it is safe
//!
//! * I1 convergence. Groups are applied in L order, which is binlog order, which is the
//!   source's commit order (DESIGN §3.8). Each row change is applied by primary key and full
//!   image only ([`ledger::apply`]): an insert or update upserts the after-image, a
//!   key-changing update deletes the old key then upserts the new one, a delete deletes by
//!   key and accepts 0 rows. Replaying an older image over a window's newer baseline makes
//!   the row regress briefly and then converge: the last change of every key in (B, F]
//!   is applied last, and a key no change touches keeps the window's value, which is its
//!   value at F (the window's HIGH is before F and nothing touched it since). Nothing is
//!   dropped because a window's HIGH already covered it. The target is exclusive and
//!   unpublished until STREAMING, so the regression is never visible.
//! * I2 no duplicate effect. Every target transaction first moves T's cursor with a
//!   conditional update from the cursor it expects ([`ledger::apply::apply_groups`]), so
//!   a batch whose COMMIT landed (even one lost on the wire) makes the retry find the cursor
//!   moved and run no business DML. A group is skipped here only when T's cursor is at or
//!   past its end; the decision is T's, never this process's memory.
//! * I3 regrouping (seed 002). The identity of what was applied is the source history's:
//!   a group is one source transaction, named by its end position, GTID and the digest of
//!   its changes ([`ledger::apply::ReplayGroup::digest`]); a chunked group's sub-cursor
//!   counts changes, not chunks. Neither depends on how many groups or rows a batch held,
//!   so a restart with another `batch_rows`/`batch_groups` resumes exactly at T's cursor
//!   and never conflicts: the reference system stalled here because its batch id was a
//!   callback sequence number whose content changed when the restart regrouped.
//! * I4 crash anywhere. The only state kept outside T is [`replay_progress`]: a hint
//!   written after the T commit it describes (never ahead of T) and used only when L
//!   confirms the group it names ends there and T's cursor is at or past it. Losing it costs
//!   a re-read of L from B, nothing else.
//! * I6 no silent loss. A pause or raw rows of this table in L (the reader met something it
//!   could not decode safely), a group whose chunks do not chain, or a cursor that names no
//!   group boundary stop the replay with a definite error naming the position.
//!
//! * Apply streams ([`ReplayConfig::apply_streams`]). With N > 1 a batch is applied over
//!   N target connections by [`ledger::parts::apply_groups_parts`]: keys split into N
//!   partitions, each its own target transaction with its own cursor row in T, the one
//!   moving the main cursor committed last (see that module for why I1/I2 hold). This
//!   loop keeps reading only the main cursor, so what it skips, the restart point and the
//!   lag are as with one stream. N connections writing at once are N target writes
//!   (DESIGN §8): a STREAMING batch takes N permits together, and after any failed,
//!   unknown or timed-out batch every one of the N connections is KILLed and confirmed
//!   gone before its permit is released (an unconfirmed one stays a hold naming it).
//!
//! * Read-ahead. While a batch applies, the next one is read from L (append-only, hash
//!   chained, read only up to the same bound). It is used only once the batch before it
//!   committed and is dropped on any failure; what to apply is still decided by T's
//!   cursor, never by what was read.
//!
//! "Replay reached F" (DESIGN §6) means T's cursor is at or past the table's last group at
//! or before F in L; with no group in (B, F] no cursor is needed and none is invented
//! ([`replay_to`] then applies nothing).
//!
//! # Layout
//!
//! | module | owns |
//! |---|---|
//! | `group.rs` | pure: a record's changes of the table, groups from chunks, coverage by T's cursor |
//! | `source.rs` | reading L: markers, the next complete groups, waiting for the tail |
//! | `progress.rs` | the progress row: restart hint, groups counted, lag |
//! | `connections.rs` | the run's target connections, KILL-confirmed ends |
//! | `batch.rs` | one batch on the target under its write permits |
//! | `policy.rs` | pure: after each outcome, retry, re-read T, pause or fail, within a budget |
//! | `driver.rs` | the loop: [`Replayer`], [`Until`], [`replay_to`], [`follow`], [`catch_up`] |
mod batch;
mod connections;
mod driver;
mod group;
mod policy;
mod progress;
mod source;
pub mod tails;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

pub use batch::WritePermits;
pub use driver::{catch_up, follow, follow_admitted, replay_to, Outcome, Replayer, Until};
pub use group::{build_group, cmp_end, coverage, table_part, Built, Coverage};
pub use progress::{behind_bytes, replay_progress, Lag, Progress};
pub use source::{find_marker, finish_group, next_groups, stream_of, Batch, MarkerAt};

use kernel::ids::{Generation, JobId};
use ledger::apply::Limits;
use std::time::Duration;

/// One table-generation as fence, replay and audit see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    pub job: JobId,
    pub generation: Generation,
    /// The L stream that captures the source server.
    pub stream: String,
    /// The SOURCE table's schema and name, as L's changes name it.
    pub source_db: String,
    pub source_table: String,
}

impl Scope {
    /// The table-generation of job record `rec`, captured in `stream`.
    pub fn of(rec: &crate::store::jobs::JobRecord, stream: String) -> Scope {
        Scope {
            job: rec.job_id,
            generation: rec.generation,
            stream,
            source_db: rec.source.db.clone(),
            source_table: rec.source.table.clone(),
        }
    }

    /// The same table-generation as a schema seal names it.
    pub fn seal_table(&self) -> crate::table::schema::seal::Table<'_> {
        crate::table::schema::seal::Table {
            job: self.job,
            generation: self.generation,
            stream: &self.stream,
            source_db: &self.source_db,
            source_table: &self.source_table,
        }
    }

    /// True for the table's own `schema`.`table` (a change, pause or raw rows of it).
    pub fn is_table(&self, schema: &str, table: &str) -> bool {
        schema == self.source_db && table == self.source_table
    }
}

/// How replay batches (every bound is finite; changing any of them across a restart is
/// safe, see the module doc).
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// Changes per target transaction at most; whole groups are packed, a larger group is
    /// applied in chunks with the sub-cursor.
    pub batch_rows: usize,
    /// Groups handed to one apply call at most.
    pub batch_groups: usize,
    /// L records read per query.
    pub read_page: u32,
    /// The wait before a retry (a failed read or apply, a permit not granted).
    pub idle_wait: Duration,
    /// L's tail per stream, watched once for every table of the process that follows it
    /// ([`tails`]; clones of one config share it).
    pub tails: tails::Tails,
    /// Consecutive transient failures tolerated while following (reset by each commit).
    pub max_retries: u32,
    /// Target connections the replay applies on at once, keys split between them by
    /// [`ledger::parts::partition_of`] (1 = one connection, as before key partitions).
    /// Each is a target write: per-batch permits are taken together, and a coarse run
    /// holds as many (`crate::table::activation::under_write_permits`).
    pub apply_streams: usize,
    /// How long a DDL on the target waits for the table's metadata lock
    /// (`lock_wait_timeout` of its session) before it fails as a transient error and is
    /// tried again: a target session holding the table (a long transaction, a dump) never
    /// stalls the stream, nor queues every later reader of the table behind the DDL, for
    /// the server's default of a day.
    pub schema_lock_wait: Duration,
}

/// [`ReplayConfig::schema_lock_wait`] unless `serve --schema-lock-wait` says otherwise.
pub const DEFAULT_SCHEMA_LOCK_WAIT: Duration = Duration::from_secs(30);

impl Default for ReplayConfig {
    fn default() -> ReplayConfig {
        ReplayConfig {
            batch_rows: 20_000,
            batch_groups: 500,
            read_page: 500,
            idle_wait: Duration::from_millis(200),
            tails: tails::Tails::default(),
            max_retries: 3,
            apply_streams: 1,
            schema_lock_wait: DEFAULT_SCHEMA_LOCK_WAIT,
        }
    }
}

impl ReplayConfig {
    /// The ledger's statement limits for this configuration.
    pub fn limits(&self) -> Limits {
        Limits {
            txn_rows: self.batch_rows.max(1),
            ..Limits::default()
        }
    }
}
