-- The schema chain of a table (DESIGN §16): version 1 is the definition sealed at install
-- (jobs); each later version is sealed at the DDL that starts it, named by the L record
-- holding that DDL (l_seq) and its position in the source binlog, and holds the
-- definition after the DDL (SCHM bytes, source names) with its fingerprint. Rows are
-- written once and never changed: replay decodes and applies every row of L with the
-- version in force at its position, and a second seal of the same DDL must be identical.
CREATE TABLE IF NOT EXISTS schema_versions (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    version INT UNSIGNED NOT NULL,
    l_seq BIGINT UNSIGNED NOT NULL,
    at_file VARCHAR(255) NOT NULL,
    at_pos BIGINT UNSIGNED NOT NULL,
    ddl MEDIUMTEXT NOT NULL,
    schema_bytes MEDIUMBLOB NOT NULL,
    fingerprint BINARY(32) NOT NULL,
    how VARCHAR(16) NOT NULL,
    sealed_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (job_id, generation, version),
    UNIQUE KEY schema_versions_at (job_id, generation, l_seq)
) ENGINE=InnoDB;
