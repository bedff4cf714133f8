//! bootstrap: the per-table protocol and the `backfill` program.
pub mod reconcile;
