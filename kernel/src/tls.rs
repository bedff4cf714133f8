//! TLS to every server (DESIGN §13): one URL syntax for the data plane (mysql_async) and
//! the control plane (sqlx), both built with rustls.
//!
//! The URL parameters are sqlx's (and the MySQL client's) names, so a state-store URL and
//! a source or target URL read the same:
//!
//! | parameter | meaning |
//! |---|---|
//! | `ssl-mode=DISABLED` / `PREFERRED` | no TLS on the data plane (sqlx: PREFERRED tries TLS) |
//! | `ssl-mode=REQUIRED` | TLS, the certificate is not verified (encryption only) |
//! | `ssl-mode=VERIFY_CA` | TLS, the certificate must chain to `ssl-ca` (or the built-in roots) |
//! | `ssl-mode=VERIFY_IDENTITY` | as VERIFY_CA, and the host name must match |
//! | `ssl-ca=/path/ca.pem` | the CA certificate(s) to trust |
//!
//! mysql_async has no URL parameter for a CA file, so [`mysql_opts`] removes these two
//! parameters, parses the rest with `Opts::from_url` and sets the `SslOpts` itself.
use mysql_async::{Opts, OptsBuilder, SslOpts};
use std::path::PathBuf;

/// The TLS mode of a URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Disabled,
    Preferred,
    Required,
    VerifyCa,
    VerifyIdentity,
}

impl Mode {
    fn parse(s: &str) -> Option<Mode> {
        Some(match s.to_ascii_uppercase().as_str() {
            "DISABLED" => Mode::Disabled,
            "PREFERRED" => Mode::Preferred,
            "REQUIRED" => Mode::Required,
            "VERIFY_CA" => Mode::VerifyCa,
            "VERIFY_IDENTITY" => Mode::VerifyIdentity,
            _ => return None,
        })
    }
}

/// The URL without `ssl-mode`/`ssl-ca`, and their values.
pub fn split(url: &str) -> Result<(String, Mode, Option<PathBuf>), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), Mode::Preferred, None));
    };
    let mut mode = Mode::Preferred;
    let mut ca = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "ssl-mode" | "sslmode" => {
                mode = Mode::parse(v).ok_or_else(|| {
                    format!(
                        "ssl-mode={v} is not one of DISABLED, PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY"
                    )
                })?
            }
            "ssl-ca" | "sslca" => ca = Some(PathBuf::from(percent_decode(v))),
            _ => rest.push(pair),
        }
    }
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((url, mode, ca))
}

/// mysql_async options for `url`, with the TLS of its `ssl-mode`/`ssl-ca` parameters.
/// The error text never contains the password.
///
/// `prefer_socket` is false unless the URL sets it: mysql_async's default (true) moves a
/// connection made to a loopback address onto the unix socket the server names in
/// `@@socket`, which (its own documentation says) can be another server's socket on this
/// host, e.g. behind a container's forwarded port; and it opens every connection twice
/// (TCP, then the socket). A connection goes where the URL says.
pub fn mysql_opts(url: &str) -> Result<Opts, String> {
    let (base, mode, ca) = split(url)?;
    let opts = Opts::from_url(&base).map_err(|e| crate::redact::redact_text(&e.to_string()))?;
    let opts = match sets_prefer_socket(&base) {
        true => opts,
        false => OptsBuilder::from_opts(opts).prefer_socket(false).into(),
    };
    let ssl = match mode {
        Mode::Disabled | Mode::Preferred => return Ok(opts),
        Mode::Required => SslOpts::default()
            .with_danger_accept_invalid_certs(true)
            .with_danger_skip_domain_validation(true),
        Mode::VerifyCa => SslOpts::default().with_danger_skip_domain_validation(true),
        Mode::VerifyIdentity => SslOpts::default(),
    };
    let ssl = match ca {
        Some(path) => {
            if !path.is_file() {
                return Err(format!("ssl-ca={} is not a readable file", path.display()));
            }
            ssl.with_root_certs(vec![path.into()])
        }
        None => ssl,
    };
    Ok(OptsBuilder::from_opts(opts).ssl_opts(Some(ssl)).into())
}

