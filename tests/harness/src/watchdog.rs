//! Cleanup that survives the death of the test process.
//!
//! Each instance gets a `bash` watchdog, in its own process group so that a Ctrl-C aimed at
//! the test does not kill it first, whose stdin is a pipe whose only write end lives in the
//! test process. The watchdog blocks on `read`; when the test process dies in any way (normal
//! exit, panic, abort, SIGKILL) the kernel closes that write end, `read` returns on EOF, and
//! the watchdog SIGKILLs the `mariadbd` named in the pid file and removes the directory.

use std::io::ErrorKind;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Name of the pid file inside an instance directory.
pub const PID_FILE: &str = "mariadbd.pid";

/// `$1` is the instance directory. Kills only a process whose command line names mariadbd,
/// so a recycled pid is never hit.
const SCRIPT: &str = r#"
trap '' INT TERM HUP
read -r _
pid=$(cat "$1/mariadbd.pid" 2>/dev/null)
if [ -n "$pid" ] && grep -qa mariadbd "/proc/$pid/cmdline" 2>/dev/null; then
  kill -9 "$pid" 2>/dev/null
  for _ in $(seq 100); do grep -qa mariadbd "/proc/$pid/cmdline" 2>/dev/null || break; sleep 0.05; done
fi
rm -rf -- "$1"
"#;

/// A running watchdog. Dropping it closes the pipe, which makes the watchdog clean up; a
/// `Server` kept in a `static` is never dropped, so its pipe closes only when the process dies.
pub struct Watchdog {
    child: Child,
    pipe: Option<ChildStdin>,
}

impl Watchdog {
    /// Spawns the watchdog for `dir`.
    pub fn spawn(dir: &Path) -> Watchdog {
        let mut child = Command::new("bash")
            .args(["-c", SCRIPT, "backfill-harness-watchdog"])
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("harness: cannot spawn the bash watchdog: {e}"));
        let pipe = child.stdin.take();
        Watchdog { child, pipe }
    }

    /// Closes the pipe now (the watchdog cleans up at once) and reaps it, bounded to 10 s.
    pub fn release(&mut self) {
        drop(self.pipe.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Root directory of every instance: `temp_dir()/backfill-harness`.
pub fn root() -> PathBuf {
    std::env::temp_dir().join("backfill-harness")
}

/// Removes instance directories (and their servers) left by test processes that are gone.
pub fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(root()) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if owner_pid(&path).is_some_and(|pid| !process_alive(pid)) {
            kill_from_pid_file(&path, "-KILL");
            remove_dir(&path);
        }
    }
}

/// The `<pid>` prefix of a `<pid>-<n>` directory name.
fn owner_pid(dir: &Path) -> Option<u32> {
    let name = dir.file_name()?.to_str()?;
    name.split_once('-')?.0.parse().ok()
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Reads the pid from `dir`'s pid file, if that process is a live mariadbd.
pub fn mariadbd_pid(dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(dir.join(PID_FILE)).ok()?;
    let pid: u32 = text.trim().parse().ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    String::from_utf8_lossy(&cmdline)
        .contains("mariadbd")
        .then_some(pid)
}

/// Sends `signal` (e.g. "-KILL", "-TERM") to the mariadbd of `dir`, if one is running.
pub fn kill_from_pid_file(dir: &Path, signal: &str) {
    if let Some(pid) = mariadbd_pid(dir) {
        send_signal(pid, signal);
    }
}

/// Sends a signal through the `kill` binary (the workspace forbids unsafe code).
pub fn send_signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(signal)
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Removes a directory tree, ignoring "already gone".
pub fn remove_dir(dir: &Path) {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != ErrorKind::NotFound => {
            eprintln!("harness: cannot remove {}: {e}", dir.display())
        }
        _ => {}
    }
}
