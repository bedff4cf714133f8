//! Real, throwaway MariaDB servers for the tests of every crate in this workspace.
//!
//! # Design
//!
//! * **Real servers, never mocks.** Each [`Server`] is a private `mariadbd` with its own
//!   directory under `temp_dir()/backfill-harness/<pid>-<n>`, initialised by
//!   `mariadb-install-db` and listening on a free loopback port. The binlog behaviour the
//!   product depends on (ROW events, FULL metadata, GTIDs, rotation on restart) can only be
//!   trusted when it comes from the real server.
//! * **Tests fail, they never skip.** If `mariadbd` or `mariadb-install-db` is missing, or the
//!   server does not come up, the harness panics with the exact install command
//!   ([`INSTALL_HINT`]). A silently skipped suite looks green while testing nothing.
//! * **Shared instances.** Starting a server costs about half a second, so
//!   [`shared_source`] and [`shared_target`] start one of each lazily per test binary
//!   (`OnceLock`) and every test isolates itself in its own database from
//!   [`Server::fresh_db`]. Tests that kill, restart or reset a server use
//!   [`Server::start_private`] instead, so they never disturb their neighbours.
//! * **Cleanup survives any death of the test process.** A `static` is never dropped, and a
//!   test binary can also abort or be SIGKILLed. So each instance has a `bash` watchdog whose
//!   stdin is a pipe held open by the test process for its whole life; when the process dies
//!   the pipe reaches EOF and the watchdog SIGKILLs the `mariadbd` named in the pid file and
//!   removes the directory. `mariadbd` runs in its own process group so a terminal's Ctrl-C
//!   reaches the test, not the server mid-write. At first use, directories whose `<pid>` is
//!   no longer a live process are swept as well.
//! * **No dependencies** beyond `std`, so the harness compiles instantly; signals go through
//!   the `kill` binary because the workspace denies unsafe code.

mod bins;
mod config;
mod galera;
mod proxy;
mod replica;
mod watchdog;

pub use bins::{GALERA_INSTALL_HINT, INSTALL_HINT, MARIADBD_ENV};
pub use config::Role;
pub use galera::{Cluster, GALERA_PROVIDER};
pub use proxy::Proxy;

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once, OnceLock};
use std::time::{Duration, Instant};

use watchdog::Watchdog;

/// How long a server may take to accept `SELECT 1` after being spawned (a Galera joiner
/// first receives the whole state by SST: ~40 s was seen on two loaded cores).
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a SIGTERM shutdown may take before the server is SIGKILLed.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts at picking a free port when another process grabs ours first.
const PORT_ATTEMPTS: u32 = 5;

/// How to start a [`Server`].
#[derive(Clone, Debug)]
pub struct ServerOpts {
    /// Source or target; selects the default `server_id`.
    pub role: Role,
    /// Lines appended to the `[mariadbd]` section, e.g. `"binlog_row_metadata=MINIMAL"`.
    pub extra_config: Vec<String>,
    /// Overrides the role's `server_id`.
    pub server_id: Option<u32>,
    /// Overrides the `mariadbd` binary (before `$BACKFILL_MARIADBD` and the PATH search).
    pub mariadbd: Option<PathBuf>,
}

impl Default for ServerOpts {
    fn default() -> Self {
        ServerOpts::source()
    }
}

impl ServerOpts {
    /// Options for a source: `server_id=1`, ROW binlog with FULL image and metadata.
    pub fn source() -> Self {
        ServerOpts {
            role: Role::Source,
            extra_config: Vec::new(),
            server_id: None,
            mariadbd: None,
        }
    }

    /// Options for a target: `server_id=2`, binlog on.
    pub fn target() -> Self {
        ServerOpts {
            role: Role::Target,
            ..ServerOpts::source()
        }
    }

    /// Appends one config line to the `[mariadbd]` section.
    pub fn config(mut self, line: impl Into<String>) -> Self {
        self.extra_config.push(line.into());
        self
    }

