-- The range chain (ledger::chain): an index of completed windows kept apart from J.
-- `entry` is the versioned ChainEntry; `root_after` the chain root once it is added.
-- Written in the same state-store transaction as the J record that counts it.
CREATE TABLE IF NOT EXISTS ledger_range_chain (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    window_id INT UNSIGNED NOT NULL,
    attempt INT UNSIGNED NOT NULL,
    manifest_hash BINARY(32) NOT NULL,
    entry BLOB NOT NULL,
    root_after BINARY(32) NOT NULL,
    PRIMARY KEY (job_id, generation, window_id)
) ENGINE=InnoDB;
