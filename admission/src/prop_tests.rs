//! Property: over any sequence of acquire / release / drop / hold / confirm /
//! time steps, no pool exceeds its capacity, freed capacity never sits idle
//! while someone waits, and a permit dropped unconfirmed stays held until
//! `confirm_hold`.

use std::collections::BTreeSet;
use std::time::Duration;

use proptest::prelude::*;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{Admission, AdmissionError, AdmissionSnapshot, HoldId, Limits, Permit, PoolKind};

#[derive(Debug, Clone)]
enum Op {
    AcquireRead { owner: u8, deadline_ms: u16 },
    TrySession { owner: u8 },
    Release(usize),
    Drop(usize),
    MarkUnknown(usize),
    ConfirmHold(usize),
    Advance(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<u8>(), 0u16..2000).prop_map(|(owner, deadline_ms)| Op::AcquireRead { owner, deadline_ms }),
        2 => any::<u8>().prop_map(|owner| Op::TrySession { owner }),
        2 => any::<usize>().prop_map(Op::Release),
        1 => any::<usize>().prop_map(Op::Drop),
        1 => any::<usize>().prop_map(Op::MarkUnknown),
        1 => any::<usize>().prop_map(Op::ConfirmHold),
        2 => (0u16..1500).prop_map(Op::Advance),
    ]
}

struct Driver {
    adm: Admission,
    held: Vec<Permit>,
    holds: BTreeSet<HoldId>,
    granted_tx: mpsc::UnboundedSender<Result<Permit, AdmissionError>>,
    granted_rx: mpsc::UnboundedReceiver<Result<Permit, AdmissionError>>,
}

impl Driver {
    fn new(limits: Limits) -> Self {
        let (granted_tx, granted_rx) = mpsc::unbounded_channel();
        Self {
            adm: Admission::new(limits).expect("valid limits"),
            held: Vec::new(),
            holds: BTreeSet::new(),
            granted_tx,
            granted_rx,
        }
    }

    fn take(&mut self, i: usize) -> Option<Permit> {
        (!self.held.is_empty()).then(|| self.held.swap_remove(i % self.held.len()))
    }

    async fn apply(&mut self, op: Op) {
        match op {
            Op::AcquireRead { owner, deadline_ms } => self.spawn_read(owner, deadline_ms),
            Op::TrySession { owner } => {
                if let Ok(p) = self.adm.try_acquire_session(&format!("s{owner}")) {
                    self.held.push(p);
                }
            }
            Op::Release(i) => self.take(i).into_iter().for_each(Permit::release_confirmed),
            Op::Drop(i) => {
                if let Some(p) = self.take(i) {
                    self.holds.insert(p.hold_id());
                }
            }
            Op::MarkUnknown(i) => {
                if let Some(p) = self.take(i) {
                    self.holds.insert(p.mark_release_unknown("timed out"));
                }
            }
            Op::ConfirmHold(i) => self.confirm(i),
            Op::Advance(ms) => tokio::time::advance(Duration::from_millis(ms.into())).await,
        }
        self.settle().await;
    }

    fn spawn_read(&self, owner: u8, deadline_ms: u16) {
        let (adm, tx) = (self.adm.clone(), self.granted_tx.clone());
        tokio::spawn(async move {
            let cancel = CancellationToken::new();
            let deadline = Duration::from_millis(deadline_ms.into());
            // Odd owners ask ahead of the queue (the activation's field check): the
            // invariants hold for a mix of both.
            let name = format!("r{owner}");
            let got = match owner % 2 {
                1 => adm.acquire_read_ahead(&name, deadline, &cancel).await,
                _ => adm.acquire_read(&name, deadline, &cancel).await,
            };
            // The receiver outlives every task; a send error cannot happen.
            let _ = tx.send(got);
        });
    }

    fn confirm(&mut self, i: usize) {
        let Some(&hold) = self.holds.iter().nth(i % self.holds.len().max(1)) else {
            return;
        };
        self.holds.remove(&hold);
        assert_eq!(self.adm.confirm_hold(hold), Ok(()));
    }

    async fn settle(&mut self) {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        while let Ok(got) = self.granted_rx.try_recv() {
            if let Ok(permit) = got {
                self.held.push(permit);
            }
        }
    }

    fn check(&self) {
        let snap = self.adm.snapshot();
        for kind in PoolKind::ALL {
            check_pool(
                &snap,
                kind,
                self.held.iter().filter(|p| p.pool() == kind).count(),
            );
        }
        let recorded: BTreeSet<HoldId> = snap.holds().map(|h| h.hold).collect();
        assert_eq!(
            recorded, self.holds,
            "holds stay until confirmed, and only those"
        );
    }
}

fn check_pool(snap: &AdmissionSnapshot, kind: PoolKind, held_by_driver: usize) {
    let pool = snap.pool(kind);
    let occupied = pool.in_use.len() + pool.holds.len();
    assert!(
        occupied <= pool.capacity as usize,
        "{kind}: {occupied} > {}",
        pool.capacity
    );
    assert_eq!(pool.available as usize, pool.capacity as usize - occupied);
    assert!(
        pool.available == 0 || pool.waiting.is_empty(),
        "{kind}: idle capacity while waiting"
    );
    assert_eq!(
        pool.in_use.len(),
        held_by_driver,
        "{kind}: every in-use permit has a holder"
    );
}

fn run(limits: Limits, ops: Vec<Op>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut driver = Driver::new(limits);
        for op in ops {
            driver.apply(op).await;
            driver.check();
        }
        // Everything confirmed: the pools are whole again.
        for p in std::mem::take(&mut driver.held) {
            p.release_confirmed();
        }
        for hold in std::mem::take(&mut driver.holds) {
            assert_eq!(driver.adm.confirm_hold(hold), Ok(()));
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        driver.settle().await;
        for p in std::mem::take(&mut driver.held) {
            p.release_confirmed();
        }
        let snap = driver.adm.snapshot();
        for kind in PoolKind::ALL {
            assert_eq!(snap.pool(kind).available, snap.pool(kind).capacity);
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn capacity_is_never_exceeded(
        read_windows in 1u32..4,
        sessions in 1u32..4,
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        let limits = Limits { read_windows, target_writes: 2, sessions };
        run(limits, ops);
    }
}
