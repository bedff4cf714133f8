//! A state store on several nodes (DESIGN §18): `mysql://u:p@h1:p1,h2:p2,h3:p3/db` names
//! the nodes of one replicated cluster (MariaDB Galera), tried in order.
//!
//! Why switching nodes cannot lose or duplicate an L record, a D move or a lease:
//! * Every node of the cluster holds the same schema: a transaction committed through one
//!   node is in the cluster's total order before its COMMIT returns, and one that is not
//!   is rolled back everywhere. A commit whose reply was lost with its node is therefore
//!   either everywhere or nowhere, and every writer already resolves such a commit by
//!   reading evidence (L's tail compare-and-set, J's head, the lease token), never by
//!   guessing.
//! * Each new connection sets `wsrep_sync_wait = 7` where the server runs wsrep, so its
//!   reads, updates, deletes and inserts first wait until the node has applied every
//!   transaction the cluster committed before them: a read after a switch sees every
//!   commit made through the old node (read-your-writes across nodes).
//! * A conflict between two nodes (certification failure, ERROR 1213) and a node that is
//!   not ready (ERROR 1047) are transient errors (`crate::error`): the transaction rolled
//!   back and is retried like any other lost transaction.
//! * Only one node takes new connections at a time (the first that answers the probe, and
//!   it stays the one until it fails one), which keeps certification conflicts rare; two
//!   nodes in use at once are still correct, only slower.
//!
//! How: [`super::open`] probes the hosts in order and opens the pool on the first that
//! answers; a watcher task probes that node every [`WATCH_EVERY`] on its own connection and,
//! when it fails, points the pool's future connections at the next host that answers
//! (`Pool::set_connect_options`). Connections open to a dead node fail their next use or
//! their ping before acquire, and are replaced by connections to the new node.
use crate::redact::redact_url;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPool};
use sqlx::{ConnectOptions, Connection};
use std::time::Duration;

/// How often the watcher probes the node in use.
pub const WATCH_EVERY: Duration = Duration::from_millis(500);

/// How long one probe (connect + status query) may take before the node counts as lost.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The session setting of every state-store connection on a wsrep server: reads and
/// writes wait for the node to apply what the cluster committed before them.
pub const WSREP_SYNC_WAIT: u8 = 7;

/// The single-host URLs of a state URL, in the order written: `mysql://u:p@a:1,b:2/db?x`
/// gives `mysql://u:p@a:1/db?x` and `mysql://u:p@b:2/db?x`. A URL with one host gives
/// itself. `Err` names an empty host.
pub fn split_hosts(url: &str) -> Result<Vec<String>, String> {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return Ok(vec![url.to_string()]);
    };
    let after = &url[scheme_end..];
    let authority_end = after.find(['/', '?']).unwrap_or(after.len());
    let authority = &after[..authority_end];
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    if !hosts.contains(',') {
        return Ok(vec![url.to_string()]);
    }
    let tail = &after[authority_end..];
    hosts
        .split(',')
        .map(|h| match h.trim() {
            "" => Err(format!(
                "state store URL {} names an empty host in its host list; write \
                 HOST:PORT,HOST:PORT",
                redact_url(url)
            )),
            h => Ok(format!("{}{userinfo}{h}{tail}", &url[..scheme_end])),
        })
        .collect()
}

/// `host:port` of connect options, for messages (never the password).
pub fn label(o: &MySqlConnectOptions) -> String {
    format!("{}:{}", o.get_host(), o.get_port())
}

