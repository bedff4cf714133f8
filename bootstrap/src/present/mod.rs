//! L3: what an operator sees: `backfill status` and the Prometheus exposition.
pub mod metrics;
pub mod profile;
pub mod status;
