//! Pure parsers for what mysql_common does not decode (notes/mariadb.md): MariaDB GTID
//! (162) and GTID_LIST (163) events, the artificial ROTATE's file name, and the
//! classification of QUERY events and of the statements that name a captured table.
use crate::position::Gtid;

/// MariaDB event type numbers mysql_common does not know.
pub mod types {
    pub const ANNOTATE_ROWS: u8 = 160;
    pub const BINLOG_CHECKPOINT: u8 = 161;
    pub const MARIADB_GTID: u8 = 162;
    pub const GTID_LIST: u8 = 163;
    pub const START_ENCRYPTION: u8 = 164;
    pub const QUERY_COMPRESSED: u8 = 165;
    /// 166..=171: compressed rows events (v1 and v2).
    pub const FIRST_COMPRESSED_ROWS: u8 = 166;
    pub const LAST_COMPRESSED_ROWS: u8 = 171;
}

/// MariaDB GTID event flags.
pub mod gtid_flags {
    pub const STANDALONE: u8 = 1;
    pub const GROUP_COMMIT_ID: u8 = 2;
    pub const PREPARED_XA: u8 = 64;
    pub const COMPLETED_XA: u8 = 128;
}

/// A parsed MariaDB GTID event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MariadbGtid {
    pub gtid: Gtid,
    pub flags: u8,
    /// The xid of an XA group (PREPARED_XA or COMPLETED_XA), rendered as the server
    /// logs it in XA statements ([`xid_text`]).
    pub xid: Option<String>,
}

impl MariadbGtid {
    /// True when the group is one statement with no XID (DDL).
    pub fn standalone(&self) -> bool {
        self.flags & gtid_flags::STANDALONE != 0
    }

    /// True for the group of an `XA PREPARE` (its `XA START` is in this event).
    pub fn prepared_xa(&self) -> bool {
        self.flags & gtid_flags::PREPARED_XA != 0
    }
}

/// An xid as the server writes it in XA statements: `X'gtrid',X'bqual',formatID`, hex in
/// lower case.
pub fn xid_text(format_id: i32, gtrid: &[u8], bqual: &[u8]) -> String {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!("X'{}',X'{}',{format_id}", hex(gtrid), hex(bqual))
}

/// Parses a MariaDB GTID event body: seq u64 LE, domain u32 LE, flags u8 (server id comes
/// from the event header); with GROUP_COMMIT_ID a commit id u64; with PREPARED_XA or
/// COMPLETED_XA the xid: formatID i32 LE, gtrid length u8, bqual length u8, the bytes.
pub fn parse_mariadb_gtid(data: &[u8], server_id: u32) -> Option<MariadbGtid> {
    let seq = u64::from_le_bytes(data.get(0..8)?.try_into().ok()?);
    let domain = u32::from_le_bytes(data.get(8..12)?.try_into().ok()?);
    let flags = *data.get(12)?;
    let mut at = 13;
    if flags & gtid_flags::GROUP_COMMIT_ID != 0 {
        at += 8;
    }
    let xid = if flags & (gtid_flags::PREPARED_XA | gtid_flags::COMPLETED_XA) != 0 {
        let format_id = i32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?);
        let g = usize::from(*data.get(at + 4)?);
        let b = usize::from(*data.get(at + 5)?);
        let bytes = data.get(at + 6..at + 6 + g + b)?;
        Some(xid_text(format_id, &bytes[..g], &bytes[g..]))
    } else {
        None
    };
    Some(MariadbGtid {
        xid,
        gtid: Gtid::Mariadb {
            domain,
            server: server_id,
            seq,
        },
        flags,
    })
}

/// Parses a MariaDB GTID_LIST event body: count u32 (low 28 bits), then count x (domain
/// u32, server u32, seq u64).
pub fn parse_gtid_list(data: &[u8]) -> Option<Vec<Gtid>> {
    let count = u32::from_le_bytes(data.get(0..4)?.try_into().ok()?) & 0x0fff_ffff;
    let mut out = Vec::with_capacity(count.min(1024) as usize);
    for i in 0..count as usize {
        let b = data.get(4 + i * 16..4 + (i + 1) * 16)?;
        out.push(Gtid::Mariadb {
            domain: u32::from_le_bytes(b[0..4].try_into().ok()?),
            server: u32::from_le_bytes(b[4..8].try_into().ok()?),
            seq: u64::from_le_bytes(b[8..16].try_into().ok()?),
        });
    }
    Some(out)
}

