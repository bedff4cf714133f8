//! The `my.cnf` written for each instance.

use std::fmt::Write as _;
use std::path::Path;

/// What an instance is for; it selects the default `server_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The live table's server: `server_id=1`, ROW binlog with FULL image and metadata.
    Source,
    /// Where rows are copied to: `server_id=2`, binlog on as well so it can become a replica.
    Target,
}

impl Role {
    /// The `server_id` used unless [`crate::ServerOpts::server_id`] overrides it.
    pub fn default_server_id(self) -> u32 {
        match self {
            Role::Source => 1,
            Role::Target => 2,
        }
    }
}

/// Renders the `[mariadbd]` section for an instance in `dir` listening on `port`.
pub fn render(dir: &Path, port: u16, server_id: u32, extra: &[String]) -> String {
    let d = dir.display();
    let mut cnf = String::from("[mariadbd]\n");
    let lines = [
        "user=root".to_string(),
        format!("datadir={d}/data"),
        format!("socket={d}/mariadbd.sock"),
        // A private tmpdir: concurrent install-db runs sharing /tmp were seen failing.
        format!("tmpdir={d}/tmp"),
        format!("pid-file={d}/{}", crate::watchdog::PID_FILE),
        format!("log-error={d}/error.log"),
        format!("port={port}"),
        "bind-address=127.0.0.1".to_string(),
        "skip-name-resolve".to_string(),
        format!("server_id={server_id}"),
        format!("log_bin={d}/binlog/mysql-bin"),
        "binlog_format=ROW".to_string(),
        "binlog_row_image=FULL".to_string(),
        "binlog_row_metadata=FULL".to_string(),
        "binlog_checksum=CRC32".to_string(),
        "gtid_domain_id=0".to_string(),
        "innodb_buffer_pool_size=64M".to_string(),
        "innodb_log_file_size=16M".to_string(),
        "performance_schema=OFF".to_string(),
        "character-set-server=utf8mb4".to_string(),
        "collation-server=utf8mb4_general_ci".to_string(),
        "innodb_flush_log_at_trx_commit=2".to_string(),
        "sync_binlog=0".to_string(),
        "max_connections=500".to_string(),
    ];
    for line in lines.iter().chain(extra) {
        let _ = writeln!(cnf, "{line}");
    }
    cnf
}
