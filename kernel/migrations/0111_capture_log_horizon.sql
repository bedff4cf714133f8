-- L's GC horizon per stream (DESIGN §17): every L record with seq < below_seq is deleted
-- (or about to be: the horizon moves in the same transaction as each bounded delete
-- batch). `below_chain` is the chain digest of record below_seq - 1, so the first kept
-- record still links to it; `deleted` counts the records removed. The audit reads L from
-- max(B, below_seq) and reports the part below as released.
CREATE TABLE IF NOT EXISTS capture_log_horizon (
    stream VARCHAR(64) NOT NULL PRIMARY KEY,
    below_seq BIGINT UNSIGNED NOT NULL,
    below_chain BINARY(32) NOT NULL,
    deleted BIGINT UNSIGNED NOT NULL DEFAULT 0,
    updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB;
