//! What `verify` found: counts kept separately for missing keys, extra keys and differing
//! fields, the first examples of each, and where the walk stands ([`VerifyCursor`]).
//!
//! [`Report`] serializes to JSON for `--format json` and prints as text with `Display`.
use super::diff::FieldDetail;
use super::key::Key;
use kernel::codec::{self, DecodeError, Versioned};
use kernel::position::BinlogPos;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A count with the first examples of what it counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Examples<T> {
    pub count: u64,
    /// The first ones found, in key order, at most the configured number.
    pub examples: Vec<T>,
}

impl<T> Default for Examples<T> {
    fn default() -> Self {
        Examples {
            count: 0,
            examples: Vec::new(),
        }
    }
}

impl<T> Examples<T> {
    fn push(&mut self, item: T, max: usize) {
        self.count += 1;
        if self.examples.len() < max {
            self.examples.push(item);
        }
    }
}

/// How a [`FieldValue`] preview is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreviewKind {
    Null,
    /// Valid UTF-8 without control characters: the preview is the text.
    Text,
    /// Anything else: the preview is lowercase hex.
    Binary,
}

/// A printable preview of one field value (a plain struct so that it encodes with postcard
/// as well as JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldValue {
    pub kind: PreviewKind,
    pub preview: String,
    /// Length of the whole value in bytes.
    pub bytes: u64,
    /// The preview shows only the first bytes.
    pub truncated: bool,
}

impl FieldValue {
    /// NULL.
    pub fn null() -> FieldValue {
        FieldValue {
            kind: PreviewKind::Null,
            preview: String::new(),
            bytes: 0,
            truncated: false,
        }
    }

    /// The preview of a detail column.
    pub fn from_detail(d: &FieldDetail) -> FieldValue {
        let FieldDetail::Value { len, head, .. } = d else {
            return FieldValue::null();
        };
        let truncated = (head.len() as u64) < *len;
        let text = match std::str::from_utf8(head) {
            Ok(s) => Some(s),
            // A multi-byte character cut by the preview is still text.
            Err(e) if truncated && e.error_len().is_none() => {
                std::str::from_utf8(&head[..e.valid_up_to()]).ok()
            }
            Err(_) => None,
        };
        let (kind, preview) = match text.filter(|s| !s.chars().any(char::is_control)) {
            Some(s) => (PreviewKind::Text, s.to_string()),
            None => (PreviewKind::Binary, hex::encode(head)),
        };
        FieldValue {
            kind,
            preview,
            bytes: *len,
            truncated,
        }
    }
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let more = if self.truncated { "..." } else { "" };
        let (p, n) = (&self.preview, self.bytes);
        match self.kind {
            PreviewKind::Null => write!(f, "NULL"),
            PreviewKind::Text => write!(f, "{p:?}{more} ({n} bytes)"),
            PreviewKind::Binary => write!(f, "0x{p}{more} ({n} bytes)"),
        }
    }
}

/// One differing field of a key present on both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldDiff {
    /// The source row's key.
    pub key: Key,
    pub column: String,
    pub source: FieldValue,
    pub target: FieldValue,
}

/// Counts so far. Kept in [`VerifyCursor`] so that a resumed walk ends with the totals of
/// an uninterrupted one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Chunk steps walked.
    pub chunks: u64,
    pub source_rows: u64,
    pub target_rows: u64,
    /// Keys present on both sides (equal or not).
    pub rows_compared: u64,
    /// Keys in the source, not in the target.
    pub missing: Examples<Key>,
    /// Keys in the target, not in the source.
    pub extra: Examples<Key>,
    /// Keys on both sides with at least one differing field.
    pub differing_rows: u64,
    /// Every differing field (a row with two differing fields counts two).
    pub differing_fields: Examples<FieldDiff>,
    /// Differing fields per column name.
    pub fields_by_column: BTreeMap<String, u64>,
    /// Wall time spent walking, summed over resumed runs.
    pub elapsed_ms: u64,
}

