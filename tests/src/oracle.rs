//! The exactly-once oracle (issue 34): reads the SOURCE's binlog and the TARGET's binlog,
//! both decoded by the server's own `mariadb-binlog --verbose` ([`parse`]), and checks,
//! per target transaction, that what the pipeline applied is exactly what the source did:
//!
//! - a page transaction (one that inserts T page credentials) inserts exactly
//!   `row_count` rows per credential, each equal to the source's row at that window's
//!   HIGH (the HIGH marker of the credential's attempt, found in the source's binlog), and
//!   no credential is inserted twice;
//! - a replay transaction (one that writes T's cursor) covers the source's changes of the
//!   table from the cursor's before-image (B for the first) to its after-image, counted in
//!   changes (group end plus sub-cursor `rows_done`); after it, every key those changes
//!   touched holds the changes' net effect (the last full image, or nothing) and no other
//!   key was touched. A re-application of an earlier change shows up as a key holding an
//!   older image or touched outside the range; a skipped change as a key not holding it;
//! - the cursor ranges of all replay transactions, counted per source change, cover every
//!   change after B exactly once (duplicates: more than once; skipped: never, before the
//!   last cursor);
//! - a transaction that writes the table without any T evidence is reported.
//!
//! The oracle keeps its own model of both tables from their whole binlog history (the
//! test marks both binlogs before the source table is created, the target table starts
//! empty), so it needs nothing from the product but the names of its T columns and
//! control markers, and it never reads L, the pages, the product's decoding or `verify`.
//! Key-partitioned replay (part cursors): each part transaction's touched keys hold the
//! net effect of its range (from its row's before image or the main cursor, whichever is
//! later), and every (change, key) is counted per transaction that applied it, part or
//! main (`keys_twice`: more than one); the main cursor's ranges still tile the changes
//! after B once (part 0 commits last, moving the main cursor only after every part).
mod collate;
mod judge;
pub mod parse;
mod source;

pub use collate::Collation;
use harness::Server;
use judge::fold_case;
use parse::{Group, Image, Pos, Value};
use source::Source;

use std::fmt;

/// Where a test's reading of one server's binlog starts (taken before the tables exist).
#[derive(Clone, Debug)]
pub struct Mark(pub Pos);

impl Mark {
    /// The server's binlog end now.
    pub fn now(server: &Server) -> Mark {
        let (file, pos) = server.binlog_end();
        Mark(Pos { file, pos })
    }
}

/// Every group of `server`'s binlog from `mark` to its end now, keeping the rows of the
/// tables `keep` accepts.
pub fn read(server: &Server, mark: &Mark, keep: &dyn Fn(&str) -> bool) -> Vec<Group> {
    let end = Mark::now(server).0;
    let files: Vec<String> = server
        .binlog_files()
        .into_iter()
        .filter(|f| *f >= mark.0.file && *f <= end.file)
        .collect();
    let mut out = Vec::new();
    for f in files {
        let start = if f == mark.0.file { mark.0.pos } else { 4 };
        let stop = (f == end.file).then_some(end.pos);
        out.extend(parse::groups(
            &f,
            &server.mariadb_binlog_bytes(&f, start, stop),
            keep,
        ));
    }
    out
}

/// 0-based indices of the columns of `db.table`'s key, in key order, as the server's
/// information_schema gives them: its PRIMARY KEY, else its first unique index (by name)
/// of NOT NULL columns (DESIGN §14's key of a table without one). Any such key identifies
/// a row, so the oracle's choice need not be the product's.
pub fn primary_key(server: &Server, db: &str, table: &str) -> Vec<usize> {
    let out = server.sql(&format!(
        "SELECT s.INDEX_NAME, c.ORDINAL_POSITION FROM information_schema.STATISTICS s \
         JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = s.TABLE_SCHEMA \
         AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME \
         WHERE s.TABLE_SCHEMA = '{db}' AND s.TABLE_NAME = '{table}' AND s.NON_UNIQUE = 0 \
         AND s.INDEX_NAME NOT IN (SELECT INDEX_NAME FROM information_schema.STATISTICS \
           WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = '{table}' AND NULLABLE = 'YES') \
         ORDER BY s.INDEX_NAME <> 'PRIMARY', s.INDEX_NAME, s.SEQ_IN_INDEX"
    ));
    let rows: Vec<(&str, usize)> = out
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(n, p)| (n, p.trim().parse::<usize>().unwrap() - 1))
        .collect();
    let first = rows.first().map(|r| r.0);
    let key: Vec<usize> = rows
        .iter()
        .filter(|r| Some(r.0) == first)
        .map(|r| r.1)
        .collect();
    assert!(
        !key.is_empty(),
        "{db}.{table} has no primary key nor a unique NOT NULL one"
    );
    key
}

