-- Every attempt of every window (DESIGN §5), recorded before the attempt writes its LOW.
-- With read-ahead, windows after the one J is at are read and sealed while J is behind:
-- J's single `current` field cannot name them, so a restart finds here, for each window
-- ahead of J, its last attempt; with `window_seals` it knows whether that attempt is
-- unsealed (new attempt, its materials are garbage) or sealed (verify, re-apply the saved
-- FINAL bytes only). `last_error` keeps the reason an attempt failed while the process
-- lived (status and the attempt cap's pause reason); a killed attempt has none.
CREATE TABLE IF NOT EXISTS window_attempts (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    window_id INT UNSIGNED NOT NULL,
    attempt INT UNSIGNED NOT NULL,
    last_error TEXT NULL,
    started_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (job_id, generation, window_id, attempt)
) ENGINE=InnoDB;
