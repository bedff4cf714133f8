//! The ledger's decisions without a server: golden bytes of every persisted format, v1
//! and v2 (golden), the net-effect fold by sort key for integer and composite keys
//! (fold), replay planning, credentials and TIMESTAMP normalisation (pure_apply), the
//! key-partitioned replay plan (parts_plan) and the partition function, pinned
//! (parts_partition).
//!
//! Proptest keeps the failure seeds of these modules in `tests/proptest-regressions/`
//! (its default place for a test binary whose root is `tests/pure/main.rs`).
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod fold;
mod golden;
mod group_digest;
mod parts_partition;
mod parts_plan;
mod pure_apply;