/// What the oracle checks: one table of one job.
#[derive(Clone, Debug)]
pub struct Subject {
    pub sdb: String,
    pub tdb: String,
    pub table: String,
    /// The control schema of the source (its `intents` table holds B and HIGH).
    pub ctl: String,
    /// 0-based indices of the primary key's columns.
    pub key: Vec<usize>,
    pub job: u64,
    pub generation: u64,
    /// A log table on the target that triggers fill with `(key, op)` for every row
    /// operation on the table (`I`, `U`, `D`; `case::evidence::add_audit_triggers`). The
    /// server fires its update trigger for an upsert that changes nothing too, so every
    /// application of a change leaves a row in the target's binlog, also one that wrote
    /// the image the target already held: with it, applying a change twice is seen even
    /// where it changed nothing.
    pub applied: Option<String>,
}

impl Subject {
    fn src(&self) -> String {
        format!("`{}`.`{}`", self.sdb, self.table)
    }
    fn tgt(&self) -> String {
        format!("`{}`.`{}`", self.tdb, self.table)
    }
    fn t(&self, name: &str) -> String {
        format!("`{}`.`{name}`", self.tdb)
    }
    fn intents(&self) -> String {
        format!("`{}`.`{}`", self.ctl, kernel::control::TABLE)
    }
    fn key_of(&self, image: &Image) -> Key {
        self.key.iter().map(|i| image[*i].clone()).collect()
    }
    /// A T or control row of this job and generation (their first two columns).
    fn ours(&self, image: &Image) -> bool {
        num(&image[0]) == self.job && num(&image[1]) == self.generation
    }
}

type Key = Vec<Value>;

/// What the oracle found. [`Report::assert_exactly_once`] fails on any finding.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Changes of the table after B in the source's binlog.
    pub source_changes: usize,
    /// Page transactions and page credentials seen in the target's binlog.
    pub page_txns: usize,
    pub pages: usize,
    /// Main-cursor replay transactions, and part-cursor ones.
    pub cursor_txns: usize,
    pub part_txns: usize,
    /// Cursor transactions that ended inside a source group (a group larger than a
    /// replay transaction, applied in chunks under a sub-cursor).
    pub chunk_txns: usize,
    /// Source changes covered by more than one replay transaction.
    pub duplicates: usize,
    /// (Source change, key) pairs applied by more than one replay or part transaction:
    /// a re-application the cursor ranges cannot show, as of one key partition (part
    /// transactions) or with an audit log of an upsert that changed nothing.
    pub keys_twice: usize,
    /// Source changes before the last cursor covered by none.
    pub skipped: usize,
    /// Source changes after the last cursor (none once the replay caught up).
    pub unreached: usize,
    /// Everything else that is wrong, with the first examples.
    pub wrong: usize,
    pub examples: Vec<String>,
}

impl Report {
    fn finding(&mut self, what: String) {
        self.wrong += 1;
        if self.examples.len() < 12 {
            self.examples.push(what);
        }
    }

    /// Every change after B applied exactly once, the replay caught up with the source,
    /// every page as the source was at its HIGH, nothing written without evidence.
    pub fn assert_exactly_once(&self) {
        assert!(
            self.duplicates == 0
                && self.keys_twice == 0
                && self.skipped == 0
                && self.unreached == 0
                && self.wrong == 0,
            "exactly-once oracle: {self}"
        );
        assert!(self.pages > 0, "exactly-once oracle saw no page: {self}");
    }

    /// For a table that stopped at a point of the source's history (cancelled at K):
    /// every change after B up to the last cursor applied exactly once and none skipped,
    /// every page applied (there may be none) once and as the source was at its HIGH,
    /// nothing written without evidence; the changes after the last cursor
    /// ([`Report::unreached`]) and the number of pages are the caller's to judge.
    pub fn assert_exactly_once_until_stopped(&self) {
        assert!(
            self.duplicates == 0 && self.keys_twice == 0 && self.skipped == 0 && self.wrong == 0,
            "exactly-once oracle (stopped table): {self}"
        );
    }

