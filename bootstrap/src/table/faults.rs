//! Every fault point of the per-table protocol, by name, in protocol order (STYLE §7).
//! With the `failpoints` feature, `BACKFILL_FAILPOINTS=name[@n]` exits the process at the
//! n-th hit of `name` (`kernel::failpoint`); a crash test kills `serve` at each of these
//! and checks that the restarted process converges. [`ALL`] lists every one of them: a
//! test that claims to cover the protocol iterates it and fails on a point never reached.

/// Fault points of the window protocol, in protocol order (STYLE §7). With the
/// `failpoints` feature, `BACKFILL_FAILPOINTS=name[@n]` exits the process at the n-th hit.
pub mod window {
    /// B written to the control table, not yet awaited in L.
    pub const AFTER_B_WRITTEN: &str = "job.after_b_written";
    /// J records CAPTURING (B durable in L, schema re-checked).
    pub const AFTER_CAPTURING: &str = "job.after_capturing";
    /// LOW written, not yet awaited in L.
    pub const AFTER_LOW_WRITTEN: &str = "window.after_low_written";
    /// LOW durable in L, read view not yet open.
    pub const AFTER_LOW_IN_L: &str = "window.after_low_in_l";
    /// The read view is open (its snapshot position read), no page read yet.
    pub const AFTER_READ_VIEW_OPEN: &str = "window.after_read_view_open";
    /// A material's bytes durable, its registry row not written (every RAW page, FINAL
    /// page and manifest; `ledger::seal`).
    pub const MATERIAL_AFTER_BYTES: &str = ledger::seal::MATERIAL_AFTER_BYTES;
    /// After each RAW page is persisted and registered (hit once per page).
    pub const MID_PAGES: &str = "window.mid_pages";
    /// Every FINAL page of the window persisted and registered, the manifest not yet
    /// (`ledger::seal`).
    pub const SEAL_AFTER_FINAL_PAGES: &str = ledger::seal::SEAL_AFTER_FINAL_PAGES;
    /// Every RAW page persisted, read view still open.
    pub const AFTER_RAW: &str = "window.after_raw";
    /// Read connection closed and confirmed, HIGH not yet written.
    pub const AFTER_READ_CLOSED: &str = "window.after_read_closed";
    /// HIGH written, not yet awaited in L.
    pub const AFTER_HIGH_WRITTEN: &str = "window.after_high_written";
    /// HIGH durable in L, nothing folded yet.
    pub const AFTER_HIGH: &str = "window.after_high";
    /// FINAL pages, manifest and seal row durable; nothing of the window in T yet.
    pub const AFTER_FINAL_SEALED: &str = "window.after_final_sealed";
    /// Like [`AFTER_FINAL_SEALED`], hit only when the window was sealed while J is still
    /// at an earlier window (read-ahead).
    pub const AFTER_SEALED_AHEAD: &str = "window.after_sealed_ahead";
    /// After each FINAL page is committed in T (hit once per page).
    pub const AFTER_PAGE_APPLIED: &str = "window.after_page_applied";
    /// Every FINAL page in T, J not advanced.
    pub const AFTER_T_BEFORE_J: &str = "window.after_t_before_j";
    /// J and the range chain advanced.
    pub const AFTER_J: &str = "window.after_j";

    /// Every fault point, in protocol order.
    pub const ALL: [&str; 16] = [
        AFTER_B_WRITTEN,
        AFTER_CAPTURING,
        AFTER_LOW_WRITTEN,
        AFTER_LOW_IN_L,
        AFTER_READ_VIEW_OPEN,
        MATERIAL_AFTER_BYTES,
        MID_PAGES,
        AFTER_RAW,
        AFTER_READ_CLOSED,
        AFTER_HIGH_WRITTEN,
        AFTER_HIGH,
        SEAL_AFTER_FINAL_PAGES,
        AFTER_FINAL_SEALED,
        AFTER_PAGE_APPLIED,
        AFTER_T_BEFORE_J,
        AFTER_J,
    ];

    /// Fault points that only read-ahead reaches (tested with J held behind).
    pub const READ_AHEAD: [&str; 1] = [AFTER_SEALED_AHEAD];
}

