//! `--config FILE` (env `BACKFILL_CONFIG`): an optional TOML file with the settings of
//! `serve` (and the state store every command shares). Precedence: a flag beats its
//! environment variable, which beats the file.
//!
//! How: before the command line is parsed, each key of the file is exported as the
//! environment variable its flag already mirrors, unless that variable is set. clap then
//! applies its usual "flag over env" rule, so there is one source of truth for names,
//! defaults and validation. An unknown key is a usage error naming the key (a typo must
//! never be silently ignored).
//!
//! ```toml
//! state = "mysql://state:secret@target-host:3306/backfill_state"
//! data_dir = "/var/lib/backfill"
//! materials = "state"            # or "local" (one host only)
//! lease_ttl_secs = 30
//! source = ["mysql://capture:secret@source-host:3306"]
//! target = ["mysql://loader:secret@target-host:3306"]
//! read_windows = 2
//! target_writes = 2
//! max_sessions = 8
//! read_rows_per_sec = 50000      # 0 or absent: unlimited
//! read_bytes_per_sec = 20000000
//! target_write_timeout_secs = 300
//! apply_streams = 1              # replay apply connections per table (<= target_writes)
//! metrics_addr = "127.0.0.1:9187"
//! log_format = "json"
//! ```
use std::ffi::OsString;
use std::path::PathBuf;

/// Environment variable naming the config file.
pub const ENV: &str = "BACKFILL_CONFIG";

/// Each key of the file and the environment variable of its flag: every flag of `serve`
/// (global ones included) but `--config`, named by its long name with `_` for `-`, as
/// `--config`'s help says.
pub const KEYS: &[(&str, &str)] = &[
    ("state", "BACKFILL_STATE"),
    ("data_dir", "BACKFILL_DATA_DIR"),
    ("materials", "BACKFILL_MATERIALS"),
    ("lease_ttl_secs", "BACKFILL_LEASE_TTL_SECS"),
    ("source", "BACKFILL_SOURCE"),
    ("target", "BACKFILL_TARGET"),
    ("page_rows", "BACKFILL_SERVE_PAGE_ROWS"),
    ("read_windows", "BACKFILL_READ_WINDOWS"),
    ("target_writes", "BACKFILL_TARGET_WRITES"),
    ("max_sessions", "BACKFILL_MAX_SESSIONS"),
    (
        "target_write_timeout_secs",
        "BACKFILL_TARGET_WRITE_TIMEOUT_SECS",
    ),
    ("read_rows_per_sec", "BACKFILL_READ_ROWS_PER_SEC"),
    ("read_bytes_per_sec", "BACKFILL_READ_BYTES_PER_SEC"),
    ("owner", "BACKFILL_OWNER"),
    ("exit_when_idle", "BACKFILL_EXIT_WHEN_IDLE"),
    ("task_retries", "BACKFILL_TASK_RETRIES"),
    ("replay_batch_rows", "BACKFILL_REPLAY_BATCH_ROWS"),
    ("replay_batch_groups", "BACKFILL_REPLAY_BATCH_GROUPS"),
    ("schema_lock_wait", "BACKFILL_SCHEMA_LOCK_WAIT"),
    ("apply_streams", "BACKFILL_APPLY_STREAMS"),
    ("windows_only", "BACKFILL_WINDOWS_ONLY"),
    ("metrics_addr", "BACKFILL_METRICS_ADDR"),
    ("audit_sample_every", "BACKFILL_AUDIT_SAMPLE_EVERY"),
    ("audit_chunk_rows", "BACKFILL_AUDIT_CHUNK_ROWS"),
    ("verify_every", "BACKFILL_VERIFY_EVERY"),
    ("retention_days", "BACKFILL_RETENTION_DAYS"),
    ("retention_until_verify", "BACKFILL_RETENTION_UNTIL_VERIFY"),
    ("gc_every", "BACKFILL_GC_EVERY"),
    ("gc_batch", "BACKFILL_GC_BATCH"),
    ("no_gc", "BACKFILL_NO_GC"),
    ("log_format", "BACKFILL_LOG_FORMAT"),
    ("format", "BACKFILL_FORMAT"),
];

/// The config file named by `--config FILE`, `--config=FILE` or `BACKFILL_CONFIG`.
pub fn file_of(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if s == "--" {
            break;
        }
        if s == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(v) = s.strip_prefix("--config=") {
            return Some(PathBuf::from(v));
        }
    }
    std::env::var_os(ENV).map(PathBuf::from)
}

