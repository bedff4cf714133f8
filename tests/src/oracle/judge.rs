//! The target's side of the oracle: each target transaction judged against the source's
//! history (page, replay cursor, part cursor or a write without evidence), with the
//! target table modelled from its own binlog and every source change's coverage counted.
use super::parse::{Group, Image, Pos, RowChange};
use super::source::Source;
use super::{num, show, unquote, Key, Report, Subject};
use std::collections::{BTreeMap, BTreeSet};

/// A T cursor as the target's binlog shows it: (group end, rows_done).
type Cursor = (Pos, u64);

/// The column of the cursor's file in T's main cursor row (job, generation, file, pos,
/// gtid, rows_done, digest, token) and in a part cursor row (job, generation, part,
/// parts, file, ...).
const CURSOR_FILE: usize = 2;
const PART_FILE: usize = 4;
/// Folds keys to what the target's unique index compares (collation weights): two keys
/// fold alike when the server holds them as one row.
pub type Fold<'a> = &'a mut dyn FnMut(&[&Key]) -> Vec<Key>;

/// Judges every target group against the source's history `src`.
pub(super) fn run(src: &Source, target: &[Group], s: &Subject, fold: Fold<'_>) -> Report {
    let mut rep = Report::default();
    let Some(b) = src.b else {
        rep.finding("no B marker of the job in the source's binlog".into());
        return rep;
    };
    rep.source_changes = src.changes.len() - b;
    let mut j = Judge {
        s,
        src,
        state: BTreeMap::new(),
        covered: vec![0; src.changes.len()],
        last: None,
        credentials: BTreeSet::new(),
        b,
        log: Vec::new(),
        replaced: BTreeMap::new(),
        key_cover: BTreeMap::new(),
        parts_at: BTreeMap::new(),
        fold,
        rep,
    };
    for g in target {
        j.group(g);
    }
    j.finish()
}
struct Judge<'a, 'f> {
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
    /// Per (source change, key): the replay and part transactions that applied it.
    key_cover: BTreeMap<(usize, Key), u32>,
    /// Per part number, the change count its last part transaction brought it to.
    parts_at: BTreeMap<Vec<u8>, usize>,
    fold: Fold<'f>,
    rep: Report,
}