/// The file name of an artificial ROTATE read before the format description event: its
/// last 4 bytes are the event's CRC32, which the stream reader could not strip yet.
pub fn fake_rotate_name(raw: &[u8], checksum_pending: bool) -> String {
    let looks_like_file = |b: &[u8]| {
        !b.is_empty()
            && b.iter().all(|c| c.is_ascii_graphic())
            && b.last().is_some_and(u8::is_ascii_digit)
    };
    if checksum_pending && raw.len() > 4 && looks_like_file(&raw[..raw.len() - 4]) {
        return String::from_utf8_lossy(&raw[..raw.len() - 4]).into_owned();
    }
    String::from_utf8_lossy(raw).into_owned()
}

/// What a QUERY event means for grouping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryKind {
    Begin,
    Commit,
    Rollback,
    /// SAVEPOINT / ROLLBACK TO: inside a transaction, no effect on rows events.
    Savepoint,
    /// `XA START xid`: opens an XA transaction (its group is held if it is prepared).
    XaStart,
    /// `XA COMMIT xid`: ends a prepared transaction (its own group), or, with ONE PHASE
    /// (MySQL), the XA transaction it closes.
    XaCommit,
    /// `XA ROLLBACK xid` of a prepared transaction (its own group).
    XaRollback,
    /// XA END (and any other XA statement) inside an XA transaction.
    XaInner,
    /// DML logged as a statement (STATEMENT or MIXED format).
    Dml,
    /// `CREATE ... IF NOT EXISTS`: cannot change an existing table (install logs one for
    /// the control table every time).
    CreateIfNotExists,
    /// Anything else: DDL, TRUNCATE, RENAME, GRANT...
    Ddl,
}

fn first_words(sql: &str, n: usize) -> Vec<String> {
    let mut s = sql.trim_start();
    // Skip leading comments.
    loop {
        if let Some(rest) = s.strip_prefix("/*") {
            match rest.find("*/") {
                Some(i) => s = rest[i + 2..].trim_start(),
                None => return Vec::new(),
            }
        } else if s.starts_with("--") || s.starts_with('#') {
            match s.find('\n') {
                Some(i) => s = s[i + 1..].trim_start(),
                None => return Vec::new(),
            }
        } else {
            break;
        }
    }
    s.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .take(n)
        .map(|w| w.to_ascii_uppercase())
        .collect()
}

/// Classifies a QUERY event's text.
pub fn classify_query(sql: &str) -> QueryKind {
    let w = first_words(sql, 2);
    let w0 = w.first().map(String::as_str).unwrap_or("");
    let w1 = w.get(1).map(String::as_str).unwrap_or("");
    match (w0, w1) {
        ("BEGIN", _) | ("START", "TRANSACTION") => QueryKind::Begin,
        ("COMMIT", _) => QueryKind::Commit,
        ("ROLLBACK", "TO") | ("SAVEPOINT", _) | ("RELEASE", _) => QueryKind::Savepoint,
        ("ROLLBACK", _) => QueryKind::Rollback,
        ("XA", "START") | ("XA", "BEGIN") => QueryKind::XaStart,
        ("XA", "COMMIT") => QueryKind::XaCommit,
        ("XA", "ROLLBACK") => QueryKind::XaRollback,
        ("XA", _) => QueryKind::XaInner,
        ("INSERT", _) | ("UPDATE", _) | ("DELETE", _) | ("REPLACE", _) | ("LOAD", _) => {
            QueryKind::Dml
        }
        ("CREATE", _) if is_create_if_not_exists(sql) => QueryKind::CreateIfNotExists,
        _ => QueryKind::Ddl,
    }
}

/// The xid of an `XA START|COMMIT|ROLLBACK xid [ONE PHASE]` statement as the server logs
/// it (`X'7831',X'',1`), without blanks, so that the XA START of a prepared group and
/// the later XA COMMIT/ROLLBACK give the same key. None when the text has no xid.
pub fn xa_xid(sql: &str) -> Option<String> {
    let s = sql.trim_start();
    let rest = s.get(2..)?.trim_start();
    let verb_end = rest.find(|c: char| c.is_whitespace())?;
    let mut xid = rest[verb_end..].trim();
    let upper = xid.to_ascii_uppercase();
    if upper.ends_with("ONE PHASE") {
        xid = xid[..xid.len() - "ONE PHASE".len()].trim_end();
    }
    let key: String = xid
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| {
            if c.is_ascii_hexdigit() {
                c.to_ascii_lowercase()
            } else {
                c
            }
        })
        .collect();
    (!key.is_empty()).then_some(key)
}

