-- Budget of automatic recoveries of uncertain target commits (DESIGN §8, issue 7): during
-- the bootstrap at most 3 per execution of a table-generation, persisted here so that a
-- restart or a new window never refunds it; `resume` starts a new execution (used = 0).
-- `used` is raised BEFORE the recovery acts on it, so a crash cannot refund an attempt.
CREATE TABLE IF NOT EXISTS uncertain_budget (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    scope VARCHAR(16) NOT NULL,
    used INT UNSIGNED NOT NULL DEFAULT 0,
    updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (job_id, generation, scope)
) ENGINE=InnoDB;
