-- L (the raw log) and D (the reader's restart position), DESIGN §2, §3.6, §4.
--
-- One stream per source server reader. Every L record is a postcard body (kind LREC) plus
-- its blake3 digest and the hash chain: `chain` = blake3(prev chain, seq, body digest).
-- A record is appended only together with the compare-and-set of capture_position in
-- the SAME transaction (UPDATE ... WHERE tail_seq = expected AND tail_chain = expected),
-- so L can have no hole and D always names L's tail.
CREATE TABLE IF NOT EXISTS capture_log (
    stream VARCHAR(64) NOT NULL,
    seq BIGINT UNSIGNED NOT NULL,
    -- 1 = group chunk, 2 = progress (D advanced past groups of no captured table)
    kind TINYINT UNSIGNED NOT NULL,
    -- where the group starts (the end of the group before it)
    start_file VARCHAR(255) NOT NULL,
    start_pos BIGINT UNSIGNED NOT NULL,
    chunk_no INT UNSIGNED NOT NULL,
    -- set on the last chunk of a group and on progress records
    end_file VARCHAR(255) NULL,
    end_pos BIGINT UNSIGNED NULL,
    gtid VARCHAR(128) NULL,
    body_digest BINARY(32) NOT NULL,
    prev_chain BINARY(32) NOT NULL,
    chain BINARY(32) NOT NULL,
    body LONGBLOB NOT NULL,
    PRIMARY KEY (stream, seq),
    UNIQUE KEY capture_log_group_chunk (stream, start_file, start_pos, chunk_no, kind)
) ENGINE=InnoDB;

-- Which captured tables a record touches: the index behind "groups of a table between
-- two positions".
CREATE TABLE IF NOT EXISTS capture_log_table (
    stream VARCHAR(64) NOT NULL,
    schema_name VARCHAR(64) NOT NULL,
    table_name VARCHAR(64) NOT NULL,
    seq BIGINT UNSIGNED NOT NULL,
    changes INT UNSIGNED NOT NULL,
    PRIMARY KEY (stream, schema_name, table_name, seq)
) ENGINE=InnoDB;

-- D: the restart position (always a group end) and L's tail, one row per stream.
CREATE TABLE IF NOT EXISTS capture_position (
    stream VARCHAR(64) NOT NULL PRIMARY KEY,
    -- postcard Lineage (kind LINE)
    lineage LONGBLOB NOT NULL,
    restart_file VARCHAR(255) NOT NULL,
    restart_pos BIGINT UNSIGNED NOT NULL,
    restart_gtid VARCHAR(128) NULL,
    -- L seq of the record that ends at the restart position (0 = none yet)
    restart_seq BIGINT UNSIGNED NOT NULL,
    tail_seq BIGINT UNSIGNED NOT NULL,
    tail_chain BINARY(32) NOT NULL,
    -- chunk bound fixed for the life of the stream, so a re-read regroups identically
    chunk_changes INT UNSIGNED NOT NULL,
    updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB;

-- Control-table intents seen in the stream, in the same transaction as their L record.
CREATE TABLE IF NOT EXISTS capture_marker (
    stream VARCHAR(64) NOT NULL,
    nonce BIGINT UNSIGNED NOT NULL,
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    kind VARCHAR(8) NOT NULL,
    window_id INT UNSIGNED NULL,
    attempt INT UNSIGNED NULL,
    -- 1 when it arrived after the generation's K: no barrier, revives nothing
    obsolete TINYINT NOT NULL,
    seq BIGINT UNSIGNED NOT NULL,
    end_file VARCHAR(255) NOT NULL,
    end_pos BIGINT UNSIGNED NOT NULL,
    gtid VARCHAR(128) NULL,
    PRIMARY KEY (stream, nonce),
    KEY capture_marker_job (stream, job_id, generation, seq)
) ENGINE=InnoDB;

-- Tables paused by the reader (schema mismatch, DDL, uncapturable events), with the
-- definite reason and the L record where it happened. The table keeps being captured raw.
CREATE TABLE IF NOT EXISTS capture_pause (
    stream VARCHAR(64) NOT NULL,
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    schema_name VARCHAR(64) NOT NULL,
    table_name VARCHAR(64) NOT NULL,
    code VARCHAR(32) NOT NULL,
    message TEXT NOT NULL,
    seq BIGINT UNSIGNED NOT NULL,
    at_file VARCHAR(255) NOT NULL,
    at_pos BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (stream, job_id, generation)
) ENGINE=InnoDB;
