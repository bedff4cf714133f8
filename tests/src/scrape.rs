//! Reading a `--metrics-addr` endpoint in tests: one GET /metrics and a series' value.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The whole HTTP answer of GET /metrics at `addr` (None while nothing listens).
pub fn scrape(addr: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The value of the first line starting with `series`.
pub fn value(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A free local port's address, `127.0.0.1:PORT`.
pub fn free_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port");
    format!("127.0.0.1:{port}")
}
