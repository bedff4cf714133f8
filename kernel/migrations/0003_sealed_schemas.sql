-- The sealed source schema of each job: kernel::codec envelope of SealedSchema (kind SCHM)
-- and its blake3 fingerprint, which a reader re-computes from the bytes before trusting them.
CREATE TABLE IF NOT EXISTS sealed_schemas (
    job_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    fingerprint BINARY(32) NOT NULL,
    schema_bytes MEDIUMBLOB NOT NULL
) ENGINE=InnoDB;
