-- Owner lease of a job (ledger::lease). One writer per job: every J write and every T write
-- checks that its fencing token is still the current one, so a stale process that wakes up
-- late is refused (DESIGN §4, issue 4). The token only ever grows.
CREATE TABLE IF NOT EXISTS ledger_lease (
    job_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    owner VARCHAR(191) NOT NULL,
    token BIGINT UNSIGNED NOT NULL,
    expires_at TIMESTAMP(6) NOT NULL
) ENGINE=InnoDB;
