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
//!    rows by key and full image (`crate::table::window::reconcile`, property-tested): the result is the
//!    range's state at HIGH whatever S was.
//! 4. A table the reader paused (minimal image, statement DML, a DDL that cannot be
//!    taken) at or before HIGH has no trustworthy L: the window pauses the table
//!    definitely, never seals (I6). A compatible DDL is sealed as a schema version: a
//!    window whose LOW..HIGH holds it is read again in that version, and the target takes
//!    it before that version's first page ([`versions`], DESIGN §16).
//!
//! Why nothing is applied twice or lost across crashes (I2, I3, I4): the runner never
//! trusts memory. Every window, the one J is at and those read ahead of it
//! ([`pipeline`]), is decided from its own evidence ([`produce`]: its last attempt in
//! `window_attempts`, recorded before LOW; the seal row and its verified materials; T's
//! credentials) by the pure [`crate::table::window::restart::decide`]:
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
//! the plan length (phase `Windows`); the job task (`crate::table`) then reaches its
//! "windows done" hook, where F, replay and the audit take over.
pub mod apply;
pub mod attempts;
pub mod garbage;
pub mod panics;
pub mod pipeline;
pub mod produce;
pub mod progress;
pub mod read;
pub mod reconcile;
pub mod restart;
pub mod runner;
pub mod seal;
pub mod versions;

pub use crate::table::ctx::RunConfig;
pub use crate::table::faults::window as fp;
pub use crate::table::hooks::{NoHooks, WindowHooks};
