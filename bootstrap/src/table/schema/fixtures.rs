//! Test definitions and versions shared by the chain's and the audit's unit tests.
use crate::store::schema_versions::SchemaVersion;
use kernel::log::LSeq;
use kernel::position::BinlogPos;
use kernel::schema::{ColumnDef, ColumnKind, SealedSchema};

/// `d`.`t` with `cols` INT columns, keyed by the first.
pub(crate) fn schema(cols: usize) -> SealedSchema {
    SealedSchema {
        database: "d".into(),
        table: "t".into(),
        columns: (0..cols)
            .map(|i| ColumnDef::plain(&format!("c{i}"), ColumnKind::Int, "int(11)"))
            .collect(),
        key: vec![0],
        key_name: "PRIMARY".into(),
    }
}

/// Position `pos` of binlog file `b.000001`.
pub(crate) fn at(pos: u64) -> BinlogPos {
    BinlogPos::new("b.000001", pos)
}

/// Version `n` of [`schema`]`(cols)`, sealed at L record `seq`, DDL at `pos`.
pub(crate) fn version(n: u32, seq: u64, pos: u64, cols: usize) -> SchemaVersion {
    SchemaVersion {
        version: n,
        l_seq: LSeq(seq),
        at: at(pos),
        ddl: String::new(),
        schema: schema(cols),
        how: "automatic".into(),
    }
}
