//! Key-partitioned replay apply: one source transaction's changes applied over P target
//! connections at once, each key partition in its own target transaction with its own
//! cursor in T (issue 6; DESIGN §3.5, §6, §9).
//!
//! Why it is safe:
//! - The target has no unique key beyond the primary key, no trigger and no foreign key
//!   (DESIGN §9: install refuses them), and replay writes by key and full image only (§6).
//!   A key's final state therefore depends only on the ordered changes OF THAT KEY:
//!   changes of different keys commute, and a partition of the keys can be replayed
//!   independently of the others.
//! - Keys are split into P partitions by [`partition_of`], a fixed function whose values
//!   are persisted in meaning (a part row says "partition p of P holds its keys through
//!   here"), so it never changes (golden test in `tests/parts_plan.rs`). A key-changing
//!   update's delete belongs to the partition of the old key, its upsert to the new one.
//! - A replay transaction t (main cursor E -> N) becomes P part transactions. Part 0 is
//!   exactly today's transaction restricted to partition 0: it writes the main cursor
//!   (`_backfill_ledger_cursor`, unchanged format and meaning) with the existing
//!   insert-or-CAS. Part p >= 1 writes its own row of `_backfill_ledger_cursor_parts` with
//!   the same insert-or-CAS rule, first in its transaction after the owner check, then
//!   only the steps of its partition (folded per key, in key order).
//! - Part 0's COMMIT is sent only after every other part of t has COMMITted OK or was
//!   skipped (its row already at or after N, or no change of its partition to apply).
//!   Hence: main cursor >= X implies every partition applied everything through X. Audit,
//!   activation, status lag and the restart point keep reading ONLY the main cursor.
//! - A part row AHEAD of main (main's COMMIT failed or the process died after some parts
//!   committed) means partition p already holds its changes through that row: the next
//!   plan for part p starts at max(main, row p). A row at or behind main means nothing.
//!   Cursors name source groups and a sub-cursor counted in changes, never batches, so
//!   any txn_rows on restart works (§3.1). A lost COMMIT of a part that lands later makes
//!   the retry's CAS fail, and the apply re-plans from T, exactly as for the main cursor.
//! - Changing P between runs: ahead rows carry the scheme (`parts`) in force; two ahead
//!   rows of different schemes are an evidence conflict. That scheme is kept until main
//!   has caught up with every ahead row, then the configured P takes over; rows at or
//!   behind main are rewritten by CAS when next used.
//! - A published target may briefly show part of a source transaction (some partitions
//!   committed): DESIGN §6 already says so for chunked large transactions.
use crate::apply::{self, Applied, ApplyError, Limits, ReplayGroup};
use crate::target::TargetCtx;
use kernel::change::GroupEnd;
use kernel::error::DefiniteCode;
use kernel::value::SqlValue;
use kernel::Error;
use mysql_async::Conn;

/// The most key partitions (connections) one replay may use.
pub const MAX_PARTS: usize = 16;

/// The partition of an integer key among `parts` (stable forever: part rows persist its
/// meaning). SplitMix64's finaliser spreads consecutive and strided keys evenly.
pub fn partition_of_int(key: i64, parts: usize) -> usize {
    if parts <= 1 {
        return 0;
    }
    let mut z = (key as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % parts as u64) as usize
}

/// Stable forever (its meaning is persisted by part rows): the partition of a primary-key
/// value. The key is read as the integer it denotes ([`SqlValue::as_key`]: `Int(5)`,
/// `UInt(5)` and text `"5"` are the same key). A value that is no signed 64-bit integer
/// (DESIGN §9 refuses such primary keys; replay refuses such changes) maps to 0.
pub fn partition_of(key: &SqlValue, parts: usize) -> usize {
    match key.as_key() {
        Some(k) => partition_of_int(k, parts),
        None => 0,
    }
}

/// Replays `groups` like [`apply::apply_groups`], split over `conns.len()` key partitions
/// (the configured P; 1 = exactly `apply_groups` on `conns[0]`).
pub async fn apply_groups_parts(
    conns: &mut [Conn],
    ctx: &TargetCtx,
    prev: Option<&GroupEnd>,
    groups: &[ReplayGroup],
    limits: Limits,
) -> Result<Applied, ApplyError> {
    match conns {
        [] => Err(Error::definite(
            DefiniteCode::Usage,
            format!("{}: replay needs at least one target connection", ctx.who()),
        )
        .into()),
        [one] => apply::apply_groups(one, ctx, prev, groups, limits).await,
        _ => Err(Error::definite(
            DefiniteCode::Usage,
            format!(
                "{}: key-partitioned replay over {} connections is not built yet; use 1",
                ctx.who(),
                conns.len()
            ),
        )
        .into()),
    }
}
