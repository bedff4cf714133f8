-- Material registry (ledger::registry): which material belongs to which table, and the
-- bytes accounted per table (job_id > 0) and in total (job_id = 0) against quotas.
-- The total row exists from the start: every first registration locks it FOR UPDATE, so
-- an empty registry never relies on gap locks (which deadlock under InnoDB).
CREATE TABLE IF NOT EXISTS ledger_material_usage (
    job_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    bytes BIGINT UNSIGNED NOT NULL,
    quota BIGINT UNSIGNED NULL
) ENGINE=InnoDB;

INSERT IGNORE INTO ledger_material_usage (job_id, bytes, quota) VALUES (0, 0, NULL);

CREATE TABLE IF NOT EXISTS ledger_material (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    digest BINARY(32) NOT NULL,
    kind CHAR(4) NOT NULL,
    bytes BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (job_id, generation, digest)
) ENGINE=InnoDB;
