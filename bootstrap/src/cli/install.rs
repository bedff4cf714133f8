//! `backfill install`: one table (`--source-table db.table --target-table db.table`, output
//! as before: the job id, or the refusal on stderr with exit 3) or many (patterns, repeated
//! flags, `--source-tables-from FILE`): a report of every table installed (job id, source,
//! target) and every table refused (each problem with its fix), text or JSON, exit 0 when
//! all were installed, 3 when any was refused, 1 when any failed otherwise.
use crate::cli::{self, Format, InstallArgs};
use crate::install::bulk::{self, BulkReport, BulkRequest};
use crate::install::select::{self, TargetMap};
use crate::install::{self, InstallRequest, Installed, TableName};
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use serde_json::{json, Value};

/// Runs install; returns stdout and the exit code.
pub async fn command(a: InstallArgs) -> Result<(String, i32)> {
    let mut sources = a.source_table.clone();
    if let Some(file) = &a.source_tables_from {
        let text = std::fs::read_to_string(file).map_err(|e| {
            usage(format!(
                "--source-tables-from {}: cannot read it: {e}",
                file.display()
            ))
        })?;
        sources.extend(select::parse_list(&file.display().to_string(), &text).map_err(usage)?);
    }
    let base = InstallRequest {
        state_url: a.state.state,
        source_url: a.source,
        source_table: TableName::new("", ""),
        target_url: a.target,
        target_table: TableName::new("", ""),
        window_rows: a.window_rows,
        page_rows: a.page_rows,
        control_schema: a.control_schema,
        create_target: a.create_target,
    };
    let single = match (sources.as_slice(), &a.target_table) {
        ([s], TargetMap::One(t)) if a.source_tables_from.is_none() => {
            s.literal().map(|s| (s, t.clone()))
        }
        _ => None,
    };
    if let Some((source_table, target_table)) = single {
        let req = InstallRequest {
            source_table,
            target_table,
            ..base
        };
        let done = install::install(&req).await?;
        let names = (&req.source_table, &req.target_table);
        return Ok((render_one(&done, names, a.format), cli::EXIT_OK));
    }
    let req = BulkRequest {
        base,
        sources,
        target: a.target_table,
    };
    let report = bulk::install_many(&req).await?;
    let code = if report.failed().next().is_some() {
        cli::EXIT_FAILURE
    } else if report.refused().next().is_some() {
        cli::EXIT_REFUSED
    } else {
        cli::EXIT_OK
    };
    let out = match a.format {
        Format::Text => render_text(&report),
        Format::Json => format!("{}\n", render_json(&report)),
    };
    Ok((out, code))
}

fn usage(m: String) -> Error {
    Error::definite(DefiniteCode::Usage, m)
}

/// The single-table output: the job id as text; in JSON also both tables' names, as the
/// bulk report gives them (the exact parts, whatever characters they hold).
fn render_one(done: &Installed, (s, t): (&TableName, &TableName), format: Format) -> String {
    let name = |t: &TableName| json!({ "db": t.db, "table": t.table });
    match format {
        Format::Text => format!("{}\n", done.job_id),
        Format::Json => format!(
            "{}\n",
            json!({
                "job_id": done.job_id.0,
                "generation": done.generation.0,
                "source": name(s),
                "target": name(t),
                "windows": done.windows,
                "fingerprint": done.fingerprint.to_hex(),
                "key": done.key,
                "target_created": done.created,
            })
        ),
    }
}

/// The bulk report for people: the installed tables, one a line, then each refused table
/// with its problems, then each failure.
pub fn render_text(r: &BulkReport) -> String {
    let total = r.tables.len();
    let mut out = String::new();
    let installed: Vec<_> = r.installed().collect();
    out.push_str(&format!(
        "installed {} of {total} tables\n",
        installed.len()
    ));
    for (s, t, i) in installed {
        let created = if i.created { " (target created)" } else { "" };
        out.push_str(&format!(
            "  job {}  {s} -> {t}  {} windows, key {}{created}\n",
            i.job_id, i.windows, i.key
        ));
    }
    let refused: Vec<String> = r
        .refused()
        .map(|(s, t, problems)| {
            let lines: String = problems.iter().map(|p| format!("\n    - {p}")).collect();
            format!("{s} -> {t}:{lines}")
        })
        .collect();
    let note = "nothing recorded for them; fix and install them again";
    out.push_str(&section("refused", total, note, &refused));
    let failed: Vec<String> = r
        .failed()
        .map(|(s, t, e)| format!("{s} -> {t}: {e}"))
        .collect();
    let note = "installing them again is safe";
    out.push_str(&section("failed", total, note, &failed));
    out
}

