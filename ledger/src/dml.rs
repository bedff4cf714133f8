//! Multi-row statements for one target table: plain INSERT for pages into the empty
//! target, `INSERT .. ON DUPLICATE KEY UPDATE` of every column for replay upserts, DELETE by
//! key list. Sent as text-protocol statements with exact literals ([`crate::literal`]),
//! bounded by a row bound and a byte bound; a batch holding a value without an exact
//! literal is bound as prepared statements instead (within the placeholder limit).
//!
//! Text rather than prepared: a prepared multi-row statement of thousands of placeholders
//! costs the server a parameter pass per value plus, with the binlog on, an expansion of
//! the statement text for the log; a literal statement is parsed once. Measured in
//! BENCH.md.
use crate::literal::{needs_mode, Backslash, Literals};
use crate::util::{my, my_is_dup};
use kernel::error::DefiniteCode;
use kernel::schema::{quote_ident, ColumnKind, SealedSchema};
use kernel::value::{Row, SqlValue};
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Params, Transaction, Value};
use std::sync::atomic::{AtomicU8, Ordering};

/// Bounds of one multi-row statement. Public as `ledger::apply::Limits`; it lives here,
/// below [`crate::apply`] and [`crate::parts`], so that the statements can read it
/// without importing their caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Rows of one INSERT/upsert/DELETE statement at most.
    pub stmt_rows: usize,
    /// Approximate bytes of one statement's values at most (keep under max_allowed_packet).
    pub stmt_bytes: usize,
    /// Row changes of one replay transaction at most; a larger group is chunked.
    pub txn_rows: usize,
    /// Page INSERTs as text-protocol statements with literals (false: prepared
    /// statements with bound values). Both write the same values; BENCH.md measures both.
    pub text_pages: bool,
    /// Replay upserts and deletes as text-protocol statements (false: prepared).
    pub text_replay: bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            stmt_rows: 10_000,
            stmt_bytes: 4 << 20,
            txn_rows: 20_000,
            text_pages: true,
            text_replay: false,
        }
    }
}

/// Multi-row statements for one target table.
pub(crate) struct Dml {
    table: String,
    cols: String,
    row_marks: String,
    update: String,
    /// The key's quoted columns: `k` for one column, `(k1, k2)` for several.
    key: String,
    /// The key's quoted columns one by one (a single tuple is deleted by `k1 = ? AND ..`).
    key_cols: Vec<String>,
    /// Per key column: an unsigned integer, whose values are written `CAST(v AS UNSIGNED)`
    /// in a key predicate (see [`Dml::delete_sql`]).
    key_unsigned: Vec<bool>,
    key_len: usize,
    /// The columns written, in row order ([`SealedSchema::written_columns`]); None when
    /// that is every column.
    written: Option<Vec<usize>>,
    ncols: usize,
    kinds: Vec<ColumnKind>,
    key_kinds: Vec<ColumnKind>,
    limits: Limits,
    /// The session's backslash mode once asked (0 unknown, 1 escape, 2 literal).
    mode: AtomicU8,
}

impl Dml {
    pub(crate) fn new(schema: &SealedSchema, limits: Limits) -> Dml {
        let written = schema.written_columns();
        let q: Vec<String> = written
            .iter()
            .map(|&i| quote_ident(&schema.columns[i].name))
            .collect();
        let key_cols: Vec<String> = schema
            .key
            .iter()
            .map(|&i| quote_ident(&schema.columns[i].name))
            .collect();
        // Every written column, key columns included: an upsert whose key the server
        // calls equal but whose bytes differ ('a' -> 'A' under a _ci collation) must write
        // the new bytes (DESIGN §14). Non-key columns first, as before composite keys.
        let is_key = |j: &usize| schema.key.contains(&written[*j]);
        let update: Vec<String> = (0..q.len())
            .filter(|j| !is_key(j))
            .chain((0..q.len()).filter(is_key))
            .map(|j| format!("{c} = VALUES({c})", c = q[j]))
            .collect();
        // A binary form (UUID, INET4, INET6) is bound as a binary string.
        let marks: Vec<&str> = written
            .iter()
            .map(|&i| match schema.columns[i].kind.is_binary_form() {
                true => "CAST(? AS BINARY)",
                false => "?",
            })
            .collect();
        Dml {
            table: schema.qualified(),
            cols: q.join(", "),
            row_marks: format!("({})", marks.join(", ")),
            update: update.join(", "),
            key: match key_cols.as_slice() {
                [one] => one.clone(),
                many => format!("({})", many.join(", ")),
            },
            key_len: key_cols.len(),
            key_cols,
            key_unsigned: schema
                .key
                .iter()
                .map(|&i| schema.columns[i].kind.is_integer() && schema.columns[i].unsigned)
                .collect(),
            ncols: q.len(),
            kinds: written.iter().map(|&i| schema.columns[i].kind).collect(),
            written: (written.len() < schema.columns.len()).then_some(written),
            key_kinds: schema.key.iter().map(|&i| schema.columns[i].kind).collect(),
            limits,
            mode: AtomicU8::new(0),
        }
    }

