-- Persisted operator commands (DESIGN §13): `start JOB` (and later `cancel`, `resume`) are
-- rows here, written without the server process; `backfill serve` polls them. A command is
-- recorded once per job and generation (idempotent).
CREATE TABLE IF NOT EXISTS job_commands (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    command VARCHAR(16) NOT NULL,
    issued_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (job_id, generation, command)
) ENGINE=InnoDB;