/// Parses an XA_PREPARE event body (MariaDB and MySQL): one_phase u8, formatID i32 LE,
/// gtrid length u32 LE, bqual length u32 LE, the bytes. Returns (one_phase, xid as the
/// server writes it). MySQL logs `XA COMMIT xid ONE PHASE` as an XA group closed by this
/// event with one_phase set; MariaDB logs it as an ordinary transaction.
pub fn parse_xa_prepare(data: &[u8]) -> Option<(bool, String)> {
    let one_phase = *data.first()? != 0;
    let format_id = i32::from_le_bytes(data.get(1..5)?.try_into().ok()?);
    let g = u32::from_le_bytes(data.get(5..9)?.try_into().ok()?) as usize;
    let b = u32::from_le_bytes(data.get(9..13)?.try_into().ok()?) as usize;
    if g > 64 || b > 64 {
        return None;
    }
    let bytes = data.get(13..13 + g + b)?;
    Some((one_phase, xid_text(format_id, &bytes[..g], &bytes[g..])))
}

/// True for `XA COMMIT xid ONE PHASE` (MySQL logs a one-phase XA transaction so).
pub fn xa_one_phase(sql: &str) -> bool {
    let w = first_words(sql, 16);
    w.len() >= 2 && w[w.len() - 2] == "ONE" && w[w.len() - 1] == "PHASE"
}

fn is_create_if_not_exists(sql: &str) -> bool {
    let w = first_words(sql, 8);
    // CREATE [TEMPORARY] TABLE|DATABASE|SCHEMA IF NOT EXISTS, without OR REPLACE / SELECT.
    let head = w
        .iter()
        .skip(1)
        .take(5)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    (head.starts_with("TABLE IF NOT EXISTS")
        || head.starts_with("TEMPORARY TABLE IF NOT EXISTS")
        || head.starts_with("DATABASE IF NOT EXISTS")
        || head.starts_with("SCHEMA IF NOT EXISTS"))
        && !identifiers(sql)
            .iter()
            .any(|i| i.eq_ignore_ascii_case("select"))
}

/// Identifier tokens of a statement: backquoted names unquoted, bare words as written,
/// string literals skipped.
pub fn identifiers(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' => {
                let mut name = String::new();
                while let Some(d) = chars.next() {
                    if d == '`' {
                        if chars.peek() == Some(&'`') {
                            chars.next();
                            name.push('`');
                        } else {
                            break;
                        }
                    } else {
                        name.push(d);
                    }
                }
                out.push(name);
            }
            '\'' | '"' => {
                let q = c;
                while let Some(d) = chars.next() {
                    if d == '\\' {
                        chars.next();
                    } else if d == q {
                        if chars.peek() == Some(&q) {
                            chars.next();
                        } else {
                            break;
                        }
                    }
                }
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                let mut name = String::from(c);
                while let Some(&d) = chars.peek() {
                    if d.is_alphanumeric() || d == '_' || d == '$' {
                        name.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(name);
            }
            _ => {}
        }
    }
    out
}

/// True when `sql` (run with default schema `default_schema`) may name `schema`.`table`.
/// Conservative: a false positive pauses a table (safe), a false negative would not be.
pub fn names_table(sql: &str, default_schema: &str, schema: &str, table: &str) -> bool {
    let ids = identifiers(sql);
    let has = |n: &str| ids.iter().any(|i| i.eq_ignore_ascii_case(n));
    has(table) && (default_schema.eq_ignore_ascii_case(schema) || has(schema))
}

