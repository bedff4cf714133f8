-- Where a sealed window attempt's manifest is (DESIGN §5 step 7): written after the FINAL
-- bytes, their registry rows and the manifest are durable, before T. A restart finds the
-- sealed attempt J names here and never re-reads it. Evidence pointer only: J stays the
-- authority on where the table is; the manifest hash is verified against the material.
CREATE TABLE IF NOT EXISTS window_seals (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    window_id INT UNSIGNED NOT NULL,
    attempt INT UNSIGNED NOT NULL,
    manifest_hash BINARY(32) NOT NULL,
    sealed_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (job_id, generation, window_id, attempt)
) ENGINE=InnoDB;

-- Progress of each window for `status` (rows read under the read view, rows sealed FINAL,
-- rows applied to the target). Counters only: never evidence, never read by the protocol.
CREATE TABLE IF NOT EXISTS window_progress (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    window_id INT UNSIGNED NOT NULL,
    attempt INT UNSIGNED NOT NULL,
    step VARCHAR(16) NOT NULL,
    rows_read BIGINT UNSIGNED NOT NULL DEFAULT 0,
    rows_final BIGINT UNSIGNED NOT NULL DEFAULT 0,
    rows_applied BIGINT UNSIGNED NOT NULL DEFAULT 0,
    updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (job_id, generation, window_id)
) ENGINE=InnoDB;
