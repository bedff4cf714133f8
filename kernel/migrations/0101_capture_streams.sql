-- One capture reader per source stream across every serve sharing the state store
-- (kernel::capture::owner, DESIGN §18, issue 18). The owner of a stream's lease is the
-- only process that runs its reader; every L append checks the token in its own
-- transaction (and writes this row, so a takeover on another Galera node conflicts at
-- certification), so a reader that lost the lease cannot append. The token only grows.
CREATE TABLE IF NOT EXISTS capture_streams (
    stream VARCHAR(64) NOT NULL PRIMARY KEY,
    owner VARCHAR(191) NOT NULL,
    token BIGINT UNSIGNED NOT NULL,
    expires_at TIMESTAMP(6) NOT NULL,
    appends BIGINT UNSIGNED NOT NULL DEFAULT 0
) ENGINE=InnoDB;

-- The tables a stream's reader holds in its capture set, written by its owner under its
-- token after the table was added. A job writes B only once its table is listed here
-- with the stream's current token: a B the reader would not capture is never written.
CREATE TABLE IF NOT EXISTS capture_members (
    stream VARCHAR(64) NOT NULL,
    job_id BIGINT UNSIGNED NOT NULL,
    generation BIGINT UNSIGNED NOT NULL,
    token BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (stream, job_id, generation)
) ENGINE=InnoDB;
