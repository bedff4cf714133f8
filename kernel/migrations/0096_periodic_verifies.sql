-- Periodic verification of STREAMING tables (`serve --verify-every`, issue 17 item 6): one
-- row per job and generation, updated after every pinned verify of the table that ended
-- with a result. `status` shows it; a report, never evidence (the audit and the next
-- verify compare the servers again). `last_differing` > 0 means the last verify paused the
-- table with `verify_failed` (its first keys are in `field_checks`, origin `verify`);
-- `last_clean_at`/`last_clean_rows` are the last verify that found no difference.
CREATE TABLE IF NOT EXISTS periodic_verifies (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    verifies BIGINT UNSIGNED NOT NULL DEFAULT 0,
    failures BIGINT UNSIGNED NOT NULL DEFAULT 0,
    last_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    last_rows BIGINT UNSIGNED NOT NULL DEFAULT 0,
    last_differing BIGINT UNSIGNED NOT NULL DEFAULT 0,
    last_ms BIGINT UNSIGNED NOT NULL DEFAULT 0,
    last_position VARCHAR(255) NULL,
    last_clean_at TIMESTAMP(6) NULL,
    last_clean_rows BIGINT UNSIGNED NULL,
    PRIMARY KEY (job_id, generation)
) ENGINE=InnoDB;