    /// For a run that stopped after the windows: every page applied once and as the
    /// source was at its HIGH, nothing written without evidence (the replay not begun).
    pub fn assert_pages_exactly_once(&self) {
        assert!(
            self.duplicates == 0
                && self.keys_twice == 0
                && self.wrong == 0
                && self.cursor_txns == 0
                && self.pages > 0,
            "exactly-once oracle (pages): {self}"
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} source changes after B; {} pages in {} transactions; {} cursor ({} inside a \
             group) and {} part transactions; duplicates {}, keys twice {}, skipped {}, \
             unreached {}, wrong {}",
            self.source_changes,
            self.pages,
            self.page_txns,
            self.cursor_txns,
            self.chunk_txns,
            self.part_txns,
            self.duplicates,
            self.keys_twice,
            self.skipped,
            self.unreached,
            self.wrong
        )?;
        for e in &self.examples {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

/// Runs the oracle over both binlogs from their marks.
pub fn check(source: &Server, smark: &Mark, target: &Server, tmark: &Mark, s: &Subject) -> Report {
    check_groups(&read_source(source, smark, s), target, tmark, s)
}

/// The groups of `source`'s binlog from `mark` to its end now, with the rows the oracle
/// needs of `s` (its table and its control markers).
pub fn read_source(source: &Server, mark: &Mark, s: &Subject) -> Vec<Group> {
    let (src, intents) = (s.src(), s.intents());
    read(source, mark, &|t| t == src || t == intents)
}

/// Runs the oracle over the source's groups `sg` (as [`read_source`] or [`switched`]
/// gives them) and the target's binlog from its mark.
pub fn check_groups(sg: &[Group], target: &Server, tmark: &Mark, s: &Subject) -> Report {
    let tdb = format!("`{}`.", s.tdb);
    let tg = read(target, tmark, &|t| t.starts_with(&tdb));
    let mut keys = Collation::of(target, &s.tdb, &s.table, &s.key);
    judge::run(&Source::build(sg, s), &tg, s, &mut |k| keys.fold(k))
}

/// The source's history across a lineage switch at `gtid` (`backfill repoint`, DESIGN
/// §18): the old server's groups up to and including the one of `gtid`, then the new
/// server's groups after its own group of `gtid`. A replica with `log_slave_updates` logs
/// every transaction it applied under the primary's GTID, in commit order, at positions of
/// its own; so the two lists together are the table's history once, each group where its
/// server logged it. The new server's files are named in lineage epoch `epoch` (`N/file`),
/// as the positions of that lineage are written (`kernel::position`), so that a position
/// of one server never names a group of the other.
pub fn switched(old: Vec<Group>, new: Vec<Group>, gtid: &str, epoch: u32) -> Vec<Group> {
    let at = |gs: &[Group], what: &str| {
        gs.iter()
            .position(|g| g.gtid == gtid)
            .unwrap_or_else(|| panic!("no group of GTID {gtid} in the {what} server's binlog"))
    };
    let (cut, from) = (at(&old, "old"), at(&new, "new"));
    let mut out = old;
    out.truncate(cut + 1);
    out.extend(new.into_iter().skip(from + 1).map(|mut g| {
        g.end.file = format!("{epoch}/{}", g.end.file);
        g
    }));
    out
}

/// The oracle over parsed groups, keys folded by ASCII case and trailing spaces (pure:
/// unit-tested on recorded text).
pub fn judge(source: &[Group], target: &[Group], s: &Subject) -> Report {
    let mut fold = |keys: &[&Key]| keys.iter().map(|k| fold_case(k)).collect();
    judge::run(&Source::build(source, s), target, s, &mut fold)
}

/// A number as printed (`5`, or `-1 (18446744073709551615)` for a large unsigned value).
pub(crate) fn num(v: &[u8]) -> u64 {
    let s = String::from_utf8_lossy(v);
    let s = s.trim();
    match s.split_once(" (") {
        Some((_, u)) => u.trim_end_matches(')').parse().unwrap_or(u64::MAX),
        None => s.parse().unwrap_or_else(|_| panic!("not a number: {s}")),
    }
}

/// A string value as printed, without its quotes.
pub(crate) fn unquote(v: &[u8]) -> String {
    let s = String::from_utf8_lossy(v);
    s.trim_matches('\'').to_string()
}

pub(crate) fn show(values: &[Value]) -> String {
    let parts: Vec<String> = values
        .iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    format!("({})", parts.join(","))
}

#[cfg(test)]
mod tests;
