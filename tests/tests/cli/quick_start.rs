//! README.md's quick start ("Copy your own table") runs as it is written (issue 39). Its
//! SQL block creates the accounts on three throwaway servers (source, target, state store),
//! each part on the server its `-- on the ... server` line names; its shell block runs in
//! bash with the program under test on PATH as `backfill`, with only the VALUES of its
//! leading variable assignments replaced (the servers' host:port in the three URLs, the
//! data directory), while a writer keeps changing the source table. Every other byte of
//! both blocks is the README's, so a renamed flag, a missing grant or a wrong wait loop
//! in the README fails this test. The block runs under `bash -e`: audit's and verify's
//! exit 4 end it with that code. Then: the table reached STREAMING, the audit passed, the
//! pinned verify was clean, and the cancel ended the job (CANCELLED), as status shows.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use harness::{Server, ServerOpts};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the whole shell block may take (it copies a few thousand rows).
const BLOCK_LIMIT: Duration = Duration::from_secs(300);

/// The README section of the quick start, up to the next `## ` heading.
fn quick_start(readme: &str) -> &str {
    let start = readme
        .find("\n## Copy your own table\n")
        .expect("README.md has no section `## Copy your own table`");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

/// The body of the first fenced block of `lang` in `section`.
fn fenced<'a>(section: &'a str, lang: &str) -> &'a str {
    let open = format!("```{lang}\n");
    let start = section
        .find(&open)
        .unwrap_or_else(|| panic!("no ```{lang} block in the quick start"))
        + open.len();
    let len = section[start..]
        .find("\n```")
        .expect("an unterminated fenced block");
    &section[start..start + len + 1]
}

/// The SQL block cut at its `-- on the X server` lines: (X, statements).
fn sql_parts(sql: &str) -> Vec<(String, String)> {
    let mut parts: Vec<(String, String)> = Vec::new();
    for line in sql.lines() {
        if let Some(rest) = line.strip_prefix("-- on the ") {
            let server = rest.split(" server").next().unwrap_or("").to_string();
            parts.push((server, String::new()));
        } else if let Some((_, body)) = parts.last_mut() {
            body.push_str(line);
            body.push('\n');
        } else {
            assert!(line.trim().is_empty(), "SQL before any `-- on the`: {line}");
        }
    }
    parts
}

/// The leading `NAME=value` lines of the shell block, in order.
fn leading_assignments(block: &str) -> Vec<(String, String)> {
    block
        .lines()
        .map_while(|l| {
            let (name, value) = l.split_once('=')?;
            let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_');
            ok.then(|| (name.to_string(), value.to_string()))
        })
        .collect()
}

/// `'mysql://user:pw@host:port/path'` with host:port replaced by the local server's.
fn with_server(value: &str, port: u16) -> String {
    let at = value.find('@').expect("a URL with user@host");
    let slash = value[at..].find('/').expect("a URL with a path") + at;
    format!("{}127.0.0.1:{port}{}", &value[..=at], &value[slash..])
}

/// Unquoted value of a shell assignment (`'a'`, `"a"` or `a`).
fn unquoted(v: &str) -> &str {
    v.trim_matches(|c| c == '\'' || c == '"')
}

/// The shell block with its leading assignments' values replaced; every other line as is.
fn localised(block: &str, ports: [(&str, u16); 3], data: &Path) -> String {
    let assigns = leading_assignments(block);
    let mut seen = Vec::new();
    let mut out = String::new();
    for (i, line) in block.lines().enumerate() {
        let Some((name, value)) = assigns.get(i) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let value = match (name.as_str(), ports.iter().find(|(n, _)| n == name)) {
            (_, Some((_, port))) => with_server(value, *port),
            ("DATA", None) => format!("'{}'", data.display()),
            _ => value.clone(),
        };
        seen.push(name.as_str());
        out.push_str(&format!("{name}={value}\n"));
    }
    for want in [
        "SOURCE",
        "TARGET",
        "STATE",
        "DATA",
        "SOURCE_TABLE",
        "TARGET_TABLE",
    ] {
        assert!(
            seen.contains(&want),
            "the quick start's block does not begin by setting {want}: {seen:?}"
        );
    }
    let rest: String = block.lines().skip(assigns.len()).collect();
    assert!(
        !rest.contains("mysql://") && !rest.contains("-host"),
        "the quick start's commands must use only its variables:\n{rest}"
    );
    out
}

/// Kills the block's process group (bash and the serve it started) when dropped.
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0)])
            .stderr(Stdio::null())
            .status();
    }
}

/// Runs `script` with bash -e, `bin` first on PATH, no BACKFILL_* setting inherited;
/// returns the exit code and what it printed (stdout then stderr).
fn run_block(script: &Path, bin: &Path, out: &Path) -> (i32, String, String) {
    let (stdout, stderr) = (out.join("stdout"), out.join("stderr"));
    let mut cmd = Command::new("bash");
    cmd.arg("-e").arg(script);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("BACKFILL_") {
            cmd.env_remove(k);
        }
    }
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("{}:{path}", bin.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .process_group(0);
    let mut child = cmd.spawn().expect("bash");
    let _group = Group(child.id());
    let until = Instant::now() + BLOCK_LIMIT;
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code().unwrap_or(-1);
        }
        if Instant::now() > until {
            break -2;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let (o, e) = (read(&stdout), read(&stderr));
    assert!(
        code != -2,
        "the quick start did not end within {BLOCK_LIMIT:?}\n{o}\n{e}"
    );
    (code, o, e)
}

