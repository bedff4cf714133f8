//! The source's side of the oracle: the table's history from the source's binlog, every
//! change in order with the key it touched, the job's B and HIGH markers, and the state of
//! any key after any number of changes.
use super::parse::{Group, Image, Pos, RowChange};
use super::{num, unquote, Key, Subject};
use std::collections::BTreeMap;

/// The source's history of the table: every change in order, the markers of the job.
pub(super) struct Source {
    /// (group end, key before, key after, after image) of every change, in order.
    pub(super) changes: Vec<Change>,
    /// Index of the first change of each group end that has changes, and their count.
    groups: BTreeMap<Pos, (usize, usize)>,
    /// Per key, (change index, image or None) of its history.
    history: BTreeMap<Key, Vec<(usize, Option<Image>)>>,
    /// Changes before B, and before each (window, attempt)'s HIGH.
    pub(super) b: Option<usize>,
    pub(super) highs: BTreeMap<(u64, u64), usize>,
}

pub(super) struct Change {
    before: Option<Key>,
    after: Option<(Key, Image)>,
}

impl Source {
    pub(super) fn build(groups: &[Group], s: &Subject) -> Source {
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
    pub(super) fn state_after(&self, key: &Key, n: usize) -> Option<&Image> {
        let h = self.history.get(key)?;
        let i = h.partition_point(|(c, _)| *c < n);
        i.checked_sub(1).and_then(|i| h[i].1.as_ref())
    }

    /// Changes a cursor (group end, rows_done) says are applied.
    pub(super) fn point(&self, end: &Pos, rows_done: u64) -> Option<usize> {
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

    /// The keys change `i` touched: its before key and its after key (one when equal).
    pub(super) fn keys_of(&self, i: usize) -> impl Iterator<Item = &Key> {
        let c = &self.changes[i];
        let after = c.after.as_ref().map(|(k, _)| k);
        c.before
            .as_ref()
            .filter(move |b| Some(*b) != after)
            .into_iter()
            .chain(after)
    }

    /// The net effect of changes [from, to) per key: the last image, or None (deleted).
    pub(super) fn net(&self, from: usize, to: usize) -> BTreeMap<Key, Option<Image>> {
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
