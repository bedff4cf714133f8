//! The text of `mariadb-binlog --verbose --base64-output=DECODE-ROWS`, read into complete
//! groups of row changes. This is the server's own decoding of its binlog: nothing here
//! shares code with the pipeline's capture (no mysql_async, no `kernel::capture`), so the
//! oracle built on it cannot inherit a decoding mistake of the product.
//!
//! What the text gives (MariaDB 10.11, measured on this machine): every event opens with a
//! header line `#YYMMDD HH:MM:SS server id N  end_log_pos P CRC32 0x.. \t<kind> ..`; a
//! transaction opens with `GTID d-s-n trans` (a DDL with `GTID d-s-n` alone, ended by its
//! Query event) and ends with `Xid = N` (or a `COMMIT` Query for a non-transactional
//! table); each row is `### INSERT INTO`/`### UPDATE`/`### DELETE FROM` and the
//! qualified table, then `### WHERE` (before image) and `### SET` (after image), one
//! `###   @i=value` line a column. Control bytes inside a string are printed as `\xNN`, so
//! a value never spans lines; quotes inside a string are not escaped, so a value is the
//! whole rest of its line (trailing padding of numbers trimmed). A group's end is the
//! `end_log_pos` of its last event: the position a replica (and the product's cursor)
//! names for "after this group".

/// A position in one binlog file. Ordered by file name (fixed-width numbered suffixes
/// of one server), then offset.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub file: String,
    pub pos: u64,
}

/// One column value as the server printed it (raw bytes, quotes included for strings).
pub type Value = Vec<u8>;

/// The columns of one row image, in table order (`@1` first).
pub type Image = Vec<Value>;

/// One row change of a row event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowChange {
    /// The qualified name as printed: `` `db`.`table` ``.
    pub table: String,
    pub before: Option<Image>,
    pub after: Option<Image>,
}

/// One complete group (transaction, or a DDL alone) of the binlog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub gtid: String,
    pub end: Pos,
    /// Row changes of the tables asked for, in binlog order.
    pub rows: Vec<RowChange>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Before,
    After,
}

struct OpenRow {
    change: RowChange,
    section: Section,
}

struct OpenGroup {
    gtid: String,
    transactional: bool,
    rows: Vec<RowChange>,
}

/// The parser's state over one file's text.
struct Parser<'a> {
    file: &'a str,
    keep: &'a dyn Fn(&str) -> bool,
    group: Option<OpenGroup>,
    row: Option<OpenRow>,
    /// The end of the Query event whose statement text is being read (in a transaction).
    query_end: Option<u64>,
    out: Vec<Group>,
}

/// Reads the groups of one file's `mariadb-binlog --verbose` text, keeping the row changes
/// of the tables `keep` accepts (by qualified name, as printed); groups without such a row
/// are kept too (empty), so positions between them are known. A group still open at the
/// end of the text (cut by a stop position) is dropped.
pub fn groups(file: &str, text: &[u8], keep: &dyn Fn(&str) -> bool) -> Vec<Group> {
    let mut p = Parser {
        file,
        keep,
        group: None,
        row: None,
        query_end: None,
        out: Vec::new(),
    };
    for line in text.split(|b| *b == b'\n') {
        p.line(line);
    }
    p.flush_row();
    p.out
}

