-- Resume points of `backfill verify` walks split with --max-chunks or interrupted (issue 6
-- item 5): one per job, generation and mode (`pinned` or `quiescent`); `cursor_bytes` is a
-- versioned VerifyCursor (`VCUR`). Deleted once a walk reaches the end of the key space.
CREATE TABLE IF NOT EXISTS verify_cursors (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    mode VARCHAR(16) NOT NULL,
    cursor_bytes BLOB NOT NULL,
    updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (job_id, generation, mode)
) ENGINE=InnoDB;
