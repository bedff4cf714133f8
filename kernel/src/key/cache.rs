//! The server weights a [`super::Keyer`] has asked, per key column and value bytes.
use super::weigh;
use std::collections::HashMap;

/// Server weights of character key values, per key column and value bytes.
#[derive(Clone, Debug, Default)]
pub struct WeightCache {
    /// Per key column (by ordinal), value bytes to weight: looked up by `&[u8]` without
    /// copying the value (a lookup per key column of every row the fold orders).
    map: Vec<HashMap<Vec<u8>, Vec<u8>>>,
    len: usize,
    /// Per collation: true when it pads with spaces (asked of the server).
    pub(super) pad: HashMap<String, bool>,
    pub(super) stats: weigh::WeighStats,
}

impl WeightCache {
    /// The weight of `value` in key column `col`, if asked.
    pub fn get(&self, col: usize, value: &[u8]) -> Option<&[u8]> {
        self.map.get(col)?.get(value).map(Vec::as_slice)
    }

    pub fn insert(&mut self, col: usize, value: Vec<u8>, weight: Vec<u8>) {
        if self.map.len() <= col {
            self.map.resize_with(col + 1, HashMap::new);
        }
        if self.map[col].insert(value, weight).is_none() {
            self.len += 1;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every weight (the cache is bounded by its owner between uses).
    pub fn clear(&mut self) {
        self.map.clear();
        self.len = 0;
    }

    /// What weighing has cost so far (round trips and values asked).
    pub fn stats(&self) -> weigh::WeighStats {
        self.stats
    }
}
