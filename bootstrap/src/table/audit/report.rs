//! The audit's verdict: which check a [`Finding`] comes from, the [`AuditReport`] and its
//! renderings (one text line per finding, or one definite `evidence_corrupt` error).
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use ledger::target::Activation;
use serde::Serialize;

/// Which check a finding comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    Journal,
    RangeChain,
    Window,
    Material,
    Credential,
    Replay,
    Log,
    Activation,
    /// The source's bytes against the target's at a pinned point (`super::fields`).
    Fields,
    /// The schema chain, T's record of it and the target's definition (`super::schema`).
    Schema,
}

/// One failed check, naming its object (window, page, hash, credential, record).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub check: Check,
    /// The object: `journal`, `w3`, `target ledger`, `change log`, a digest.
    pub subject: String,
    pub message: String,
}

/// The audit's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditReport {
    pub job: u64,
    pub generation: u64,
    pub phase: Option<String>,
    pub windows: usize,
    pub final_pages: usize,
    pub l_records: usize,
    /// The activation credential the evidence recomputes to (None if B, F or J is missing).
    #[serde(skip)]
    pub expected: Option<Activation>,
    pub activation_present: bool,
    /// The field comparison's result (None: not run by this audit).
    pub fields: Option<super::fields::FieldSample>,
    /// The recorded field checks (`backfill audit`: the last activation audit's and a
    /// standing verify finding), one line each.
    pub recorded_fields: Vec<String>,
    /// Evidence released by retention (DESIGN §17): what was checked before release.
    pub released: Vec<String>,
    pub findings: Vec<Finding>,
}

impl AuditReport {
    /// True when every check passed.
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }

    /// One line per finding.
    pub fn text(&self) -> String {
        let mut s = format!(
            "audit of job {} g{}: {} ({} windows, {} FINAL pages, {} change log records from the start \
             position (B) to the final fence (F), phase {})\n",
            self.job,
            self.generation,
            if self.passed() { "PASS" } else { "FAIL" },
            self.windows,
            self.final_pages,
            self.l_records,
            self.phase.as_deref().unwrap_or("?")
        );
        match &self.fields {
            Some(f) => s.push_str(&format!("  {}\n", f.text())),
            None if self.recorded_fields.is_empty() => {
                s.push_str("  fields: not run by this audit, none recorded\n")
            }
            None => {}
        }
        for l in &self.recorded_fields {
            s.push_str(&format!("  fields (recorded): {l}\n"));
        }
        for l in &self.released {
            s.push_str(&format!("  released: {l}\n"));
        }
        for f in &self.findings {
            s.push_str(&format!(
                "  - [{:?}] {}: {}\n",
                f.check, f.subject, f.message
            ));
        }
        s
    }

    /// The findings as one definite error (Ok when there are none).
    pub fn into_result(self) -> Result<AuditReport> {
        if self.passed() {
            return Ok(self);
        }
        Err(Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!(
                "activation audit of job {} g{} failed: {}",
                self.job,
                self.generation,
                self.findings
                    .iter()
                    .map(|f| format!("[{:?}] {}: {}", f.check, f.subject, f.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ))
    }
}