impl Parser<'_> {
    fn line(&mut self, line: &[u8]) {
        if let Some(rest) = line.strip_prefix(b"### ") {
            self.row_line(rest);
        } else if is_header(line) {
            self.flush_row();
            self.header(line);
        } else if let Some(end) = self.query_end {
            let stmt = String::from_utf8_lossy(line);
            let stmt = stmt.trim();
            if stmt == "COMMIT" || stmt.starts_with("ROLLBACK") {
                self.close(end);
            }
        }
    }

    fn header(&mut self, line: &[u8]) {
        self.query_end = None;
        let text = String::from_utf8_lossy(line);
        let Some(end) = end_log_pos(&text) else {
            return;
        };
        let kind = text.split_once('\t').map(|(_, k)| k.trim()).unwrap_or("");
        if let Some(gtid) = kind.strip_prefix("GTID ") {
            let mut words = gtid.split_whitespace();
            self.group = Some(OpenGroup {
                gtid: words.next().unwrap_or("").to_string(),
                transactional: words.any(|w| w == "trans"),
                rows: Vec::new(),
            });
        } else if kind.starts_with("Xid = ") {
            self.close(end);
        } else if kind.starts_with("Query") {
            match &self.group {
                Some(g) if !g.transactional => self.close(end),
                Some(_) => self.query_end = Some(end),
                None => {}
            }
        }
    }

    fn row_line(&mut self, rest: &[u8]) {
        let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
        let start = |table: &[u8], section| {
            Some(OpenRow {
                change: RowChange {
                    table: text(table),
                    before: None,
                    after: None,
                },
                section,
            })
        };
        if let Some(t) = rest.strip_prefix(b"INSERT INTO ") {
            self.flush_row();
            self.row = start(t, Section::After);
        } else if let Some(t) = rest.strip_prefix(b"UPDATE ") {
            self.flush_row();
            self.row = start(t, Section::Before);
        } else if let Some(t) = rest.strip_prefix(b"DELETE FROM ") {
            self.flush_row();
            self.row = start(t, Section::Before);
        } else if rest == b"WHERE" {
            self.set_section(Section::Before);
        } else if rest == b"SET" {
            self.set_section(Section::After);
        } else if let Some(v) = rest.strip_prefix(b"  @") {
            self.value(v);
        }
    }

    fn set_section(&mut self, s: Section) {
        if let Some(r) = &mut self.row {
            r.section = s;
        }
    }

    /// `i=value` of the open row's current image; `i` must be the next column.
    fn value(&mut self, v: &[u8]) {
        let Some(r) = &mut self.row else { return };
        let eq = v.iter().position(|b| *b == b'=').expect("@i=value");
        let i: usize = String::from_utf8_lossy(&v[..eq]).parse().expect("@i");
        let mut value = v[eq + 1..].to_vec();
        while value.last().is_some_and(|b| *b == b' ' || *b == b'\t') {
            value.pop();
        }
        let image = match r.section {
            Section::Before => r.change.before.get_or_insert_with(Vec::new),
            Section::After => r.change.after.get_or_insert_with(Vec::new),
        };
        assert_eq!(image.len() + 1, i, "column @{i} out of order");
        image.push(value);
    }

    fn flush_row(&mut self) {
        let Some(r) = self.row.take() else { return };
        if !(self.keep)(&r.change.table) {
            return;
        }
        let g = self
            .group
            .as_mut()
            .unwrap_or_else(|| panic!("a row of {} outside any group", r.change.table));
        g.rows.push(r.change);
    }

    fn close(&mut self, end: u64) {
        self.flush_row();
        self.query_end = None;
        if let Some(g) = self.group.take() {
            self.out.push(Group {
                gtid: g.gtid,
                end: Pos {
                    file: self.file.to_string(),
                    pos: end,
                },
                rows: g.rows,
            });
        }
    }
}

/// An event header: `#` and the date's digits, with an `end_log_pos`.
fn is_header(line: &[u8]) -> bool {
    line.len() > 2 && line[0] == b'#' && line[1].is_ascii_digit()
}