impl Tally {
    pub(crate) fn missing(&mut self, key: Key, max: usize) {
        self.missing.push(key, max);
    }

    pub(crate) fn extra(&mut self, key: Key, max: usize) {
        self.extra.push(key, max);
    }

    pub(crate) fn field(&mut self, diff: FieldDiff, max: usize) {
        *self
            .fields_by_column
            .entry(diff.column.clone())
            .or_insert(0) += 1;
        self.differing_fields.push(diff, max);
    }

    /// True when nothing differs.
    pub fn is_clean(&self) -> bool {
        self.missing.count == 0 && self.extra.count == 0 && self.differing_rows == 0
    }

    /// The counts without timing: what two walks over the same data must agree on.
    pub fn without_timing(&self) -> Tally {
        Tally {
            elapsed_ms: 0,
            ..self.clone()
        }
    }
}

/// Where a walk stands: every key up to and including `last_key` has been compared, and
/// `tally` holds the counts so far.
///
/// A caller that persists it (postcard or JSON) and passes it back continues after
/// `last_key`, on a new snapshot. The totals then equal an uninterrupted walk's when the
/// tables did not change in between (a quiescent point, or both sides pinned at the same
/// source position again); otherwise each part is exact for its own snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyCursor {
    /// The last key compared (the source's values and sort key); `None` before the first
    /// chunk.
    pub last_key: Option<Key>,
    /// The whole key space has been walked.
    pub finished: bool,
    pub tally: Tally,
}

impl VerifyCursor {
    /// A cursor at the start of the key space.
    pub fn start() -> VerifyCursor {
        VerifyCursor::default()
    }

    /// The cursor's bytes: `VCUR` v2.
    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self)
    }

    /// Decodes a stored cursor of any version written: v1 (a single signed integer key)
    /// becomes the equivalent v2 cursor of that integer key.
    pub fn decode(bytes: &[u8]) -> Result<VerifyCursor, DecodeError> {
        let (version, body) = codec::split::<VerifyCursor>(bytes)?;
        if version == 1 {
            let v1: v1::Cursor = codec::decode_body(&Self::KIND, 1, body)?;
            return Ok(v1.into());
        }
        codec::decode_body(&Self::KIND, version, body)
    }
}

/// Persisted as `VCUR` through [`kernel::codec`]; v2 holds keys as typed values with
/// their sort keys, v1 held `i64` keys (golden bytes of both pinned below).
impl Versioned for VerifyCursor {
    const KIND: [u8; 4] = *b"VCUR";
    const VERSION: u16 = 2;
}

/// `VCUR` v1: the cursor of a walk by one signed integer column, decoded only.
mod v1 {
    use super::{Examples, FieldValue, Key};
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    #[derive(Serialize, Deserialize)]
    pub(super) struct FieldDiff {
        key: i64,
        column: String,
        source: FieldValue,
        target: FieldValue,
    }

    #[derive(Serialize, Deserialize)]
    pub(super) struct Tally {
        chunks: u64,
        source_rows: u64,
        target_rows: u64,
        rows_compared: u64,
        missing: Examples<i64>,
        extra: Examples<i64>,
        differing_rows: u64,
        differing_fields: Examples<FieldDiff>,
        fields_by_column: BTreeMap<String, u64>,
        elapsed_ms: u64,
    }

    #[derive(Serialize, Deserialize)]
    pub(super) struct Cursor {
        last_key: Option<i64>,
        finished: bool,
        tally: Tally,
    }

    fn keys(e: Examples<i64>) -> Examples<Key> {
        Examples {
            count: e.count,
            examples: e.examples.into_iter().map(Key::of_i64).collect(),
        }
    }

