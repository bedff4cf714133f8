//! The window protocol of DESIGN §5, steps 1 to 9, with its restart rules.
//!
//! Why a window's FINAL output is the range's state at HIGH (DESIGN §11 I1):
//! 1. LOW is written to the control table and awaited in L ([`read`]): every change
//!    committed before LOW is in L before the read view opens, and every later change is
//!    after LOW in L (binlog order = commit order, DESIGN §3.8).
//! 2. The read view is a consistent snapshot at a binlog point S that MariaDB reports; the
//!    runner checks LOW <= S < HIGH (manifest), so the view lies inside the fence.
//! 3. HIGH is written only after the read connection is confirmed closed, and awaited in
//!    L ([`seal`]); the L changes of the table between LOW and HIGH are folded over the RAW
//!    rows by key and full image (`crate::reconcile`, property-tested): the result is the
//!    range's state at HIGH whatever S was.
//! 4. A table the reader paused (DDL, minimal image, statement DML) at or before HIGH has
//!    no trustworthy L: the window pauses the table definitely, never seals (I6).
//!
//! Why nothing is applied twice or lost across crashes (I2, I3, I4): the runner never
//! trusts memory. Every window, the one J is at and those read ahead of it
//! ([`pipeline`]), is decided from its own evidence ([`produce`]: its last attempt in
//! `window_attempts`, recorded before LOW; the seal row and its verified materials; T's
//! credentials) by the pure [`crate::restart::decide`]:
//! * unsealed: a new attempt from LOW; materials of older attempts are garbage (released
//!   once a later attempt seals, [`garbage`]), a page cursor is never continued on another
//!   connection;
//! * sealed: never re-read; the saved FINAL bytes are applied through T, which answers
//!   AlreadyCommitted for pages it holds (credential first, DESIGN §3.5); J and the
//!   range chain advance in one state-store transaction, in plan order only.
//!
//! So a crash at any fault point of [`fp`] leaves each window either unsealed (restarted)
//! or sealed (re-applied from bytes, exactly once by T), whether J is at it or behind it.
//! A different page size or read concurrency after a restart only affects windows not
//! yet sealed.
//!
//! Where issue 6 continues: [`runner::run_windows`] returns when J's `completed` equals
//! the plan length (phase `Windows`); the job task (`crate::job`) then reaches its
//! "windows done" hook, where F, replay and the audit take over.
pub mod apply;
pub mod attempts;
pub mod garbage;
pub mod hooks;
pub mod panics;
pub mod pipeline;
pub mod produce;
pub mod progress;
pub mod read;
pub mod runner;
pub mod seal;

pub use hooks::{NoHooks, WindowHooks};

/// Fault points of the window protocol, in protocol order (STYLE §7). With the
/// `failpoints` feature, `BACKFILL_FAILPOINTS=name[@n]` exits the process at the n-th hit.
pub mod fp {
    /// B written to the control table, not yet awaited in L.
    pub const AFTER_B_WRITTEN: &str = "job.after_b_written";
    /// J records CAPTURING (B durable in L, schema re-checked).
    pub const AFTER_CAPTURING: &str = "job.after_capturing";
    /// LOW written, not yet awaited in L.
    pub const AFTER_LOW_WRITTEN: &str = "window.after_low_written";
    /// LOW durable in L, read view not yet open.
    pub const AFTER_LOW_IN_L: &str = "window.after_low_in_l";
    /// After each RAW page is persisted and registered (hit once per page).
    pub const MID_PAGES: &str = "window.mid_pages";
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
    pub const ALL: [&str; 13] = [
        AFTER_B_WRITTEN,
        AFTER_CAPTURING,
        AFTER_LOW_WRITTEN,
        AFTER_LOW_IN_L,
        MID_PAGES,
        AFTER_RAW,
        AFTER_READ_CLOSED,
        AFTER_HIGH_WRITTEN,
        AFTER_HIGH,
        AFTER_FINAL_SEALED,
        AFTER_PAGE_APPLIED,
        AFTER_T_BEFORE_J,
        AFTER_J,
    ];

    /// Fault points that only read-ahead reaches (tested with J held behind).
    pub const READ_AHEAD: [&str; 1] = [AFTER_SEALED_AHEAD];
}

/// Tunables of a job's execution that may change between restarts (DESIGN §11 I3).
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Rows per RAW and FINAL page of windows sealed from now on.
    pub page_rows: usize,
    /// How long a marker (B, LOW, HIGH) may take to become durable in L.
    pub marker_timeout: std::time::Duration,
    /// How long to wait for a read or write permit.
    pub permit_timeout: std::time::Duration,
    /// How long one read view may take (open, every page, commit); then the attempt
    /// fails and the read connection's close must be confirmed (DESIGN §8).
    pub read_view_timeout: std::time::Duration,
    /// Failed attempts of one window in a row (lost connection, ...) before the table
    /// pauses with the window and the last error.
    pub max_attempts: u32,
    /// Limits of one target statement.
    pub limits: ledger::apply::Limits,
}

impl Default for RunConfig {
    fn default() -> RunConfig {
        RunConfig {
            page_rows: crate::install::DEFAULT_PAGE_ROWS as usize,
            marker_timeout: std::time::Duration::from_secs(60),
            permit_timeout: std::time::Duration::from_secs(600),
            read_view_timeout: std::time::Duration::from_secs(300),
            max_attempts: 5,
            limits: ledger::apply::Limits::default(),
        }
    }
}
