//! When a STREAMING table's materials may be released (pure): `serve --retention-days N`
//! (default 7; 0 = right after activation; `never`), `--retention-until-verify` (also keep
//! them until a periodic verify passed after activation), and what still needs them.
//! Times are seconds of the state store's clock, so every serve decides alike.

/// How long materials are kept after the table became STREAMING.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Released this many days after the table was first seen STREAMING (0: at once).
    Days(u32),
    /// Never released.
    Never,
}

/// `serve`'s retention settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub keep: Keep,
    /// Keep until a periodic verify passed after activation.
    pub until_verify: bool,
    /// How often a STREAMING table's task runs GC.
    pub every: std::time::Duration,
    /// L records deleted per state-store transaction.
    pub batch: u32,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            keep: Keep::Days(7),
            until_verify: false,
            every: std::time::Duration::from_secs(600),
            batch: 1_000,
        }
    }
}

/// Parses `--retention-days`: a number of days or `never`.
pub fn parse_keep(s: &str) -> std::result::Result<Keep, String> {
    match s.trim() {
        "never" => Ok(Keep::Never),
        t => t.parse().map(Keep::Days).map_err(|_| {
            format!("`{s}` is not a number of days or `never` (e.g. --retention-days 7)")
        }),
    }
}

/// What the decision looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// Now, in seconds of the state store's clock.
    pub now: i64,
    /// When the table was first seen STREAMING.
    pub streaming_since: i64,
    /// The last periodic verify that found no difference, if any.
    pub last_clean_verify: Option<i64>,
    /// Who else still needs the materials (an audit, a verify, a cancel drain...).
    pub needed_by: Vec<String>,
}

/// Release now, or keep with the reason (shown in status and the log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Release,
    Keep(String),
}

/// The decision for one table-generation.
pub fn decide(p: &Policy, f: &Facts) -> Decision {
    if let Some(who) = f.needed_by.first() {
        return Decision::Keep(format!("still needed by {who}"));
    }
    let days = match p.keep {
        Keep::Never => return Decision::Keep("retention is `never`".into()),
        Keep::Days(d) => i64::from(d),
    };
    let due = f.streaming_since.saturating_add(days * 86_400);
    if f.now < due {
        return Decision::Keep(format!(
            "retention of {days} day(s) ends in {} s",
            due - f.now
        ));
    }
    if p.until_verify && f.last_clean_verify.is_none_or(|v| v < f.streaming_since) {
        return Decision::Keep("no periodic verify has passed since activation yet".into());
    }
    Decision::Release
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(now: i64) -> Facts {
        Facts {
            now,
            streaming_since: 1_000,
            last_clean_verify: None,
            needed_by: vec![],
        }
    }

    #[test]
    fn days_count_from_streaming() {
        let p = |d| Policy {
            keep: Keep::Days(d),
            ..Policy::default()
        };
        assert_eq!(decide(&p(0), &facts(1_000)), Decision::Release);
        assert!(
            matches!(decide(&p(1), &facts(1_000 + 86_399)), Decision::Keep(m) if m.contains("ends in 1 s"))
        );
        assert_eq!(decide(&p(1), &facts(1_000 + 86_400)), Decision::Release);
        assert_eq!(
            decide(&Policy::default(), &facts(1_000 + 7 * 86_400)),
            Decision::Release
        );
        let never = Policy {
            keep: Keep::Never,
            ..Policy::default()
        };
        assert!(
            matches!(decide(&never, &facts(i64::MAX)), Decision::Keep(m) if m.contains("never"))
        );
    }

    #[test]
    fn until_verify_needs_a_clean_verify_after_activation() {
        let p = Policy {
            keep: Keep::Days(0),
            until_verify: true,
            ..Policy::default()
        };
        let mut f = facts(5_000);
        assert!(matches!(decide(&p, &f), Decision::Keep(m) if m.contains("verify")));
        f.last_clean_verify = Some(999);
        assert!(
            matches!(decide(&p, &f), Decision::Keep(_)),
            "a verify before activation does not count"
        );
        f.last_clean_verify = Some(1_000);
        assert_eq!(decide(&p, &f), Decision::Release);
    }

    #[test]
    fn a_material_still_needed_is_kept_whatever_the_retention() {
        let p = Policy {
            keep: Keep::Days(0),
            ..Policy::default()
        };
        let mut f = facts(10_000);
        f.needed_by = vec!["generation 1 of job 3 (CANCELING)".into()];
        assert!(matches!(decide(&p, &f), Decision::Keep(m) if m.contains("CANCELING")));
    }

    #[test]
    fn keep_parses_days_and_never() {
        assert_eq!(parse_keep("7"), Ok(Keep::Days(7)));
        assert_eq!(parse_keep("0"), Ok(Keep::Days(0)));
        assert_eq!(parse_keep("never"), Ok(Keep::Never));
        assert!(parse_keep("-1").unwrap_err().contains("never"));
    }
}
