//! bootstrap: the per-table protocol and the `backfill` program (DESIGN §12, §13).
//!
//! The crate is in layers; a layer imports only the layers below it (checked in CI by
//! the unit tests of `src/layers.rs`, which read every `crate::` path of every file):
//!
//! | layer | modules | what |
//! |---|---|---|
//! | L0 | [`io`], [`store`], [`seams`] | connecting, deadlines, confirmed release; the only SQL on bootstrap's own tables; the test seams |
//! | L1 | [`install`], [`table`] | preconditions, sealing, range plan; the per-table protocol (lifecycle, windows, F, replay, audit, activation, cancel, pause) |
//! | L2 | [`supervisor`], [`verify`] | `serve`: tasks, sources, leases, telemetry; the independent comparison |
//! | L3 | [`present`] | `status` and the metrics exposition |
//! | L4 | [`cli`], [`demo`] | the only clap code: every command; `backfill demo` |
//!
//! Within a folder, sibling modules import each other without a circle (same test).
pub mod cli;
pub mod demo;
pub mod install;
pub mod io;
mod layers;
pub mod present;
pub mod seams;
pub mod store;
pub mod supervisor;
pub mod table;
pub mod verify;