    /// Overrides the `server_id`.
    pub fn server_id(mut self, id: u32) -> Self {
        self.server_id = Some(id);
        self
    }

    /// Overrides the `mariadbd` binary.
    pub fn mariadbd(mut self, path: impl Into<PathBuf>) -> Self {
        self.mariadbd = Some(path.into());
        self
    }
}

/// A running private MariaDB instance. Usable from `&'static`; dropping a non-static one
/// kills the server and removes its directory.
pub struct Server {
    dir: PathBuf,
    port: u16,
    server_id: u32,
    role: Role,
    mariadbd: PathBuf,
    extra_config: Vec<String>,
    child: Mutex<Option<Child>>,
    watchdog: Mutex<Watchdog>,
    /// Extra arguments of every start until cleared (a Galera node's `--wsrep-new-cluster`,
    /// cleared once the node is up).
    once_args: Mutex<Vec<String>>,
}

/// Checks, without panicking, that every MariaDB binary the harness needs is installed
/// (`mariadbd` honouring [`MARIADBD_ENV`], `mariadb-install-db`, `mariadb`). The error
/// names what is missing and the install command ([`INSTALL_HINT`]). Programs that are not
/// tests (`backfill demo`) call this first, then [`Server::start`].
pub fn check_installed() -> Result<(), String> {
    let mut missing: Vec<String> = ["mariadb-install-db", "mariadb"]
        .into_iter()
        .filter(|b| bins::find(b).is_none())
        .map(str::to_string)
        .collect();
    match std::env::var_os(MARIADBD_ENV) {
        Some(p) if !std::path::Path::new(&p).is_file() => missing.insert(
            0,
            format!("mariadbd (${MARIADBD_ENV} = {})", p.to_string_lossy()),
        ),
        Some(_) => {}
        None if bins::find("mariadbd").is_none() => missing.insert(0, "mariadbd".to_string()),
        None => {}
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "MariaDB is not installed here ({} not found in PATH or /usr/sbin). Install it with: \
         `{INSTALL_HINT}` (or run scripts/ensure-mariadb)",
        missing.join(", ")
    ))
}

/// The source shared by all tests of this test binary (started on first use).
pub fn shared_source() -> &'static Server {
    static SOURCE: OnceLock<Server> = OnceLock::new();
    SOURCE.get_or_init(|| Server::start(ServerOpts::source()))
}

/// The target shared by all tests of this test binary (started on first use).
pub fn shared_target() -> &'static Server {
    static TARGET: OnceLock<Server> = OnceLock::new();
    TARGET.get_or_init(|| Server::start(ServerOpts::target()))
}

impl Server {
    /// Initialises and starts a new instance; panics (with [`INSTALL_HINT`]) if it cannot.
    pub fn start(opts: ServerOpts) -> Server {
        let mariadbd = bins::mariadbd(opts.mariadbd.as_deref());
        let install_db = bins::require("mariadb-install-db");
        bins::client();
        static SWEEP: Once = Once::new();
        SWEEP.call_once(watchdog::sweep_stale);
        let mut server = Server::create(opts, mariadbd);
        server.install(&install_db);
        server.boot();
        server
    }

    /// Same as [`Server::start`]; names the intent of a test that needs its own instance.
    pub fn start_private(opts: ServerOpts) -> Server {
        Server::start(opts)
    }

    /// Makes the directory, its watchdog and the config, without starting anything.
    fn create(opts: ServerOpts, mariadbd: PathBuf) -> Server {
        let dir = new_instance_dir();
        let watchdog = Watchdog::spawn(&dir);
        let server = Server {
            port: free_port(),
            server_id: opts.server_id.unwrap_or(opts.role.default_server_id()),
            role: opts.role,
            mariadbd,
            extra_config: opts.extra_config,
            child: Mutex::new(None),
            watchdog: Mutex::new(watchdog),
            once_args: Mutex::new(Vec::new()),
            dir,
        };
        server.write_config();
        server
    }

