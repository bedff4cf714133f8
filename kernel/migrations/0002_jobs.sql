-- Jobs and generations (DESIGN §2, §4). One row of source_tables per source table (server
-- identity + schema + table); every install of it is a job with the next generation.
-- A generation is live until cancellation has written K (state CANCELLED): install refuses
-- a table that has a live generation. J (ledger) holds the execution state; `state` here
-- only says INSTALLED (live) or CANCELLED.
CREATE TABLE IF NOT EXISTS source_tables (
    table_key BINARY(32) NOT NULL PRIMARY KEY,
    source_identity VARCHAR(255) NOT NULL,
    source_db VARCHAR(64) NOT NULL,
    source_table VARCHAR(64) NOT NULL,
    last_generation BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS jobs (
    job_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    table_key BINARY(32) NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    state VARCHAR(16) NOT NULL,
    source_identity VARCHAR(255) NOT NULL,
    -- URLs are stored with the password replaced (kernel::redact): never a secret at rest.
    source_url VARCHAR(1024) NOT NULL,
    source_db VARCHAR(64) NOT NULL,
    source_table VARCHAR(64) NOT NULL,
    target_identity VARCHAR(255) NOT NULL,
    target_url VARCHAR(1024) NOT NULL,
    target_db VARCHAR(64) NOT NULL,
    target_table VARCHAR(64) NOT NULL,
    control_schema VARCHAR(64) NOT NULL,
    window_rows BIGINT UNSIGNED NOT NULL,
    page_rows BIGINT UNSIGNED NOT NULL,
    installed_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    cancelled_at TIMESTAMP(6) NULL,
    UNIQUE KEY table_generation (table_key, generation)
) ENGINE=InnoDB;

-- A target table belongs to one job forever: re-adding a table after cancellation needs a
-- new, empty target (DESIGN §2), and two jobs can never write one target.
CREATE TABLE IF NOT EXISTS target_claims (
    target_key BINARY(32) NOT NULL PRIMARY KEY,
    job_id BIGINT UNSIGNED NOT NULL,
    target_identity VARCHAR(255) NOT NULL,
    target_db VARCHAR(64) NOT NULL,
    target_table VARCHAR(64) NOT NULL
) ENGINE=InnoDB;
