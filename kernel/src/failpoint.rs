//! Named fault points (STYLE §7): a test tells the process to exit hard at an exact
//! protocol step, then restarts it and checks that it converges (DESIGN §11 I4).
//!
//! Compiled in only with the `failpoints` feature (the test builds enable it); in a
//! production build [`hit`] is an empty inline function. Configuration is the environment
//! variable `BACKFILL_FAILPOINTS`: a comma-separated list of `name` (exit at the first hit)
//! or `name@n` (exit at the n-th hit). The process exits with [`EXIT_CODE`] without
//! running destructors or flushing anything, like a kill -9 between two statements.

/// The exit status of a process stopped by a fault point.
pub const EXIT_CODE: i32 = 86;

/// Environment variable naming the active fault points.
pub const ENV: &str = "BACKFILL_FAILPOINTS";

/// True when fault points (and the test hooks gated on them) are compiled in.
pub const ENABLED: bool = cfg!(feature = "failpoints");

#[cfg(feature = "failpoints")]
mod imp {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    fn table() -> &'static Mutex<HashMap<String, u64>> {
        static T: OnceLock<Mutex<HashMap<String, u64>>> = OnceLock::new();
        T.get_or_init(|| Mutex::new(super::parse(&std::env::var(super::ENV).unwrap_or_default())))
    }

    pub fn hit(name: &str) {
        let mut t = table().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(left) = t.get_mut(name) {
            *left -= 1;
            if *left == 0 {
                eprintln!("failpoint {name}: exiting with status {}", super::EXIT_CODE);
                std::process::exit(super::EXIT_CODE);
            }
        }
    }
}

/// Marks a protocol step. Exits the process when the step is armed.
#[inline]
pub fn hit(name: &str) {
    #[cfg(feature = "failpoints")]
    imp::hit(name);
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}

/// Parses `a,b@3` into {a: 1, b: 3}. Malformed counts count as 1.
pub fn parse(spec: &str) -> std::collections::HashMap<String, u64> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.split_once('@') {
            Some((n, c)) => (n.to_string(), c.parse().unwrap_or(1).max(1)),
            None => (s.to_string(), 1),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_names_and_counts() {
        let m = super::parse(" a, b@3 ,c@x,");
        assert_eq!(m.get("a"), Some(&1));
        assert_eq!(m.get("b"), Some(&3));
        assert_eq!(m.get("c"), Some(&1));
        assert_eq!(m.len(), 3);
    }
}
