//! The indexes of a compared table as `information_schema.STATISTICS` gives them, and how
//! the target's must equal the source's (issue 34 item 5): the same names, each with the
//! same columns in the same order and the same prefix lengths, and the same uniqueness,
//! with the one exception the design makes on purpose.
//!
//! The exception: a UNIQUE index of the source other than the key the table is copied by
//! (PRIMARY, or the NOT NULL UNIQUE key standing in for it) is a plain index on the target.
//! Install refuses a target with such a unique key and `--create-target` makes it
//! non-unique (DESIGN §9, §17): replay upserts full images in the source's order, and a
//! second unique key could reject a row that is valid at its point in the source's
//! history. The reverse, an index unique on the target only, is a difference.
//!
//! An index with an expression part (MySQL's functional indexes: STATISTICS gives no
//! column) is not compared on either side: `--create-target` cannot name its column and
//! does not copy it.

/// The index query: one row per index part, in index then part order. Text values only
/// (the comparator's sessions read every value as text).
pub const STATISTICS_SQL: &str = "SELECT INDEX_NAME, CAST(NON_UNIQUE AS CHAR), COLUMN_NAME, \
     CAST(SUB_PART AS CHAR) FROM information_schema.STATISTICS \
     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX";

/// One index: its name, uniqueness and parts in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    pub name: String,
    pub unique: bool,
    /// (column, prefix length); the column is None for an expression part.
    pub parts: Vec<(Option<String>, Option<u64>)>,
}

impl Index {
    /// `(a, b(10))`: the parts as a definition writes them.
    fn columns(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|(c, len)| {
                let c = c.as_deref().unwrap_or("(expression)");
                match len {
                    Some(n) => format!("{c}({n})"),
                    None => c.to_string(),
                }
            })
            .collect();
        format!("({})", parts.join(", "))
    }

    fn has_expression(&self) -> bool {
        self.parts.iter().any(|p| p.0.is_none())
    }

    /// The table's key: PRIMARY, or an index of exactly the key columns, in order.
    fn is_key(&self, key: &[String]) -> bool {
        self.name.eq_ignore_ascii_case("PRIMARY")
            || (self.parts.len() == key.len()
                && self.parts.iter().zip(key).all(|(p, k)| {
                    p.1.is_none() && p.0.as_deref().is_some_and(|c| c.eq_ignore_ascii_case(k))
                }))
    }
}

/// The indexes of [`STATISTICS_SQL`]'s rows (each value text or NULL).
pub fn of_rows(rows: &[Vec<Option<Vec<u8>>>]) -> Result<Vec<Index>, String> {
    let mut out: Vec<Index> = Vec::new();
    for r in rows {
        let text = |i: usize| -> Result<Option<String>, String> {
            match r.get(i) {
                Some(Some(b)) => String::from_utf8(b.clone())
                    .map(Some)
                    .map_err(|_| format!("index row value {i} is not UTF-8")),
                Some(None) => Ok(None),
                None => Err(format!("index row value {i} is absent")),
            }
        };
        let name = text(0)?.ok_or("INDEX_NAME is NULL")?;
        let unique = text(1)?.as_deref() == Some("0");
        let len = match text(3)? {
            Some(n) => Some(n.parse().map_err(|_| format!("SUB_PART {n:?}"))?),
            None => None,
        };
        let part = (text(2)?, len);
        match out.last_mut() {
            Some(ix) if ix.name == name => ix.parts.push(part),
            _ => out.push(Index {
                name,
                unique,
                parts: vec![part],
            }),
        }
    }
    Ok(out)
}

/// Every way the target's indexes differ from the source's, one plain sentence each
/// naming the index; `key` is the table's key columns (the module doc's exception).
pub fn differences(source: &[Index], target: &[Index], key: &[String]) -> Vec<String> {
    let find = |ixs: &[Index], name: &str| {
        ixs.iter()
            .find(|i| i.name.eq_ignore_ascii_case(name))
            .cloned()
    };
    let mut out = Vec::new();
    for s in source.iter().filter(|i| !i.has_expression()) {
        let Some(t) = find(target, &s.name) else {
            out.push(format!(
                "index `{}` {} is on the source, not on the target",
                s.name,
                s.columns()
            ));
            continue;
        };
        if s.parts != t.parts {
            out.push(format!(
                "index `{}`: columns {} on the source, {} on the target",
                s.name,
                s.columns(),
                t.columns()
            ));
        }
        out.extend(uniqueness(s, &t, key));
    }
    for t in target.iter().filter(|i| !i.has_expression()) {
        if find(source, &t.name).is_none() {
            out.push(format!(
                "index `{}` {} is on the target, not on the source",
                t.name,
                t.columns()
            ));
        }
    }
    out
}