    /// The literal writer for this session; asks the server for its sql_mode only when a
    /// value's escaping depends on it.
    async fn literals<'v>(
        &self,
        tx: &mut Transaction<'_>,
        values: impl Iterator<Item = &'v SqlValue>,
    ) -> Result<Literals> {
        let mut backslash = match self.mode.load(Ordering::Relaxed) {
            1 => Backslash::Escape,
            2 => Backslash::Literal,
            _ => Backslash::Unknown,
        };
        if backslash == Backslash::Unknown && needs_mode(values) {
            let mode: Option<String> = tx
                .query_first("SELECT @@SESSION.sql_mode")
                .await
                .map_err(my("reading the target session's sql_mode"))?;
            let literal = mode.is_some_and(|m| {
                m.split(',')
                    .any(|x| x.eq_ignore_ascii_case("NO_BACKSLASH_ESCAPES"))
            });
            backslash = if literal {
                Backslash::Literal
            } else {
                Backslash::Escape
            };
            self.mode
                .store(if literal { 2 } else { 1 }, Ordering::Relaxed);
        }
        Ok(Literals { backslash })
    }

    /// Text statements for `rows` (None when a value has no exact literal).
    fn insert_texts(&self, rows: &[Row], upsert: bool, lit: &Literals) -> Option<Vec<String>> {
        let head = format!("INSERT INTO {} ({}) VALUES ", self.table, self.cols);
        let tail = if upsert {
            format!(" ON DUPLICATE KEY UPDATE {}", self.update)
        } else {
            String::new()
        };
        let max_rows = self.limits.stmt_rows.max(1);
        let mut out = Vec::new();
        let mut s = String::new();
        let mut n = 0usize;
        for r in rows {
            if n == 0 {
                s.reserve(self.limits.stmt_bytes.min(1 << 20));
                s.push_str(&head);
            } else {
                s.push(',');
            }
            s.push('(');
            for (i, (v, k)) in r.iter().zip(&self.kinds).enumerate() {
                if i > 0 {
                    s.push(',');
                }
                if !lit.push(&mut s, v, *k) {
                    return None;
                }
            }
            s.push(')');
            n += 1;
            if n >= max_rows || s.len() >= self.limits.stmt_bytes {
                s.push_str(&tail);
                out.push(std::mem::take(&mut s));
                n = 0;
            }
        }
        if n > 0 {
            s.push_str(&tail);
            out.push(s);
        }
        Some(out)
    }

    /// Text DELETEs of `keys`; one tuple of a composite key by `k1 = x AND ..` (see
    /// [`Dml::delete_sql`]).
    fn delete_texts(&self, keys: &[Vec<SqlValue>], lit: &Literals) -> Option<Vec<String>> {
        let mut out = Vec::new();
        for chunk in keys.chunks(self.limits.stmt_rows.max(1)) {
            if let [one] = chunk {
                if self.key_len > 1 {
                    let mut s = format!("DELETE FROM {} WHERE ", self.table);
                    for (j, (v, c)) in one.iter().zip(&self.key_cols).enumerate() {
                        if j > 0 {
                            s.push_str(" AND ");
                        }
                        s.push_str(c);
                        s.push_str(" = ");
                        if !self.push_key_value(&mut s, j, v, lit) {
                            return None;
                        }
                    }
                    out.push(s);
                    continue;
                }
            }
            let mut s = format!("DELETE FROM {} WHERE {} IN (", self.table, self.key);
            for (i, k) in chunk.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                if self.key_len > 1 {
                    s.push('(');
                }
                for (j, v) in k.iter().enumerate() {
                    if j > 0 {
                        s.push(',');
                    }
                    if !self.push_key_value(&mut s, j, v, lit) {
                        return None;
                    }
                }
                if self.key_len > 1 {
                    s.push(')');
                }
            }
            s.push(')');
            out.push(s);
        }
        Some(out)
    }

    /// The literal of key column `j`'s value, `CAST(.. AS UNSIGNED)` for an unsigned one.
    fn push_key_value(&self, s: &mut String, j: usize, v: &SqlValue, lit: &Literals) -> bool {
        if !self.key_unsigned[j] {
            return lit.push(s, v, self.key_kinds[j]);
        }
        s.push_str("CAST(");
        let ok = lit.push(s, v, self.key_kinds[j]);
        s.push_str(" AS UNSIGNED)");
        ok
    }

    /// The placeholder of key column `j` (see [`Dml::push_key_value`]).
    fn key_mark(&self, j: usize) -> &'static str {
        if self.key_unsigned[j] {
            "CAST(? AS UNSIGNED)"
        } else {
            "?"
        }
    }

    async fn run_texts(&self, tx: &mut Transaction<'_>, texts: Vec<String>) -> Result<()> {
        for sql in texts {
            tx.query_drop(sql)
                .await
                .map_err(|e| business_error(&self.table, e))?;
        }
        Ok(())
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

    /// The DELETE of `n` keys. One key of several columns is named column by column:
    /// MariaDB 10.11 plans a DELETE by a single row constructor (`(a, b) IN ((?, ?))`,
    /// which it rewrites to `(a, b) = (?, ?)`) as a full table scan (measured: EXPLAIN
    /// says `type: ALL` on 200 000 rows, while two or more tuples, up to 10 000, are a
    /// range), and the scan locks every row it reads: slow on a large table, and in
    /// key-partitioned replay it waits for rows another part holds until
    /// innodb_lock_wait_timeout. `a = ? AND b = ?` is a range of one key.
    /// An IN list whose values of an UNSIGNED BIGINT lie on both sides of 2^63 (three or
    /// more: literals or parameters of signed and unsigned type) is not range-read either
    /// (EXPLAIN: type ALL, also in a SELECT); every unsigned value is therefore written
    /// `CAST(? AS UNSIGNED)`, one type for all.
    fn delete_sql(&self, n: usize) -> String {
        let marks: Vec<&str> = (0..self.key_len).map(|j| self.key_mark(j)).collect();
        if n == 1 && self.key_len > 1 {
            let eq: Vec<String> = self
                .key_cols
                .iter()
                .zip(&marks)
                .map(|(c, m)| format!("{c} = {m}"))
                .collect();
            return format!("DELETE FROM {} WHERE {}", self.table, eq.join(" AND "));
        }
        let one = if self.key_len > 1 {
            format!("({})", marks.join(","))
        } else {
            marks[0].to_string()
        };
        format!(
            "DELETE FROM {} WHERE {} IN ({})",
            self.table,
            self.key,
            vec![one; n].join(",")
        )
    }

    /// The values of the written columns of each row (generated ones left out).
    fn written_values(&self, rows: Vec<Row>) -> Vec<Row> {
        let Some(w) = &self.written else {
            return rows;
        };
        rows.into_iter()
            .map(|mut r| {
                w.iter()
                    .map(|&i| std::mem::replace(&mut r[i], SqlValue::Null))
                    .collect()
            })
            .collect()
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
        let rows = self.written_values(rows);
        if (upsert && self.limits.text_replay) || (!upsert && self.limits.text_pages) {
            let lit = self.literals(tx, rows.iter().flatten()).await?;
            if let Some(texts) = self.insert_texts(&rows, upsert, &lit) {
                return self.run_texts(tx, texts).await;
            }
        }
        let bytes: usize = rows.iter().take(64).map(row_bytes).sum::<usize>() / rows.len().min(64);
        let per = self.rows_per_stmt(bytes);
        let mut it = rows.into_iter();
        for n in stmt_sizes(it.len(), per) {
            let chunk: Vec<Row> = it.by_ref().take(n).collect();
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
        keys: Vec<Vec<SqlValue>>,
    ) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        if self.limits.text_replay {
            let lit = self.literals(tx, keys.iter().flatten()).await?;
            if let Some(texts) = self.delete_texts(&keys, &lit) {
                return self.run_texts(tx, texts).await;
            }
        }
        let mut rest = &keys[..];
        let per = (65_535 / self.key_len.max(1))
            .min(self.limits.stmt_rows)
            .max(1);
        for n in stmt_sizes(keys.len(), per) {
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            let params: Vec<Value> = chunk.iter().flatten().cloned().map(Value::from).collect();
            tx.exec_drop(self.delete_sql(chunk.len()), Params::Positional(params))
                .await
                .map_err(|e| business_error(&self.table, e))?;
        }
        Ok(())
    }
}

