//! Multi-row statements for one target table: plain INSERT for pages into the empty
//! target, `INSERT .. ON DUPLICATE KEY UPDATE` of every column for replay upserts, DELETE by
//! key list. Bounded by the placeholder limit, a row bound and a byte bound.
use crate::apply::Limits;
use crate::util::my_is_dup;
use kernel::error::DefiniteCode;
use kernel::schema::{quote_ident, SealedSchema};
use kernel::value::{Row, SqlValue};
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Params, Transaction, Value};
/// Multi-row statements for one target table.
pub(crate) struct Dml {
    table: String,
    cols: String,
    row_marks: String,
    update: String,
    pk: String,
    ncols: usize,
    limits: Limits,
}

impl Dml {
    pub(crate) fn new(schema: &SealedSchema, limits: Limits) -> Dml {
        let q: Vec<String> = schema
            .columns
            .iter()
            .map(|c| quote_ident(&c.name))
            .collect();
        let pk = q[schema.pk].clone();
        let update: Vec<String> = q
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != schema.pk)
            .map(|(_, c)| format!("{c} = VALUES({c})"))
            .collect();
        Dml {
            table: schema.qualified(),
            cols: q.join(", "),
            row_marks: format!("({})", vec!["?"; q.len()].join(", ")),
            update: if update.is_empty() {
                format!("{pk} = {pk}")
            } else {
                update.join(", ")
            },
            pk,
            ncols: q.len(),
            limits,
        }
    }

    fn insert_sql(&self, n: usize, upsert: bool) -> String {
        let mut s = String::with_capacity(64 + n * (self.row_marks.len() + 1));
        s.push_str("INSERT INTO ");
        s.push_str(&self.table);
        s.push_str(" (");
        s.push_str(&self.cols);
        s.push_str(") VALUES ");
        for i in 0..n {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&self.row_marks);
        }
        if upsert {
            s.push_str(" ON DUPLICATE KEY UPDATE ");
            s.push_str(&self.update);
        }
        s
    }

    fn delete_sql(&self, n: usize) -> String {
        format!(
            "DELETE FROM {} WHERE {} IN ({})",
            self.table,
            self.pk,
            vec!["?"; n].join(",")
        )
    }

    /// Rows per statement: within the placeholder limit, the row bound and the byte bound.
    fn rows_per_stmt(&self, approx_row_bytes: usize) -> usize {
        let by_params = 65_535 / self.ncols.max(1);
        let by_bytes = self.limits.stmt_bytes / approx_row_bytes.max(1);
        by_params.min(self.limits.stmt_rows).min(by_bytes).max(1)
    }

    pub(crate) async fn rows(
        &self,
        tx: &mut Transaction<'_>,
        rows: Vec<Row>,
        upsert: bool,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let bytes: usize = rows.iter().take(64).map(row_bytes).sum::<usize>() / rows.len().min(64);
        let per = self.rows_per_stmt(bytes);
        let mut it = rows.into_iter().peekable();
        while it.peek().is_some() {
            let chunk: Vec<Row> = it.by_ref().take(per).collect();
            let sql = self.insert_sql(chunk.len(), upsert);
            let params: Vec<Value> = chunk.into_iter().flatten().map(Value::from).collect();
            tx.exec_drop(sql, Params::Positional(params))
                .await
                .map_err(|e| business_error(&self.table, e))?;
        }
        Ok(())
    }

    pub(crate) async fn deletes(
        &self,
        tx: &mut Transaction<'_>,
        keys: Vec<SqlValue>,
    ) -> Result<()> {
        for chunk in keys.chunks(self.limits.stmt_rows.clamp(1, 65_535)) {
            let params: Vec<Value> = chunk.iter().cloned().map(Value::from).collect();
            tx.exec_drop(self.delete_sql(chunk.len()), Params::Positional(params))
                .await
                .map_err(|e| business_error(&self.table, e))?;
        }
        Ok(())
    }
}

fn row_bytes(r: &Row) -> usize {
    r.iter()
        .map(|v| match v {
            SqlValue::Bytes(b) => b.len() + 9,
            _ => 12,
        })
        .sum()
}

fn business_error(table: &str, e: mysql_async::Error) -> Error {
    if my_is_dup(&e) {
        return Error::definite(
            DefiniteCode::TargetRejected,
            format!("target {table} already holds a key this page inserts: the target is not exclusive or windows overlap ({e})"),
        );
    }
    kernel::error::from_mysql(&format!("writing rows into {table}"), &e)
}

pub(crate) fn check_row(schema: &SealedSchema, row: &Row, what: &str) -> Result<()> {
    if row.len() != schema.columns.len() {
        return Err(Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!(
                "{what}: a row has {} values but {} has {} columns",
                row.len(),
                schema.qualified(),
                schema.columns.len()
            ),
        ));
    }
    if row[schema.pk].as_key().is_none() {
        return Err(Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!(
                "{what}: a row's primary key {:?} is not an integer",
                row[schema.pk]
            ),
        ));
    }
    Ok(())
}
