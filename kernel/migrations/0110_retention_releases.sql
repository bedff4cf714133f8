-- Retention and GC (DESIGN §17, issue 17 item 4): one row per job and generation once the
-- table is STREAMING and serve's GC has looked at it. `state` 0 = retained (first seen
-- STREAMING at `streaming_since`, not released yet), 1 = release intent recorded (the
-- `record` names every material that will be removed and the audit facts that summarise
-- it, written BEFORE any byte is removed), 2 = done (bytes removed, registry rows gone,
-- usage accounted). `record` is a versioned ReleaseRecord (`RELS`). The audit reports a
-- released material from this record instead of failing on its absence.
CREATE TABLE IF NOT EXISTS retention_releases (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    state TINYINT UNSIGNED NOT NULL DEFAULT 0,
    streaming_since TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    record LONGBLOB NULL,
    materials BIGINT UNSIGNED NOT NULL DEFAULT 0,
    bytes BIGINT UNSIGNED NOT NULL DEFAULT 0,
    intent_at TIMESTAMP(6) NULL,
    done_at TIMESTAMP(6) NULL,
    PRIMARY KEY (job_id, generation)
) ENGINE=InnoDB;
