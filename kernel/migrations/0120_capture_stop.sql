-- A stream whose reader stopped on a definite finding about the source's binlog history
-- (lineage_changed, binlog_purged): the reader records it here when its session ends with
-- it and removes it when a later session passes the same check at connect. A following
-- table whose wait for L's tail ended without the tail moving reads it and pauses with
-- that reason, so a stalled stream never leaves its tables STREAMING without a word.
CREATE TABLE IF NOT EXISTS capture_stop (
    stream VARCHAR(64) NOT NULL,
    code VARCHAR(32) NOT NULL,
    message TEXT NOT NULL,
    stopped_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (stream)
) ENGINE=InnoDB;
