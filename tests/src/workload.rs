//! A concurrent writer of the crash matrix (issue 34): every kind of change a source
//! takes, on the case table `t (id, k, v)` or tables of its shape (one writer may spread
//! its steps over several: [`Workload::across`]), and every statement
//! must succeed (an error fails the test; attempts are never counted as writes). Per
//! step, by a seeded random choice over the keys the writer knows to exist: an insert of a
//! new key, an update, a delete, a key change, a multi-statement transaction (update,
//! insert, delete), a rolled-back transaction (nothing of it may reach the target), and
//! every 40th step one UPDATE of ~400 rows: one source transaction larger than a replay
//! batch of the matrix.
use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the writer committed, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub inserts: u64,
    pub updates: u64,
    pub deletes: u64,
    pub key_changes: u64,
    pub transactions: u64,
    pub rolled_back: u64,
    pub large: u64,
}

impl Counts {
    /// Statements and transactions committed or rolled back.
    pub fn total(&self) -> u64 {
        self.inserts
            + self.updates
            + self.deletes
            + self.key_changes
            + self.transactions
            + self.rolled_back
            + self.large
    }
}

/// A running writer; [`Workload::stop`] ends it and returns its counts.
pub struct Workload {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Counts>,
}

impl Workload {
    /// Starts writing to `t` of the database in `url`, whose keys are 1..=rows now.
    pub fn start(url: String, rows: i64, seed: u64) -> Workload {
        Workload::on(url, "t", rows, seed, Duration::from_millis(8))
    }

    /// Starts writing to `table` (of the shape of `t`) of the database in `url`, whose keys
    /// are 1..=rows now, pausing `pause` after each step (several writers on one source
    /// share its pace).
    pub fn on(url: String, table: &str, rows: i64, seed: u64, pause: Duration) -> Workload {
        Workload::across(url, &[table.to_string()], rows, seed, pause)
    }

    /// Starts writing to `tables` (each of the shape of `t`, with keys 1..=rows now) of the
    /// database in `url` over one connection: each step on a table chosen at random.
    pub fn across(
        url: String,
        tables: &[String],
        rows: i64,
        seed: u64,
        pause: Duration,
    ) -> Workload {
        assert!(!tables.is_empty(), "a writer of no table");
        let stop = Arc::new(AtomicBool::new(false));
        let to = Target {
            url,
            tables: tables.to_vec(),
            pause,
        };
        let task = tokio::spawn(run(to, rows, seed, stop.clone()));
        Workload { stop, task }
    }

    /// Stops the writer after its current step.
    pub async fn stop(self) -> Counts {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("the writer panicked")
    }
}

/// Where a writer writes and at what pace.
struct Target {
    url: String,
    tables: Vec<String>,
    pause: Duration,
}

struct Writer {
    conn: mysql_async::Conn,
    /// The table of this step (one of `tables`) and the keys it holds.
    table: String,
    live: Vec<i64>,
    /// The other tables, with their keys.
    others: Vec<(String, Vec<i64>)>,
    next: i64,
    /// The keys filled before the writer (the large update's range lies among them).
    first: i64,
    rng: rand::rngs::StdRng,
    counts: Counts,
}

async fn run(to: Target, rows: i64, seed: u64, stop: Arc<AtomicBool>) -> Counts {
    let opts = mysql_async::Opts::from_url(&to.url).expect("a writer URL");
    let mut tables = to.tables.into_iter();
    let mut w = Writer {
        conn: mysql_async::Conn::new(opts)
            .await
            .expect("the writer connects"),
        table: tables.next().expect("a table"),
        live: (1..=rows).collect(),
        others: tables.map(|t| (t, (1..=rows).collect())).collect(),
        next: 10_000_000,
        first: rows,
        rng: rand::rngs::StdRng::seed_from_u64(seed),
        counts: Counts::default(),
    };
    let mut step = 0u64;
    while !stop.load(Ordering::SeqCst) {
        w.switch();
        w.step(step).await;
        step += 1;
        tokio::time::sleep(to.pause).await;
    }
    w.counts
}

impl Writer {
    /// Makes a table chosen at random (of several) the one of the next step.
    fn switch(&mut self) {
        if self.others.is_empty() {
            return;
        }
        let i = self.rng.random_range(0..=self.others.len());
        if let Some((t, live)) = self.others.get_mut(i) {
            std::mem::swap(&mut self.table, t);
            std::mem::swap(&mut self.live, live);
        }
    }

    /// A key the writer knows to exist (it never empties the table: inserts keep pace).
    fn pick(&mut self) -> (usize, i64) {
        let i = self.rng.random_range(0..self.live.len());
        (i, self.live[i])
    }

    fn fresh(&mut self) -> i64 {
        self.next += 1;
        self.next
    }

    async fn exec(&mut self, sql: String) {
        self.conn
            .query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("writer: {sql}: {e}"));
    }

    async fn step(&mut self, step: u64) {
        let t = self.table.clone();
        if step % 40 == 39 {
            let a = self.rng.random_range(1..=self.first.max(401) - 400);
            self.exec(format!(
                "UPDATE {t} SET k = k + 1 WHERE id BETWEEN {a} AND {}",
                a + 400
            ))
            .await;
            self.counts.large += 1;
            return;
        }
        match self.rng.random_range(0..6) {
            0 => self.insert().await,
            1 => {
                let (_, a) = self.pick();
                self.exec(format!(
                    "UPDATE {t} SET k = k + 1, v = 'u{step}' WHERE id = {a}"
                ))
                .await;
                self.counts.updates += 1;
            }
            2 if self.live.len() > 100 => {
                let (i, a) = self.pick();
                self.exec(format!("DELETE FROM {t} WHERE id = {a}")).await;
                self.live.swap_remove(i);
                self.counts.deletes += 1;
            }
            3 => {
                let ((i, a), b) = (self.pick(), self.fresh());
                self.exec(format!("UPDATE {t} SET id = {b} WHERE id = {a}"))
                    .await;
                self.live[i] = b;
                self.counts.key_changes += 1;
            }
            4 => self.transaction(step).await,
            5 => {
                let ((_, a), b) = (self.pick(), self.fresh());
                self.exec(format!(
                    "BEGIN; UPDATE {t} SET v = 'never' WHERE id = {a}; \
                     INSERT INTO {t} (id, k, v) VALUES ({b}, 0, 'never'); ROLLBACK"
                ))
                .await;
                self.counts.rolled_back += 1;
            }
            _ => self.insert().await,
        }
    }

    async fn insert(&mut self) {
        let (b, t) = (self.fresh(), self.table.clone());
        self.exec(format!(
            "INSERT INTO {t} (id, k, v) VALUES ({b}, {b}, 'ins')"
        ))
        .await;
        self.live.push(b);
        self.counts.inserts += 1;
    }

    /// One transaction of an update, an insert and a delete of another key.
    async fn transaction(&mut self, step: u64) {
        let ((_, a), b) = (self.pick(), self.fresh());
        let (i, d) = self.pick();
        if d == a {
            return self.insert().await;
        }
        let t = self.table.clone();
        self.exec(format!(
            "BEGIN; UPDATE {t} SET v = 'txn{step}' WHERE id = {a}; \
             INSERT INTO {t} (id, k, v) VALUES ({b}, 0, 'txn'); DELETE FROM {t} WHERE id = {d}; COMMIT"
        ))
        .await;
        self.live.swap_remove(i);
        self.live.push(b);
        self.counts.transactions += 1;
    }
}