/// True when the DDL statement `sql` may change `schema`.`table`: its target objects are
/// parsed for the common statement shapes (ALTER/CREATE/DROP TABLE, INDEX, VIEW, TRIGGER,
/// TRUNCATE, DROP DATABASE...), so `CREATE TABLE x LIKE t` or a view selecting from `t`
/// does not pause `t`. A shape it does not know falls back to [`names_table`] (any
/// mention), erring towards pausing. Names compare without case, like `names_table`.
pub fn ddl_changes_table(sql: &str, default_schema: &str, schema: &str, table: &str) -> bool {
    match ddl_targets(sql, default_schema) {
        Some(targets) => targets.iter().any(|t| match t {
            Target::Table(s, n) => s.eq_ignore_ascii_case(schema) && n.eq_ignore_ascii_case(table),
            Target::Schema(s) => s.eq_ignore_ascii_case(schema),
        }),
        None => names_table(sql, default_schema, schema, table),
    }
}

/// An object a DDL statement changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Table(String, String),
    /// Every table of a schema (DROP DATABASE).
    Schema(String),
}

/// A token of a statement: comments and string literals are dropped; the body of an
/// executable comment (`/*! ... */`, `/*M!nnnnn ... */`) is kept as code.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    Quoted(String),
    Punct(char),
}

fn tokens(sql: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let exec = chars.peek() == Some(&'!') || chars.peek() == Some(&'M');
                if exec {
                    // `/*!50100 code */` or `/*M!100100 code */`: keep the code.
                    while chars
                        .peek()
                        .is_some_and(|d| *d == 'M' || *d == '!' || d.is_ascii_digit())
                    {
                        chars.next();
                    }
                } else {
                    let mut prev = ' ';
                    for d in chars.by_ref() {
                        if prev == '*' && d == '/' {
                            break;
                        }
                        prev = d;
                    }
                }
            }
            '*' if chars.peek() == Some(&'/') => {
                chars.next(); // the end of an executable comment
            }
            '#' => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            '`' => {
                let mut name = String::new();
                while let Some(d) = chars.next() {
                    if d == '`' {
                        if chars.peek() == Some(&'`') {
                            chars.next();
                            name.push('`');
                        } else {
                            break;
                        }
                    } else {
                        name.push(d);
                    }
                }
                out.push(Tok::Quoted(name));
            }
            '\'' | '"' => {
                while let Some(d) = chars.next() {
                    if d == '\\' {
                        chars.next();
                    } else if d == c {
                        if chars.peek() == Some(&c) {
                            chars.next();
                        } else {
                            break;
                        }
                    }
                }
                out.push(Tok::Punct('\''));
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                let mut w = String::from(c);
                while let Some(&d) = chars.peek() {
                    if d.is_alphanumeric() || d == '_' || d == '$' {
                        w.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Tok::Word(w));
            }
            c if c.is_whitespace() => {}
            c => out.push(Tok::Punct(c)),
        }
    }
    out
}

struct Toks<'a> {
    t: &'a [Tok],
    i: usize,
    default: &'a str,
}

impl Toks<'_> {
    fn is(&self, k: &str) -> bool {
        matches!(self.t.get(self.i), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(k))
    }

    fn eat(&mut self, k: &str) -> bool {
        let yes = self.is(k);
        if yes {
            self.i += 1;
        }
        yes
    }

    fn eat_all(&mut self, ks: &[&str]) {
        while ks.iter().any(|k| self.eat(k)) {}
    }

    fn punct(&mut self, c: char) -> bool {
        let yes = self.t.get(self.i) == Some(&Tok::Punct(c));
        if yes {
            self.i += 1;
        }
        yes
    }

    fn ident(&mut self) -> Option<String> {
        let s = match self.t.get(self.i)? {
            Tok::Word(w) | Tok::Quoted(w) => w.clone(),
            Tok::Punct(_) => return None,
        };
        self.i += 1;
        Some(s)
    }

    /// `name` or `schema.name`.
    fn name(&mut self) -> Option<Target> {
        let first = self.ident()?;
        if self.punct('.') {
            let second = self.ident()?;
            return Some(Target::Table(first, second));
        }
        Some(Target::Table(self.default.to_string(), first))
    }

    fn names(&mut self) -> Option<Vec<Target>> {
        let mut out = vec![self.name()?];
        while self.punct(',') {
            out.push(self.name()?);
        }
        Some(out)
    }

    fn if_exists(&mut self) {
        if self.is("IF") {
            self.i += 1;
            self.eat("NOT");
            self.eat("EXISTS");
        }
    }

    /// Skips to the first of `objects` before any `(` (attributes such as `DEFINER=...`,
    /// `ALGORITHM=...`, `OR REPLACE`); returns it upper-cased.
    fn object(&mut self, objects: &[&str]) -> Option<String> {
        while self.i < self.t.len() && self.i < 24 {
            if let Some(k) = objects.iter().find(|k| self.is(k)) {
                self.i += 1;
                return Some(k.to_string());
            }
            if self.t.get(self.i) == Some(&Tok::Punct('(')) {
                return None;
            }
            self.i += 1;
        }
        None
    }

    fn any(&self, k: &str) -> bool {
        self.t
            .iter()
            .any(|t| matches!(t, Tok::Word(w) if w.eq_ignore_ascii_case(k)))
    }
}

