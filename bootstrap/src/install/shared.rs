//! The server-level reads of a bulk install, made once for the whole command (DESIGN §17).
//!
//! A bulk install checks every table on its own, but some of what it reads is a fact of the
//! servers and the account, the same for every table of the command: the source's and the
//! target's server facts (`SHOW GLOBAL VARIABLES`), the source account (`CURRENT_USER()`),
//! whether that account may read the binlog (a replication connection opened and closed),
//! and whether the state store lives on the source (a token read through both). Read again
//! for each of 1 000 tables they were six statements and one replication connection a
//! table.
//!
//! Why it is safe: each value is read by the first table that needs it, exactly as the
//! single-table path reads it, and every later table of the same command gets the same
//! value (and so the same refusal, listed under each table as before). The command runs
//! for seconds; a server setting changed meanwhile is what it would be for two installs
//! run one after the other, and serve checks the server identity and the binlog lineage
//! again when it starts each job. Table-level facts (the table's definition, its binlog
//! filters, the binlog position and lineage each job records, the target table, live jobs
//! and claims) are still read for every table. A failed read is not kept: the next table
//! reads again.
//!
//! One table-level fact is read once too, for every selected schema on the source and every
//! target schema: the foreign keys that reference the selected tables (the parent side of
//! the foreign-key checks). The server
//! cannot find a table's children by its name: each such lookup read every table's
//! constraints, so a bulk install was quadratic in the table count (1.2 s a table at
//! 10 000 tables). Read at the start of the command it is the same point-in-time check a
//! little earlier, as the server facts are; serve re-reads the definition of each job.
use super::checks::Refusal;
use kernel::introspect::{ParentKeys, ServerFacts};
use kernel::Result;
use std::future::Future;
use tokio::sync::OnceCell;

/// The server-level reads of one bulk command (each made at most once when it succeeds).
#[derive(Default)]
pub struct Shared {
    /// The source's server facts and the account.
    pub(super) source: OnceCell<(ServerFacts, String)>,
    /// The target's server facts.
    pub(super) target: OnceCell<ServerFacts>,
    /// The replication probe's refusal, if any.
    pub(super) replication: OnceCell<Option<Refusal>>,
    /// The state-store-on-the-source refusal, if any.
    pub(super) state_on_source: OnceCell<Option<Refusal>>,
    /// The foreign keys referencing the selected tables, read once before any table.
    pub(super) parents: Option<ParentKeys>,
    /// The same of the target tables (the target must be referenced by none).
    pub(super) target_parents: Option<ParentKeys>,
}

/// `read` once per command when `cell` is one of a [`Shared`]'s, else every time (the
/// single-table path).
pub(super) async fn once<T: Clone, F: Future<Output = Result<T>>>(
    cell: Option<&OnceCell<T>>,
    read: impl FnOnce() -> F,
) -> Result<T> {
    match cell {
        Some(c) => c.get_or_try_init(read).await.cloned(),
        None => read().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn a_shared_read_runs_once_and_a_failed_one_again() {
        let shared = Shared::default();
        let reads = AtomicU32::new(0);
        let fail_first = |n: u32| async move {
            match n {
                0 => Err(kernel::Error::transient("lost")),
                _ => Ok(Some(Refusal::new("o", "why", "fix"))),
            }
        };
        let first = once(Some(&shared.replication), || {
            fail_first(reads.fetch_add(1, Ordering::SeqCst))
        })
        .await;
        assert!(first.is_err());
        for _ in 0..3 {
            let r = once(Some(&shared.replication), || {
                fail_first(reads.fetch_add(1, Ordering::SeqCst))
            })
            .await;
            assert_eq!(r.unwrap(), Some(Refusal::new("o", "why", "fix")));
        }
        assert_eq!(
            reads.load(Ordering::SeqCst),
            2,
            "read again after the failure, then kept"
        );
        for _ in 0..2 {
            let r = once(None, || fail_first(reads.fetch_add(1, Ordering::SeqCst))).await;
            assert!(r.is_ok());
        }
        assert_eq!(
            reads.load(Ordering::SeqCst),
            4,
            "without a command, every call reads"
        );
    }
}
