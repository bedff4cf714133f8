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
//! Key-partitioned replay (part cursors) is checked per transaction only (each part's
//! touched keys hold the net effect of its range); coverage needs the main cursor.
pub mod parse;

use harness::Server;
use parse::{Group, Image, Pos, RowChange, Value};
use std::collections::{BTreeMap, BTreeSet};
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
            self.duplicates == 0 && self.skipped == 0 && self.unreached == 0 && self.wrong == 0,
            "exactly-once oracle: {self}"
        );
        assert!(self.pages > 0, "exactly-once oracle saw no page: {self}");
    }

    /// For a run that stopped after the windows: every page applied once and as the
    /// source was at its HIGH, nothing written without evidence (the replay not begun).
    pub fn assert_pages_exactly_once(&self) {
        assert!(
            self.duplicates == 0 && self.wrong == 0 && self.cursor_txns == 0 && self.pages > 0,
            "exactly-once oracle (pages): {self}"
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} source changes after B; {} pages in {} transactions; {} cursor ({} inside a \
             group) and {} part transactions; duplicates {}, skipped {}, unreached {}, wrong {}",
            self.source_changes,
            self.pages,
            self.page_txns,
            self.cursor_txns,
            self.chunk_txns,
            self.part_txns,
            self.duplicates,
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

/// The source's history of the table: every change in order, the markers of the job.
struct Source {
    /// (group end, key before, key after, after image) of every change, in order.
    changes: Vec<Change>,
    /// Index of the first change of each group end that has changes, and their count.
    groups: BTreeMap<Pos, (usize, usize)>,
    /// Per key, (change index, image or None) of its history.
    history: BTreeMap<Key, Vec<(usize, Option<Image>)>>,
    /// Changes before B, and before each (window, attempt)'s HIGH.
    b: Option<usize>,
    highs: BTreeMap<(u64, u64), usize>,
}

struct Change {
    before: Option<Key>,
    after: Option<(Key, Image)>,
}

impl Source {
    fn build(groups: &[Group], s: &Subject) -> Source {
        let (src, intents) = (s.src(), s.intents());
        let mut me = Source {
            changes: Vec::new(),
            groups: BTreeMap::new(),
            history: BTreeMap::new(),
            b: None,
            highs: BTreeMap::new(),
        };
        for g in groups {
            let first = me.changes.len();
            for r in &g.rows {
                if r.table == src {
                    me.push(s, r);
                } else if r.table == intents {
                    me.marker(s, r);
                }
            }
            if me.changes.len() > first {
                me.groups
                    .insert(g.end.clone(), (first, me.changes.len() - first));
            }
        }
        me
    }

    fn push(&mut self, s: &Subject, r: &RowChange) {
        let i = self.changes.len();
        let before = r.before.as_ref().map(|b| s.key_of(b));
        let after = r.after.as_ref().map(|a| (s.key_of(a), a.clone()));
        if let Some(b) = &before {
            if after.as_ref().map(|(k, _)| k) != Some(b) {
                self.history.entry(b.clone()).or_default().push((i, None));
            }
        }
        if let Some((k, a)) = &after {
            self.history
                .entry(k.clone())
                .or_default()
                .push((i, Some(a.clone())));
        }
        self.changes.push(Change { before, after });
    }

    fn marker(&mut self, s: &Subject, r: &RowChange) {
        let Some(a) = &r.after else { return };
        if r.before.is_some() || !s.ours(&a[1..].to_vec()) {
            return;
        }
        match unquote(&a[3]).as_str() {
            "B" => self.b = Some(self.changes.len()),
            "HIGH" => {
                let at = (num(&a[4]), num(&a[5]));
                self.highs.insert(at, self.changes.len());
            }
            _ => {}
        }
    }

    /// The key's image after the first `n` changes.
    fn state_after(&self, key: &Key, n: usize) -> Option<&Image> {
        let h = self.history.get(key)?;
        let i = h.partition_point(|(c, _)| *c < n);
        i.checked_sub(1).and_then(|i| h[i].1.as_ref())
    }

    /// Changes a cursor (group end, rows_done) says are applied.
    fn point(&self, end: &Pos, rows_done: u64) -> Option<usize> {
        let (first, len) = self.groups.get(end)?;
        Some(
            first
                + if rows_done == 0 {
                    *len
                } else {
                    rows_done as usize
                },
        )
    }

    /// The net effect of changes [from, to) per key: the last image, or None (deleted).
    fn net(&self, from: usize, to: usize) -> BTreeMap<Key, Option<Image>> {
        let mut net = BTreeMap::new();
        for c in &self.changes[from..to] {
            if let Some(b) = &c.before {
                net.insert(b.clone(), None);
            }
            if let Some((k, a)) = &c.after {
                net.insert(k.clone(), Some(a.clone()));
            }
        }
        net
    }
}

/// A T cursor as the target's binlog shows it: (group end, rows_done).
type Cursor = (Pos, u64);

/// Runs the oracle over both binlogs from their marks.
pub fn check(source: &Server, smark: &Mark, target: &Server, tmark: &Mark, s: &Subject) -> Report {
    let (src, intents) = (s.src(), s.intents());
    let sg = read(source, smark, &|t| t == src || t == intents);
    let tdb = format!("`{}`.", s.tdb);
    let tg = read(target, tmark, &|t| t.starts_with(&tdb));
    judge(&sg, &tg, s)
}

/// The oracle over parsed groups (pure: unit-tested on recorded text).
pub fn judge(source: &[Group], target: &[Group], s: &Subject) -> Report {
    let src = Source::build(source, s);
    let mut rep = Report::default();
    let Some(b) = src.b else {
        rep.finding("no B marker of the job in the source's binlog".into());
        return rep;
    };
    rep.source_changes = src.changes.len() - b;
    let mut j = Judge {
        s,
        src: &src,
        state: BTreeMap::new(),
        covered: vec![0; src.changes.len()],
        last: None,
        credentials: BTreeSet::new(),
        b,
        log: Vec::new(),
        replaced: BTreeMap::new(),
        rep,
    };
    for g in target {
        j.group(g);
    }
    j.finish()
}

struct Judge<'a> {
    s: &'a Subject,
    src: &'a Source,
    /// The target table as its binlog built it.
    state: BTreeMap<Key, Image>,
    /// Per source change, how many replay transactions covered it.
    covered: Vec<u32>,
    /// The main cursor's last after-image, as a change count.
    last: Option<usize>,
    credentials: BTreeSet<(u64, u64)>,
    b: usize,
    /// The current transaction's trigger log: (key, op) per row operation.
    log: Vec<(Key, u8)>,
    /// The current transaction's in-place updates whose key bytes changed, before key ->
    /// after key: an upsert the server matched to a row whose key is equal under the key's
    /// collation but not in bytes (`_ci`: 'gg0' and 'GG0'; the replay of an older image over
    /// a newer baseline does it). The product never updates a key otherwise (a key change
    /// is a delete and an upsert), so the old bytes count as the new key's.
    replaced: BTreeMap<Key, Key>,
    rep: Report,
}

