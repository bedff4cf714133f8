//! Pure parts of the comparator's queries: which columns are compared, how each column
//! is turned into exact bytes, and the SQL text. Every value leaves the server as HEX text
//! or as a digest, so nothing here depends on how a client library decodes a type.
pub use super::column::Column;
use super::key::{Key, KeyCols};
use kernel::schema::{quote_ident, ColumnKind};

/// The columns both sides have, as (source index, target index) in source order, and every
/// definition difference as a sentence.
pub fn pair_columns(source: &[Column], target: &[Column]) -> (Vec<(usize, usize)>, Vec<String>) {
    let mut pairs = Vec::new();
    let mut diffs = Vec::new();
    let find =
        |cols: &[Column], name: &str| cols.iter().position(|c| c.name.eq_ignore_ascii_case(name));
    for (i, s) in source.iter().enumerate() {
        let Some(j) = find(target, &s.name) else {
            diffs.push(format!("column `{}` is missing in the target", s.name));
            continue;
        };
        let t = &target[j];
        if (&s.column_type, s.nullable, &s.collation) != (&t.column_type, t.nullable, &t.collation)
        {
            diffs.push(format!(
                "column `{}`: source {}, target {}",
                s.name,
                s.describe(),
                t.describe()
            ));
        }
        diffs.extend(s.attrs.differences(&s.name, &t.attrs));
        pairs.push((i, j));
    }
    for t in target {
        if find(source, &t.name).is_none() {
            diffs.push(format!("column `{}` exists only in the target", t.name));
        }
    }
    if pairs.windows(2).any(|w| w[0].1 > w[1].1) {
        let names = |idx: &mut dyn Iterator<Item = usize>, cols: &[Column]| {
            idx.map(|i| cols[i].name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut by_target = pairs.clone();
        by_target.sort_by_key(|p| p.1);
        diffs.push(format!(
            "column order differs: source ({}), target ({})",
            names(&mut pairs.iter().map(|p| p.0), source),
            names(&mut by_target.iter().map(|p| p.0), source)
        ));
    }
    (pairs, diffs)
}

/// The exact bytes of a column as a binary string, NULL for NULL.
///
/// `CAST(x AS BINARY)` is the stored bytes for string and binary types (no charset
/// conversion, trailing spaces and 0x00 kept) and the server's canonical text for the
/// others (DECIMAL with its scale, temporal types with their fractional digits, TIMESTAMP
/// in the session zone, DOUBLE in shortest round-trip form, BIT as its raw bytes).
/// FLOAT is widened to DOUBLE first: its own text form has only ~6 digits, so two
/// different FLOATs could print alike, while the widening is exact.
/// (`HEX(x)` alone is NOT exact: for a number it is the value rounded to BIGINT.)
pub fn value_expr(column: &Column) -> String {
    let q = quote_ident(&column.name);
    match column.kind() {
        Some(ColumnKind::Float) => format!("CAST(CAST({q} AS DOUBLE) AS BINARY)"),
        _ => format!("CAST({q} AS BINARY)"),
    }
}

/// The next `limit` keys after `last` with the SHA-256 of their compared columns: per
/// row the key ([`KeyCols::select_exprs`]) then the hash, ordered by the key columns.
///
/// Each column contributes `HEX(bytes)` or `NULL`, joined by 0x1f: HEX only emits
/// `0-9A-F`, so the word `NULL` and the separator can never be confused with a value, and
/// the empty string (empty HEX) differs from NULL. Key columns are hashed like every
/// other column, so keys the server calls equal but whose bytes differ differ here.
pub fn chunk_sql(
    qualified: &str,
    key: &KeyCols,
    columns: &[&Column],
    last: Option<&Key>,
    limit: usize,
) -> Result<String, String> {
    Ok(format!(
        "SELECT {}, {} FROM {qualified}{} ORDER BY {} LIMIT {limit}",
        key.select_exprs().join(", "),
        row_hash(columns),
        key.after(last)?,
        kernel::key::sql::order_by(&key.quoted()),
    ))
}

/// The SHA-256 (64 hex digits) of a row's compared columns, as [`chunk_sql`] describes.
fn row_hash(columns: &[&Column]) -> String {
    format!("SHA2({}, 256)", row_text(columns))
}

/// The encoded row itself, the input of [`row_hash`] and of [`digest_sql`]'s chunk string.
fn row_text(columns: &[&Column]) -> String {
    let parts: Vec<String> = columns.iter().map(|c| hashed_part(c)).collect();
    format!("CONCAT_WS(0x1f, {})", parts.join(", "))
}

/// One column's part of [`row_hash`]: `NULL` for NULL, else its bytes, hex-encoded unless
/// the column's text has a fixed alphabet ([`plain_text`]).
///
/// A column this side declares NOT NULL is written without the `IF` (the server then
/// evaluates one expression less per value, about a tenth of a walk, measured): its value
/// is never NULL here. Should the other side hold a NULL in it (its column nullable), that
/// side writes `NULL`, which no HEX or plain text spells: the rows still differ. (Were a
/// NULL ever to reach an unguarded part, `CONCAT_WS` would drop it and the row would have
/// one separator fewer than every row of the other side: different again.)
fn hashed_part(c: &Column) -> String {
    let value = value_expr(c);
    let bytes = if plain_text(c.kind()) {
        value
    } else {
        format!("HEX({value})")
    };
    if c.nullable {
        format!("IF({} IS NULL, 'NULL', {bytes})", quote_ident(&c.name))
    } else {
        bytes
    }
}

/// Whether the server's text for a column of this kind is made only of digits, signs,
/// `.`, `e`, `:`, `-` and space, and is never empty: such text can contain neither the
/// 0x1f separator nor be the word `NULL`, so it goes into the hash as it is and the
/// encoding stays injective. Hex-encoding it as well only costs the server time (about a
/// tenth of a walk over integer-heavy rows, measured). Strings, binary, BIT, ENUM/SET,
/// JSON, GEOMETRY, UUID and any unknown kind carry arbitrary bytes and stay hex-encoded.
fn plain_text(kind: Option<ColumnKind>) -> bool {
    use ColumnKind::*;
    matches!(
        kind,
        Some(
            TinyInt
                | SmallInt
                | MediumInt
                | Int
                | BigInt
                | Decimal
                | Float
                | Double
                | Date
                | Datetime
                | Timestamp
                | Time
                | Year
        )
    )
}

/// The longest chunk string [`digest_sql`] builds (`group_concat_max_len` of every
/// comparator session, [`super::read::SESSION_SETUP`]): the server's memory for one chunk
/// query is bounded by it. A chunk of 10 000 rows of ~800 encoded bytes fits; a longer one
/// is cut, the server warns (1260), and the walk compares by [`sum_sql`] instead.
pub const DIGEST_MAX_BYTES: usize = 8 << 20;

/// The rows with `last < key <= bound` digested on the server: their count and the
/// SHA-256 of their encoded rows ([`row_text`]) concatenated in the order the server reads
/// them, each row after a 0x1e.
///
/// Why a match proves the chunk equal: no part of a row (HEX, plain text, `NULL`) contains
/// 0x1e or 0x1f, so the chunk string is an injective encoding of the sequence of rows, and
/// equal digests mean equal sequences (SHA-256). The order is the server's: both sides read
/// the same key range through their key index, so equal chunks read alike; a side that
/// read them in another order only makes the digests differ, and a differing chunk is
/// compared again row by row, which names every difference (never a false equality).
/// A chunk string longer than [`DIGEST_MAX_BYTES`] is cut with warning 1260: the caller
/// must treat that answer as no answer. Cheaper for the server than [`sum_sql`]: one hash
/// per chunk instead of one per row plus a text-to-number conversion per row (~20 % of a
/// walk, measured).
pub fn digest_sql(
    qualified: &str,
    key: &KeyCols,
    columns: &[&Column],
    last: Option<&Key>,
    bound: Option<&Key>,
) -> Result<String, String> {
    let digest = format!(
        "SHA2(GROUP_CONCAT({} SEPARATOR 0x1e), 256)",
        row_text(columns)
    );
    summary_sql(qualified, key, (last, bound), &digest)
}

/// `SELECT COUNT(*), <summary>` over the rows with `last < key <= bound`: the shape of
/// [`digest_sql`] and [`sum_sql`].
fn summary_sql(
    qualified: &str,
    key: &KeyCols,
    (last, bound): (Option<&Key>, Option<&Key>),
    summary: &str,
) -> Result<String, String> {
    Ok(format!(
        "SELECT COUNT(*), {summary} FROM {qualified}{}",
        key.between(last, bound)?
    ))
}

/// The rows with `last < key <= bound`, summed on the server: their count and the exact
/// (DECIMAL) sum of the first 64 bits of each row's [`row_hash`].
///
/// Why a match proves the chunk equal: both sides evaluate the same key range under their
/// own column collations and hash the same exact bytes. Keys are unique, so no row counts
/// twice; two different sets of rows with the same count give the same exact sum only if
/// the hashes of the rows that differ happen to sum alike, about 2^-64 for one chunk. A
/// chunk whose count or sum differs (or whose range the two sides read differently) is
/// compared again row by row, which names every difference. Nothing but two numbers
/// crosses the wire for an equal chunk, and no key weight is computed.
pub fn sum_sql(
    qualified: &str,
    key: &KeyCols,
    columns: &[&Column],
    last: Option<&Key>,
    bound: Option<&Key>,
) -> Result<String, String> {
    let sum = format!(
        "SUM(CAST(CONV(LEFT({}, 16), 16, 10) AS UNSIGNED))",
        row_hash(columns)
    );
    summary_sql(qualified, key, (last, bound), &sum)
}

/// The `n`-th key (1-based) after `last` in key order: a skipped chunk's last key. The
/// server steps over the keys before it in the index without sending (or computing the
/// select list of) them, so a sampled walk does not read every key it skips.
pub fn nth_key_sql(
    qualified: &str,
    key: &KeyCols,
    last: Option<&Key>,
    n: usize,
) -> Result<String, String> {
    Ok(format!(
        "SELECT {} FROM {qualified}{} ORDER BY {} LIMIT 1 OFFSET {}",
        key.select_exprs().join(", "),
        key.after(last)?,
        kernel::key::sql::order_by(&key.quoted()),
        n.max(1) - 1
    ))
}

/// For each given key: the key, then per column the SHA-256 of its bytes, their length and
/// the HEX of the first `preview` bytes (all NULL for NULL), ordered by the key columns.
pub fn detail_sql(
    qualified: &str,
    key: &KeyCols,
    columns: &[&Column],
    keys: &[Key],
    preview: usize,
) -> Result<String, String> {
    let parts: Vec<String> = columns
        .iter()
        .map(|c| {
            let v = value_expr(c);
            format!("SHA2({v}, 256), LENGTH({v}), HEX(LEFT({v}, {preview}))")
        })
        .collect();
    Ok(format!(
        "SELECT {}, {} FROM {qualified}{} ORDER BY {}",
        key.select_exprs().join(", "),
        parts.join(", "),
        key.any_of(keys)?,
        kernel::key::sql::order_by(&key.quoted()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, data_type: &str, column_type: &str) -> Column {
        Column::new(name.into(), data_type, column_type, true, None)
    }

    #[test]
    fn expressions_are_exact_per_type() {
        assert_eq!(
            value_expr(&col("f", "float", "float")),
            "CAST(CAST(`f` AS DOUBLE) AS BINARY)"
        );
        assert_eq!(
            value_expr(&col("a`b", "varchar", "varchar(3)")),
            "CAST(`a``b` AS BINARY)"
        );
        let c = col("v", "decimal", "decimal(5,2)");
        let key = KeyCols::of("t", &[col("id", "bigint", "bigint(20)")], &["id"]).expect("key");
        let sql = chunk_sql("`d`.`t`", &key, &[&c], Some(&Key::of_i64(-5)), 7).expect("sql");
        assert_eq!(
            sql,
            "SELECT CAST(`id` AS BINARY), SHA2(CONCAT_WS(0x1f, IF(`v` IS NULL, 'NULL', CAST(`v` AS BINARY))), 256) \
             FROM `d`.`t` WHERE `id` > -5 ORDER BY `id` LIMIT 7"
        );
        assert_eq!(
            nth_key_sql("`d`.`t`", &key, Some(&Key::of_i64(-5)), 7).expect("sql"),
            "SELECT CAST(`id` AS BINARY) FROM `d`.`t` WHERE `id` > -5 ORDER BY `id` LIMIT 1 OFFSET 6"
        );
        assert_eq!(
            sum_sql("`d`.`t`", &key, &[&c], Some(&Key::of_i64(-5)), Some(&Key::of_i64(9)))
                .expect("sql"),
            "SELECT COUNT(*), SUM(CAST(CONV(LEFT(SHA2(CONCAT_WS(0x1f, IF(`v` IS NULL, 'NULL', CAST(`v` AS BINARY))), 256), 16), 16, 10) AS UNSIGNED)) \
             FROM `d`.`t` WHERE (`id` > -5) AND (`id` <= 9)"
        );
        assert_eq!(
            digest_sql("`d`.`t`", &key, &[&c], Some(&Key::of_i64(-5)), Some(&Key::of_i64(9)))
                .expect("sql"),
            "SELECT COUNT(*), SHA2(GROUP_CONCAT(CONCAT_WS(0x1f, IF(`v` IS NULL, 'NULL', CAST(`v` AS BINARY))) SEPARATOR 0x1e), 256) \
             FROM `d`.`t` WHERE (`id` > -5) AND (`id` <= 9)"
        );
        let tail = sum_sql("`d`.`t`", &key, &[&c], Some(&Key::of_i64(-5)), None).expect("sql");
        assert!(tail.ends_with("FROM `d`.`t` WHERE (`id` > -5)"), "{tail}");
        let all = sum_sql("`d`.`t`", &key, &[&c], None, None).expect("sql");
        assert!(all.ends_with("FROM `d`.`t`"), "{all}");
        let first = chunk_sql("`d`.`t`", &key, &[&c], None, 7).expect("sql");
        assert!(!first.contains("WHERE"));
        let keys = [Key::of_i64(1), Key::of_i64(2)];
        let sql = detail_sql("`d`.`t`", &key, &[&c], &keys, 8).expect("sql");
        assert!(sql.ends_with("WHERE `id` IN (1, 2) ORDER BY `id`"), "{sql}");
        assert!(sql.contains("HEX(LEFT(CAST(`v` AS BINARY), 8))"));
    }

    #[test]
    fn a_not_null_column_has_no_null_guard() {
        let c = Column::new("c".into(), "varchar", "varchar(3)", false, None);
        assert_eq!(hashed_part(&c), "HEX(CAST(`c` AS BINARY))");
        let n = Column::new("n".into(), "int", "int(11)", false, None);
        assert_eq!(
            row_text(&[&c, &n]),
            "CONCAT_WS(0x1f, HEX(CAST(`c` AS BINARY)), CAST(`n` AS BINARY))"
        );
    }

    #[test]
    fn every_session_allows_the_longest_digested_chunk() {
        let set = format!("SET SESSION group_concat_max_len = {DIGEST_MAX_BYTES}");
        assert!(super::super::read::SESSION_SETUP.contains(&set.as_str()));
    }

    #[test]
    fn only_fixed_alphabet_text_skips_the_hex() {
        let part =
            |data_type: &str, column_type: &str| hashed_part(&col("c", data_type, column_type));
        for (dt, ct) in [
            ("int", "int(10) unsigned"),
            ("decimal", "decimal(5,2)"),
            ("datetime", "datetime(6)"),
            ("time", "time(3)"),
            ("year", "year(4)"),
        ] {
            assert_eq!(
                part(dt, ct),
                "IF(`c` IS NULL, 'NULL', CAST(`c` AS BINARY))",
                "{ct}"
            );
        }
        assert_eq!(
            part("float", "float"),
            "IF(`c` IS NULL, 'NULL', CAST(CAST(`c` AS DOUBLE) AS BINARY))"
        );
        for (dt, ct) in [
            ("varchar", "varchar(3)"),
            ("char", "char(4)"),
            ("binary", "binary(16)"),
            ("bit", "bit(8)"),
            ("enum", "enum('a','b')"),
            ("set", "set('a','b')"),
            ("longtext", "longtext"),
            ("point", "point"),
            ("uuid", "uuid"),
            ("no_such_type", "no_such_type"),
        ] {
            assert_eq!(
                part(dt, ct),
                "IF(`c` IS NULL, 'NULL', HEX(CAST(`c` AS BINARY)))",
                "{ct}"
            );
        }
    }

    #[test]
    fn composite_keys_seek_order_and_select_their_weights() {
        let cols = [
            Column::new("a".into(), "int", "int(11)", false, None),
            Column::new(
                "b".into(),
                "varchar",
                "varchar(20)",
                false,
                Some("utf8mb4_general_ci".into()),
            ),
        ];
        let key = KeyCols::of("t", &cols, &["a", "b"]).expect("key");
        let last = key
            .read(&[
                Some(b"5".to_vec()),
                Some(b"ab".to_vec()),
                Some(vec![0, 0x41]),
            ])
            .expect("key");
        let v = col("v", "int", "int(11)");
        let sql = chunk_sql("`d`.`t`", &key, &[&v], Some(&last), 3).expect("sql");
        assert!(
            sql.starts_with(
                "SELECT CAST(`a` AS BINARY), CAST(`b` AS BINARY), WEIGHT_STRING(`b` AS CHAR(20)), SHA2("
            ),
            "{sql}"
        );
        assert!(
            sql.ends_with(
                "WHERE `a` >= 5 AND (`a` > 5 OR (`b` > CONVERT(X'6162' USING utf8mb4) \
                 COLLATE utf8mb4_general_ci)) ORDER BY `a`, `b` LIMIT 3"
            ),
            "{sql}"
        );
        let sql = detail_sql("`d`.`t`", &key, &[&v], &[last], 4).expect("sql");
        assert!(
            sql.contains(
                "WHERE (`a`, `b`) IN ((5, CONVERT(X'6162' USING utf8mb4) COLLATE utf8mb4_general_ci))"
            ),
            "{sql}"
        );
    }

    #[test]
    fn display_widths_do_not_differ() {
        let s = [
            col("id", "bigint", "bigint(20)"),
            col("n", "int", "int(11) unsigned"),
        ];
        let t = [
            col("id", "bigint", "bigint"),
            col("n", "int", "int unsigned"),
        ];
        let (pairs, diffs) = pair_columns(&s, &t);
        assert_eq!(pairs, vec![(0, 0), (1, 1)]);
        assert!(diffs.is_empty(), "{diffs:?}");
    }

    #[test]
    fn definition_differences_are_named() {
        let s = [
            col("id", "bigint", "bigint(20)"),
            col("a", "varchar", "varchar(10)"),
            col("b", "int", "int(11)"),
            col("gone", "int", "int(11)"),
        ];
        let t = [
            col("id", "bigint", "bigint(20)"),
            col("b", "int", "int(11)"),
            col("a", "varchar", "varchar(20)"),
            col("new", "int", "int(11)"),
        ];
        let (pairs, diffs) = pair_columns(&s, &t);
        assert_eq!(pairs, vec![(0, 0), (1, 2), (2, 1)]);
        assert_eq!(
            diffs,
            vec![
                "column `a`: source varchar(10) NULL, target varchar(20) NULL",
                "column `gone` is missing in the target",
                "column `new` exists only in the target",
                "column order differs: source (id, a, b), target (id, b, a)",
            ]
        );
    }
}