fn uniqueness(s: &Index, t: &Index, key: &[String]) -> Option<String> {
    let (name, cols) = (&s.name, s.columns());
    match (s.unique, t.unique) {
        (true, false) if s.is_key(key) => Some(format!(
            "index `{name}` {cols} is unique on the source, not on the target (it is the \
             key the table is copied by)"
        )),
        (false, true) => Some(format!(
            "index `{name}` {cols} is unique on the target, not on the source"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ix(name: &str, unique: bool, parts: &[(&str, Option<u64>)]) -> Index {
        Index {
            name: name.into(),
            unique,
            parts: parts.iter().map(|p| (Some(p.0.to_string()), p.1)).collect(),
        }
    }

    fn v(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }

    #[test]
    fn rows_group_into_indexes_in_part_order() {
        let rows = vec![
            vec![v("PRIMARY"), v("0"), v("id"), None],
            vec![v("ia"), v("1"), v("a"), None],
            vec![v("ia"), v("1"), v("b"), v("10")],
        ];
        let got = of_rows(&rows).expect("valid");
        assert_eq!(
            got,
            vec![
                ix("PRIMARY", true, &[("id", None)]),
                ix("ia", false, &[("a", None), ("b", Some(10))]),
            ]
        );
        assert_eq!(got[1].columns(), "(a, b(10))");
        assert!(of_rows(&[vec![None, v("0"), v("a"), None]]).is_err());
        assert!(of_rows(&[vec![v("i"), v("0"), v("a"), v("x")]]).is_err());
    }

    #[test]
    fn equal_indexes_have_no_difference() {
        let key = ["id".to_string()];
        let s = [
            ix("PRIMARY", true, &[("id", None)]),
            ix("ia", false, &[("a", None)]),
        ];
        assert!(differences(&s, &s, &key).is_empty());
        let case = [s[0].clone(), ix("IA", false, &[("a", None)])];
        assert!(differences(&s, &case, &key).is_empty(), "names ignore case");
    }

    #[test]
    fn each_index_difference_is_named() {
        let key = ["id".to_string()];
        let s = [
            ix("PRIMARY", true, &[("id", None)]),
            ix("ia", false, &[("a", None)]),
            ix("ib", false, &[("b", Some(8))]),
            ix("ic", false, &[("c", None)]),
        ];
        let t = [
            ix("PRIMARY", false, &[("id", None)]),
            ix("ib", false, &[("b", None)]),
            ix("ic", true, &[("c", None)]),
            ix("iz", false, &[("z", None), ("a", None)]),
        ];
        assert_eq!(
            differences(&s, &t, &key),
            vec![
                "index `PRIMARY` (id) is unique on the source, not on the target (it is the \
                 key the table is copied by)",
                "index `ia` (a) is on the source, not on the target",
                "index `ib`: columns (b(8)) on the source, (b) on the target",
                "index `ic` (c) is unique on the target, not on the source",
                "index `iz` (z, a) is on the target, not on the source",
            ]
        );
    }

    #[test]
    fn only_a_second_unique_key_may_be_plain_on_the_target() {
        let key = ["a".to_string(), "b".to_string()];
        let s = [
            ix("u_ab", true, &[("a", None), ("b", None)]),
            ix("u_c", true, &[("c", None)]),
        ];
        let t = [
            ix("u_ab", false, &[("a", None), ("b", None)]),
            ix("u_c", false, &[("c", None)]),
        ];
        assert_eq!(
            differences(&s, &t, &key),
            vec![
                "index `u_ab` (a, b) is unique on the source, not on the target (it is the \
                 key the table is copied by)"
            ]
        );
        let functional = Index {
            name: "f".into(),
            unique: false,
            parts: vec![(None, None)],
        };
        assert!(differences(&[functional], &[], &key).is_empty());
    }
}