/// Rows per prepared statement for `total` rows at most `per` each: full statements of
/// `per`, then the rest as powers of two, largest first. Prepared statements are cached
/// by their text, which depends on the row count: a rest of any size would prepare a new
/// statement of thousands of placeholders almost every time (replay batches and, more
/// so, key partitions have rests of every size); powers of two reuse at most ~16 texts.
pub(crate) fn stmt_sizes(total: usize, per: usize) -> Vec<usize> {
    let per = per.max(1);
    let mut out = vec![per; total / per];
    let rest = total % per;
    let mut bit = 1usize << (usize::BITS - 1 - rest.leading_zeros().min(usize::BITS - 1));
    while bit > 0 {
        if rest & bit != 0 {
            out.push(bit);
        }
        bit >>= 1;
    }
    out
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
    kernel::error::from_target_write(&format!("writing rows into {table}"), &e)
}

#[cfg(test)]
mod tests {
    use super::{stmt_sizes, Backslash, Dml, Limits, Literals, SqlValue};
    use kernel::schema::{ColumnDef, ColumnKind, SealedSchema};

    fn table(key: Vec<usize>) -> SealedSchema {
        let col = |name: &str| ColumnDef::plain(name, ColumnKind::Int, "int(11)");
        SealedSchema {
            database: "d".into(),
            table: "t".into(),
            columns: vec![col("v"), col("b"), col("a")],
            key,
            key_name: "PRIMARY".into(),
        }
    }

