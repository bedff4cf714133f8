//! Where a bootstrap's wall time goes (issue 35 item 1): with `BACKFILL_PROFILE=FILE`, every
//! span of the `profile` target (`tracing::info_span!(target: "profile", "window.read",
//! job, w)`: the protocol's steps, named in `crate::table`) is written to FILE when it
//! closes, one JSON line each: `{"phase":"window.read","job":1,"w":3,"ms":12.345}`, the
//! span's whole life (busy and waiting). `scripts/bench-bootstrap.sh --profile` sums
//! them per phase and per window. Without the variable the spans are disabled by their
//! filter and cost nothing but the check.
//!
//! Why it is safe: it only observes; a write error to FILE is reported once on stderr and
//! profiling stops, nothing else changes.
use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The environment variable naming the profile file.
pub const ENV: &str = "BACKFILL_PROFILE";
/// The target of profiled spans.
pub const TARGET: &str = "profile";

/// Writes each closed `profile` span as a JSON line.
pub struct ProfileLayer {
    out: Mutex<Option<std::io::BufWriter<std::fs::File>>>,
}

impl ProfileLayer {
    /// The layer writing to the file `BACKFILL_PROFILE` names, or None without it.
    pub fn from_env() -> Option<ProfileLayer> {
        let path = std::env::var_os(ENV)?;
        match std::fs::File::create(&path) {
            Ok(f) => Some(ProfileLayer {
                out: Mutex::new(Some(std::io::BufWriter::new(f))),
            }),
            Err(e) => {
                eprintln!("{ENV}={}: cannot create it: {e}", path.to_string_lossy());
                None
            }
        }
    }

    fn write(&self, line: &str) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let Some(w) = out.as_mut() else { return };
        if let Err(e) = writeln!(w, "{line}").and_then(|()| w.flush()) {
            eprintln!("{ENV}: writing the profile failed, profiling stops: {e}");
            *out = None;
        }
    }
}

/// When a span opened and its job and window fields.
struct Opened {
    at: Instant,
    fields: Fields,
}

#[derive(Default)]
struct Fields {
    job: Option<u64>,
    w: Option<u64>,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "job" => self.job = Some(value),
            "w" => self.w = Some(value),
            _ => {}
        }
    }
    /// Only numbers are kept ([`profile_span!`] records both as u64).
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl<S> tracing_subscriber::Layer<S> for ProfileLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().target() != TARGET {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Opened {
                at: Instant::now(),
                fields,
            });
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let ext = span.extensions();
        let Some(o) = ext.get::<Opened>() else { return };
        let line = serde_json::json!({
            "phase": span.metadata().name(),
            "job": o.fields.job,
            "w": o.fields.w,
            "ms": o.at.elapsed().as_secs_f64() * 1000.0,
        });
        self.write(&line.to_string());
    }
}

/// A `profile` span of phase `name` for `job`'s window `w` (None outside a window).
#[macro_export]
macro_rules! profile_span {
    ($name:literal, $job:expr) => {
        tracing::info_span!(target: "profile", $name, job = $job.0)
    };
    ($name:literal, $job:expr, $w:expr) => {
        tracing::info_span!(target: "profile", $name, job = $job.0, w = u64::from($w.0))
    };
}
