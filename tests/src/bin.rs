//! The `backfill` program under test, run as a child process.
//!
//! How it is found: this package compiles bootstrap's own `src/main.rs` as its binary
//! `backfill-under-test` (tests/Cargo.toml), so `cargo test` (`-p backfill-tests` or
//! `--workspace`, clean clone or not) builds it, with fault points compiled in, before it
//! runs the suites. A suite's executable lives in `target/<profile>/deps/`, the package's
//! binaries one level up: [`path`] looks there. `BACKFILL_TEST_BIN` overrides it (e.g. to run
//! the suites against another build). The program runs with argv[0] = `backfill`, so it
//! names itself as the shipped one does.
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

/// Overrides where the program under test is.
pub const BIN_ENV: &str = "BACKFILL_TEST_BIN";

/// A binary of this package (`backfill-under-test`, `finish-child`) next to the running
/// test executable.
pub fn sibling(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut dir = exe.parent().expect("target/<profile>/deps").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let p = dir.join(name);
    assert!(
        p.is_file(),
        "{} is missing: it is built by `cargo test -p backfill-tests` (a [[bin]] of \
         tests/Cargo.toml); set {BIN_ENV} to use another build",
        p.display()
    );
    p
}

/// Path of the `backfill` program under test.
pub fn path() -> PathBuf {
    match std::env::var_os(BIN_ENV) {
        Some(p) => PathBuf::from(p),
        None => sibling("backfill-under-test"),
    }
}

/// A command running the program, with no `BACKFILL_*` setting inherited from the test's
/// environment (a test passes each one it means) but `BACKFILL_MARIADBD` (where the
/// harness, and so `backfill demo`, finds `mariadbd`).
pub fn command() -> Command {
    let mut c = Command::new(path());
    c.arg0("backfill");
    for (k, _) in std::env::vars_os() {
        let name = k.to_string_lossy();
        if name.starts_with("BACKFILL_") && name != "BACKFILL_MARIADBD" {
            c.env_remove(k);
        }
    }
    c
}

/// What a finished run printed, and its exit code (-1 when killed by a signal).
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Runs `cmd` to its end.
    pub fn of(cmd: &mut Command) -> Run {
        let o = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// stdout then stderr.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// The exit code and stdout then stderr.
    pub fn code_all(&self) -> (i32, String) {
        (self.code, self.all())
    }

    /// The exit code, stdout and stderr.
    pub fn parts(self) -> (i32, String, String) {
        (self.code, self.stdout, self.stderr)
    }
}

/// `backfill ARGS`, run to its end.
pub fn backfill(args: &[&str]) -> Run {
    Run::of(command().args(args))
}