/// The job's lease taken (a new fencing token committed in the state store), nothing
/// else of the task done (`crate::supervisor::tasks`).
pub const LEASE_AFTER_ACQUIRED: &str = "job.after_lease_acquired";
/// T's tables exist and T's owner row carries this process's fencing token
/// (`ledger::target::claim`); no J row written by this task yet.
pub const TARGET_AFTER_CLAIM: &str = "job.after_target_claim";
/// The table's material registry row exists (created on the first run, 0 bytes); J not
/// yet read or created.
pub const REGISTRY_AFTER_OPENED: &str = "job.after_registry_opened";
/// The lease renewed (hit once per renewal, every third of the lease TTL, whatever the
/// task is doing then: `ledger::lease::keep`).
pub const LEASE_AFTER_RENEWED: &str = ledger::lease::AFTER_RENEWED;
/// F written to the control table, not yet awaited in L.
pub const FENCE_AFTER_F_WRITTEN: &str = "fence.after_f_written";
/// F durable in L, J not yet FENCED.
pub const FENCE_AFTER_F_IN_L: &str = "fence.after_f_in_l";
/// J records FENCED(F), not yet REPLAYING.
pub const FENCE_AFTER_J_FENCED: &str = "fence.after_j_fenced";
/// J records REPLAYING, nothing of (B, F] replayed by this process yet.
pub const ACTIVATE_AFTER_J_REPLAYING: &str = "activate.after_j_replaying";
/// A batch of (B, F] committed in T (hit once per batch).
pub const REPLAY_AFTER_BATCH_T: &str = "replay.after_batch_t";
/// Part of (B, F] replayed, the rest not.
pub const REPLAY_MID: &str = "replay.mid";
/// J records AUDITED, the activation credential not yet written in T.
pub const ACTIVATE_AFTER_J_AUDITED: &str = "activate.after_j_audited";
/// The activation credential committed in T, J not yet STREAMING.
pub const ACTIVATE_AFTER_CREDENTIAL_BEFORE_J: &str = "activate.after_credential_before_j";
/// A STREAMING batch committed in T (hit once per batch).
pub const STREAM_AFTER_BATCH: &str = "stream.after_batch";
/// A schema version's DDL ran on the target, T does not record it yet (DESIGN §16).
pub const SCHEMA_AFTER_TARGET_DDL: &str = "schema.after_target_ddl";
/// T records a schema version with the cursor past its DDL's group.
pub const SCHEMA_AFTER_T: &str = "schema.after_t";
/// J records a pause (its reason), the phase unchanged (`crate::table::pause`).
pub const PAUSE_AFTER_J_PAUSED: &str = "pause.after_j_paused";
/// A resume cleared J's pause; its command row is not yet deleted.
pub const RESUME_AFTER_J_CLEARED: &str = "resume.after_j_cleared";
/// J records CANCELING, K not yet written.
pub const CANCEL_AFTER_CANCELING: &str = "cancel.after_canceling";
/// K written to the control table, not yet awaited in L.
pub const CANCEL_AFTER_K_WRITTEN: &str = "cancel.after_k_written";
/// J records CANCELLED(K), the jobs row not yet.
pub const CANCEL_AFTER_CANCELLED: &str = "cancel.after_cancelled";
/// The jobs row records the cancel too: nothing of the job is left to do.
pub const CANCEL_AFTER_JOBS_ROW: &str = "cancel.after_jobs_row";

/// Every fault point of the table protocol, in protocol order: the task's start (lease,
/// T claim, registry), the windows', then F, replay, activation, STREAMING, a pause and
/// its resume, and cancellation; the lease renewal, periodic, after the start.
pub const ALL: [&str; 38] = [
    LEASE_AFTER_ACQUIRED,
    TARGET_AFTER_CLAIM,
    REGISTRY_AFTER_OPENED,
    LEASE_AFTER_RENEWED,
    window::AFTER_B_WRITTEN,
    window::AFTER_CAPTURING,
    window::AFTER_LOW_WRITTEN,
    window::AFTER_LOW_IN_L,
    window::AFTER_READ_VIEW_OPEN,
    window::MATERIAL_AFTER_BYTES,
    window::MID_PAGES,
    window::AFTER_RAW,
    window::AFTER_READ_CLOSED,
    window::AFTER_HIGH_WRITTEN,
    window::AFTER_HIGH,
    window::SEAL_AFTER_FINAL_PAGES,
    window::AFTER_FINAL_SEALED,
    window::AFTER_SEALED_AHEAD,
    window::AFTER_PAGE_APPLIED,
    window::AFTER_T_BEFORE_J,
    window::AFTER_J,
    FENCE_AFTER_F_WRITTEN,
    FENCE_AFTER_F_IN_L,
    FENCE_AFTER_J_FENCED,
    ACTIVATE_AFTER_J_REPLAYING,
    REPLAY_AFTER_BATCH_T,
    REPLAY_MID,
    ACTIVATE_AFTER_J_AUDITED,
    ACTIVATE_AFTER_CREDENTIAL_BEFORE_J,
    STREAM_AFTER_BATCH,
    SCHEMA_AFTER_TARGET_DDL,
    SCHEMA_AFTER_T,
    PAUSE_AFTER_J_PAUSED,
    RESUME_AFTER_J_CLEARED,
    CANCEL_AFTER_CANCELING,
    CANCEL_AFTER_K_WRITTEN,
    CANCEL_AFTER_CANCELLED,
    CANCEL_AFTER_JOBS_ROW,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_listed_once_and_windows_are_a_prefix() {
        let mut seen = std::collections::BTreeSet::new();
        for p in ALL {
            assert!(seen.insert(p), "{p} listed twice");
            assert!(p.contains('.'), "{p}: names are phase.step");
        }
        for p in window::ALL.iter().chain(window::READ_AHEAD.iter()) {
            assert!(seen.contains(p), "{p} missing from ALL");
        }
        let at = |p: &str| ALL.iter().position(|q| *q == p).expect("listed");
        assert!(at(REGISTRY_AFTER_OPENED) < at(window::AFTER_B_WRITTEN));
    }
}

/// Fault points of `backfill install`, listed beside the install code it arms
/// (`crate::install::faults`: install is below the table protocol's modules).
pub use crate::install::faults as install;

/// Fault points of retention and GC (`crate::table::retention`), in protocol order.
pub mod gc {
    /// The release intent (what will be removed, the audit facts) is durable; no byte
    /// removed yet.
    pub const AFTER_RELEASE_INTENT: &str = "gc.after_release_intent";
    /// After each material's bytes are removed (hit once per material).
    pub const MID_REMOVE: &str = "gc.mid_remove";
    /// Every released byte removed; registry rows still there, release not done.
    pub const AFTER_BYTES_REMOVED: &str = "gc.after_bytes_removed";
    /// A batch of L records below the horizon deleted (hit once per batch).
    pub const AFTER_L_BATCH: &str = "gc.after_l_batch";

    /// Every fault point, in protocol order.
    pub const ALL: [&str; 4] = [
        AFTER_RELEASE_INTENT,
        MID_REMOVE,
        AFTER_BYTES_REMOVED,
        AFTER_L_BATCH,
    ];
}
