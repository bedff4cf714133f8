-- J (ledger::journal): append-only, hash-chained records of one table-generation's state
-- machine. The head is the highest seq; appending seq = head + 1 is the compare-and-set
-- (a second writer of the same seq hits the primary key). `digest` = blake3(prev || record).
CREATE TABLE IF NOT EXISTS ledger_journal (
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    seq BIGINT UNSIGNED NOT NULL,
    record MEDIUMBLOB NOT NULL,
    prev_digest BINARY(32) NOT NULL,
    digest BINARY(32) NOT NULL,
    token BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (job_id, generation, seq)
) ENGINE=InnoDB;
