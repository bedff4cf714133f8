//! Locating the MariaDB binaries. A missing binary is a hard failure with an install hint.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The exact command that installs everything this harness needs.
pub const INSTALL_HINT: &str = "apt-get update && apt-get install -y mariadb-server mariadb-client";

/// What the Galera cluster of [`crate::Cluster`] needs beyond [`INSTALL_HINT`].
pub const GALERA_INSTALL_HINT: &str =
    "apt-get update && apt-get install -y galera-4 mariadb-backup socat";

/// Environment variable that overrides the path of `mariadbd`.
pub const MARIADBD_ENV: &str = "BACKFILL_MARIADBD";

/// Directories searched after `PATH` (Debian puts `mariadbd` in /usr/sbin, often not in PATH).
const FALLBACK_DIRS: [&str; 4] = ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"];

/// Panics with a message that names the missing piece and the install command.
pub fn missing(what: &str, detail: &str) -> ! {
    panic!(
        "harness: {what} is not available. These tests need a real MariaDB server and never \
         skip. Install it with: `{INSTALL_HINT}`\n{detail}"
    )
}

/// Finds `name` in `PATH` then in the fallback directories.
pub fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(FALLBACK_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

/// Finds `name` or panics with the install hint.
pub fn require(name: &str) -> PathBuf {
    find(name).unwrap_or_else(|| missing(name, "not found in PATH or /usr/sbin"))
}

/// The `mariadb` client, looked up once per process.
pub fn client() -> &'static Path {
    static CLIENT: OnceLock<PathBuf> = OnceLock::new();
    CLIENT.get_or_init(|| require("mariadb"))
}

/// Resolves `mariadbd`: an explicit override wins, then `$BACKFILL_MARIADBD`, then the search.
pub fn mariadbd(explicit: Option<&Path>) -> PathBuf {
    let chosen = explicit
        .map(|p| (p.as_os_str().to_owned(), "ServerOpts::mariadbd"))
        .or_else(|| std::env::var_os(MARIADBD_ENV).map(|p| (p, MARIADBD_ENV)));
    match chosen {
        Some((path, source)) => checked_override(path, source),
        None => require("mariadbd"),
    }
}

fn checked_override(path: OsString, source: &str) -> PathBuf {
    let path = PathBuf::from(path);
    if !is_executable(&path) {
        let detail = format!(
            "{source} points at {}, which is not an executable",
            path.display()
        );
        missing("mariadbd", &detail);
    }
    path
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
