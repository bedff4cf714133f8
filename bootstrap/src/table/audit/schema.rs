//! The audit's check of the schema chain (DESIGN §16, issue 16 item 5): every DDL of the
//! table the target's cursor has passed has its sealed version, the versions are one
//! chain in L order, T records exactly the versions before its cursor with their
//! fingerprints, and the target's definition is the version in force at the cursor.
//! Gathering reads; [`findings`] is pure.
use super::report::{Check, Finding};
use crate::store::schema_versions::{self, SchemaVersion};
use kernel::change::GroupEnd;
use kernel::ids::Digest;
use kernel::log::{DdlRow, LSeq};
use kernel::position::BinlogPos;
use kernel::Result;
use std::cmp::Ordering;

/// What the check reads.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaFacts {
    /// Version 1's fingerprint (install's seal).
    pub install: Digest,
    pub versions: Vec<SchemaVersion>,
    /// The table's DDLs in L after B.
    pub ddls: Vec<DdlRow>,
    /// The versions T records as applied.
    pub recorded: Vec<(u32, Digest)>,
    /// T's main cursor.
    pub cursor: Option<GroupEnd>,
    /// The target table's definition's fingerprint now.
    pub target: Option<Digest>,
}

impl SchemaFacts {
    /// A table without schema changes and no target read (unit tests).
    pub fn unchanged() -> SchemaFacts {
        SchemaFacts {
            install: Digest([0; 32]),
            versions: Vec::new(),
            ddls: Vec::new(),
            recorded: Vec::new(),
            cursor: None,
            target: None,
        }
    }
}

/// Reads the facts of job-generation `scope` (T through `conn` and `ctx`).
pub async fn gather(
    pool: &sqlx::MySqlPool,
    scope: &crate::table::replay::Scope,
    b_seq: LSeq,
    conn: &mut mysql_async::Conn,
    ctx: &ledger::target::TargetCtx,
    install: Digest,
) -> Result<SchemaFacts> {
    let versions = schema_versions::versions(pool, scope.job, scope.generation).await?;
    let (db, t) = (&scope.source_db, &scope.source_table);
    let ddls = kernel::log::ddls(pool, &scope.stream, db, t, b_seq, LSeq::MAX).await?;
    let recorded = ledger::schema::recorded_versions(conn, ctx).await?;
    let cursor = ledger::target::replay_cursor(conn, ctx, false)
        .await?
        .map(|c| c.end);
    let facts =
        kernel::introspect::read_table(conn, &ctx.schema.database, &ctx.schema.table).await?;
    let target = facts
        .and_then(|f| kernel::introspect::seal(&f).ok())
        .map(|s| s.fingerprint());
    Ok(SchemaFacts {
        install,
        versions,
        ddls,
        recorded,
        cursor,
        target,
    })
}

fn finding(subject: String, message: String) -> Finding {
    Finding {
        check: Check::Schema,
        subject,
        message,
    }
}

/// True when position `at` is before T's cursor (its group is applied).
fn passed(at: &BinlogPos, cursor: Option<&GroupEnd>) -> bool {
    cursor.is_some_and(|c| at.try_cmp(&c.pos).ok() == Some(Ordering::Less))
}

/// Every inconsistency of the chain, T and the target (empty: the chain holds).
pub fn findings(f: &SchemaFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut last = LSeq::ZERO;
    for (i, v) in f.versions.iter().enumerate() {
        let want = u32::try_from(i).unwrap_or(u32::MAX).saturating_add(2);
        if v.version != want || v.l_seq <= last {
            out.push(finding(format!("v{}", v.version), format!("schema version {} is out of order (expected version {want} after change log record {last})", v.version)));
        }
        last = v.l_seq;
        if !f.ddls.iter().any(|d| d.seq == v.l_seq && d.at == v.at) {
            out.push(finding(format!("v{}", v.version), format!("schema version {} is sealed at change log record {} ({}), where the change log holds no DDL of the table", v.version, v.l_seq, v.at)));
        }
    }
    let cursor = f.cursor.as_ref();
    for d in f.ddls.iter().filter(|d| passed(&d.at, cursor)) {
        if !f.versions.iter().any(|v| v.l_seq == d.seq) {
            out.push(finding(format!("change log record {}", d.seq), format!("the target ledger's cursor is past the DDL at {} (change log record {}), which has no sealed schema version", d.at, d.seq)));
        }
    }
    let applied: Vec<(u32, Digest)> = f
        .versions
        .iter()
        .filter(|v| passed(&v.at, cursor))
        .map(|v| (v.version, v.schema.fingerprint()))
        .collect();
    if applied != f.recorded {
        let show = |v: &[(u32, Digest)]| {
            v.iter()
                .map(|(n, _)| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(finding("target ledger".into(), format!("the target ledger records schema versions [{}], the chain before the target ledger's cursor is [{}] (or their fingerprints differ)", show(&f.recorded), show(&applied))));
    }
    let in_force = applied.last().map_or(f.install, |(_, d)| *d);
    if f.target.is_some_and(|t| t != in_force) {
        let n = applied.last().map_or(1, |(n, _)| *n);
        out.push(finding("target".into(), format!("the target table's definition is not schema version {n}, the one in force at the target ledger's cursor (runbooks/target-tampered.md)")));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::table::schema::fixtures::{at, schema, version};

    fn ddl(seq: u64, pos: u64) -> DdlRow {
        DdlRow {
            seq: LSeq(seq),
            at: at(pos),
            default_schema: "d".into(),
            sql: "ALTER TABLE t ADD c INT".into(),
        }
    }

    /// Two DDLs, both sealed; the cursor past the first only.
    fn facts() -> SchemaFacts {
        SchemaFacts {
            install: schema(1).fingerprint(),
            versions: vec![version(2, 10, 1000, 2), version(3, 20, 2000, 3)],
            ddls: vec![ddl(10, 1000), ddl(20, 2000)],
            recorded: vec![(2, schema(2).fingerprint())],
            cursor: Some(GroupEnd {
                pos: at(1500),
                gtid: None,
            }),
            target: Some(schema(2).fingerprint()),
        }
    }

    fn messages(f: &SchemaFacts) -> Vec<String> {
        findings(f).into_iter().map(|x| x.message).collect()
    }

    #[test]
    fn a_consistent_chain_has_no_finding() {
        assert!(findings(&facts()).is_empty(), "{:?}", messages(&facts()));
        assert!(findings(&SchemaFacts::unchanged()).is_empty());
    }

    #[test]
    fn a_ddl_passed_without_a_version_is_named() {
        let mut f = facts();
        f.versions.pop();
        f.cursor = Some(GroupEnd {
            pos: at(2500),
            gtid: None,
        });
        let m = messages(&f).join("\n");
        assert!(m.contains("past the DDL at b.000001:2000"), "{m}");
    }

    #[test]
    fn t_and_the_target_must_hold_the_version_in_force() {
        let mut f = facts();
        f.recorded.clear();
        assert!(messages(&f)
            .iter()
            .any(|m| m.contains("the target ledger records schema versions []")));
        let mut f = facts();
        f.target = Some(schema(3).fingerprint());
        assert!(messages(&f)
            .iter()
            .any(|m| m.contains("not schema version 2")));
    }

    #[test]
    fn a_version_out_of_order_or_without_its_ddl_is_named() {
        let mut f = facts();
        f.versions[1].version = 4;
        assert!(messages(&f).iter().any(|m| m.contains("out of order")));
        let mut f = facts();
        f.ddls.remove(1);
        assert!(messages(&f)
            .iter()
            .any(|m| m.contains("where the change log holds no DDL")));
    }
}
