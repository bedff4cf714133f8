//! Tables of every supported charset for the end-to-end suites (DESIGN §15, issue 15): a
//! [`Group`] is one table `t` holding, per charset, a VARCHAR key column, a CHAR and a
//! TEXT column of that charset, keyed by `(first charset's key column, a, every other
//! charset's key column)`; its writer ([`writer`]) inserts, deletes, reinserts, changes the
//! CHAR and TEXT columns, flips the case of every key column (the same key under the
//! charsets' `_ci` collations, other bytes) and moves rows across windows by changing the
//! first key column. Every value is non-ASCII where the charset has such characters; the
//! writer sends UTF-8 text on a utf8mb4 session and the source server converts it into
//! each column's charset, so the source holds each charset's own bytes.
use crate::keyed::Writing;
use mysql_async::prelude::Queryable;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One charset of a group: its name and a few texts it can hold (at most 10 characters).
#[derive(Clone, Copy)]
pub struct Charset {
    pub name: &'static str,
    pub texts: &'static [&'static str],
}

const fn cs(name: &'static str, texts: &'static [&'static str]) -> Charset {
    Charset { name, texts }
}

/// The groups of [`ALL`] the suites run, one table each.
pub fn groups() -> Vec<Group> {
    ["west", "east", "asia", "wide"]
        .into_iter()
        .zip(ALL.chunks(7))
        .map(|(name, charsets)| Group {
            name,
            charsets,
            space: 120,
        })
        .collect()
}

/// Every charset issue 15 names, with texts of non-ASCII characters where it has them
/// (a few with a trailing space: kept in VARCHAR and TEXT, stripped from CHAR alike by
/// the snapshot and the binlog).
/// cp1251 holds 'тйов' (F2E9EEE2) and 'твой' (F2E2EEE9): the pair the issue found
/// swapped between source and target while STREAMING.
pub const ALL: &[Charset] = &[
    cs("ascii", &["Plain ~txt", "Zebra", "a_b-c"]),
    cs("latin1", &["Åsa é ß", "Öl ÿ", "Ça "]),
    cs("latin2", &["Łódź ř", "Ő ű ą", "Žal"]),
    cs("cp1250", &["Łódź Šť", "Ő č", "Ďas"]),
    cs("cp1251", &["тйов", "твой", "Жё Щука"]),
    cs("cp1257", &["Ąžuolas Ė", "Ų š", "Ļ"]),
    cs("cp866", &["Привет ё", "Ёлка", "Щи"]),
    cs("greek", &["Ωμέγα ά", "Λάμδα", "ψ"]),
    cs("hebrew", &["שלום", "עברית", "אב"]),
    cs("tis620", &["สวัสดี", "ภาษา", "ไทย"]),
    cs("koi8r", &["Привет", "Жук", "ёж"]),
    cs("macroman", &["Café ñ ü", "Øre", "Ågé"]),
    cs("macce", &["Łódź ő", "Čas", "Ň"]),
    cs("big5", &["中文資料", "繁體", "臺北"]),
    cs("gbk", &["中文数据", "汉字", "北京"]),
    cs("gb2312", &["中文数据", "简体", "上海"]),
    cs("sjis", &["カタカナ日本", "ひらがな", "東京"]),
    cs("cp932", &["カタカナ①", "漢字", "㈱"]),
    cs("ujis", &["ひらがな日本", "カナ", "大阪"]),
    cs("euckr", &["한국어", "서울", "부산"]),
    cs("utf8mb3", &["Ünïcödé ж", "Ωx 中", "ǅ"]),
    cs("utf8mb4", &["emoji 😀 ж", "🎉 ok", "ß"]),
    cs("ucs2", &["ж é 中", "Ωmega", "ǆ "]),
    cs("utf16", &["😀 ж", "Ärger", "𝄞"]),
    cs("utf16le", &["😀 é", "Ünï", "Ω"]),
    cs("utf32", &["😀 中", "Ωω", "Ä "]),
    cs("binary", &["bytes é", "ÿ z", "x"]),
];

/// One table of several charsets.
#[derive(Clone, Copy)]
pub struct Group {
    pub name: &'static str,
    pub charsets: &'static [Charset],
    /// Keys `a` in 0..space; the even ones are filled before install.
    pub space: u32,
}

/// A string literal of `s` (UTF-8, converted by the server into the column's charset).
fn q(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

impl Group {
    fn cols(&self, prefix: &str) -> impl Iterator<Item = String> + '_ {
        let p = prefix.to_string();
        self.charsets.iter().map(move |c| format!("{p}_{}", c.name))
    }

    /// The key columns, in key order: the first charset's, `a`, the others'.
    pub fn key(&self) -> Vec<String> {
        let mut k: Vec<String> = self.cols("k").collect();
        k.insert(1, "a".into());
        k
    }

    pub fn ddl(&self) -> String {
        let mut defs = vec!["a INT NOT NULL".to_string()];
        for c in self.charsets {
            let n = c.name;
            defs.push(format!("k_{n} VARCHAR(14) CHARACTER SET {n} NOT NULL"));
            // CHAR(70): more than 255 bytes in utf8mb4/utf16/utf32, which the binlog encodes
            // with a two-byte length.
            defs.push(format!("c_{n} CHAR(70) CHARACTER SET {n} NULL"));
            defs.push(format!("x_{n} TEXT CHARACTER SET {n} NULL"));
        }
        defs.push("n INT NOT NULL".into());
        // `a` is unique by the writer's steps (install refuses a second unique key): an
        // insert skips an `a` that exists, so every step names one row.
        format!(
            "CREATE TABLE t ({}, PRIMARY KEY ({})) ENGINE=InnoDB",
            defs.join(", "),
            self.key().join(", ")
        )
    }

    /// The text of charset `c` for key i and version v.
    fn text(c: &Charset, i: u32, v: u64) -> &'static str {
        c.texts[(u64::from(i) + v) as usize % c.texts.len()]
    }

    /// Key column values of row i, version v: the first one varies with v (a key change
    /// moves the row), the others only with i.
    fn key_lits(&self, i: u32, v: u64) -> Vec<String> {
        self.charsets
            .iter()
            .enumerate()
            .map(|(j, c)| {
                let v = if j == 0 { v } else { 0 };
                q(&format!("{}{}", Self::text(c, i + j as u32, v), i % 3))
            })
            .collect()
    }

    fn all_cols(&self) -> String {
        let mut cols = vec!["a".to_string()];
        cols.extend(self.cols("k"));
        cols.extend(self.cols("c"));
        cols.extend(self.cols("x"));
        cols.push("n".into());
        cols.join(", ")
    }

    /// `(a, k.., c.., x.., n)` of row i, version v.
    fn values(&self, i: u32, v: u64) -> String {
        format!("({})", self.value_list(i, v))
    }

    /// An insert of row i, version v, unless a row of `a = i` exists (the writer is the
    /// only one: no race).
    fn insert(&self, i: u32, v: u64) -> String {
        format!(
            "INSERT INTO t ({}) SELECT {} FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM t WHERE a = {i})",
            self.all_cols(),
            self.value_list(i, v)
        )
    }

    fn value_list(&self, i: u32, v: u64) -> String {
        let mut vals = vec![i.to_string()];
        vals.extend(self.key_lits(i, v));
        vals.extend(self.charsets.iter().map(|c| q(Self::text(c, i + 1, v))));
        vals.extend(self.charsets.iter().map(|c| {
            q(&format!(
                "{} {v} {}",
                Self::text(c, i, v),
                Self::text(c, i + 2, v)
            ))
        }));
        vals.push(v.to_string());
        vals.join(", ")
    }

    /// The fill: every even `a`, as statements of the harness client (utf8mb4 named).
    pub fn fill(&self) -> Vec<String> {
        let rows: Vec<String> = (0..self.space)
            .step_by(2)
            .map(|i| self.values(i, 0))
            .collect();
        rows.chunks(100)
            .map(|c| {
                format!(
                    "SET NAMES utf8mb4; INSERT INTO t ({}) VALUES {}",
                    self.all_cols(),
                    c.join(", ")
                )
            })
            .collect()
    }

    /// The statements of one writer step on row `a = i` (op chosen by `op`).
    pub fn step(&self, op: u32, i: u32, n: u64) -> Vec<String> {
        let w = format!("a = {i}");
        match op % 7 {
            0 => vec![self.insert(i, n)],
            // The CHAR and TEXT columns of every charset.
            1 => {
                let sets: Vec<String> = self
                    .charsets
                    .iter()
                    .flat_map(|c| {
                        let m = c.name;
                        [
                            format!("c_{m} = {}", q(Self::text(c, i, n))),
                            format!(
                                "x_{m} = CONCAT(LEFT(IFNULL(x_{m}, ''), 40), {})",
                                q(Self::text(c, i + 1, n))
                            ),
                        ]
                    })
                    .collect();
                vec![format!(
                    "UPDATE t SET {}, n = n + 1 WHERE {w}",
                    sets.join(", ")
                )]
            }
            // Every key column's case flipped: the same key under `_ci`, other bytes.
            2 => {
                let sets: Vec<String> = self
                    .cols("k")
                    .map(|k| {
                        format!("{k} = IF(BINARY {k} = BINARY UPPER({k}), LOWER({k}), UPPER({k}))")
                    })
                    .collect();
                vec![format!("UPDATE t SET {} WHERE {w}", sets.join(", "))]
            }
            // A key change of the leading key column: the row moves across windows.
            3 => vec![format!(
                "UPDATE t SET k_{} = {}, n = n + 1 WHERE {w}",
                self.charsets[0].name,
                self.key_lits(i, n)[0]
            )],
            4 => vec![format!("DELETE FROM t WHERE {w}")],
            5 => vec![
                "BEGIN".into(),
                format!("DELETE FROM t WHERE {w}"),
                self.insert(i, n),
                "COMMIT".into(),
            ],
            _ => {
                let sets: Vec<String> = self
                    .charsets
                    .iter()
                    .map(|c| format!("c_{m} = NULL, x_{m} = ''", m = c.name))
                    .collect();
                vec![format!("UPDATE t SET {} WHERE {w}", sets.join(", "))]
            }
        }
    }
}

/// Changes the source table with [`Group::step`]s on a utf8mb4 session until `stop`;
/// returns the steps done.
pub async fn writer(url: String, g: Group, stop: Arc<AtomicBool>) -> u64 {
    use rand::Rng;
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    c.query_drop("SET NAMES utf8mb4").await.unwrap();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        let (op, i) = {
            let mut r = rand::rng();
            (r.random_range(0..7), r.random_range(0..g.space))
        };
        for sql in g.step(op, i, n) {
            c.query_drop(&sql)
                .await
                .unwrap_or_else(|e| panic!("writer of {}: {e}\n{sql}", g.name));
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    c.disconnect().await.unwrap();
    n
}

/// [`writer`] on its own task.
pub fn writing(c: &crate::case::Case, g: Group) -> Writing {
    let url = c.source.url_db(&c.sdb);
    Writing::spawn(|stop| writer(url, g, stop))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_charset_of_issue_15_is_in_the_list_once() {
        let names: Vec<&str> = ALL.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), 27);
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert!(ALL
            .iter()
            .all(|c| c.texts.iter().all(|t| t.chars().count() <= 10)));
    }
}