    impl From<Cursor> for super::VerifyCursor {
        fn from(c: Cursor) -> Self {
            let t = c.tally;
            super::VerifyCursor {
                last_key: c.last_key.map(Key::of_i64),
                finished: c.finished,
                tally: super::Tally {
                    chunks: t.chunks,
                    source_rows: t.source_rows,
                    target_rows: t.target_rows,
                    rows_compared: t.rows_compared,
                    missing: keys(t.missing),
                    extra: keys(t.extra),
                    differing_rows: t.differing_rows,
                    differing_fields: Examples {
                        count: t.differing_fields.count,
                        examples: t
                            .differing_fields
                            .examples
                            .into_iter()
                            .map(|d| super::FieldDiff {
                                key: Key::of_i64(d.key),
                                column: d.column,
                                source: d.source,
                                target: d.target,
                            })
                            .collect(),
                    },
                    fields_by_column: t.fields_by_column,
                    elapsed_ms: t.elapsed_ms,
                },
            }
        }
    }
}

/// The result of one `verify` run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// `db`.`table` on the source and on the target.
    pub source: String,
    pub target: String,
    /// The key columns merged by, in index order.
    pub key: Vec<String>,
    /// The columns compared (present on both sides), in source order.
    pub columns: Vec<String>,
    /// Definition differences (missing columns, other types): each is a difference.
    pub schema_differences: Vec<String>,
    /// The binlog position of the source read view, when the server reports it (MariaDB).
    pub source_snapshot: Option<BinlogPos>,
    /// The binlog position of the target read view, when it has one.
    pub target_snapshot: Option<BinlogPos>,
    /// The walk reached the end of the key space (false: stopped by a chunk budget or a
    /// cancellation; resume with `cursor`).
    pub complete: bool,
    /// Wall time of this run.
    pub elapsed_ms: u64,
    pub cursor: VerifyCursor,
    /// Chunks a sampled walk skipped (`super::sample`); 0 for a full walk.
    #[serde(default)]
    pub skipped_chunks: u64,
    /// Chunks of this run found equal by their count and hash sum on each server, without
    /// reading their rows (the others were compared row by row).
    #[serde(default)]
    pub summed_chunks: u64,
}

impl Report {
    /// True when the walk is complete and nothing differs, definitions included.
    pub fn is_clean(&self) -> bool {
        self.complete && self.schema_differences.is_empty() && self.cursor.tally.is_clean()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.cursor.tally;
        let verdict = match (self.complete, self.is_clean()) {
            (_, true) => "EQUAL",
            (false, false) if t.is_clean() && self.schema_differences.is_empty() => {
                "INCOMPLETE (no difference so far)"
            }
            (false, false) => "INCOMPLETE, DIFFERENT",
            (true, false) => "DIFFERENT",
        };
        writeln!(f, "verify {} -> {}: {verdict}", self.source, self.target)?;
        let pos =
            |p: &Option<BinlogPos>| p.as_ref().map_or("not reported".into(), |p| p.to_string());
        writeln!(f, "  source snapshot: {}", pos(&self.source_snapshot))?;
        writeln!(f, "  target snapshot: {}", pos(&self.target_snapshot))?;
        writeln!(
            f,
            "  rows: {} source, {} target, {} compared by key ({}) over {} columns in {} chunks ({} equal by their sums), {} ms",
            t.source_rows,
            t.target_rows,
            t.rows_compared,
            self.key
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", "),
            self.columns.len(),
            t.chunks,
            self.summed_chunks,
            t.elapsed_ms
        )?;
        for d in &self.schema_differences {
            writeln!(f, "  definition differs: {d}")?;
        }
        write_keys(f, "missing keys (in source, not in target)", &t.missing)?;
        write_keys(f, "extra keys (in target, not in source)", &t.extra)?;
        writeln!(
            f,
            "  differing fields: {} in {} rows",
            t.differing_fields.count, t.differing_rows
        )?;
        for (column, n) in &t.fields_by_column {
            writeln!(f, "    `{column}`: {n}")?;
        }
        for d in &t.differing_fields.examples {
            writeln!(
                f,
                "    key {} `{}`: source {} / target {}",
                d.key, d.column, d.source, d.target
            )?;
        }
        if !self.complete {
            let at = self
                .cursor
                .last_key
                .as_ref()
                .map_or("the start".into(), |k| format!("key {k}"));
            writeln!(f, "  stopped after {at}: resume from the cursor")?;
        }
        Ok(())
    }
}