/// Sets `autocommit = 1` on a new connection (sqlx does not, and a server whose global
/// default is 0 would keep every state-store write outside a transaction uncommitted, and
/// lose it with the connection), and `wsrep_sync_wait` when its server runs wsrep (MariaDB
/// Galera); anything else is left as it is.
pub async fn set_session(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    sqlx::raw_sql("SET SESSION autocommit = 1")
        .execute(&mut *conn)
        .await?;
    let on: Option<(String, String)> = sqlx::query_as("SHOW VARIABLES LIKE 'wsrep_on'")
        .fetch_optional(&mut *conn)
        .await?;
    if on.is_some_and(|(_, v)| v.eq_ignore_ascii_case("ON")) {
        let sql = format!("SET SESSION wsrep_sync_wait = {WSREP_SYNC_WAIT}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Whether a connected node may be used: a wsrep node must say `wsrep_ready = ON` (it is
/// in the primary component and synced enough to serve); a server without wsrep may.
async fn ready(conn: &mut MySqlConnection) -> Result<(), String> {
    let row: Option<(String, String)> = sqlx::query_as("SHOW GLOBAL STATUS LIKE 'wsrep_ready'")
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| crate::redact::redact_text(&e.to_string()))?;
    match row {
        Some((_, v)) if !v.eq_ignore_ascii_case("ON") => {
            Err(format!("the node is not ready (wsrep_ready = {v})"))
        }
        _ => Ok(()),
    }
}

/// Connects to one host (without a default schema: it may not exist yet) and checks that
/// it may be used, within [`PROBE_TIMEOUT`].
pub async fn probe(o: &MySqlConnectOptions) -> Result<MySqlConnection, String> {
    let attempt = async {
        let mut conn = o
            .clone()
            .database("")
            .connect()
            .await
            .map_err(|e| crate::redact::redact_text(&e.to_string()))?;
        ready(&mut conn).await?;
        Ok(conn)
    };
    match tokio::time::timeout(PROBE_TIMEOUT, attempt).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
    }
}

/// The first host (in order) that answers the probe, with its index; `Err` lists why
/// each one did not.
pub async fn first_live(hosts: &[MySqlConnectOptions]) -> Result<usize, String> {
    let mut why = Vec::new();
    for (i, o) in hosts.iter().enumerate() {
        match probe(o).await {
            Ok(conn) => {
                let _ = conn.close().await;
                return Ok(i);
            }
            Err(e) => why.push(format!("{}: {e}", label(o))),
        }
    }
    Err(why.join("; "))
}

/// Keeps `pool`'s future connections on a live node: probes the node in use every
/// [`WATCH_EVERY`] and, when it fails, moves to the next host that answers. Ends when the
/// pool is closed.
pub fn spawn_watch(pool: MySqlPool, hosts: Vec<MySqlConnectOptions>, mut current: usize) {
    tokio::spawn(async move {
        let mut conn: Option<MySqlConnection> = None;
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            if pool.is_closed() {
                return;
            }
            match still_live(conn.take(), &hosts[current]).await {
                Ok(c) => conn = Some(c),
                Err(why) => {
                    if let Some((next, c)) = next_live(&hosts, current).await {
                        tracing::warn!(lost = %label(&hosts[current]), error = %why, now = %label(&hosts[next]), "state store node lost: new connections go to the next node");
                        pool.set_connect_options(hosts[next].clone());
                        current = next;
                        conn = Some(c);
                    } else {
                        tracing::warn!(node = %label(&hosts[current]), error = %why, "state store node lost and no other node answers; probing again");
                    }
                }
            }
        }
    });
}

/// Re-checks the watcher's connection (or a new one) to the node in use.
async fn still_live(
    conn: Option<MySqlConnection>,
    o: &MySqlConnectOptions,
) -> Result<MySqlConnection, String> {
    let Some(mut c) = conn else {
        return probe(o).await;
    };
    match tokio::time::timeout(PROBE_TIMEOUT, ready(&mut c)).await {
        Ok(Ok(())) => Ok(c),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
    }
}

/// The next host after `current` (wrapping) that answers the probe.
async fn next_live(
    hosts: &[MySqlConnectOptions],
    current: usize,
) -> Option<(usize, MySqlConnection)> {
    for k in 1..hosts.len() {
        let next = (current + k) % hosts.len();
        if let Ok(c) = probe(&hosts[next]).await {
            return Some((next, c));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_list_gives_one_url_per_host_in_order() {
        let hosts =
            split_hosts("mysql://u:p%40w@a:1,b:2, c:3/state?ssl-mode=required").expect("split");
        assert_eq!(
            hosts,
            [
                "mysql://u:p%40w@a:1/state?ssl-mode=required",
                "mysql://u:p%40w@b:2/state?ssl-mode=required",
                "mysql://u:p%40w@c:3/state?ssl-mode=required",
            ]
        );
        assert_eq!(
            split_hosts("mysql://root@h:3306/s").expect("one"),
            ["mysql://root@h:3306/s"]
        );
        assert_eq!(split_hosts("mysql://h1,h2").expect("no path").len(), 2);
    }

    #[test]
    fn an_empty_host_is_refused_without_the_password() {
        let e = split_hosts("mysql://u:secret@a:1,,b:2/s").expect_err("empty host");
        assert!(e.contains("empty host") && !e.contains("secret"), "{e}");
        assert!(e.contains("u:***@"), "{e}");
    }
}