    fn write_config(&self) {
        let cnf = config::render(&self.dir, self.port, self.server_id, &self.extra_config);
        std::fs::write(self.cnf_path(), cnf).unwrap_or_else(|e| panic!("harness: my.cnf: {e}"));
    }

    fn install(&self, install_db: &Path) {
        let out = Command::new(install_db)
            .arg(format!("--defaults-file={}", self.cnf_path().display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| bins::missing("mariadb-install-db", &e.to_string()));
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            self.fail(&format!("{} failed: {stderr}", install_db.display()));
        }
    }

    /// First start: on a port clash, picks another port and tries again.
    fn boot(&mut self) {
        for _ in 1..PORT_ATTEMPTS {
            match self.spawn_and_wait() {
                Ok(()) => return,
                Err(Failure::PortClash) => {
                    self.port = free_port();
                    self.write_config();
                }
                Err(Failure::Other(why)) => self.fail(&why),
            }
        }
        self.start_or_panic();
    }

    fn start_or_panic(&self) {
        match self.spawn_and_wait() {
            Ok(()) => {}
            Err(Failure::PortClash) => self.fail(&format!("port {} is taken", self.port)),
            Err(Failure::Other(why)) => self.fail(&why),
        }
    }

    fn fail(&self, why: &str) -> ! {
        self.kill_child();
        let detail = format!(
            "{why}\n--- tail of {}:\n{}",
            self.error_log().display(),
            self.log_tail()
        );
        bins::missing("a MariaDB server that starts", &detail)
    }

    fn spawn_and_wait(&self) -> Result<(), Failure> {
        let child = self.spawn_mariadbd().map_err(Failure::Other)?;
        *self.child_lock() = Some(child);
        self.wait_ready()
    }

    fn spawn_mariadbd(&self) -> Result<Child, String> {
        let out = |name: &str| File::create(self.dir.join(name)).map_err(|e| e.to_string());
        let once = self
            .once_args
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Command::new(&self.mariadbd)
            .arg(format!("--defaults-file={}", self.cnf_path().display()))
            .args(once)
            .stdin(Stdio::null())
            .stdout(out("mariadbd.stdout")?)
            .stderr(out("mariadbd.stderr")?)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot spawn {}: {e}", self.mariadbd.display()))
    }

