//! The demo's live progress: indicatif bars (windows, rows applied, and a line with the
//! phase, the writer and the replay lag) when stdout is a terminal, plain lines every few
//! seconds and on each phase change otherwise (CI logs). Everything shown is read from the
//! state store by [`crate::present::status::gather`], the same snapshot `backfill status` prints.
use super::writer::Tally;
use crate::present::status::{self, JobStatus};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kernel::ids::JobId;
use kernel::Result;
use sqlx::MySqlPool;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Prints now on stdout (progress lines, and a report before an error).
pub fn print_now(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes()).and_then(|()| o.flush());
}

/// Where progress lines go: stdout in text mode, stderr when the summary is JSON.
pub struct Out {
    json: bool,
    tty: bool,
}

impl Out {
    pub fn new(json: bool) -> Out {
        Out {
            json,
            tty: !json && std::io::stdout().is_terminal(),
        }
    }

    pub fn line(&self, s: &str) {
        if self.json {
            eprintln!("demo: {s}");
        } else {
            print_now(&format!("demo: {s}\n"));
        }
    }
}

/// The live view of one job.
pub struct Live<'a> {
    out: &'a Out,
    pool: MySqlPool,
    job: crate::store::jobs::JobRecord,
    bars: Option<(MultiProgress, ProgressBar, ProgressBar, ProgressBar)>,
    last_phase: Option<String>,
    last_line: Instant,
}

/// Plain lines at most this often (besides phase changes).
const PLAIN_EVERY: Duration = Duration::from_secs(2);

impl<'a> Live<'a> {
    pub async fn new(out: &'a Out, pool: MySqlPool, job: JobId) -> Result<Live<'a>> {
        let job = crate::store::jobs::load_job(&pool, job).await?;
        let bars = out.tty.then(|| {
            let m = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
            let style = |t: &str| {
                ProgressStyle::with_template(t)
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> ")
            };
            let w = m.add(ProgressBar::new(u64::from(job.windows)));
            w.set_style(style("windows  [{bar:40}] {pos}/{len}"));
            let r = m.add(ProgressBar::new(job.estimated_rows.max(1)));
            r.set_style(style(
                "rows     [{bar:40}] {human_pos}/{human_len} applied ({per_sec})",
            ));
            let s = m.add(ProgressBar::new_spinner());
            s.set_style(
                ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            (m, w, r, s)
        });
        Ok(Live {
            out,
            pool,
            job,
            bars,
            last_phase: None,
            last_line: Instant::now(),
        })
    }

    /// How often to refresh.
    pub fn every(&self) -> Duration {
        Duration::from_millis(if self.bars.is_some() { 200 } else { 500 })
    }

    /// Reads the status and redraws; returns it.
    pub async fn tick(&mut self, writes: Tally) -> Result<JobStatus> {
        let st = status::gather(&self.pool, self.job.clone()).await?;
        let lag = match &st.replay {
            Some(r) => format!(
                "replay lag {} bytes / {} ms, {} groups replayed",
                r.lag
                    .behind_bytes
                    .map_or_else(|| "?".to_string(), |b| b.to_string()),
                r.lag.behind_ms,
                r.groups_applied
            ),
            None => "replay not started".into(),
        };
        let msg = format!(
            "{}  writer {} statements  {lag}",
            st.state(),
            writes.statements
        );
        match &self.bars {
            Some((_, w, r, s)) => {
                w.set_position(u64::from(st.windows_done));
                r.set_length(st.job.estimated_rows.max(st.rows_applied).max(1));
                r.set_position(st.rows_applied);
                s.set_message(msg);
                s.tick();
            }
            None => {
                let changed = self.last_phase.as_deref() != st.phase.as_deref();
                if changed || self.last_line.elapsed() >= PLAIN_EVERY {
                    self.out.line(&format!(
                        "windows {}/{}  rows applied {}  {msg}",
                        st.windows_done, st.job.windows, st.rows_applied
                    ));
                    self.last_line = Instant::now();
                }
            }
        }
        self.last_phase.clone_from(&st.phase);
        Ok(st)
    }

    pub fn message(&self, s: &str) {
        match &self.bars {
            Some((m, ..)) => {
                let _ = m.println(format!("demo: {s}"));
            }
            None => self.out.line(s),
        }
    }

    pub fn finish(&mut self) {
        if let Some((_, w, r, s)) = self.bars.take() {
            w.finish();
            r.finish();
            s.finish();
        }
    }
}
