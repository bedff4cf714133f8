//! Pure: the schema chain of a table (DESIGN §16) and which version is in force where.
//!
//! Version 1 is the definition sealed at install; version n+1 starts at the DDL held by L
//! record `l_seq` of version n+1. A row of L is decoded and applied with the last
//! version whose DDL record precedes it; T's cursor is past a DDL exactly when the target
//! has its version (`ledger::schema`), so the version in force at the cursor is the last
//! one whose DDL position precedes the cursor's group end.
use crate::store::schema_versions::SchemaVersion;
use kernel::change::GroupEnd;
use kernel::error::{Definite, DefiniteCode};
use kernel::ids::Digest;
use kernel::log::LSeq;
use kernel::schema::SealedSchema;
use std::cmp::Ordering;

/// The versions of one table-generation, source names.
#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    /// Version 1 (install's seal).
    pub install: SealedSchema,
    /// Versions 2, 3, ... in order.
    pub versions: Vec<SchemaVersion>,
    /// The digest of the stream's lineage, for the identities of rows decoded from raw
    /// events (the capture's changes carry the same).
    pub lineage: Digest,
}

/// What a window manifest is checked against besides version 1: each later version's DDL
/// position and fingerprint ([`ledger::manifest::Expect::later`]).
pub fn later(versions: &[SchemaVersion]) -> Vec<(kernel::position::BinlogPos, Digest)> {
    versions
        .iter()
        .map(|v| (v.at.clone(), v.schema.fingerprint()))
        .collect()
}

/// A version and its definition.
pub type InForce<'a> = (u32, &'a SealedSchema);

impl Chain {
    /// The version sealed at the DDL of L record `seq`, if any.
    pub fn sealed_at(&self, seq: LSeq) -> Option<&SchemaVersion> {
        self.versions.iter().find(|v| v.l_seq == seq)
    }

    /// The version rows of L record `seq` are decoded with: the last one whose DDL
    /// record precedes `seq`.
    pub fn in_force_after(&self, seq: LSeq) -> InForce<'_> {
        self.versions
            .iter()
            .rev()
            .find(|v| v.l_seq < seq)
            .map_or((1, &self.install), |v| (v.version, &v.schema))
    }

    /// True when a version after the install's is sealed before L record `seq`.
    pub fn changed_before(&self, seq: LSeq) -> bool {
        self.versions.iter().any(|v| v.l_seq < seq)
    }

    /// The version the target has when T's cursor is at `cursor` (none: version 1).
    pub fn in_force_at(&self, cursor: Option<&GroupEnd>) -> Result<InForce<'_>, Definite> {
        let Some(c) = cursor else {
            return Ok((1, &self.install));
        };
        let mut out = (1, &self.install);
        for v in &self.versions {
            let before = v.at.try_cmp(&c.pos).map_err(|e| Definite {
                code: DefiniteCode::LineageChanged,
                message: e.to_string(),
            })?;
            if before == Ordering::Less {
                out = (v.version, &v.schema);
            }
        }
        Ok(out)
    }

    /// The last version.
    pub fn latest(&self) -> InForce<'_> {
        self.versions
            .last()
            .map_or((1, &self.install), |v| (v.version, &v.schema))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::table::schema::fixtures::{at, schema, version};

    fn chain() -> Chain {
        Chain {
            install: schema(1),
            versions: vec![version(2, 10, 1000, 2), version(3, 20, 2000, 3)],
            lineage: Digest([0; 32]),
        }
    }

    #[test]
    fn rows_take_the_version_of_the_last_ddl_before_them() {
        let c = chain();
        assert_eq!(c.in_force_after(LSeq(5)).0, 1);
        assert_eq!(c.in_force_after(LSeq(10)).0, 1, "the DDL's own record");
        assert_eq!(c.in_force_after(LSeq(11)).0, 2);
        assert_eq!(c.in_force_after(LSeq(21)).1.columns.len(), 3);
        assert_eq!(c.sealed_at(LSeq(20)).map(|v| v.version), Some(3));
        assert!(c.sealed_at(LSeq(11)).is_none());
        assert!(!c.changed_before(LSeq(10)) && c.changed_before(LSeq(11)));
        assert_eq!(c.latest().0, 3);
    }

    #[test]
    fn the_cursor_has_a_version_once_past_its_ddl() {
        let c = chain();
        let end = |p| GroupEnd {
            pos: at(p),
            gtid: None,
        };
        assert_eq!(c.in_force_at(None).unwrap().0, 1);
        assert_eq!(c.in_force_at(Some(&end(999))).unwrap().0, 1);
        assert_eq!(c.in_force_at(Some(&end(1100))).unwrap().0, 2);
        assert_eq!(c.in_force_at(Some(&end(2100))).unwrap().0, 3);
    }
}
