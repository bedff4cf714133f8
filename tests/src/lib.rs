//! Shared end-to-end test helpers.
pub use harness;