/// `what N of TOTAL tables (note)` and the entries, indented; empty without entries.
fn section(what: &str, total: usize, note: &str, entries: &[String]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let mut out = format!("{what} {} of {total} tables ({note})\n", entries.len());
    for e in entries {
        out.push_str(&format!("  {e}\n"));
    }
    out
}

/// The bulk report as one JSON document: `installed`, `refused` and `failed` arrays.
pub fn render_json(r: &BulkReport) -> Value {
    let name = |t: &TableName| json!({ "db": t.db, "table": t.table });
    let installed: Vec<Value> = r
        .installed()
        .map(|(s, t, i)| {
            json!({
                "job_id": i.job_id.0,
                "generation": i.generation.0,
                "source": name(s),
                "target": name(t),
                "windows": i.windows,
                "key": i.key,
                "target_created": i.created,
            })
        })
        .collect();
    let refused: Vec<Value> = r
        .refused()
        .map(|(s, t, problems)| {
            let problems: Vec<Value> = problems
                .iter()
                .map(|p| json!({ "object": p.object, "problem": p.problem, "fix": p.fix }))
                .collect();
            json!({ "source": name(s), "target": name(t), "refusals": problems })
        })
        .collect();
    let failed: Vec<Value> = r
        .failed()
        .map(|(s, t, e)| json!({ "source": name(s), "target": name(t), "error": e }))
        .collect();
    json!({
        "tables": r.tables.len(),
        "installed": installed,
        "refused": refused,
        "failed": failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::bulk::Outcome;
    use crate::install::checks::Refusal;
    use kernel::ids::{Digest, Generation, JobId};

    fn report() -> BulkReport {
        let installed = Installed {
            job_id: JobId(7),
            generation: Generation(1),
            windows: 3,
            fingerprint: Digest::of(b"f"),
            plan_digest: Digest::of(b"p"),
            estimated_rows: 10,
            key: "PRIMARY (`id`)".into(),
            created: true,
        };
        let s = |n: &str| TableName::new("shop", n);
        let t = |n: &str| TableName::new("copy", n);
        BulkReport {
            tables: vec![
                (s("a"), t("a"), Outcome::Installed(installed)),
                (
                    s("b"),
                    t("b"),
                    Outcome::Refused(vec![Refusal::new(
                        "source table b",
                        "has no key",
                        "add one",
                    )]),
                ),
                (s("c"), t("c"), Outcome::Failed("transient: lost".into())),
            ],
        }
    }

    #[test]
    fn the_text_report_lists_installed_refused_and_failed_tables() {
        let text = render_text(&report());
        assert_eq!(
            text,
            "installed 1 of 3 tables\n  job 7  `shop`.`a` -> `copy`.`a`  3 windows, key \
             PRIMARY (`id`) (target created)\nrefused 1 of 3 tables (nothing recorded for \
             them; fix and install them again)\n  `shop`.`b` -> `copy`.`b`:\n    - source \
             table b: has no key; fix: add one\nfailed 1 of 3 tables (installing them again \
             is safe)\n  `shop`.`c` -> `copy`.`c`: transient: lost\n"
        );
    }

    #[test]
    fn the_json_report_names_each_table_and_refusal() {
        let j = render_json(&report());
        assert_eq!(j["tables"], 3);
        assert_eq!(j["installed"][0]["job_id"], 7);
        assert_eq!(j["installed"][0]["target"]["db"], "copy");
        assert_eq!(j["installed"][0]["target_created"], true);
        assert_eq!(j["refused"][0]["source"]["table"], "b");
        assert_eq!(j["refused"][0]["refusals"][0]["fix"], "add one");
        assert_eq!(j["failed"][0]["error"], "transient: lost");
    }
}
