//! The capture killed, restarted and stopped at its fault points: under load (kill),
//! between an XA PREPARE and its outcome (xa), and with the source and the state store
//! restarting under it (restart). The fault points run in the `capture-probe` process,
//! which must be built with the `failpoints` feature (kernel's own tests enable it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod kill;
mod restart;
mod xa;
