//! Chunk cuts and group ends. A chunk is cut after every `chunk_changes` changes counted
//! from the group's first event and a group ends at a position of the source history, so
//! a re-read from the same start regenerates byte-identical records (I3).

use super::{Capturer, Closing, Emit, Release};
use crate::change::GroupEnd;
use crate::log::{GroupChunk, LogRecord, RecordBody, XaHeld};
use crate::position::BinlogPos;

impl Capturer {
    /// Cuts the open group's chunk when it reached the bound.
    pub(super) fn maybe_cut(&mut self) {
        let full = self
            .group
            .as_ref()
            .is_some_and(|g| g.count >= self.chunk_changes);
        if !full {
            return;
        }
        let first = self.group.as_ref().is_some_and(|g| g.chunk_no == 0);
        if first {
            let start = self.group.as_ref().map(|g| g.start.clone());
            if let Some(start) = start {
                if start != self.last_recorded_end {
                    self.emit_progress(start);
                }
            }
        }
        if let Some(g) = &mut self.group {
            let chunk = std::mem::take(&mut g.chunk);
            let rec = LogRecord {
                start: g.start.pos.clone(),
                chunk: g.chunk_no,
                gtid: g.gtid.clone(),
                end: None,
                body: body_of(&g.xa, chunk),
            };
            g.chunk_no += 1;
            g.count = 0;
            self.push(rec);
        }
    }

    pub(super) fn close(&mut self, end: u64, closing: Closing) {
        let Some(mut g) = self.group.take() else {
            return;
        };
        let end = GroupEnd {
            pos: BinlogPos::new(self.file.clone(), end),
            gtid: g.gtid.clone(),
        };
        match closing {
            Closing::XaCommit(xid) => {
                self.state.held.remove(&xid);
                if g.start != self.last_recorded_end {
                    self.emit_progress(g.start.clone());
                }
                self.out.push(Emit::Release(Release {
                    xid,
                    start: g.start.pos.clone(),
                    gtid: g.gtid.clone(),
                    end: end.clone(),
                }));
                self.last_recorded_end = end.clone();
                self.last_end = end;
                return;
            }
            Closing::XaRollback(xid) => {
                self.state.held.remove(&xid);
                self.push(LogRecord {
                    start: g.start.pos.clone(),
                    chunk: 0,
                    gtid: g.gtid.clone(),
                    end: Some(end.clone()),
                    body: RecordBody::Dropped { xid },
                });
                self.last_recorded_end = end.clone();
                self.last_end = end;
                return;
            }
            Closing::XaPrepare => {}
            Closing::Normal => g.xa = None,
        }
        let c = &g.chunk;
        let has = !c.changes.is_empty()
            || !c.intents.is_empty()
            || !c.pauses.is_empty()
            || !c.statements.is_empty()
            || !c.raw.is_empty();
        if has || g.chunk_no > 0 {
            if let Some(xid) = &g.xa {
                self.state.held.insert(xid.clone());
            }
            self.push(LogRecord {
                start: g.start.pos.clone(),
                chunk: g.chunk_no,
                gtid: g.gtid.clone(),
                end: Some(end.clone()),
                body: body_of(&g.xa, g.chunk),
            });
            self.last_recorded_end = end.clone();
        }
        self.last_end = end;
    }
}

/// A chunk's body: held while its group is an XA transaction.
fn body_of(xa: &Option<String>, chunk: GroupChunk) -> RecordBody {
    match xa {
        Some(xid) => RecordBody::Held(XaHeld {
            xid: xid.clone(),
            chunk,
        }),
        None => RecordBody::Chunk(chunk),
    }
}
