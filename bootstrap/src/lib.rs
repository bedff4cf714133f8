//! bootstrap: the per-table protocol and the `backfill` program (DESIGN §12, §13).
//!
//! * [`install`]: every precondition of DESIGN §9, schema sealing, lineage, range plan and
//!   generation; [`install::install`] is the library entry point the CLI and tests call.
//! * [`jobs`]: the jobs store (jobs, generations, sealed schemas, lineage, range plans).
//! * [`reconcile`]: the window's reconcile fold; [`restart`]: the window restart rules.
//! * [`cli`], [`run`]: the command line and its exit codes; [`status`]: `backfill status`.
//! * [`commands`]: persisted `start` and `cancel`; [`cancel`]: CANCELING to CANCELLED(K); [`serve`]: the long-running process (one capture
//!   reader per source, one [`job`] task per started job); [`window`]: the window protocol.
//! * [`demo`]: `backfill demo`, the whole protocol on throwaway local servers.
//! * [`fence`], [`replay`], [`audit`], [`finish`]: F, replay of (B, F], the activation
//!   audit and activation, continuous replay after STREAMING (DESIGN §6, §7).
pub mod audit;
pub mod bounded;
pub mod cancel;
pub mod check_cli;
pub mod cli;
pub mod commands;
pub mod config;
pub mod connect;
pub mod demo;
pub mod fence;
pub mod finish;
pub mod install;
pub mod job;
pub mod jobs;
pub mod metrics;
pub mod pause;
pub mod reconcile;
pub mod replay;
pub mod restart;
pub mod run;
pub mod serve;
pub mod serve_cli;
pub mod serve_state;
pub mod status;
pub mod uncertain;
pub mod verify;
pub mod window;
