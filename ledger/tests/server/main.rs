//! The ledger against a real MariaDB target and state store: page and replay apply
//! (target_apply), text literals (literal_apply), the state store's journal, chain,
//! registry and materials (state_store), materials stored in the state store
//! (state_materials), one window end to end (window_flow) and the
//! key-partitioned replay (parts_apply), tables keyed by composite, unsigned and binary
//! keys (keyed_apply) and two edges of theirs: a case-only key change, a kill after a part
//! commit (keyed_edges); the lease's fencing check on a three-node Galera cluster (galera).
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod charset_apply;
mod galera;
mod keyed_apply;
mod keyed_edges;
mod literal_apply;
mod parts_apply;
mod state_materials;
mod state_store;
mod target_apply;
mod window_flow;