#[test]
fn the_readme_quick_start_runs_as_written() {
    let t0 = Instant::now();
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let section = quick_start(&readme);
    let (sql, block) = (fenced(section, "sql"), fenced(section, "sh"));
    let assigns = leading_assignments(block);
    let value = |n: &str| {
        let v = assigns
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str());
        unquoted(v.unwrap_or_else(|| panic!("the block sets no {n}"))).to_string()
    };
    let source_table = value("SOURCE_TABLE");
    let (sdb, stable) = source_table
        .split_once('.')
        .expect("SOURCE_TABLE as db.table");

    let source = Server::start_private(ServerOpts::source());
    let target = Server::start_private(ServerOpts::target());
    let state = Server::start_private(ServerOpts::target().server_id(3));
    // The user's own table, as root: 3 000 rows.
    source.sql(&format!(
        "CREATE DATABASE `{sdb}`; USE `{sdb}`; \
         CREATE TABLE `{stable}` (id BIGINT NOT NULL PRIMARY KEY, item VARCHAR(40) NOT NULL, \
         qty INT NOT NULL, at DATETIME(6) NULL) ENGINE=InnoDB; \
         INSERT INTO `{stable}` SELECT seq, CONCAT('item ', seq), seq % 7, NOW(6) \
         FROM seq_1_to_3000"
    ));
    let parts = sql_parts(sql);
    let names: Vec<&str> = parts.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(names, ["source", "target", "state-store"], "{sql}");
    for (name, statements) in &parts {
        let server = match name.as_str() {
            "source" => &source,
            "target" => &target,
            _ => &state,
        };
        server.sql(statements);
    }

    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(backfill_tests::bin::path(), bin.join("backfill")).unwrap();
    let data = dir.path().join("data");
    let ports = [
        ("SOURCE", source.port()),
        ("TARGET", target.port()),
        ("STATE", state.port()),
    ];
    let script = dir.path().join("quick-start.sh");
    std::fs::write(&script, localised(block, ports, &data)).unwrap();

    // A writer changes the source table the whole time the block runs.
    let stop = AtomicBool::new(false);
    let writes = AtomicU64::new(0);
    let (code, out, err) = std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                source.sql_in(
                    sdb,
                    &format!(
                        "INSERT INTO `{stable}` VALUES ({}, 'new', 1, NOW(6)); \
                         UPDATE `{stable}` SET qty = qty + 1 WHERE id = {}",
                        100_000 + n,
                        n % 3000 + 1
                    ),
                );
                writes.store(n, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let r = run_block(&script, &bin, dir.path());
        stop.store(true, Ordering::Relaxed);
        r
    });
    let all = format!("{out}\n--- stderr\n{err}");
    assert_eq!(code, 0, "the quick start failed:\n{all}");
    assert!(
        writes.load(Ordering::Relaxed) > 0,
        "no write reached the source"
    );

    // What the block printed: the status after the wait, the audit, the verify.
    assert!(
        out.lines()
            .any(|l| l.starts_with("job ") && l.contains("  STREAMING  ")),
        "no STREAMING status:\n{all}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("audit of job ") && l.contains(": PASS (")),
        "no passed audit:\n{all}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("verify ") && l.ends_with(": EQUAL")),
        "verify did not say EQUAL:\n{all}"
    );
    for clean in [
        "  missing keys (in source, not in target): 0",
        "  extra keys (in target, not in source): 0",
        "  differing fields: 0 in 0 rows",
    ] {
        assert!(out.lines().any(|l| l == clean), "no `{clean}`:\n{all}");
    }
    // The job ended: CANCELLED, as the state store says after the block.
    let st = backfill_tests::backfill(&[
        "status",
        "--state",
        &state.url_db(value("STATE").rsplit('/').next().unwrap()),
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&st.stdout)
        .unwrap_or_else(|e| panic!("status JSON ({e}): {}", st.all()));
    let jobs = v["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 1, "{v}");
    assert_eq!(jobs[0]["state"], "CANCELLED", "{v}");
    // The target kept its rows (a cancel never deletes them): at least the 3 000 copied.
    let target_table = value("TARGET_TABLE");
    let (tdb, ttable) = target_table
        .split_once('.')
        .expect("TARGET_TABLE as db.table");
    let rows: u64 = target
        .sql_in(tdb, &format!("SELECT COUNT(*) FROM `{ttable}`"))
        .parse()
        .unwrap();
    assert!(rows >= 3000, "{rows} rows in the target");
    eprintln!(
        "quick start: {} writes during the block, {rows} target rows, {:.1} s in all",
        writes.load(Ordering::Relaxed),
        t0.elapsed().as_secs_f64()
    );
}
