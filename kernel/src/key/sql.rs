//! Key predicates for statements (DESIGN §14, notes/mariadb.md "Composite keys in range
//! predicates"): comparisons the server evaluates under the columns' own types and
//! collations, in the form its optimizer turns into a range seek. A row constructor
//! `(a, b) > (x, y)` is NOT a range seek on MariaDB (it reads the index from its start), so
//! `key > x` is written `a >= x1 AND (a > x1 OR (b >= x2 AND (b > x2 OR ...)))`.
use crate::value::SqlValue;

/// A predicate with its positional parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Pred {
    pub sql: String,
    pub params: Vec<SqlValue>,
}

/// `key > values` over `cols` (quoted names, key order).
pub fn after(cols: &[String], values: &[SqlValue]) -> Pred {
    chain(cols, values, ">")
}

/// `key <= values` over `cols`.
pub fn upto(cols: &[String], values: &[SqlValue]) -> Pred {
    chain(cols, values, "<")
}

/// `key > exprs` with the values given as SQL expressions (typed literals) instead of
/// parameters, for text-protocol statements; the same range-seek chain as [`after`].
pub fn after_inline(cols: &[String], exprs: &[String]) -> String {
    chain_sql(cols, exprs, ">")
}

/// `key <= exprs` with the values given as SQL expressions (typed literals), the range-seek
/// chain of [`upto`].
pub fn upto_inline(cols: &[String], exprs: &[String]) -> String {
    chain_sql(cols, exprs, "<")
}

/// `after` with `strict` = ">" builds `c > v` on the last column and `c >= v AND (c > v OR
/// rest)` before it; `upto` with "<" builds `c <= v` last and `c <= v AND (c < v OR rest)`.
fn chain(cols: &[String], values: &[SqlValue], strict: &str) -> Pred {
    let marks = vec!["?".to_string(); cols.len()];
    // Each column but the last is compared twice, the last once.
    let mut params = Vec::with_capacity(2 * cols.len());
    for (i, v) in values.iter().enumerate().take(cols.len()) {
        params.push(v.clone());
        if i + 1 < cols.len() {
            params.push(v.clone());
        }
    }
    Pred {
        sql: chain_sql(cols, &marks, strict),
        params,
    }
}

fn chain_sql(cols: &[String], values: &[String], strict: &str) -> String {
    let (c, v) = (&cols[0], &values[0]);
    let weak = if strict == ">" { ">=" } else { "<=" };
    if cols.len() == 1 {
        let op = if strict == ">" { ">" } else { "<=" };
        return format!("{c} {op} {v}");
    }
    let rest = chain_sql(&cols[1..], &values[1..], strict);
    format!("{c} {weak} {v} AND ({c} {strict} {v} OR ({rest}))")
}

/// `key = values`: `a = ? AND b = ?`.
pub fn equal(cols: &[String], values: &[SqlValue]) -> Pred {
    Pred {
        sql: cols
            .iter()
            .map(|c| format!("{c} = ?"))
            .collect::<Vec<_>>()
            .join(" AND "),
        params: values.to_vec(),
    }
}

/// `ORDER BY` list of the key: `a, b`.
pub fn order_by(cols: &[String]) -> String {
    cols.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(n: usize) -> Vec<String> {
        ["`a`", "`b`", "`c`"][..n]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn one_column_is_a_plain_comparison() {
        let p = after(&cols(1), &[SqlValue::Int(5)]);
        assert_eq!(p.sql, "`a` > ?");
        assert_eq!(upto(&cols(1), &[SqlValue::Int(5)]).sql, "`a` <= ?");
    }

    #[test]
    fn composite_comparisons_are_range_seek_chains() {
        let v = [SqlValue::Int(1), SqlValue::Int(2), SqlValue::Int(3)];
        let p = after(&cols(3), &v);
        assert_eq!(
            p.sql,
            "`a` >= ? AND (`a` > ? OR (`b` >= ? AND (`b` > ? OR (`c` > ?))))"
        );
        assert_eq!(p.params.len(), 5);
        let u = upto(&cols(2), &v[..2]);
        assert_eq!(u.sql, "`a` <= ? AND (`a` < ? OR (`b` <= ?))");
        assert_eq!(equal(&cols(2), &v[..2]).sql, "`a` = ? AND `b` = ?");
        assert_eq!(
            p.params,
            [1, 1, 2, 2, 3].map(SqlValue::Int).to_vec(),
            "each column but the last is bound twice"
        );
    }

    #[test]
    fn inline_values_form_the_same_chain() {
        let lits = ["1".to_string(), "'x'".to_string()];
        assert_eq!(
            after_inline(&cols(2), &lits),
            "`a` >= 1 AND (`a` > 1 OR (`b` > 'x'))"
        );
        assert_eq!(after_inline(&cols(1), &lits[..1]), "`a` > 1");
        assert_eq!(
            upto_inline(&cols(2), &lits),
            "`a` <= 1 AND (`a` < 1 OR (`b` <= 'x'))"
        );
    }
}