const NO_TABLE: &[&str] = &[
    "DATABASE",
    "SCHEMA",
    "FUNCTION",
    "PROCEDURE",
    "EVENT",
    "USER",
    "ROLE",
    "SERVER",
    "PACKAGE",
];

/// The objects a DDL statement changes, or None for a shape not recognised here.
pub fn ddl_targets(sql: &str, default_schema: &str) -> Option<Vec<Target>> {
    let t = tokens(sql);
    let mut k = Toks {
        t: &t,
        i: 0,
        default: default_schema,
    };
    let verb = k.ident()?.to_ascii_uppercase();
    match verb.as_str() {
        "ALTER" => alter(&mut k),
        "CREATE" => create(&mut k),
        "DROP" => drop(&mut k),
        "TRUNCATE" => {
            k.eat("TABLE");
            Some(vec![k.name()?])
        }
        "GRANT" | "REVOKE" | "ANALYZE" | "OPTIMIZE" | "REPAIR" | "CHECKSUM" => Some(Vec::new()),
        _ => None,
    }
}

fn alter(k: &mut Toks<'_>) -> Option<Vec<Target>> {
    let objects = ["TABLE", "VIEW", "SEQUENCE"];
    let all: Vec<&str> = objects.iter().chain(NO_TABLE).copied().collect();
    match k.object(&all)?.as_str() {
        "TABLE" => {
            k.if_exists();
            let target = k.name()?;
            // EXCHANGE PARTITION ... WITH TABLE t and RENAME [TO] t change another table
            // too: any mention counts.
            if k.any("EXCHANGE") || k.any("RENAME") || k.any("CONVERT") {
                return None;
            }
            Some(vec![target])
        }
        "VIEW" | "SEQUENCE" => {
            k.if_exists();
            Some(vec![k.name()?])
        }
        _ => Some(Vec::new()),
    }
}

fn create(k: &mut Toks<'_>) -> Option<Vec<Target>> {
    let objects = ["TABLE", "INDEX", "VIEW", "SEQUENCE", "TRIGGER"];
    let all: Vec<&str> = objects.iter().chain(NO_TABLE).copied().collect();
    match k.object(&all)?.as_str() {
        // The new table only: LIKE t and AS SELECT ... FROM t read t, they do not change it.
        "TABLE" | "VIEW" | "SEQUENCE" => {
            k.if_exists();
            Some(vec![k.name()?])
        }
        "INDEX" => {
            k.if_exists();
            k.ident()?;
            k.eat("ON").then_some(())?;
            Some(vec![k.name()?])
        }
        "TRIGGER" => {
            k.if_exists();
            k.name()?;
            k.object(&["ON"])?;
            Some(vec![k.name()?])
        }
        _ => Some(Vec::new()),
    }
}

