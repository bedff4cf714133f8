-- The fixed range plan of each job (DESIGN §5): planned once at install, never re-cut.
-- Windows are (lower, upper]; NULL lower = open below (first window), NULL upper = open
-- above (last window). plan_digest covers the ordered ranges (bootstrap::install::plan).
CREATE TABLE IF NOT EXISTS range_plans (
    job_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    generation BIGINT UNSIGNED NOT NULL,
    windows INT UNSIGNED NOT NULL,
    plan_digest BINARY(32) NOT NULL,
    window_rows BIGINT UNSIGNED NOT NULL,
    estimated_rows BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS plan_windows (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    window_id INT UNSIGNED NOT NULL,
    lower_key BIGINT NULL,
    upper_key BIGINT NULL,
    PRIMARY KEY (job_id, window_id)
) ENGINE=InnoDB;
