//! The capture against real MariaDB servers: exactness of L for a workload, regrouping,
//! markers (workload), lineage errors (lineage), pauses (pause), DDL classification against the server's definitions
//! (schema_ddl), value fidelity (types)
//! and XA transactions (xa); the state store's pool giving back a connection that owes an
//! answer (state_pool); one reader per stream under its capture lease (owner). Killed and restarted captures: the `crash` binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod lineage;
mod owner;
mod pause;
mod schema_ddl;
mod state_pool;
mod types;
mod workload;
mod xa;
