//! Key equality as the target server's unique index decides it. A target row may hold a
//! key whose bytes differ from the source change that reached it ('Åsa' and 'åsa' under
//! `latin1_swedish_ci`, 'ǆ ' and 'ǆ' under a PAD SPACE collation, UTF-16 code units of
//! either case): a delete or upsert of one matches the row stored as the other. Which keys
//! are equal is the server's decision, so the oracle asks it: each string key column's
//! value is folded to its `WEIGHT_STRING` under the column's charset and collation on the
//! target, trailing spaces trimmed first where the collation pads (equal weights, equal
//! keys); a column without a collation (numbers, binary
//! strings) is compared byte for byte. Nothing here comes from the product.
use super::{Key, Value};
use harness::Server;
use std::collections::HashMap;

/// Folds keys of one table to their collation weights, asking the server once per value.
pub struct Collation<'a> {
    server: &'a Server,
    /// Per key column: (charset, collation), or None to compare bytes.
    columns: Vec<Option<(String, String)>>,
    cache: HashMap<(usize, Value), Value>,
}

/// Values per weight query (one SELECT of that many columns).
const BATCH: usize = 200;

impl<'a> Collation<'a> {
    /// The collations of `db.table`'s key columns `key` (0-based, in key order) on `server`.
    pub fn of(server: &'a Server, db: &str, table: &str, key: &[usize]) -> Self {
        let out = server.sql(&format!(
            "SELECT ORDINAL_POSITION, IFNULL(CHARACTER_SET_NAME, ''), IFNULL(COLLATION_NAME, '') \
             FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = '{table}'"
        ));
        let mut by_pos: HashMap<usize, (String, String)> = HashMap::new();
        for l in out.lines() {
            let f: Vec<&str> = l.split('\t').collect();
            let pos: usize = f[0].trim().parse().expect("an ordinal position");
            if f[1] != "binary" && !f[1].is_empty() && !f[2].is_empty() {
                by_pos.insert(pos - 1, (f[1].to_string(), f[2].to_string()));
            }
        }
        let columns = key.iter().map(|i| by_pos.get(i).cloned()).collect();
        Collation {
            server,
            columns,
            cache: HashMap::new(),
        }
    }

    /// Every key of `keys` with each collated column replaced by its weight.
    pub fn fold(&mut self, keys: &[&Key]) -> Vec<Key> {
        let missing: Vec<(usize, Value)> = keys
            .iter()
            .flat_map(|k| k.iter().enumerate())
            .filter(|(i, v)| self.columns[*i].is_some() && is_string(v))
            .map(|(i, v)| (i, v.clone()))
            .filter(|iv| !self.cache.contains_key(iv))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for chunk in missing.chunks(BATCH) {
            self.weigh(chunk);
        }
        keys.iter()
            .map(|k| {
                k.iter()
                    .enumerate()
                    .map(|(i, v)| {
                        self.cache
                            .get(&(i, v.clone()))
                            .cloned()
                            .unwrap_or_else(|| v.clone())
                    })
                    .collect()
            })
            .collect()
    }

    /// Asks the server for the weights of `values` (column index, printed value).
    fn weigh(&mut self, values: &[(usize, Value)]) {
        let exprs: Vec<String> = values
            .iter()
            .map(|(i, v)| {
                let (cs, coll) = self.columns[*i].as_ref().expect("a collated column");
                let value = format!("_{cs} X'{}' COLLATE {coll}", hex(&unprint(v)));
                // WEIGHT_STRING keeps trailing spaces (measured on 10.11), which a PAD
                // SPACE collation's comparison ignores; MariaDB names the others `nopad`.
                if coll.contains("nopad") {
                    format!("HEX(WEIGHT_STRING({value}))")
                } else {
                    format!("HEX(WEIGHT_STRING(TRIM(TRAILING ' ' FROM {value})))")
                }
            })
            .collect();
        let out = self.server.sql(&format!("SELECT {}", exprs.join(", ")));
        let line = out.lines().next().unwrap_or_default();
        let weights: Vec<&str> = line.split('\t').collect();
        assert_eq!(
            weights.len(),
            values.len(),
            "weights of {} values",
            values.len()
        );
        for ((i, v), w) in values.iter().zip(weights) {
            // Tagged so a weight never equals a printed value of another column.
            let w = format!("w:{}", w.trim()).into_bytes();
            self.cache.insert((*i, v.clone()), w);
        }
    }
}

/// A printed string value (`'...'`), not a number or NULL.
fn is_string(v: &[u8]) -> bool {
    v.len() >= 2 && v[0] == b'\'' && v[v.len() - 1] == b'\''
}

/// The bytes of a string value as `mariadb-binlog --verbose` printed it: quotes removed,
/// `\xNN` (a byte below 0x20) restored; every other byte, a backslash too, is printed raw.
pub(super) fn unprint(v: &[u8]) -> Vec<u8> {
    let inner = &v[1..v.len() - 1];
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let rest = &inner[i..];
        if rest.len() >= 4 && rest[0] == b'\\' && rest[1] == b'x' {
            if let Some(b) = std::str::from_utf8(&rest[2..4])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .filter(|b| *b < 0x20)
            {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(rest[0]);
        i += 1;
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}
