//! Processes that die: `backfill serve` (or the finish child) exiting at fault points or
//! SIGKILLed, lost commit answers, killed statements; every run converges afterwards.
mod cancel_crash;
mod charsets_crash;
mod failover_kill;
mod faults;
mod finish;
mod galera;
mod host_loss;
mod host_loss4;
mod install_crash;
mod keys_crash;
mod lost_commit;
mod materials_bench;
mod matrix;
mod oracle_keys;
mod replay_parts_crash;
mod repoint;
mod retention;
mod serve_finish;
mod state_outage;
mod stream_kill;
mod types_crash;
mod window_ahead;
mod window_crash;
mod window_evidence;
