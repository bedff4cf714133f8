-- The source lineage recorded at install (DESIGN §3.4): kernel::introspect::InstallLineage
-- (kind LING) plus its fields in plain columns for operators and queries.
CREATE TABLE IF NOT EXISTS install_lineage (
    job_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    lineage_digest BINARY(32) NOT NULL,
    flavor VARCHAR(16) NOT NULL,
    server_id INT UNSIGNED NOT NULL,
    server_uid VARCHAR(255) NOT NULL,
    binlog_base VARCHAR(255) NOT NULL,
    binlog_file VARCHAR(255) NOT NULL,
    binlog_pos BIGINT UNSIGNED NOT NULL,
    gtid_pos TEXT NOT NULL,
    lineage_bytes BLOB NOT NULL
) ENGINE=InnoDB;
