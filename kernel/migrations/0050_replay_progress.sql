-- Replay progress of a table-generation (DESIGN §6, issue 6): a HINT and a status row,
-- never evidence. T's cursor alone says what the target holds; this row only lets a
-- restarted replayer skip re-reading L from B (it is written after the T commit it
-- describes, so it is never ahead of T, and it is ignored unless L confirms it) and lets
-- `status` show the replay cursor and lag.
CREATE TABLE IF NOT EXISTS replay_progress (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    -- L seq of the last record of the last group applied, and where that group ends
    l_seq BIGINT UNSIGNED NOT NULL,
    end_file VARCHAR(255) NOT NULL,
    end_pos BIGINT UNSIGNED NOT NULL,
    groups_applied BIGINT UNSIGNED NOT NULL DEFAULT 0,
    -- lag: binlog bytes from the cursor to the end of the table's newest group in L (same
    -- file only), and the age of the oldest group L holds that T does not
    behind_bytes BIGINT UNSIGNED NULL,
    behind_ms BIGINT UNSIGNED NULL,
    phase VARCHAR(16) NOT NULL,
    updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (job_id, generation)
) ENGINE=InnoDB;