fn end_log_pos(header: &str) -> Option<u64> {
    let (_, rest) = header.split_once("end_log_pos ")?;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from MariaDB 10.11 (`mariadb-binlog --verbose --base64-output=DECODE-ROWS`)
    /// on this machine: a key-changing UPDATE, then a transaction of a DELETE and an
    /// INSERT, then a DDL (cut to the lines the parser reads).
    const RECORDED: &[u8] = b"# at 1005
#261206 23:10:21 server id 1  end_log_pos 1047 CRC32 0xbffd87cc \tGTID 0-1-4 trans
/*M!100001 SET @@session.gtid_seq_no=4*//*!*/;
START TRANSACTION
/*!*/;
# at 1047
# at 1105
#261206 23:10:21 server id 1  end_log_pos 1105 CRC32 0xa9cd3733 \tAnnotate_rows:
#Q> update t set id=5, v='x' where id=1
#261206 23:10:21 server id 1  end_log_pos 1183 CRC32 0x63e102c1 \tTable_map: `d`.`t` mapped to number 8
# at 1183
#261206 23:10:21 server id 1  end_log_pos 1277 CRC32 0xeb0b1afd \tUpdate_rows: table id 8 flags: STMT_END_F
### UPDATE `d`.`t`
### WHERE
###   @1=1
###   @2='a'b\\c'
###   @3=0.1                 
### SET
###   @1=5
###   @2='x'
###   @3=0.1                 
# Number of rows: 1
# at 1277
#261206 23:10:21 server id 1  end_log_pos 1308 CRC32 0x98ef4a47 \tXid = 6
COMMIT/*!*/;
# at 1308
#261206 23:10:21 server id 1  end_log_pos 1350 CRC32 0xaf8b4e2a \tGTID 0-1-5 trans
START TRANSACTION
/*!*/;
#261206 23:10:21 server id 1  end_log_pos 1521 CRC32 0xef5758d2 \tDelete_rows: table id 8 flags: STMT_END_F
### DELETE FROM `d`.`t`
### WHERE
###   @1=2
###   @2=NULL
###   @3=NULL
### DELETE FROM `d`.`other`
### WHERE
###   @1=2
#261206 23:10:21 server id 1  end_log_pos 1719 CRC32 0xfda032d9 \tWrite_rows: table id 8 flags: STMT_END_F
### INSERT INTO `d`.`t`
### SET
###   @1=3
###   @2='\xc3\xa9'
###   @3=2                   
#261206 23:10:21 server id 1  end_log_pos 1750 CRC32 0x2052f633 \tXid = 8
COMMIT/*!*/;
#261206 23:10:22 server id 1  end_log_pos 1792 CRC32 0x0510f3d3 \tGTID 0-1-6
/*!100001 SET @@session.server_id=1*//*!*/;
#261206 23:10:22 server id 1  end_log_pos 1900 CRC32 0x0510f3d4 \tQuery\tthread_id=5\texec_time=0\terror_code=0\txid=0
SET TIMESTAMP=1765062622/*!*/;
ALTER TABLE t ADD INDEX ia (k)
/*!*/;
#261206 23:10:22 server id 1  end_log_pos 1942 CRC32 0x0510f3d5 \tGTID 0-1-7 trans
START TRANSACTION
/*!*/;
### INSERT INTO `d`.`t`
### SET
###   @1=4
";

    #[test]
    fn groups_rows_images_and_ends_of_recorded_text() {
        let g = groups("mysql-bin.000001", RECORDED, &|t| t == "`d`.`t`");
        assert_eq!(g.len(), 3, "{g:?}");
        assert_eq!((g[0].gtid.as_str(), g[0].end.pos), ("0-1-4", 1308));
        let r = &g[0].rows[0];
        assert_eq!(r.table, "`d`.`t`");
        let b = r.before.as_ref().unwrap();
        assert_eq!(
            b,
            &vec![b"1".to_vec(), b"'a'b\\c'".to_vec(), b"0.1".to_vec()]
        );
        assert_eq!(r.after.as_ref().unwrap()[0], b"5");
        assert_eq!(g[1].end.pos, 1750);
        assert_eq!(g[1].rows.len(), 2, "the other table's row is not kept");
        assert!(g[1].rows[0].after.is_none() && g[1].rows[1].before.is_none());
        assert_eq!(
            g[1].rows[1].after.as_ref().unwrap()[1],
            b"'\xc3\xa9'",
            "raw bytes"
        );
        assert_eq!(
            (g[2].gtid.as_str(), g[2].end.pos, g[2].rows.len()),
            ("0-1-6", 1900, 0)
        );
    }

    #[test]
    fn a_commit_query_ends_a_transaction_and_positions_order_by_file() {
        let text = b"#261206 23:10:21 server id 1  end_log_pos 100 CRC32 0x1 \tGTID 0-1-9 trans
#261206 23:10:21 server id 1  end_log_pos 200 CRC32 0x2 \tQuery\tthread_id=5
SET TIMESTAMP=1/*!*/;
COMMIT
/*!*/;
";
        let g = groups("mysql-bin.000002", text, &|_| true);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].end.pos, 200);
        let a = Pos {
            file: "mysql-bin.000001".into(),
            pos: 900,
        };
        assert!(a < g[0].end);
    }
}