impl Judge<'_, '_> {
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
    fn applications(
        &mut self,
        g: &Group,
        (from, to): (usize, usize),
        net: &BTreeMap<Key, Option<Image>>,
        touched_only: bool,
    ) {
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
        // Under key partitions the other parts committed their keys of this range first.
        let by_parts: BTreeSet<&Key> = self
            .key_cover
            .range((from, Vec::new())..(to, Vec::new()))
            .map(|((_, k), _)| k)
            .collect();
        for k in net.iter().filter(|(_, v)| v.is_some()).map(|(k, _)| k) {
            if !upserts.contains_key(k) && !by_parts.contains(k) {
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

    /// The change counts (from, to) a cursor write covers: from its before image (B for
    /// the first write) to its after image. `file` is the column of the cursor's file:
    /// position and rows_done follow at +1 and +3 (the main and the part cursor rows store
    /// a cursor alike, `ledger::target::cursor_values`).
    fn range(&mut self, g: &Group, c: &RowChange, file: usize) -> Option<(usize, usize)> {
        let at = |i: &Image| -> Cursor {
            let pos = Pos {
                file: unquote(&i[file]),
                pos: num(&i[file + 1]),
            };
            (pos, num(&i[file + 3]))
        };
        let after = at(c.after.as_ref().expect("a cursor write has an after image"));
        self.rep.chunk_txns += usize::from(file == CURSOR_FILE && after.1 > 0);
        let from = match &c.before {
            None => Some(self.b),
            Some(b) => self.point(g, &at(b)),
        };
        let to = self.point(g, &after);
        Some((from?, to?))
    }

    fn replay(&mut self, g: &Group, c: &RowChange, touched: &BTreeSet<Key>) {
        self.rep.cursor_txns += 1;
        let Some((from, to)) = self.range(g, c, CURSOR_FILE) else {
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

    /// A part transaction's range starts at its row's before image or at the main
    /// cursor, whichever is later: a first row, or a row at or behind the main cursor,
    /// means nothing (`ledger::parts`: the part's plan starts at max(main, row)).
    fn part(&mut self, g: &Group, c: &RowChange, touched: &BTreeSet<Key>) {
        self.rep.part_txns += 1;
        if let Some((from, to)) = self.range(g, c, PART_FILE) {
            let part = c.after.as_ref().expect("a part write has an after image")[2].clone();
            self.parts_at.insert(part, to);
            let from = from.max(self.last.unwrap_or(self.b));
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
        self.applications(g, (from, to), &net, touched_only);
        let by_collation = self.touched_in_range(g, from, to, &net, touched);
        self.cover(from, to, &net, touched, &by_collation);
        for (k, want) in &net {
            if touched_only && !touched.contains(k) {
                continue;
            }
            let ahead = !touched_only && !touched.contains(k) && self.ahead_in_a_part(k, to);
            if self.state.get(k) != want.as_ref() && !ahead {
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

    /// A key the main cursor's transaction did not write that holds the source's row as of
    /// a part row ahead of `to`: its partition committed past the main cursor before a
    /// kill (`ledger::parts_plan`: such a part is `Ahead` until main passes it), so it
    /// shows a later state than main's until main gets there, where it is checked exactly.
    fn ahead_in_a_part(&self, k: &Key, to: usize) -> bool {
        let have = self.state.get(k);
        self.parts_at
            .values()
            .any(|&p| p > to && self.src.state_after(k, p) == have)
    }

    /// Every touched key is a key of the range's changes: by bytes, as the new bytes of
    /// a key the upsert matched in place, or equal to one under the key's collation.
    /// Returns the range's keys matched only by collation.
    fn touched_in_range(
        &mut self,
        g: &Group,
        from: usize,
        to: usize,
        net: &BTreeMap<Key, Option<Image>>,
        touched: &BTreeSet<Key>,
    ) -> BTreeSet<Key> {
        let misses: Vec<&Key> = touched
            .iter()
            .filter(|k| !net.contains_key(*k))
            .filter(|k| !self.replaced.get(*k).is_some_and(|a| net.contains_key(a)))
            .collect();
        let mut matched = BTreeSet::new();
        if misses.is_empty() {
            return matched;
        }
        let keys: Vec<&Key> = net.keys().collect();
        let folded: BTreeMap<Key, &Key> = (self.fold)(&keys).into_iter().zip(keys).collect();
        let missed = (self.fold)(&misses);
        for (k, f) in misses.iter().zip(missed) {
            match folded.get(&f) {
                Some(n) => {
                    matched.insert((*n).clone());
                }
                None => self.rep.finding(format!(
                    "{}: key {} written though no change of changes {from}..{to} touches it",
                    g.gtid,
                    show(k)
                )),
            }
        }
        matched
    }

    /// Counts, per change of [from, to) and key it touched, this transaction's
    /// application of that key: a key of the range the transaction wrote (by bytes, in
    /// place under new bytes, by collation) or logged (the audit triggers).
    fn cover(
        &mut self,
        from: usize,
        to: usize,
        net: &BTreeMap<Key, Option<Image>>,
        touched: &BTreeSet<Key>,
        by_collation: &BTreeSet<Key>,
    ) {
        let logged = self.log.iter().map(|(k, _)| k);
        let replaced = touched.iter().filter_map(|k| self.replaced.get(k));
        let applied: BTreeSet<&Key> = touched
            .iter()
            .chain(replaced)
            .chain(logged)
            .chain(by_collation)
            .filter(|k| net.contains_key(*k))
            .collect();
        for i in from..to {
            for k in self.src.keys_of(i) {
                if applied.contains(k) {
                    *self.key_cover.entry((i, k.clone())).or_default() += 1;
                }
            }
        }
    }

    fn finish(mut self) -> Report {
        let last = self.last.unwrap_or(self.b);
        // The main cursor's ranges tile (B, last] once also under key partitions: its
        // CAS chain advances only after every partition applied the range.
        self.rep.duplicates += self.covered[self.b..].iter().filter(|n| **n > 1).count();
        self.rep.skipped = self.covered[self.b..last]
            .iter()
            .filter(|n| **n == 0)
            .count();
        let twice: Vec<&(usize, Key)> = self
            .key_cover
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(k, _)| k)
            .collect();
        self.rep.keys_twice = twice.len();
        if let Some((i, k)) = twice.first() {
            let what = format!(
                "change {i}'s key {} applied by more than one transaction",
                show(k)
            );
            self.rep.finding(what);
        }
        self.rep.unreached = self.src.changes.len().saturating_sub(last);
        self.rep
    }
}

/// A key with ASCII letters in lower case and trailing spaces of strings removed: a `_ci`,
/// PAD SPACE collation's equality over ASCII, by which the target server matches a key
/// whose stored bytes differ from the source's (a delete or upsert of 'ann' meets the row
/// 'ANN' that an older image put there). The pure judge's fold, for recorded text; against
/// real servers the oracle asks the target ([`super::collate`]), which also folds
/// non-ASCII letters. Only the "touched outside the range" check folds; every value check
/// stays byte for byte.
pub(super) fn fold_case(k: &Key) -> Key {
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
