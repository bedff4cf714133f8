//! Log events of this process, captured (INFO and above) so a test can wait for what the
//! program says it did ("retrying", "paused") instead of sleeping and asserting that
//! nothing happened meanwhile. Cleared by [`crate::in_process`]; installed by
//! [`crate::init_tracing`].
use std::fmt::Write as _;
use std::sync::Mutex;

static EVENTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// One event as `LEVEL target: message key=value ... ` (the message first, every field
/// followed by a space, so ` key=value ` matches any field).
pub fn events() -> Vec<String> {
    EVENTS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// How many captured events satisfy `f`.
pub fn count(f: impl Fn(&str) -> bool) -> usize {
    EVENTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|e| f(e))
        .count()
}

pub fn clear() {
    EVENTS.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// The tracing layer that records every event it is given.
pub struct Capture;

#[derive(Default)]
struct Fields {
    message: String,
    fields: String,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, "{}={value:?} ", field.name());
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, "{}={value} ", field.name());
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let m = event.metadata();
        let mut f = Fields::default();
        event.record(&mut f);
        let line = format!("{} {}: {} {}", m.level(), m.target(), f.message, f.fields);
        EVENTS.lock().unwrap_or_else(|p| p.into_inner()).push(line);
    }
}
