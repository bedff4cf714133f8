-- The admission state of each `backfill serve` process (DESIGN §8, §13): `status` is a
-- separate process and shows permits in use, holds whose release is unknown and queues
-- from here. One row per serve owner (`serve@host`), rewritten about every second; the
-- heartbeat's age (server clock) tells a live process from a stale row. `admission` is a
-- versioned postcard record (`ADMS`, bootstrap::serve_state).
CREATE TABLE IF NOT EXISTS serve_processes (
    owner VARCHAR(255) NOT NULL,
    pid INT UNSIGNED NOT NULL,
    started_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    heartbeat_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    stopped_at TIMESTAMP(6) NULL,
    admission MEDIUMBLOB NOT NULL,
    PRIMARY KEY (owner)
) ENGINE=InnoDB;