fn write_keys(f: &mut fmt::Formatter<'_>, what: &str, e: &Examples<Key>) -> fmt::Result {
    write!(f, "  {what}: {}", e.count)?;
    if !e.examples.is_empty() {
        let keys: Vec<String> = e.examples.iter().map(Key::to_string).collect();
        write!(f, " (first: {})", keys.join(", "))?;
    }
    writeln!(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernel::value::SqlValue;

    fn detail(bytes: &[u8], len: u64) -> FieldDetail {
        FieldDetail::Value {
            digest: String::new(),
            len,
            head: bytes.to_vec(),
        }
    }

    #[test]
    fn previews_are_text_or_hex() {
        assert_eq!(
            FieldValue::from_detail(&FieldDetail::Null),
            FieldValue::null()
        );
        let v = FieldValue::from_detail(&detail(b"ab ", 3));
        assert_eq!(v.to_string(), "\"ab \" (3 bytes)");
        let v = FieldValue::from_detail(&detail(b"a\0", 2));
        assert_eq!(v.to_string(), "0x6100 (2 bytes)");
        // "é" cut in half by the preview is still text.
        let v = FieldValue::from_detail(&detail(&"aé".as_bytes()[..2], 3));
        assert_eq!(v.to_string(), "\"a\"... (3 bytes)");
        let v = FieldValue::from_detail(&detail(&[0xff, 0xfe], 9));
        assert_eq!(v.to_string(), "0xfffe... (9 bytes)");
    }

    #[test]
    fn examples_are_bounded_but_counts_are_not() {
        let mut t = Tally::default();
        for k in 0..5 {
            t.missing(Key::of_i64(k), 2);
        }
        assert_eq!(t.missing.count, 5);
        assert_eq!(t.missing.examples, vec![Key::of_i64(0), Key::of_i64(1)]);
        assert!(!t.is_clean());
    }

    /// The cursor of the v1 golden bytes, with `key` making each of its keys.
    fn sample_cursor(key: impl Fn(i64) -> Key) -> VerifyCursor {
        let mut c = VerifyCursor {
            last_key: Some(key(-2)),
            finished: false,
            tally: Tally {
                chunks: 3,
                source_rows: 5,
                target_rows: 4,
                rows_compared: 4,
                differing_rows: 1,
                elapsed_ms: 7,
                ..Tally::default()
            },
        };
        c.tally.missing(key(-9), 20);
        c.tally.extra(key(1), 20);
        c.tally.field(
            FieldDiff {
                key: key(-3),
                column: "v".into(),
                source: FieldValue::from_detail(&detail(b"a\0", 2)),
                target: FieldValue::null(),
            },
            20,
        );
        c
    }

    /// A composite key (INT, VARCHAR _ci, DATETIME) as a walk reads it.
    fn composite(i: i64) -> Key {
        let mut sort = Vec::new();
        let mut col = Vec::new();
        kernel::key::encode::signed(i, &mut col);
        kernel::key::frame(&col, &mut sort);
        kernel::key::frame(&[0, 0x41, 0, 0x42], &mut sort);
        kernel::key::frame(b"2024-01-02 00:00:00", &mut sort);
        Key {
            values: vec![
                SqlValue::Int(i),
                SqlValue::Bytes(b"ab".to_vec()),
                SqlValue::Bytes(b"2024-01-02 00:00:00".to_vec()),
            ],
            sort: kernel::key::SortKey(sort),
        }
    }

    #[test]
    fn v1_cursor_bytes_still_decode_to_integer_keys() {
        // Golden: written by the v1 build (one signed integer key); STYLE §5.
        let bytes = hex::decode(GOLDEN_V1).expect("hex");
        assert_eq!(VerifyCursor::decode(&bytes), Ok(sample_cursor(Key::of_i64)));
        let c = VerifyCursor::decode(&bytes).expect("v1");
        assert_eq!(c.last_key.expect("key").values, [SqlValue::Int(-2)]);
    }

    #[test]
    fn v2_cursor_bytes_are_pinned() {
        let c = sample_cursor(composite);
        let bytes = c.encode();
        assert_eq!(hex::encode(&bytes), GOLDEN_V2);
        assert_eq!(VerifyCursor::decode(&bytes), Ok(c));
        // A v1-shaped walk written today is v2 too, and decodes back the same.
        let ints = sample_cursor(Key::of_i64);
        assert_eq!(&ints.encode()[4..6], &[2, 0]);
        assert_eq!(VerifyCursor::decode(&ints.encode()), Ok(ints));
        let mut newer = bytes.clone();
        newer[4] = 3;
        assert!(matches!(
            VerifyCursor::decode(&newer),
            Err(DecodeError::Version { found: 3, .. })
        ));
    }

    const GOLDEN_V1: &str =
        "564355520100010300030504040101110101020101010501760204363130300200000000000101760107";

    /// Golden: `VCUR` v2 of [`sample_cursor`] with composite keys (STYLE §5).
    const GOLDEN_V2: &str = concat!(
        "56435552020001030203010261620113323032342d30312d30322030303a30303a3030277ffffffffffffffe",
        "000100ff4100ff420001323032342d30312d30322030303a30303a3030000100030504040101030211010261",
        "620113323032342d30312d30322030303a30303a3030277ffffffffffffff7000100ff4100ff420001323032",
        "342d30312d30322030303a30303a303000010101030202010261620113323032342d30312d30322030303a30",
        "303a30302d8000ff00ff00ff00ff00ff00ff01000100ff4100ff420001323032342d30312d30322030303a30",
        "303a30300001010101030205010261620113323032342d30312d30322030303a30303a3030277fffffffffff",
        "fffd000100ff4100ff420001323032342d30312d30322030303a30303a303000010176020436313030020000",
        "0000000101760107"
    );

    #[test]
    fn report_prints_and_serializes() {
        let mut cursor = VerifyCursor::start();
        cursor.finished = true;
        cursor.tally.extra(Key::of_i64(7), 20);
        cursor.tally.extra(composite(5), 20);
        cursor.tally.differing_rows = 1;
        cursor.tally.field(
            FieldDiff {
                key: Key::of_i64(3),
                column: "name".into(),
                source: FieldValue::from_detail(&detail(b"x", 1)),
                target: FieldValue::null(),
            },
            20,
        );
        let r = Report {
            source: "`a`.`t`".into(),
            target: "`b`.`t`".into(),
            key: vec!["id".into()],
            columns: vec!["id".into(), "name".into()],
            schema_differences: vec![],
            source_snapshot: Some(BinlogPos::new("mysql-bin.000001", 4)),
            target_snapshot: None,
            complete: true,
            elapsed_ms: 1,
            cursor,
            skipped_chunks: 0,
            summed_chunks: 0,
        };
        let text = r.to_string();
        assert!(text.contains("DIFFERENT"), "{text}");
        assert!(
            text.contains(
                "extra keys (in target, not in source): 2 (first: 7, (5, 'ab', '2024-01-02 00:00:00'))"
            ),
            "{text}"
        );
        assert!(text.contains("key 3 `name`: source \"x\" (1 bytes) / target NULL"));
        let json = serde_json::to_value(&r).expect("json");
        assert_eq!(json["cursor"]["tally"]["extra"]["count"], 2);
        assert_eq!(
            json["cursor"]["tally"]["differing_fields"]["examples"][0]["target"]["kind"],
            "null"
        );
        let back: Report = serde_json::from_value(json).expect("round trip");
        assert_eq!(back, r);
    }
}
