//! Admission errors. Refusals caused by configuration are definite; a timeout
//! or a cancellation is not (STYLE §2).

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::ids::{HoldId, PoolKind};

/// Who occupies one unit of a pool's capacity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// The owner named when the permit was acquired.
    pub owner: String,
    /// `Some(reason)` when the permit's release is unknown (a hold).
    pub release_unknown: Option<String>,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.release_unknown {
            None => f.write_str(&self.owner),
            Some(reason) => write!(f, "{} (release unknown: {reason})", self.owner),
        }
    }
}

/// Why a permit was not granted, or why a hold could not be confirmed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "error", rename_all = "kebab-case")]
pub enum AdmissionError {
    /// The deadline passed while waiting; `holders` are those occupying the pool then.
    #[error(
        "timed out after {waited:?} waiting for a {pool} permit; held by: {}",
        list(holders)
    )]
    Timeout {
        pool: PoolKind,
        waited: Duration,
        holders: Vec<Holder>,
    },
    /// The cancel token fired before a permit was granted.
    #[error("cancelled while waiting for a {pool} permit for {owner}")]
    Cancelled { pool: PoolKind, owner: String },
    /// Session capacity is full; sessions are never waited for.
    #[error(
        "session limit {limit} reached ({} in use: {}); raise it with --max-sessions or \
         BACKFILL_MAX_SESSIONS",
        holders.len(),
        list(holders)
    )]
    SessionLimit { limit: u32, holders: Vec<Holder> },
    /// `confirm_hold` named a hold that does not exist (never made or already confirmed).
    #[error("{0} is not recorded: never made or already confirmed")]
    UnknownHold(HoldId),
    /// More permits asked at once than the pool holds: it could never be granted.
    #[error(
        "{asked} {pool} permits asked at once but the capacity is {capacity}: it could \
         never be granted; raise the capacity (--target-writes) or ask for fewer"
    )]
    BeyondCapacity {
        pool: PoolKind,
        asked: usize,
        capacity: u32,
    },
    /// A configured limit is zero: nothing could ever be admitted.
    #[error("invalid admission limit: {field} must be at least 1")]
    InvalidLimit { field: &'static str },
}

impl AdmissionError {
    /// True when retrying cannot help: the cause is configuration or a caller bug.
    /// A timeout or a cancellation is not definite.
    pub fn is_definite(&self) -> bool {
        !matches!(self, Self::Timeout { .. } | Self::Cancelled { .. })
    }
}

fn list(holders: &[Holder]) -> String {
    if holders.is_empty() {
        return "nobody".to_owned();
    }
    let names: Vec<String> = holders.iter().map(Holder::to_string).collect();
    names.join(", ")
}