impl Judge<'_> {
    fn group(&mut self, g: &Group) {
        let (tgt, pages) = (self.s.tgt(), self.s.t(ledger::target::PAGES));
        let (cursor, parts) = (
            self.s.t(ledger::target::CURSOR),
            self.s.t(ledger::target::CURSOR_PARTS),
        );
        let ours = |r: &&RowChange| r.after.as_ref().is_some_and(|a| self.s.ours(a));
        let rows: Vec<&RowChange> = g.rows.iter().filter(|r| r.table == tgt).collect();
        let creds: Vec<&RowChange> = g
            .rows
            .iter()
            .filter(|r| r.table == pages)
            .filter(ours)
            .collect();
        let cur: Vec<&RowChange> = g
            .rows
            .iter()
            .filter(|r| r.table == cursor)
            .filter(ours)
            .collect();
        let part: Vec<&RowChange> = g
            .rows
            .iter()
            .filter(|r| r.table == parts)
            .filter(ours)
            .collect();
        self.log = self.applied_log(g);
        let touched = self.apply(g, &rows);
        if !creds.is_empty() {
            self.pages(g, &creds, &rows);
        } else if let Some(c) = cur.first() {
            self.replay(g, c, &touched);
        } else if let Some(p) = part.first() {
            self.part(g, p, &touched);
        } else if !rows.is_empty() {
            let what = format!(
                "{}: {} row changes of the table without T evidence",
                g.gtid,
                rows.len()
            );
            self.rep.finding(what);
        }
    }

    /// The trigger log rows of `g` (empty without [`Subject::applied`]).
    fn applied_log(&self, g: &Group) -> Vec<(Key, u8)> {
        let Some(log) = &self.s.applied else {
            return Vec::new();
        };
        let log = self.s.t(log);
        g.rows
            .iter()
            .filter(|r| r.table == log)
            .filter_map(|r| r.after.as_ref())
            .map(|a| (vec![a[0].clone()], a[1].get(1).copied().unwrap_or(b'?')))
            .collect()
    }

    /// With a trigger log: every key whose net effect is an image was upserted exactly
    /// once by the transaction, and no other key was upserted or deleted (a delete of an
    /// absent key fires nothing, so deletes are only checked to be in the range).
    fn applications(&mut self, g: &Group, net: &BTreeMap<Key, Option<Image>>, touched_only: bool) {
        if self.s.applied.is_none() {
            return;
        }
        let mut upserts: BTreeMap<&Key, u32> = BTreeMap::new();
        for (k, op) in &self.log {
            let expected = match net.get(k) {
                Some(Some(_)) => *op != b'D',
                Some(None) => *op == b'D',
                None => false,
            };
            if !expected {
                self.rep.duplicates += 1;
                let what = format!(
                    "{}: key {} applied ({}) outside its cursor range",
                    g.gtid,
                    show(k),
                    *op as char
                );
                self.rep.finding(what);
            }
            if *op != b'D' {
                *upserts.entry(k).or_default() += 1;
            }
        }
        let twice: Vec<String> = upserts
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(k, _)| show(k))
            .collect();
        if !twice.is_empty() {
            self.rep.duplicates += twice.len();
            self.rep.finding(format!(
                "{}: keys applied twice in one transaction: {twice:?}",
                g.gtid
            ));
        }
        if touched_only {
            return;
        }
        for k in net.iter().filter(|(_, v)| v.is_some()).map(|(k, _)| k) {
            if !upserts.contains_key(k) {
                self.rep.finding(format!(
                    "{}: key {} of the range was never applied",
                    g.gtid,
                    show(k)
                ));
            }
        }
    }

    /// Applies the transaction's row changes to the model; returns the keys touched.
    fn apply(&mut self, g: &Group, rows: &[&RowChange]) -> BTreeSet<Key> {
        let mut touched = BTreeSet::new();
        self.replaced.clear();
        for r in rows {
            if let (Some(b), Some(a)) = (&r.before, &r.after) {
                let (kb, ka) = (self.s.key_of(b), self.s.key_of(a));
                if kb != ka {
                    self.replaced.insert(kb, ka);
                }
            }
            if let Some(b) = &r.before {
                let k = self.s.key_of(b);
                if self.state.remove(&k).as_ref() != Some(b) {
                    self.rep.finding(format!(
                        "{}: the target's before image of key {} is not the model's",
                        g.gtid,
                        show(&k)
                    ));
                }
                touched.insert(k);
            }
            if let Some(a) = &r.after {
                let k = self.s.key_of(a);
                if r.before.is_none() && self.state.contains_key(&k) {
                    self.rep
                        .finding(format!("{}: insert of present key {}", g.gtid, show(&k)));
                }
                self.state.insert(k.clone(), a.clone());
                touched.insert(k);
            }
        }
        touched
    }

    fn pages(&mut self, g: &Group, creds: &[&RowChange], rows: &[&RowChange]) {
        self.rep.page_txns += 1;
        if self.last.is_some() {
            self.rep
                .finding(format!("{}: a page applied after the replay began", g.gtid));
        }
        let mut high = None;
        let mut expect_rows = 0;
        for c in creds {
            let a = c.after.as_ref().expect("a credential is an insert");
            let (w, page, attempt) = (num(&a[2]), num(&a[3]), num(&a[4]));
            self.rep.pages += 1;
            expect_rows += num(&a[6]) as usize;
            if !self.credentials.insert((w, page)) {
                self.rep.duplicates += 1;
                self.rep.finding(format!(
                    "{}: page w{w}p{page} credential inserted twice",
                    g.gtid
                ));
            }
            high = self.src.highs.get(&(w, attempt)).copied();
            if high.is_none() {
                self.rep.finding(format!(
                    "{}: no HIGH of window {w} attempt {attempt} in the source's binlog",
                    g.gtid
                ));
            }
        }
        let inserts = rows.iter().filter(|r| r.before.is_none()).count();
        if inserts != expect_rows || inserts != rows.len() {
            self.rep.finding(format!(
                "{}: {} row changes ({inserts} inserts) for credentials of {expect_rows} rows",
                g.gtid,
                rows.len()
            ));
        }
        let logged = self.log.iter().filter(|(_, op)| *op == b'I').count();
        if self.s.applied.is_some() && (logged != rows.len() || logged != self.log.len()) {
            self.rep.finding(format!(
                "{}: the trigger log has {logged} inserts of {} operations for {} page rows",
                g.gtid,
                self.log.len(),
                rows.len()
            ));
        }
        let Some(high) = high else { return };
        for r in rows {
            let a = r.after.as_ref().expect("checked: inserts");
            let k = self.s.key_of(a);
            if self.src.state_after(&k, high) != Some(a) {
                self.rep.finding(format!(
                    "{}: page row of key {} is not the source's row at HIGH",
                    g.gtid,
                    show(&k)
                ));
            }
        }
    }

    /// The change count a cursor image names (None: no group of the table ends there).
    fn point(&mut self, g: &Group, c: &Cursor) -> Option<usize> {
        let p = self.src.point(&c.0, c.1);
        if p.is_none() {
            self.rep.finding(format!(
                "{}: T's cursor {}:{} (+{}) names no group of the table",
                g.gtid, c.0.file, c.0.pos, c.1
            ));
        }
        p
    }

    fn replay(&mut self, g: &Group, c: &RowChange, touched: &BTreeSet<Key>) {
        self.rep.cursor_txns += 1;
        // Columns: job, generation, file, pos, gtid, rows_done, digest, token.
        let at = |i: &Image| {
            (
                Pos {
                    file: unquote(&i[2]),
                    pos: num(&i[3]),
                },
                num(&i[5]),
            )
        };
        let from = match &c.before {
            None => Some(self.b),
            Some(b) => self.point(g, &at(b)),
        };
        let after = at(c.after.as_ref().expect("a cursor write has an after image"));
        self.rep.chunk_txns += usize::from(after.1 > 0);
        let to = self.point(g, &after);
        let (Some(from), Some(to)) = (from, to) else {
            return;
        };
        if c.before.is_some() && self.last != Some(from) {
            self.rep.finding(format!(
                "{}: T's cursor before image is not the last cursor written",
                g.gtid
            ));
        }
        if to <= from {
            self.rep.finding(format!(
                "{}: T's cursor did not advance ({from} -> {to} changes)",
                g.gtid
            ));
            return;
        }
        for n in &mut self.covered[from..to] {
            *n += 1;
        }
        self.last = Some(to);
        self.net_effect(g, from, to, touched, false);
    }

    fn part(&mut self, g: &Group, c: &RowChange, touched: &BTreeSet<Key>) {
        self.rep.part_txns += 1;
        // Columns: job, generation, part, parts, file, pos, gtid, rows_done, digest, token.
        let at = |i: &Image| {
            (
                Pos {
                    file: unquote(&i[4]),
                    pos: num(&i[5]),
                },
                num(&i[7]),
            )
        };
        let from = match &c.before {
            None => Some(self.b),
            Some(b) => self.point(g, &at(b)),
        };
        let to = self.point(g, &at(c.after.as_ref().expect("an after image")));
        if let (Some(from), Some(to)) = (from, to) {
            self.net_effect(g, from, to.max(from), touched, true);
        }
    }

    /// After the transaction, every key of changes [from, to) holds their net effect and
    /// no other key was touched (`touched_only`: only the touched keys are checked, for a
    /// part transaction whose share of the keys the oracle does not know).
    fn net_effect(
        &mut self,
        g: &Group,
        from: usize,
        to: usize,
        touched: &BTreeSet<Key>,
        touched_only: bool,
    ) {
        let net = self.src.net(from, to);
        self.applications(g, &net, touched_only);
        let folded: BTreeSet<Key> = net.keys().map(fold_case).collect();
        let in_net = |k: &Key| {
            net.contains_key(k)
                || self.replaced.get(k).is_some_and(|a| net.contains_key(a))
                || folded.contains(&fold_case(k))
        };
        for k in touched.iter().filter(|k| !in_net(k)) {
            self.rep.finding(format!(
                "{}: key {} written though no change of changes {from}..{to} touches it",
                g.gtid,
                show(k)
            ));
        }
        for (k, want) in &net {
            if touched_only && !touched.contains(k) {
                continue;
            }
            if self.state.get(k) != want.as_ref() {
                self.rep.finding(format!(
                    "{}: key {} after changes {from}..{to} is {} in the target, {} in the source",
                    g.gtid,
                    show(k),
                    self.state.get(k).map_or("absent".into(), |i| show(i)),
                    want.as_ref().map_or("absent".into(), |i| show(i)),
                ));
            }
        }
    }

    fn finish(mut self) -> Report {
        let last = self.last.unwrap_or(self.b);
        if self.rep.part_txns == 0 {
            self.rep.duplicates += self.covered[self.b..].iter().filter(|n| **n > 1).count();
            self.rep.skipped = self.covered[self.b..last]
                .iter()
                .filter(|n| **n == 0)
                .count();
        }
        self.rep.unreached = self.src.changes.len().saturating_sub(last);
        self.rep
    }
}

