//! A panic inside a window sub-task (a window's read-ahead producer, a page's apply) is a
//! bug in backfill, not a transient failure: retrying it up to the attempt cap only
//! repeats the bug and burns attempts. The pipeline turns such a panic into a definite
//! error that names the window and the (redacted) panic message, so the table pauses at
//! once, as `serve` does for a panic of the whole job task.
//!
//! Why it is safe: the panicked task has ended (tokio caught the unwind), so nothing of it
//! runs any more. A read or write permit it held was dropped unsettled during the unwind
//! and is a hold with release unknown (`admission::permit`): the statement it guarded may
//! still run on the server, exactly as the serve-level panic path leaves permits. The
//! window's evidence (attempt record, materials, seal row, T) is what it was; `resume`
//! decides each window from it like after a crash.
use kernel::error::DefiniteCode;
use kernel::ids::JobId;
use kernel::Error;
use tokio::task::JoinError;

/// The error a failed sub-task of `job` (described by `what`) ends the pipeline with: a
/// definite one naming `what` and the panic when it panicked, a transient one otherwise
/// (the task was cancelled).
pub fn task_failed(job: JobId, what: &str, e: JoinError) -> Error {
    if !e.is_panic() {
        return Error::transient(format!("job {job}: the {what} task failed: {e}"));
    }
    let msg = text(e.into_panic());
    tracing::error!(%job, task = what, panic = %msg, "a window sub-task panicked; pausing the table");
    Error::definite(
        DefiniteCode::Internal,
        format!(
            "job {job}: the {what} task panicked ({msg}); this is a bug in backfill: keep the \
             serve log for a report, then `backfill resume {job}` (after an upgrade if the \
             panic repeats)"
        ),
    )
}

/// A panic payload as text for logs and pause reasons, URLs redacted (a panic message may
/// quote a value that holds one). Also used by `serve` for a panicked job task.
pub fn text(payload: Box<dyn std::any::Any + Send>) -> String {
    let raw = match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => match p.downcast::<&'static str>() {
            Ok(s) => (*s).to_string(),
            Err(_) => "a non-text panic payload".to_string(),
        },
    };
    kernel::redact::redact_text(&raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn join_error(panics: bool) -> JoinError {
        let h = tokio::spawn(async move {
            if panics {
                panic!("boom at mysql://u:pw@h:1/db");
            }
            std::future::pending::<()>().await;
        });
        if !panics {
            h.abort();
        }
        h.await.expect_err("the task did not end normally")
    }

    #[tokio::test]
    async fn a_panic_is_definite_and_names_the_task_and_the_redacted_message() {
        let e = task_failed(JobId(7), "w3 read-ahead", join_error(true).await);
        assert!(!e.is_transient(), "{e}");
        let s = e.to_string();
        assert!(
            s.starts_with("internal: job 7: the w3 read-ahead task panicked"),
            "{s}"
        );
        assert!(s.contains("boom at mysql://u:***@h:1/db"), "{s}");
        assert!(!s.contains("pw@"), "{s}");
        assert!(s.contains("backfill resume 7"), "{s}");
    }

    #[test]
    fn panic_payloads_read_as_redacted_text() {
        let s: Box<dyn std::any::Any + Send> = Box::new("at mysql://u:pw@h:1/db".to_string());
        assert_eq!(text(s), "at mysql://u:***@h:1/db");
        let s: Box<dyn std::any::Any + Send> = Box::new("static mysql://u:pw@h/db");
        assert_eq!(text(s), "static mysql://u:***@h/db");
        assert_eq!(text(Box::new(7u8)), "a non-text panic payload");
    }

    #[tokio::test]
    async fn a_cancelled_task_stays_transient() {
        let e = task_failed(JobId(7), "w3 page p0 apply", join_error(false).await);
        assert!(e.is_transient(), "{e}");
    }
}
