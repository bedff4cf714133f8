-- Field comparisons of a job's source and target (issue 15 item 4): the activation audit's
-- field check (origin `audit`, written at every activation audit and re-audit on restart)
-- and the last `backfill verify` of a STREAMING table that found a difference (origin
-- `verify`, deleted by a later clean, complete verify). One row per job, generation and
-- origin; `status` and `audit` show them. `summary` is readable text (keys as the verify
-- report prints them, values as hex), never evidence: the audit recomputes, status reports.
CREATE TABLE IF NOT EXISTS field_checks (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    origin VARCHAR(16) NOT NULL,
    checked_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    mode VARCHAR(64) NOT NULL,
    seed BIGINT UNSIGNED NOT NULL,
    position VARCHAR(255) NULL,
    rows_checked BIGINT UNSIGNED NOT NULL,
    differing_rows BIGINT UNSIGNED NOT NULL,
    summary TEXT NOT NULL,
    PRIMARY KEY (job_id, generation, origin)
) ENGINE=InnoDB;