    /// Waits until our own server (checked by its datadir) answers `SELECT 1`.
    fn wait_ready(&self) -> Result<(), Failure> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Err(self.classify_exit(&status));
            }
            if self.port_open() && self.answers_as_ours() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(Failure::Other(format!(
            "not ready within {READY_TIMEOUT:?}"
        )))
    }

    fn answers_as_ours(&self) -> bool {
        let expected = format!("{}/data", self.dir.display());
        self.try_sql("SELECT 1, @@datadir")
            .is_ok_and(|out| out.trim_end_matches('/').ends_with(&expected))
    }

    fn exited(&self) -> Option<String> {
        let mut guard = self.child_lock();
        let status = guard.as_mut()?.try_wait().ok()??;
        guard.take();
        Some(status.to_string())
    }

    fn classify_exit(&self, status: &str) -> Failure {
        let log = self.log_tail();
        if log.contains("Address already in use") || log.contains("Bind on TCP/IP port") {
            Failure::PortClash
        } else {
            Failure::Other(format!("mariadbd exited early ({status})"))
        }
    }

    /// The port this server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `mysql://root@127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}", self.port)
    }

    /// `mysql://root@127.0.0.1:PORT/DB`
    pub fn url_db(&self, db: &str) -> String {
        format!("{}/{db}", self.url())
    }

    /// `mysql://USER:PASSWORD@127.0.0.1:PORT/DB`, user and password percent-encoded.
    pub fn url_user(&self, user: &str, password: &str, db: &str) -> String {
        let (user, password) = (percent_encode(user), percent_encode(password));
        format!("mysql://{user}:{password}@127.0.0.1:{}/{db}", self.port)
    }

    /// The instance directory (config, logs, `data/`, `binlog/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory holding the binlog files (`mysql-bin.NNNNNN`).
    pub fn binlog_dir(&self) -> PathBuf {
        self.dir.join("binlog")
    }

    /// The configured `server_id`.
    pub fn server_id(&self) -> u32 {
        self.server_id
    }

    /// The role this server was started with.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The pid of the running `mariadbd`, if it is running.
    pub fn pid(&self) -> Option<u32> {
        self.child_lock().as_ref().map(Child::id)
    }

    /// Creates an empty database named `PREFIX_N_PID` (at most 64 chars of `[a-z0-9_]`).
    pub fn fresh_db(&self, prefix: &str) -> String {
        let name = unique_db_name(prefix);
        self.sql(&format!("CREATE DATABASE `{name}`"));
        name
    }

    /// Runs SQL as root through the `mariadb` CLI (`-N -B`); panics with stderr on failure.
    /// Returns stdout without its trailing newlines (tab-separated columns, one row a line).
    pub fn sql(&self, sql: &str) -> String {
        self.try_sql(sql).unwrap_or_else(|e| {
            panic!("harness: SQL failed on port {}: {e}\nSQL: {sql}", self.port)
        })
    }

    /// Like [`Server::sql`] but returns the client's stderr as the error.
    pub fn try_sql(&self, sql: &str) -> Result<String, String> {
        let out = self
            .client()
            .arg("-e")
            .arg(sql)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            Ok(text.trim_end_matches(['\n', '\r']).to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    /// Like [`Server::sql`], with `db` as the default database.
    pub fn sql_in(&self, db: &str, sql: &str) -> String {
        self.sql(&format!("USE `{}`; {sql}", db.replace('`', "``")))
    }

    fn client(&self) -> Command {
        let mut cmd = Command::new(bins::client());
        cmd.args(["--no-defaults", "-h127.0.0.1", "-uroot", "-N", "-B"])
            .arg(format!("-P{}", self.port))
            .stdin(Stdio::null());
        cmd
    }

    /// SIGKILLs `mariadbd` and waits until its port refuses connections.
    pub fn kill9(&self) {
        self.kill_child();
        watchdog::kill_from_pid_file(&self.dir, "-KILL");
        self.wait_port_closed();
    }

    /// SIGTERMs `mariadbd` and waits for a clean shutdown (SIGKILL after 60 s).
    pub fn stop(&self) {
        let Some(mut child) = self.child_lock().take() else {
            return;
        };
        watchdog::send_signal(child.id(), "-TERM");
        let deadline = Instant::now() + STOP_TIMEOUT;
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        self.wait_port_closed();
    }

    /// Starts `mariadbd` again on the same directory and port (stopping it first if it is
    /// running) and waits until it is ready. After [`Server::kill9`] this is crash recovery.
    pub fn restart(&self) {
        if self.pid().is_some() {
            self.stop();
        }
        self.start_or_panic();
    }

    /// Alias of [`Server::restart`].
    pub fn start_again(&self) {
        self.restart();
    }

    /// Decodes a binlog file with `mariadb-binlog --verbose --base64-output=DECODE-ROWS`.
    /// `file` is a name in [`Server::binlog_dir`] (as in [`Server::binlog_files`]) or a path.
    pub fn mariadb_binlog_verbose(&self, file: &str) -> String {
        let path = self.binlog_dir().join(file);
        let out = Command::new(bins::require("mariadb-binlog"))
            .args(["--no-defaults", "--verbose", "--base64-output=DECODE-ROWS"])
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("harness: cannot run mariadb-binlog: {e}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "mariadb-binlog {} failed: {stderr}",
            path.display()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The bytes of `mariadb-binlog --verbose --base64-output=DECODE-ROWS` of `file`, from
    /// the event at `start` (a position `SHOW MASTER STATUS` gave, or 4) up to the event
    /// that ends at `stop` if given (a file still being written is read up to a position the
    /// server reported, never into an event it is writing). Bytes, not text: string values
    /// are printed as their raw bytes, and a lossy conversion could make two differ equal.
    pub fn mariadb_binlog_bytes(&self, file: &str, start: u64, stop: Option<u64>) -> Vec<u8> {
        let path = self.binlog_dir().join(file);
        let mut cmd = Command::new(bins::require("mariadb-binlog"));
        cmd.args(["--no-defaults", "--verbose", "--base64-output=DECODE-ROWS"])
            .arg(format!("--start-position={start}"));
        if let Some(stop) = stop {
            cmd.arg(format!("--stop-position={stop}"));
        }
        let out = cmd
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("harness: cannot run mariadb-binlog: {e}"));
        assert!(
            out.status.success(),
            "mariadb-binlog {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// The server's binlog file and position now (`SHOW MASTER STATUS`).
    pub fn binlog_end(&self) -> (String, u64) {
        let out = self.sql("SHOW MASTER STATUS");
        let mut f = out.split('\t');
        let file = f.next().unwrap_or_default().to_string();
        let pos = f.next().and_then(|p| p.trim().parse().ok());
        let pos = pos.unwrap_or_else(|| panic!("harness: SHOW MASTER STATUS gave {out:?}"));
        (file, pos)
    }

    /// The binlog file names, oldest first, from `SHOW BINARY LOGS`.
    pub fn binlog_files(&self) -> Vec<String> {
        let out = self.sql("SHOW BINARY LOGS");
        out.lines()
            .filter_map(|l| l.split('\t').next())
            .map(str::to_owned)
            .collect()
    }

    fn kill_child(&self) {
        if let Some(mut child) = self.child_lock().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn port_open(&self) -> bool {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
    }

    fn wait_port_closed(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.port_open() {
            assert!(
                Instant::now() < deadline,
                "harness: port {} still open",
                self.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn child_lock(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cnf_path(&self) -> PathBuf {
        self.dir.join("my.cnf")
    }

    fn error_log(&self) -> PathBuf {
        self.dir.join("error.log")
    }

    /// The last lines of the error log and of mariadbd's stderr.
    fn log_tail(&self) -> String {
        let read = |name: &str| std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        let text = read("error.log") + &read("mariadbd.stderr");
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill_child();
        watchdog::kill_from_pid_file(&self.dir, "-KILL");
        watchdog::remove_dir(&self.dir);
        self.watchdog
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .release();
    }
}

enum Failure {
    PortClash,
    Other(String),
}

/// A fresh `temp_dir()/backfill-harness/<pid>-<n>` with an empty `binlog/`.
fn new_instance_dir() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = watchdog::root().join(format!("{}-{n}", std::process::id()));
    watchdog::remove_dir(&dir);
    std::fs::create_dir_all(dir.join("tmp")).expect("create tmpdir");
    std::fs::create_dir_all(dir.join("binlog"))
        .unwrap_or_else(|e| panic!("harness: cannot create {}: {e}", dir.display()));
    dir
}

/// A loopback port that was free a moment ago (bind to port 0, then release it).
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("harness: cannot bind 127.0.0.1:0: {e}"))
}

/// `PREFIX_N_PID`: prefix lowercased to `[a-z0-9_]` and cut so the name fits in 64 chars.
fn unique_db_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let suffix = format!(
        "_{}_{}",
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::process::id()
    );
    let clean: String = prefix
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64 - suffix.len())
        .collect();
    let clean = if clean.is_empty() {
        "db".to_string()
    } else {
        clean
    };
    clean + &suffix
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
