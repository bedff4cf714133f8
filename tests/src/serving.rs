//! `serve` run in this process, as the suites run it: the same `supervisor::serve`, with the
//! telemetry of the last serve started kept so a test can look at that serve's admission
//! pools and metrics after it ran (serve keeps nothing process-global; the suites that
//! run serve here hold `crate::in_process()`, so "the last serve" is the test's own).
use crate::bf::supervisor::{self, Telemetry};
use kernel::Result;
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

pub use crate::bf::supervisor::{Outcomes, ServeConfig};

static LAST: Mutex<Option<Telemetry>> = Mutex::new(None);

fn last() -> Option<Telemetry> {
    LAST.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Forgets the last serve's telemetry (a test starting clean).
pub fn forget() {
    *LAST.lock().unwrap_or_else(|p| p.into_inner()) = None;
}

/// Runs serve with `cfg`, keeping its telemetry for [`admission_snapshot`] and friends.
pub async fn serve(cfg: ServeConfig, cancel: CancellationToken) -> Result<Outcomes> {
    *LAST.lock().unwrap_or_else(|p| p.into_inner()) = Some(cfg.telemetry.clone());
    supervisor::serve(cfg, cancel).await
}

/// Runs serve with `cfg` until it is idle (`exit_when_idle`); panics when it is not
/// within `within` or ends with an error.
pub async fn serve_until_idle(cfg: ServeConfig, within: std::time::Duration) -> Outcomes {
    tokio::time::timeout(within, serve(cfg, CancellationToken::new()))
        .await
        .unwrap_or_else(|_| panic!("serve did not become idle within {within:?}"))
        .unwrap_or_else(|e| panic!("serve: {e}"))
}

/// The admission state of the last serve (None before it registered its pools).
pub fn admission_snapshot() -> Option<admission::AdmissionSnapshot> {
    last().and_then(|t| t.admission_snapshot())
}

/// The admission pools of the last serve (tests take permits from them).
pub fn observed_admission() -> Option<admission::Admission> {
    last().and_then(|t| t.admission())
}

/// The metrics exposition of the last serve (its telemetry and the state store's jobs).
pub async fn render_metrics(pool: &sqlx::MySqlPool) -> String {
    let t = last().unwrap_or_default();
    crate::bf::present::metrics::render(pool, &t).await
}
