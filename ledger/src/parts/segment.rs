//! One segment of a key-partitioned replay: consecutive replay transactions of one
//! scheme, every connection running its parts concurrently on the caller's task, part 0
//! COMMITted only after every other part of its transaction (the commit order argued in
//! [`crate::parts`]).
use super::txn::{commit_main, prepare_main, run_part, Ended};
use crate::apply::{rollback_quietly, ApplyError};
use crate::dml::Dml;
use crate::group::ReplayGroup;
use crate::parts_plan::PartsTxn;
use crate::target::TargetCtx;
use kernel::Error;
use mysql_async::{Conn, IsolationLevel, Transaction};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use tokio::sync::watch;

/// How the part transactions of one attempt run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Mode {
    pub(super) iso: Option<IsolationLevel>,
    /// Part 0 runs its DML while the other parts run theirs (else: after they committed).
    pub(super) overlap: bool,
}

/// A task's end: how it ended and whether it committed a main transaction.
type TaskOut = Result<(Ended, bool), ApplyError>;
type Task<'a> = Pin<Box<dyn Future<Output = TaskOut> + Send + 'a>>;

/// Polls every task to completion, concurrently on this task (they borrow the caller's
/// connections, so they cannot be spawned).
async fn join_all(mut tasks: Vec<Task<'_>>) -> Vec<TaskOut> {
    let mut out: Vec<Option<TaskOut>> = (0..tasks.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (t, o) in tasks.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match t.as_mut().poll(cx) {
                    Poll::Ready(v) => *o = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// How far each connection got in a segment: `done[c]` transactions have every part of
/// connection c committed (or skipped); `failed` stops everyone at the next boundary.
#[derive(Debug)]
struct Progress {
    done: Vec<usize>,
    failed: bool,
}

type Board = watch::Sender<Progress>;

/// Consecutive replay transactions of one scheme. Part p >= 1 runs on connection `p % n`,
/// each connection its parts in plan order and free to run ahead; part 0 runs on
/// connection 0 after that connection's other parts of the same transaction, and
/// COMMITs transaction k only when every connection has committed its parts of k.
pub(super) async fn run_segment(
    conns: &mut [Conn],
    ctx: &TargetCtx,
    groups: &[ReplayGroup],
    dml: &Dml,
    seg: &[PartsTxn],
    mode: Mode,
) -> Result<(Ended, bool), ApplyError> {
    let n = conns.len();
    let (board, _) = watch::channel(Progress {
        done: vec![0; n],
        failed: false,
    });
    let board = &board;
    let mut it = conns.iter_mut();
    let Some(first) = it.next() else {
        return Err(Error::transient("no target connection").into());
    };
    let mut tasks: Vec<Task<'_>> = Vec::with_capacity(n);
    let job = Job {
        ctx,
        groups,
        dml,
        seg,
        mode,
        board,
        n,
    };
    tasks.push(Box::pin(job.main_conn(first)));
    for (i, c) in it.enumerate() {
        tasks.push(Box::pin(job.part_conn(c, i + 1)));
    }
    let (mut unknown, mut definite, mut transient) = (None, None, None);
    let (mut ended, mut any) = (Ended::Committed, false);
    for o in join_all(tasks).await {
        match o {
            Ok((e, a)) => {
                any |= a;
                if e == Ended::Moved {
                    ended = Ended::Moved;
                }
            }
            Err(ApplyError::Unknown(m)) => unknown = unknown.or(Some(m)),
            Err(ApplyError::Failed(e)) if e.is_transient() => transient = transient.or(Some(e)),
            Err(ApplyError::Failed(e)) => definite = definite.or(Some(e)),
        }
    }
    if let Some(m) = unknown {
        return Err(ApplyError::Unknown(m));
    }
    if let Some(e) = definite.or(transient) {
        return Err(e.into());
    }
    Ok((ended, any))
}

/// Waits until every other connection committed its parts of transaction `k`; false
/// when one of them failed (or the board is gone).
async fn others_done(rx: &mut watch::Receiver<Progress>, k: usize) -> bool {
    let ready = |s: &Progress| s.failed || s.done.iter().skip(1).all(|&d| d > k);
    rx.wait_for(ready).await.is_ok_and(|s| !s.failed)
}

/// What every connection task of a segment shares.
#[derive(Clone, Copy)]
struct Job<'j> {
    ctx: &'j TargetCtx,
    groups: &'j [ReplayGroup],
    dml: &'j Dml,
    seg: &'j [PartsTxn],
    mode: Mode,
    board: &'j Board,
    n: usize,
}

impl<'j> Job<'j> {
    fn fail(&self) {
        self.board.send_modify(|s| s.failed = true);
    }

    /// Runs this connection's parts p >= 1 of transaction `t`; stops at the first that
    /// did not commit (T moved or an error), after telling the others.
    async fn my_parts(&self, conn: &mut Conn, c: usize, t: &PartsTxn) -> TaskOut {
        for p in (1..t.parts).filter(|p| p % self.n == c) {
            let r = run_part(conn, self.ctx, self.groups, self.dml, t, p, self.mode.iso).await;
            if !matches!(r, Ok(Ended::Committed)) {
                self.fail();
                return r.map(|e| (e, false));
            }
        }
        Ok((Ended::Committed, false))
    }

    /// Connection c >= 1: its parts of every transaction in order, ahead of part 0.
    async fn part_conn(self, conn: &'j mut Conn, c: usize) -> TaskOut {
        for (k, t) in self.seg.iter().enumerate() {
            if self.board.borrow().failed {
                return Ok((Ended::Moved, false));
            }
            let r = self.my_parts(conn, c, t).await?;
            if r.0 != Ended::Committed {
                return Ok(r);
            }
            self.board.send_modify(|s| s.done[c] = k + 1);
        }
        Ok((Ended::Committed, false))
    }

    /// Connection 0: its other parts, then part 0 of each transaction, COMMITted once
    /// every connection is done with that transaction.
    async fn main_conn(self, conn: &'j mut Conn) -> TaskOut {
        let mut rx = self.board.subscribe();
        let mut any = false;
        for (k, t) in self.seg.iter().enumerate() {
            let r = self.my_parts(conn, 0, t).await?;
            if r.0 != Ended::Committed {
                return Ok((r.0, any));
            }
            let tx = if self.mode.overlap {
                let Some(tx) = self.main_tx(conn, t).await? else {
                    return Ok((Ended::Moved, any));
                };
                if !others_done(&mut rx, k).await {
                    rollback_quietly(tx).await;
                    return Ok((Ended::Moved, any));
                }
                tx
            } else {
                if !others_done(&mut rx, k).await {
                    return Ok((Ended::Moved, any));
                }
                let Some(tx) = self.main_tx(conn, t).await? else {
                    return Ok((Ended::Moved, any));
                };
                tx
            };
            if let Err(e) = commit_main(tx, self.ctx, t).await {
                self.fail();
                return Err(e);
            }
            any = true;
        }
        Ok((Ended::Committed, any))
    }

    /// Part 0 of `t` up to its COMMIT; None when T's main cursor moved. Tells the others
    /// to stop when it cannot go on.
    async fn main_tx<'c>(
        &self,
        conn: &'c mut Conn,
        t: &PartsTxn,
    ) -> Result<Option<Transaction<'c>>, ApplyError> {
        match prepare_main(conn, self.ctx, self.groups, self.dml, t, self.mode.iso).await {
            Ok((Ended::Committed, Some(tx))) => Ok(Some(tx)),
            Ok(_) => {
                self.fail();
                Ok(None)
            }
            Err(e) => {
                self.fail();
                Err(e)
            }
        }
    }
}
