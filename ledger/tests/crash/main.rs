//! The ledger's process or connection dying at the worst moments: a child process exits
//! at the fault points before and after the target COMMIT (fault_points); connections
//! and the target server are killed while a COMMIT waits (kill); a material in the state
//! store is cut between its chunk transactions (material_partial).
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod fault_points;
mod kill;
mod material_partial;