/// Whether the URL's query names `prefer_socket` (then its value is the user's choice).
fn sets_prefer_socket(url: &str) -> bool {
    url.split_once('?').is_some_and(|(_, q)| {
        q.split('&')
            .any(|p| p.split_once('=').map_or(p, |(k, _)| k) == "prefer_socket")
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The fix named when a server refuses a plain connection.
pub const REQUIRE_TLS_FIX: &str = "the server requires TLS (require_secure_transport=ON): add \
    `?ssl-mode=REQUIRED` to this URL, or `?ssl-mode=VERIFY_CA&ssl-ca=/path/to/ca.pem` to also \
    verify its certificate (runbooks/install.md)";

/// Access denied (1045) or secure transport required (4036, 3159): what a server with
/// `require_secure_transport=ON` answers a plain connection (MariaDB 10.11 says 1045).
const PLAIN_REFUSED: [u16; 3] = [1045, 4036, 3159];

/// When a connection over `url` was refused with `code` and the URL asks for no TLS
/// (`ssl-mode=DISABLED`, or no mode on the data plane, which then connects in plain),
/// turns `err` into a usage error that adds the TLS fix to its message.
pub fn with_plain_hint(
    url: &str,
    code: Option<u16>,
    data_plane: bool,
    err: crate::Error,
) -> crate::Error {
    let plain = match split(url) {
        Ok((_, Mode::Disabled, _)) => true,
        Ok((_, Mode::Preferred, _)) => data_plane,
        _ => false,
    };
    if !plain || !code.is_some_and(|c| PLAIN_REFUSED.contains(&c)) {
        return err;
    }
    crate::Error::definite(
        crate::error::DefiniteCode::Usage,
        format!(
            "{err}; check the user and password, and if {}",
            REQUIRE_TLS_FIX
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_goes_where_the_url_says_unless_prefer_socket_is_asked() {
        assert!(!mysql_opts("mysql://u@127.0.0.1:3306/db")
            .unwrap()
            .prefer_socket());
        assert!(!mysql_opts("mysql://u@localhost/db?ssl-mode=DISABLED")
            .unwrap()
            .prefer_socket());
        assert!(mysql_opts("mysql://u@127.0.0.1/db?prefer_socket=true")
            .unwrap()
            .prefer_socket());
        assert!(!mysql_opts("mysql://u@127.0.0.1/db?prefer_socket=false")
            .unwrap()
            .prefer_socket());
    }

    #[test]
    fn tls_parameters_are_split_off_and_applied() {
        let (u, m, ca) = split("mysql://u:p@h:1/db?ssl-mode=verify_ca&ssl-ca=%2Ftmp%2Fca.pem&x=1")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(u, "mysql://u:p@h:1/db?x=1");
        assert_eq!(m, Mode::VerifyCa);
        assert_eq!(ca, Some(PathBuf::from("/tmp/ca.pem")));
        let (u, m, _) = split("mysql://h/db").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((u.as_str(), m), ("mysql://h/db", Mode::Preferred));
        assert!(split("mysql://h/db?ssl-mode=sometimes").is_err());
        let o =
            mysql_opts("mysql://u:p@h:1/db?ssl-mode=REQUIRED").unwrap_or_else(|e| panic!("{e}"));
        assert!(o.ssl_opts().is_some_and(|s| s.accept_invalid_certs()));
        assert!(mysql_opts("mysql://u:p@h:1/db").is_ok_and(|o| o.ssl_opts().is_none()));
        let e = mysql_opts("mysql://u:secret@h:1/db?ssl-mode=VERIFY_CA&ssl-ca=/nope.pem")
            .err()
            .unwrap_or_default();
        assert!(e.contains("/nope.pem") && !e.contains("secret"), "{e}");
    }
}
