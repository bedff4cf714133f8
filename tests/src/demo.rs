//! `backfill demo` watched from outside: the demo starts and removes its own servers, so
//! its summary (its own audit and verify) is all it leaves. [`run`] stops the demo process
//! (SIGSTOP) the moment it says the catch-up is done and its audit and verify begin (the
//! writer has stopped, the target has caught up), finds its two servers (the harness
//! directories named after its pid, `port=` in their `my.cnf`), compares the source and
//! target tables there with statements of this crate only ([`crate::digest_sql`] and
//! `CHECKSUM TABLE`, through the `mariadb` client), then lets the demo go on (SIGCONT).
use crate::Run;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The line after which source and target must be equal and stay so.
const CAUGHT_UP: &str = "running the activation audit and verify";
/// The demo's sample table, and where it lives on each server.
const SOURCE: (&str, &str) = ("shop", "orders");
const TARGET: (&str, &str) = ("shop_copy", "orders");
const COLUMNS: [&str; 8] = [
    "id",
    "customer_id",
    "status",
    "amount",
    "currency",
    "note",
    "created_at",
    "updated_at",
];

/// One side of the independent comparison.
#[derive(Debug, PartialEq, Eq)]
pub struct Side {
    /// Row count and digest, as the server computed them.
    pub digest: String,
    /// `CHECKSUM TABLE`'s value.
    pub checksum: String,
}

/// What was seen of a demo run.
pub struct Demo {
    pub run: Run,
    /// (source, target), compared while the demo was stopped.
    pub sides: (Side, Side),
}

/// Runs `backfill demo ARGS` to its end (see the module doc); the progress lines are on
/// stdout, or on stderr with `--format json`.
pub fn run(args: &[&str]) -> Demo {
    let progress_on_stderr = args.windows(2).any(|w| w == ["--format", "json"]);
    let mut child = crate::command()
        .arg("demo")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn backfill demo");
    let pid = child.id();
    let (progress, other): (Box<dyn Read + Send>, Box<dyn Read + Send>) = if progress_on_stderr {
        (
            Box::new(child.stderr.take().unwrap()),
            Box::new(child.stdout.take().unwrap()),
        )
    } else {
        (
            Box::new(child.stdout.take().unwrap()),
            Box::new(child.stderr.take().unwrap()),
        )
    };
    let other = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = BufReader::new(other).read_to_string(&mut s);
        s
    });
    let mut seen = String::new();
    let mut sides = None;
    for line in BufReader::new(progress).lines() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if sides.is_none() && line.contains(CAUGHT_UP) {
            signal(pid, "-STOP");
            let s = compare(pid);
            signal(pid, "-CONT");
            sides = Some(s);
        }
    }
    let status = child.wait().unwrap();
    let other = other.join().unwrap();
    let (stdout, stderr) = if progress_on_stderr {
        (other, seen)
    } else {
        (seen, other)
    };
    let sides =
        sides.unwrap_or_else(|| panic!("the demo never said `{CAUGHT_UP}`:\n{stdout}\n{stderr}"));
    Demo {
        run: Run {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr,
        },
        sides,
    }
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// The ports of the servers of process `pid` (harness instance directories `<pid>-<n>`).
pub fn server_ports(pid: u32) -> Vec<u16> {
    let root = std::env::temp_dir().join("backfill-harness");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("{pid}-"))
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs.iter()
        .filter_map(|d| {
            let cnf = std::fs::read_to_string(d.join("my.cnf")).ok()?;
            cnf.lines()
                .find_map(|l| l.trim().strip_prefix("port=")?.trim().parse().ok())
        })
        .collect()
}

/// Runs `sql` on the server at `port` with the `mariadb` client; its tab-separated output.
pub fn sql_at(port: u16, db: &str, sql: &str) -> String {
    let client = ["/usr/bin/mariadb", "/usr/local/bin/mariadb"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("mariadb"));
    let o = Command::new(client)
        .args(["--no-defaults", "-h127.0.0.1", "-uroot", "-N", "-B"])
        .arg(format!("-P{port}"))
        .arg(format!("-D{db}"))
        .arg("-e")
        .arg(sql)
        .output()
        .expect("run the mariadb client");
    assert!(
        o.status.success(),
        "{sql} on port {port}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn has_db(port: u16, db: &str) -> bool {
    sql_at(
        port,
        "information_schema",
        &format!("SELECT COUNT(*) FROM SCHEMATA WHERE SCHEMA_NAME = '{db}'"),
    ) == "1"
}

fn side(port: u16, (db, table): (&str, &str)) -> Side {
    let checksum = sql_at(port, db, &format!("CHECKSUM TABLE `{table}`"));
    Side {
        digest: sql_at(port, db, &crate::digest_sql(table, "id", &COLUMNS)),
        checksum: checksum.split('\t').nth(1).unwrap_or("").to_string(),
    }
}

fn compare(pid: u32) -> (Side, Side) {
    let ports = server_ports(pid);
    assert_eq!(ports.len(), 2, "the demo's two servers: {ports:?}");
    let source = *ports
        .iter()
        .find(|p| has_db(**p, SOURCE.0))
        .expect("the demo's source server");
    let target = *ports
        .iter()
        .find(|p| has_db(**p, TARGET.0))
        .expect("the demo's target server");
    (side(source, SOURCE), side(target, TARGET))
}