fn drop(k: &mut Toks<'_>) -> Option<Vec<Target>> {
    let objects = ["TABLE", "TABLES", "INDEX", "VIEW", "SEQUENCE"];
    let schema = ["DATABASE", "SCHEMA"];
    let all: Vec<&str> = objects
        .iter()
        .chain(&schema)
        .chain(NO_TABLE)
        .copied()
        .collect();
    match k.object(&all)?.as_str() {
        "TABLE" | "TABLES" | "VIEW" | "SEQUENCE" => {
            k.if_exists();
            k.eat_all(&["NOWAIT"]);
            k.names()
        }
        "INDEX" => {
            k.if_exists();
            k.ident()?;
            k.eat("ON").then_some(())?;
            Some(vec![k.name()?])
        }
        "DATABASE" | "SCHEMA" => {
            k.if_exists();
            Some(vec![Target::Schema(k.ident()?)])
        }
        _ => Some(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mariadb_gtid_bytes() {
        let mut data = 42u64.to_le_bytes().to_vec();
        data.extend(0u32.to_le_bytes());
        data.push(gtid_flags::STANDALONE);
        let g = parse_mariadb_gtid(&data, 7).expect("parses");
        assert_eq!(g.gtid.to_string(), "0-7-42");
        assert!(g.standalone());
        assert_eq!(g.xid, None);
        assert_eq!(parse_mariadb_gtid(&data[..12], 7), None);
        // An XA PREPARE group's GTID as MariaDB 10.11 logs it (XA START 'zz','Q').
        let mut xa = 11u64.to_le_bytes().to_vec();
        xa.extend(0u32.to_le_bytes());
        xa.push(gtid_flags::PREPARED_XA);
        xa.extend(1i32.to_le_bytes());
        xa.extend([2, 1, b'z', b'z', b'Q']);
        let g = parse_mariadb_gtid(&xa, 1).expect("parses");
        assert!(g.prepared_xa());
        assert_eq!(g.xid.as_deref(), Some("X'7a7a',X'51',1"));
        assert_eq!(xa_xid("XA COMMIT X'7A7A',X'51',1"), g.xid);
        assert_eq!(parse_mariadb_gtid(&xa[..xa.len() - 1], 1), None);
    }

    #[test]
    fn gtid_list_bytes() {
        let mut data = 2u32.to_le_bytes().to_vec();
        for (d, s, n) in [(0u32, 1u32, 9u64), (3, 2, 1)] {
            data.extend(d.to_le_bytes());
            data.extend(s.to_le_bytes());
            data.extend(n.to_le_bytes());
        }
        let l = parse_gtid_list(&data).expect("parses");
        let names: Vec<String> = l.iter().map(|g| g.to_string()).collect();
        assert_eq!(names, ["0-1-9", "3-2-1"]);
        assert_eq!(parse_gtid_list(&data[..20]), None);
    }

    #[test]
    fn fake_rotate_crc_is_stripped() {
        let mut raw = b"mysql-bin.000003".to_vec();
        raw.extend([0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(fake_rotate_name(&raw, true), "mysql-bin.000003");
        assert_eq!(
            fake_rotate_name(b"mysql-bin.000003", false),
            "mysql-bin.000003"
        );
    }

    #[test]
    fn queries_classify() {
        assert_eq!(classify_query("BEGIN"), QueryKind::Begin);
        assert_eq!(classify_query("COMMIT"), QueryKind::Commit);
        assert_eq!(
            classify_query("ROLLBACK TO SAVEPOINT a"),
            QueryKind::Savepoint
        );
        assert_eq!(classify_query("XA COMMIT 'x'"), QueryKind::XaCommit);
        assert_eq!(
            classify_query("XA ROLLBACK X'78',X'',1"),
            QueryKind::XaRollback
        );
        assert_eq!(classify_query("XA START X'78',X'',1"), QueryKind::XaStart);
        assert_eq!(classify_query("XA END X'78',X'',1"), QueryKind::XaInner);
        assert_eq!(
            classify_query("/* c */ insert into t values (1)"),
            QueryKind::Dml
        );
        assert_eq!(classify_query("ALTER TABLE t ADD c INT"), QueryKind::Ddl);
        assert_eq!(classify_query("TRUNCATE t"), QueryKind::Ddl);
        assert_eq!(
            classify_query("CREATE TABLE IF NOT EXISTS `c`.`intents` (id INT)"),
            QueryKind::CreateIfNotExists
        );
        assert_eq!(
            classify_query("CREATE TABLE IF NOT EXISTS x SELECT * FROM t"),
            QueryKind::Ddl
        );
        assert_eq!(
            classify_query("CREATE OR REPLACE TABLE t (a INT)"),
            QueryKind::Ddl
        );
    }

    #[test]
    fn xa_xids_match_between_start_and_end() {
        // As MariaDB 10.11 logs them (mariadb-binlog --verbose).
        let start = xa_xid("XA START X'7834',X'6271',7").unwrap();
        assert_eq!(start, "X'7834',X'6271',7");
        assert_eq!(xa_xid("XA COMMIT X'7834',X'6271',7").unwrap(), start);
        assert_eq!(xa_xid("XA ROLLBACK  X'7834', X'6271', 7").unwrap(), start);
        assert_eq!(
            xa_xid("XA COMMIT X'7834',X'6271',7 ONE PHASE").unwrap(),
            start
        );
        assert!(xa_one_phase("XA COMMIT X'7834',X'6271',7 ONE PHASE"));
        assert!(!xa_one_phase("XA COMMIT X'7834',X'6271',7"));
        assert_eq!(xa_xid("XA COMMIT"), None);
        // XA PREPARE X'7a7a',X'51',1 as MariaDB 10.11 logs it (mariadb-binlog --hexdump).
        let prepare = [0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, b'z', b'z', b'Q'];
        let (one, xid) = parse_xa_prepare(&prepare).unwrap();
        assert!(!one);
        assert_eq!(xid, "X'7a7a',X'51',1");
        let mut one_phase = prepare;
        one_phase[0] = 1;
        assert_eq!(parse_xa_prepare(&one_phase).map(|p| p.0), Some(true));
        assert_eq!(parse_xa_prepare(&prepare[..15]), None);
    }

    #[test]
    fn ddl_targets_are_the_changed_objects_only() {
        let c = |sql: &str| ddl_changes_table(sql, "db", "db", "t");
        // Changes t.
        for sql in [
            "ALTER TABLE t ADD c INT",
            "alter online ignore table `db`.`t` add c int",
            "ALTER TABLE /* x */ t DROP COLUMN c",
            "/*!40000 ALTER TABLE `t` DISABLE KEYS */",
            "TRUNCATE t",
            "TRUNCATE TABLE db.t",
            "DROP TABLE IF EXISTS a, `db`.`t` /* generated by server */",
            "DROP TEMPORARY TABLE t",
            "CREATE OR REPLACE TABLE t (a INT)",
            "CREATE UNIQUE INDEX i ON t (c)",
            "DROP INDEX i ON db.t",
            "DROP DATABASE db",
            "DROP SCHEMA IF EXISTS `db`",
            "CREATE DEFINER=`root`@`localhost` TRIGGER trg BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1",
            "RENAME TABLE t TO t_old",
            "RENAME TABLE x TO t",
            "ALTER TABLE x EXCHANGE PARTITION p WITH TABLE t",
            "ALTER TABLE x RENAME TO t",
            "SOMETHING NEW ON t",
        ] {
            assert!(c(sql), "{sql}");
        }
        // Mentions t without changing it.
        for sql in [
            "CREATE TABLE x LIKE t",
            "CREATE TABLE x AS SELECT * FROM t",
            "CREATE TABLE `x` (t INT, FOREIGN KEY (t) REFERENCES t (id))",
            "CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW `v` AS select `t`.`id` AS `id` from `t`",
            "CREATE OR REPLACE VIEW v AS SELECT * FROM t",
            "ALTER TABLE t2 ADD FOREIGN KEY (a) REFERENCES t (id)",
            "ALTER TABLE x ADD COLUMN t INT",
            "ALTER TABLE other.t ADD c INT",
            "DROP TABLE t2, other.t",
            "DROP INDEX t ON x",
            "CREATE INDEX t ON x (c)",
            "DROP DATABASE other",
            "DROP VIEW IF EXISTS v_t",
            "GRANT SELECT ON db.t TO u",
            "ANALYZE TABLE t",
            "ALTER DATABASE db CHARACTER SET utf8mb4",
            "CREATE DEFINER=`root`@`localhost` PROCEDURE p() SELECT * FROM t",
        ] {
            assert!(!c(sql), "{sql}");
        }
    }

    #[test]
    fn table_names_in_statements() {
        assert!(names_table("ALTER TABLE `t` ADD c INT", "db", "db", "t"));
        assert!(names_table(
            "alter table db.t add c int",
            "other",
            "db",
            "t"
        ));
        assert!(!names_table("ALTER TABLE t2 ADD c INT", "db", "db", "t"));
        assert!(!names_table(
            "ALTER TABLE x.t ADD c INT",
            "other",
            "db",
            "t"
        ));
        assert!(!names_table("INSERT INTO u VALUES ('t')", "db", "db", "t"));
        assert!(names_table(
            "RENAME TABLE `db`.`t` TO `db`.`t_old`",
            "",
            "db",
            "t"
        ));
        assert_eq!(identifiers("`a``b` 'x\\'y' c"), ["a`b", "c"]);
    }
}
