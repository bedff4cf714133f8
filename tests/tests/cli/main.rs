//! The operator's surface, mostly through the `backfill` program: install and its refusals,
//! `--config`, status, metrics, verify, secrets and TLS, runbooks, the demo, the README's
//! quick start.
mod config;
mod dashboard;
mod demo;
mod digest;
mod fleet_status;
mod help;
mod install;
mod install_bulk;
mod install_server;
mod install_target;
mod keys_refusals;
mod metrics;
mod odd_names;
mod profile;
mod quick_start;
mod runbooks;
mod secrets;
mod serve_autocommit;
mod serve_materials;
mod serve_urls;
mod status;
mod status_holds;
mod status_window;
mod tls;
mod verify;
mod verify_definition;
mod verify_finding;
mod verify_keys;
mod verify_pinned;
