//! TLS to the servers (issue 8): a MariaDB started with a certificate signed by a test CA
//! (made with the `openssl` CLI) and `require_secure_transport=ON`. A connection with
//! `ssl-mode=VERIFY_CA&ssl-ca=...` passes on both planes (sqlx: the state store through
//! `backfill status`; mysql_async: the connection of install/serve/verify, encrypted); a
//! plain one fails with a usage error (exit 2) that names the URL parameter to add. With
//! a password in those TLS URLs, no output of the binary at debug level contains it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::{backfill, bf};
use harness::{Server, ServerOpts};
use mysql_async::prelude::Queryable;
use std::path::Path;
use std::process::Command;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the openssl CLI is needed by this test (apt-get install -y openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// ca.pem, server.pem, server.key in `dir`.
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=backfill-test-ca",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_pass_and_a_plain_one_is_refused_with_the_fix() {
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let p = |f: &str| certs.path().join(f).display().to_string();
    let server = Server::start_private(
        ServerOpts::target()
            .config(format!("ssl_ca={}", p("ca.pem")))
            .config(format!("ssl_cert={}", p("server.pem")))
            .config(format!("ssl_key={}", p("server.key"))),
    );
    // The harness's readiness check uses a plain client: require TLS only now.
    server.sql("CREATE DATABASE tls_db; SET GLOBAL require_secure_transport = ON");
    let port = server.port();
    let ca = p("ca.pem");
    let verify = format!("ssl-mode=VERIFY_CA&ssl-ca={ca}");

    // Control plane (sqlx): the state store over TLS; plain is refused with the fix.
    let state_tls = format!("mysql://root@127.0.0.1:{port}/tls_state?{verify}");
    let (code, out) = backfill(&["status", "--state", &state_tls]).code_all();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no jobs installed"), "{out}");
    let state_plain = format!("mysql://root@127.0.0.1:{port}/tls_state?ssl-mode=DISABLED");
    let (code, out) = backfill(&["status", "--state", &state_plain]).code_all();
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("requires TLS") && out.contains("ssl-mode=REQUIRED"),
        "{out}"
    );

    // Data plane (mysql_async): the same URL parameters.
    let data_tls = format!("mysql://root@127.0.0.1:{port}/tls_db?{verify}");
    let opts = bf::io::connect::opts(&data_tls, "--target").unwrap();
    let mut c = bf::io::connect::connect(opts, "target", &data_tls)
        .await
        .unwrap_or_else(|e| panic!("TLS connect: {e}"));
    let cipher: Option<(String, String)> = c
        .query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .await
        .unwrap();
    assert!(
        cipher.is_some_and(|(_, v)| !v.is_empty()),
        "the session is not encrypted"
    );
    c.disconnect().await.unwrap();
    let required = format!("mysql://root@127.0.0.1:{port}/tls_db?ssl-mode=REQUIRED");
    let opts = bf::io::connect::opts(&required, "--target").unwrap();
    let c = bf::io::connect::connect(opts, "target", &required)
        .await
        .unwrap();
    c.disconnect().await.unwrap();
    let plain = format!("mysql://root@127.0.0.1:{port}/tls_db");
    let opts = bf::io::connect::opts(&plain, "--target").unwrap();
    let e = bf::io::connect::connect(opts, "target", &plain)
        .await
        .expect_err("a plain connection must be refused");
    let m = e.to_string();
    assert!(
        m.contains("requires TLS") && m.contains("ssl-mode=REQUIRED"),
        "{m}"
    );
    assert_eq!(bf::cli::run::exit_code(&e), bf::cli::EXIT_USAGE, "{m}");
    // A CA that did not sign the server's certificate is refused too.
    let other = tempfile::tempdir().unwrap();
    certificates(other.path());
    let wrong = format!(
        "mysql://root@127.0.0.1:{port}/tls_db?ssl-mode=VERIFY_CA&ssl-ca={}",
        other.path().join("ca.pem").display()
    );
    let opts = bf::io::connect::opts(&wrong, "--target").unwrap();
    assert!(bf::io::connect::connect(opts, "target", &wrong)
        .await
        .is_err());
    no_password_in_tls_outputs(
        &server,
        &verify,
        &other.path().join("ca.pem").display().to_string(),
    );
}

const PW: &str = "Tls9sEcReTpw55q";

/// TLS URLs that carry a password, at debug log level, through the real binary: a status
/// that succeeds, a plain connection refused, a CA that did not sign the certificate, and
/// install's data-plane connection with the wrong CA; no output holds the password.
fn no_password_in_tls_outputs(server: &Server, verify: &str, wrong_ca: &str) {
    server.sql(&format!(
        "CREATE USER IF NOT EXISTS 'bf_tls_user'@'%' IDENTIFIED BY '{PW}'; \
         GRANT ALL PRIVILEGES ON *.* TO 'bf_tls_user'@'%'"
    ));
    let port = server.port();
    let base = format!("mysql://bf_tls_user:{PW}@127.0.0.1:{port}");
    let run = |args: &[&str]| {
        let o = backfill_tests::command()
            .args(args)
            .env("RUST_LOG", "debug")
            .env("RUST_BACKTRACE", "1")
            .env_remove("BACKFILL_STATE")
            .env_remove("BACKFILL_FORMAT")
            .output()
            .unwrap();
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.code().unwrap_or(-1), out)
    };
    let state = format!("{base}/tls_state?{verify}");
    let mut all = String::new();
    let mut expect = |args: &[&str], ok: bool| {
        let (code, out) = run(args);
        assert_eq!(code == 0, ok, "exit {code}: {}", out.replace(PW, "<PW>"));
        all.push_str(&out);
    };
    expect(&["status", "--state", &state], true);
    expect(&["status", "--state", &state, "--format", "json"], true);
    expect(
        &[
            "status",
            "--state",
            &format!("{base}/tls_state?ssl-mode=DISABLED"),
        ],
        false,
    );
    expect(
        &[
            "status",
            "--state",
            &format!("{base}/tls_state?ssl-mode=VERIFY_CA&ssl-ca={wrong_ca}"),
        ],
        false,
    );
    expect(
        &[
            "install",
            "--state",
            &state,
            "--source",
            &format!("{base}?ssl-mode=VERIFY_CA&ssl-ca={wrong_ca}"),
            "--source-table",
            "tls_db.t",
            "--target",
            &format!("{base}?ssl-mode=REQUIRED"),
            "--target-table",
            "tls_db.t2",
        ],
        false,
    );
    assert!(
        all.contains("***"),
        "redacted URLs are expected somewhere:\n{all}"
    );
    let hits: Vec<&str> = all.lines().filter(|l| l.contains(PW)).collect();
    assert!(
        hits.is_empty(),
        "the password leaked in {} line(s):\n{}",
        hits.len(),
        hits.join("\n").replace(PW, "<PW>")
    );
}