/// The (variable, value) pairs a config text sets. Errors name the key or the line.
pub fn parse(text: &str) -> Result<Vec<(&'static str, String)>, String> {
    let table: toml::Table = text.parse().map_err(|e| format!("not valid TOML: {e}"))?;
    let mut out = Vec::new();
    for (k, v) in &table {
        let Some((_, var)) = KEYS.iter().find(|(key, _)| key == k) else {
            let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
            return Err(format!("unknown key `{k}` (known: {})", known.join(", ")));
        };
        let value = match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Array(items) => items
                .iter()
                .map(|i| match i {
                    toml::Value::String(s) => Ok(s.clone()),
                    _ => Err(format!("`{k}`: a list of strings is expected")),
                })
                .collect::<Result<Vec<_>, _>>()?
                .join(","),
            _ => {
                return Err(format!(
                    "`{k}`: a string, integer, boolean or list is expected"
                ))
            }
        };
        out.push((*var, value));
    }
    Ok(out)
}

/// Reads the config file (if any) and exports its settings as environment variables that
/// are not set yet. Call before parsing the command line and before any thread starts.
pub fn apply(args: &[OsString]) -> Result<(), String> {
    let Some(path) = file_of(args) else {
        return Ok(());
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("--config {}: cannot read: {e}", path.display()))?;
    let pairs = parse(&text).map_err(|e| format!("--config {}: {e}", path.display()))?;
    for (var, value) in pairs {
        if std::env::var_os(var).is_none() {
            std::env::set_var(var, value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_the_flags_env_vars() {
        let v = parse(
            "state = \"mysql://u:p@h/s\"\nsource = [\"mysql://a\", \"mysql://b\"]\n\
             read_windows = 3\nexit_when_idle = true\n",
        )
        .unwrap_or_default();
        assert!(v.contains(&("BACKFILL_STATE", "mysql://u:p@h/s".into())));
        assert!(v.contains(&("BACKFILL_SOURCE", "mysql://a,mysql://b".into())));
        assert!(v.contains(&("BACKFILL_READ_WINDOWS", "3".into())));
        assert!(v.contains(&("BACKFILL_EXIT_WHEN_IDLE", "true".into())));
        let e = parse("read_window = 3").err().unwrap_or_default();
        assert!(e.contains("unknown key `read_window`"), "{e}");
        assert!(parse("x = ").is_err());
    }

    #[test]
    fn every_key_is_a_flag_of_serve_or_global() {
        use clap::CommandFactory;
        let cli = crate::cli::Cli::command();
        let serve = cli
            .find_subcommand("serve")
            .map(|c| {
                c.get_arguments()
                    .filter_map(|a| a.get_env())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let global: Vec<_> = cli.get_arguments().filter_map(|a| a.get_env()).collect();
        for (k, var) in KEYS {
            assert!(
                serve
                    .iter()
                    .chain(&global)
                    .any(|e| *e == std::ffi::OsStr::new(var)),
                "{k}: no flag mirrors {var}"
            );
        }
        let args = ["backfill", "--config=/x.toml"].map(OsString::from);
        assert_eq!(file_of(&args), Some(PathBuf::from("/x.toml")));
    }

    /// `--config`'s help promises the keys are serve's flags with `_` for `-`: each key is
    /// such a flag mirrored by its variable, and each such flag is a key.
    #[test]
    fn the_keys_are_serves_flags_named_as_the_help_says() {
        use clap::CommandFactory;
        let mut cli = crate::cli::Cli::command();
        cli.build();
        let serve = cli.find_subcommand("serve").cloned().unwrap_or_default();
        let flags: Vec<(String, String)> = serve
            .get_arguments()
            .filter_map(|a| {
                let long = a.get_long()?;
                let env = a.get_env()?.to_string_lossy().into_owned();
                (long != "config").then(|| (long.replace('-', "_"), env))
            })
            .collect();
        let keys: Vec<(String, String)> = KEYS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for f in &flags {
            assert!(keys.contains(f), "serve's flag {f:?} is not a key");
        }
        for k in &keys {
            assert!(flags.contains(k), "key {k:?} is not a flag of serve");
        }
    }

    #[test]
    fn every_flag_of_every_command_has_an_env_mirror() {
        use clap::CommandFactory;
        let cli = crate::cli::Cli::command();
        let mut missing = Vec::new();
        for sub in cli.get_subcommands() {
            for a in sub.get_arguments() {
                let id = a.get_id().as_str();
                if a.is_positional() || id == "help" || id == "version" {
                    continue;
                }
                if a.get_env().is_none() {
                    missing.push(format!("{} --{id}", sub.get_name()));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "flags without an env mirror: {missing:?}"
        );
    }
}
