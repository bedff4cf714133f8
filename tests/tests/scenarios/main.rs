//! `serve` run in this process through the table lifecycle: windows, finish, pause,
//! cancel, permits and holds, read rates, many tables, hangs; and the replay benchmark.
//! Tests that run serve here hold `backfill_tests::in_process()` (process-wide seams).
mod audit_fields;
mod cancel;
mod cancel_holds;
mod cancel_paused;
mod cancel_replay;
mod cancel_streams;
mod hang;
mod keys_e2e;
mod keys_upgrade;
mod legacy_pages;
mod many_tables;
mod parts_permits;
mod pause;
mod pause_panic;
mod pause_sessions;
mod pause_uncertain;
mod pause_window_panic;
mod periodic_verify;
mod pools;
mod pools_reuse;
mod rate;
mod replay_bench;
mod replay_permits;
mod schema_change;
mod schema_windows;
mod stream_permits;
mod target_refused;
mod types_tz;
mod window;
mod window_faults;
mod window_release;
mod window_writer;