/// A key with ASCII letters in lower case and trailing spaces of strings removed: the
/// oracle's stand-in for a `_ci`, PAD SPACE collation's equality, by which the target
/// server matches a key whose stored bytes differ from the source's (a delete or upsert
/// of 'ann' meets the row 'ANN' that an older image put there). Only the "touched outside
/// the range" check uses it; every value check stays byte for byte.
fn fold_case(k: &Key) -> Key {
    k.iter()
        .map(|v| {
            let mut v = v.to_ascii_lowercase();
            if v.len() >= 2 && v.first() == Some(&b'\'') && v.last() == Some(&b'\'') {
                v.pop();
                while v.last() == Some(&b' ') {
                    v.pop();
                }
                v.push(b'\'');
            }
            v
        })
        .collect()
}

/// A number as printed (`5`, or `-1 (18446744073709551615)` for a large unsigned value).
fn num(v: &[u8]) -> u64 {
    let s = String::from_utf8_lossy(v);
    let s = s.trim();
    match s.split_once(" (") {
        Some((_, u)) => u.trim_end_matches(')').parse().unwrap_or(u64::MAX),
        None => s.parse().unwrap_or_else(|_| panic!("not a number: {s}")),
    }
}

/// A string value as printed, without its quotes.
fn unquote(v: &[u8]) -> String {
    let s = String::from_utf8_lossy(v);
    s.trim_matches('\'').to_string()
}

fn show(values: &[Value]) -> String {
    let parts: Vec<String> = values
        .iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    format!("({})", parts.join(","))
}

#[cfg(test)]
mod tests;