    #[test]
    fn deletes_name_keys_so_the_server_reads_only_their_rows() {
        let one = Dml::new(&table(vec![2]), Limits::default());
        assert_eq!(one.delete_sql(1), "DELETE FROM `d`.`t` WHERE `a` IN (?)");
        assert_eq!(one.delete_sql(2), "DELETE FROM `d`.`t` WHERE `a` IN (?,?)");
        // A single composite key by its columns (a lone row constructor is a table scan).
        let two = Dml::new(&table(vec![2, 1]), Limits::default());
        assert_eq!(
            two.delete_sql(1),
            "DELETE FROM `d`.`t` WHERE `a` = ? AND `b` = ?"
        );
        assert_eq!(
            two.delete_sql(2),
            "DELETE FROM `d`.`t` WHERE (`a`, `b`) IN ((?,?),(?,?))"
        );
    }

    #[test]
    fn unsigned_key_values_are_written_as_one_type() {
        let mut t = table(vec![2]);
        t.columns[2].unsigned = true;
        t.columns[2].kind = ColumnKind::BigInt;
        t.columns[2].column_type = "bigint unsigned".into();
        let d = Dml::new(&t, Limits::default());
        assert_eq!(
            d.delete_sql(2),
            "DELETE FROM `d`.`t` WHERE `a` IN (CAST(? AS UNSIGNED),CAST(? AS UNSIGNED))"
        );
        t.key = vec![2, 1];
        let d = Dml::new(&t, Limits::default());
        assert_eq!(
            d.delete_sql(1),
            "DELETE FROM `d`.`t` WHERE `a` = CAST(? AS UNSIGNED) AND `b` = ?"
        );
    }

    /// Generated columns are never named in a write, and their values are left out of the
    /// row; a binary form (INET6) is bound as a binary string.
    #[test]
    fn generated_columns_are_not_written_and_binary_forms_are_bound_binary() {
        let mut t = table(vec![2]);
        t.columns[0].generated = Some(kernel::schema::Generated {
            stored: false,
            expression: "`a` + 1".into(),
        });
        t.columns[1].kind = ColumnKind::Inet6;
        let d = Dml::new(&t, Limits::default());
        assert_eq!(
            d.insert_sql(1, true),
            "INSERT INTO `d`.`t` (`b`, `a`) VALUES (CAST(? AS BINARY), ?) \
             ON DUPLICATE KEY UPDATE `b` = VALUES(`b`), `a` = VALUES(`a`)"
        );
        let row = vec![
            SqlValue::Int(9),
            SqlValue::Bytes(vec![0; 16]),
            SqlValue::Int(3),
        ];
        let w = d.written_values(vec![row]);
        assert_eq!(
            w,
            vec![vec![SqlValue::Bytes(vec![0; 16]), SqlValue::Int(3)]]
        );
        let lit = Literals {
            backslash: Backslash::Unknown,
        };
        let texts = d.insert_texts(&w, false, &lit).unwrap();
        assert_eq!(
            texts,
            vec![format!(
                "INSERT INTO `d`.`t` (`b`, `a`) VALUES (X'{}',3)",
                "00".repeat(16)
            )]
        );
    }

    #[test]
    fn statement_sizes_cover_every_row_with_few_distinct_texts() {
        assert_eq!(stmt_sizes(0, 100), Vec::<usize>::new());
        assert_eq!(stmt_sizes(250, 100), vec![100, 100, 32, 16, 2]);
        assert_eq!(stmt_sizes(7, 0), vec![1; 7]);
        assert_eq!(stmt_sizes(1, 10_000), vec![1]);
        for total in 0..3000 {
            let s = stmt_sizes(total, 1000);
            assert_eq!(s.iter().sum::<usize>(), total);
            assert!(s
                .iter()
                .all(|&n| n == 1000 || (n < 1000 && n.is_power_of_two())));
        }
    }
}
