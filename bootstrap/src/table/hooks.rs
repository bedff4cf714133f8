//! Test hooks that inject source DML inside a window (STYLE §8; Flink CDC's snapshot-phase
//! hooks): right after LOW is durable and right after the read view closed, i.e. strictly
//! between LOW and HIGH. Library tests pass a [`WindowHooks`] object; process-level tests
//! (feature `failpoints` only) name a SQL file per step in [`SQL_ENV`].
use kernel::ids::{Attempt, JobId, WindowId};
use std::future::Future;
use std::pin::Pin;

/// A boxed hook future.
pub type HookFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Where a hook runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookStep {
    /// LOW is durable in L; the read view is not open yet.
    AfterLow,
    /// The read view is closed; HIGH is not written yet.
    AfterReadClosed,
}

impl HookStep {
    /// The name used in [`SQL_ENV`].
    pub fn as_str(self) -> &'static str {
        match self {
            HookStep::AfterLow => "after_low",
            HookStep::AfterReadClosed => "after_read_closed",
        }
    }
}

/// Callbacks between LOW and HIGH. Both default to nothing.
pub trait WindowHooks: Send + Sync {
    /// Runs once LOW of `window` is durable in L.
    fn after_low(&self, _job: JobId, _window: WindowId, _attempt: Attempt) -> HookFuture<'_> {
        Box::pin(async {})
    }

    /// Runs inside the read view, after its first RAW page, with the server's id of the
    /// read connection (a test can KILL it: the attempt must fail and a new one follow).
    fn mid_read(
        &self,
        _job: JobId,
        _window: WindowId,
        _attempt: Attempt,
        _read_connection: u32,
    ) -> HookFuture<'_> {
        Box::pin(async {})
    }

    /// Runs once the read view of `window` is closed and confirmed.
    fn after_read_closed(
        &self,
        _job: JobId,
        _window: WindowId,
        _attempt: Attempt,
    ) -> HookFuture<'_> {
        Box::pin(async {})
    }
}

/// No hooks (production).
pub struct NoHooks;

impl WindowHooks for NoHooks {}

/// `BACKFILL_WINDOW_HOOK_SQL=after_low=/path/a.sql,after_read_closed=/path/b.sql`: with the
/// `failpoints` feature only, the SQL file runs on the source at that step of every window.
pub const SQL_ENV: &str = "BACKFILL_WINDOW_HOOK_SQL";

/// Hooks that run SQL files on the source (process-level tests).
pub struct SqlFileHooks {
    source: mysql_async::Opts,
    after_low: Option<String>,
    after_read_closed: Option<String>,
}

impl SqlFileHooks {
    /// The hooks named in [`SQL_ENV`], if fault points are compiled in and it is set.
    pub fn from_env(source: mysql_async::Opts) -> Option<SqlFileHooks> {
        if !kernel::failpoint::ENABLED {
            return None;
        }
        let spec = std::env::var(SQL_ENV).ok()?;
        let mut h = SqlFileHooks {
            source,
            after_low: None,
            after_read_closed: None,
        };
        for part in spec.split(',') {
            match part.split_once('=') {
                Some(("after_low", p)) => h.after_low = Some(p.to_string()),
                Some(("after_read_closed", p)) => h.after_read_closed = Some(p.to_string()),
                _ => tracing::warn!(part, "ignoring a malformed {SQL_ENV} entry"),
            }
        }
        Some(h)
    }

    async fn run(&self, path: Option<&str>) {
        use mysql_async::prelude::Queryable;
        let Some(path) = path else { return };
        let sql = match std::fs::read_to_string(path) {
            Ok(s) => s,
            Err(e) => return tracing::warn!(path, error = %e, "hook SQL file unreadable"),
        };
        match mysql_async::Conn::new(self.source.clone()).await {
            Ok(mut c) => {
                if let Err(e) = c.query_drop(sql).await {
                    tracing::warn!(path, error = %e, "hook SQL failed");
                }
                let _ = c.disconnect().await;
            }
            Err(e) => tracing::warn!(path, error = %e, "hook cannot connect"),
        }
    }
}

impl WindowHooks for SqlFileHooks {
    fn after_low(&self, _: JobId, _: WindowId, _: Attempt) -> HookFuture<'_> {
        Box::pin(self.run(self.after_low.as_deref()))
    }

    fn after_read_closed(&self, _: JobId, _: WindowId, _: Attempt) -> HookFuture<'_> {
        Box::pin(self.run(self.after_read_closed.as_deref()))
    }
}
