//! Which tasks hold a control slot, so a task asking for a second one while it holds one
//! is named. Holding a control slot while waiting for another is how slot waits form a
//! cycle (four activations each held one of the target's four and waited for a fifth:
//! nothing moved until the slot waits failed); the pool's rule (`super`) is that a slot
//! wait never holds another slot of its class. Debug builds (every test) log such a
//! nesting as an error naming the server, and count it ([`nested_control_waits`]);
//! release builds do not track holders.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

static NESTED: AtomicU64 = AtomicU64::new(0);

/// Control slots asked for by a task already holding one, in this process (debug
/// builds; 0 in release builds).
pub fn nested_control_waits() -> u64 {
    NESTED.load(Ordering::Relaxed)
}

/// Control slots held per task.
#[derive(Debug, Default, Clone)]
pub(super) struct Holders(Arc<Mutex<HashMap<tokio::task::Id, u32>>>);

/// One task's hold of a control slot, ended when dropped.
#[derive(Debug)]
pub(super) struct Held {
    holders: Holders,
    task: tokio::task::Id,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut m = self.holders.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.task) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.task);
            }
        }
    }
}

impl Holders {
    /// Records the current task's hold (debug builds, inside a task).
    pub(super) fn hold(&self) -> Option<Held> {
        if !cfg!(debug_assertions) {
            return None;
        }
        let task = tokio::task::try_id()?;
        *self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(task)
            .or_insert(0) += 1;
        Some(Held {
            holders: self.clone(),
            task,
        })
    }

    /// Logs and counts a control slot asked for by a task that holds one.
    pub(super) fn check_not_nested(&self, side: &str, label: &str) {
        if !cfg!(debug_assertions) {
            return;
        }
        let Some(task) = tokio::task::try_id() else {
            return;
        };
        let held = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&task)
            .copied()
            .unwrap_or(0);
        if held > 0 {
            NESTED.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                %side,
                server = %label,
                held,
                "a task holding a control connection asks for another of the same server: slot waits can form a cycle"
            );
        }
    }
}
