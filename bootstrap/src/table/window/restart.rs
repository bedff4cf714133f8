//! The restart rules of a window (DESIGN §5), as a pure decision over evidence.
//!
//! Why it is safe: a window is done only when its sealed manifest, its T credentials and J
//! agree (a LOW or HIGH marker in the binlog proves nothing by itself). After a crash the
//! runner gathers what each store says about each window from the one J is at onwards
//! (its last attempt in `window_attempts`, the seal row, the materials, T's credentials;
//! windows read ahead of J are decided exactly like the one J is at) and asks [`decide`]
//! what to do next:
//! * nothing sealed: the read view and RAW pages of the old attempt are worthless (a page
//!   cursor is never continued on another connection), so a NEW attempt starts from LOW;
//! * sealed and its materials verify: never re-read. Credentials that T holds must match
//!   the sealed FINAL hashes exactly; the missing pages are applied from the saved FINAL
//!   bytes (the ledger skips present ones as AlreadyCommitted); then J advances;
//! * sealed but the materials fail verification: with no credential in T nothing of it
//!   reached the target, so a new attempt is safe; with a credential, the target holds
//!   bytes we can no longer prove: an evidence failure that pauses the table.
use kernel::ids::{Attempt, Digest, PageNo};

/// What T holds for one FINAL page of the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credential {
    Absent,
    Present(Digest),
}

/// The evidence about one window (the one J is at, or one read ahead of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Evidence {
    /// No manifest sealed for the window's last recorded attempt (or none started).
    Unsealed { last_attempt: Option<Attempt> },
    /// A sealed manifest of `attempt`, whether its materials verified, its FINAL page
    /// hashes in page order, and what T holds for each page.
    Sealed {
        attempt: Attempt,
        materials_ok: bool,
        final_pages: Vec<Digest>,
        credentials: Vec<Credential>,
    },
}

/// The next step for the window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Start (or restart) the window from LOW with this attempt.
    NewAttempt(Attempt),
    /// Apply these FINAL pages (saved bytes), then advance J.
    Apply {
        attempt: Attempt,
        pages: Vec<PageNo>,
    },
    /// Every page is in T with the sealed hash: advance J.
    Advance { attempt: Attempt },
    /// The evidence contradicts itself: pause with this reason.
    Pause(String),
}

/// Decides the next step from the evidence (DESIGN §5 restart rules).
pub fn decide(evidence: &Evidence) -> Decision {
    match evidence {
        Evidence::Unsealed { last_attempt } => {
            Decision::NewAttempt(last_attempt.map_or(Attempt(1), Attempt::next))
        }
        Evidence::Sealed {
            attempt,
            materials_ok,
            final_pages,
            credentials,
        } => sealed(*attempt, *materials_ok, final_pages, credentials),
    }
}

fn sealed(
    attempt: Attempt,
    materials_ok: bool,
    final_pages: &[Digest],
    credentials: &[Credential],
) -> Decision {
    let any_credential = credentials
        .iter()
        .any(|c| matches!(c, Credential::Present(_)));
    if !materials_ok {
        return if any_credential {
            Decision::Pause(format!(
                "window attempt {attempt}: sealed materials fail verification but the target ledger already \
                 holds page credentials; the target holds bytes that can no longer be proven"
            ))
        } else {
            Decision::NewAttempt(attempt.next())
        };
    }
    if credentials.len() != final_pages.len() {
        return Decision::Pause(format!(
            "window attempt {attempt}: manifest seals {} FINAL pages but {} credentials were read",
            final_pages.len(),
            credentials.len()
        ));
    }
    let mut missing = Vec::new();
    for (i, (sealed, cred)) in final_pages.iter().zip(credentials).enumerate() {
        match cred {
            Credential::Absent => missing.push(PageNo(i as u32)),
            Credential::Present(d) if d == sealed => {}
            Credential::Present(d) => {
                return Decision::Pause(format!(
                "window attempt {attempt} page {i}: target ledger credential {d} differs from the \
                     sealed FINAL hash {sealed} (evidence conflict)"
            ))
            }
        }
    }
    if missing.is_empty() {
        Decision::Advance { attempt }
    } else {
        Decision::Apply {
            attempt,
            pages: missing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(n: u8) -> Digest {
        Digest([n; 32])
    }

    fn sealed(ok: bool, creds: Vec<Credential>) -> Evidence {
        Evidence::Sealed {
            attempt: Attempt(2),
            materials_ok: ok,
            final_pages: vec![d(1), d(2), d(3)],
            credentials: creds,
        }
    }

    #[test]
    fn unsealed_windows_restart_with_a_new_attempt() {
        assert_eq!(
            decide(&Evidence::Unsealed { last_attempt: None }),
            Decision::NewAttempt(Attempt(1))
        );
        assert_eq!(
            decide(&Evidence::Unsealed {
                last_attempt: Some(Attempt(4))
            }),
            Decision::NewAttempt(Attempt(5))
        );
    }

    #[test]
    fn sealed_windows_apply_only_missing_pages_then_advance() {
        use Credential::*;
        let e = sealed(true, vec![Present(d(1)), Absent, Absent]);
        assert_eq!(
            decide(&e),
            Decision::Apply {
                attempt: Attempt(2),
                pages: vec![PageNo(1), PageNo(2)]
            }
        );
        let e = sealed(true, vec![Present(d(1)), Present(d(2)), Present(d(3))]);
        assert_eq!(
            decide(&e),
            Decision::Advance {
                attempt: Attempt(2)
            }
        );
    }

    #[test]
    fn conflicts_and_unprovable_targets_pause() {
        use Credential::*;
        let e = sealed(true, vec![Present(d(1)), Present(d(9)), Absent]);
        assert!(matches!(decide(&e), Decision::Pause(m) if m.contains("page 1")));
        let e = sealed(false, vec![Absent, Present(d(2)), Absent]);
        assert!(matches!(decide(&e), Decision::Pause(m) if m.contains("no longer be proven")));
        let e = sealed(true, vec![Absent]);
        assert!(matches!(decide(&e), Decision::Pause(_)));
    }

    #[test]
    fn failed_materials_without_credentials_reopen() {
        let e = sealed(false, vec![Credential::Absent; 3]);
        assert_eq!(decide(&e), Decision::NewAttempt(Attempt(3)));
    }
}
