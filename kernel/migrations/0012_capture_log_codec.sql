-- How an L record's body is stored: 0 = the LREC postcard bytes as they are, 1 = those
-- bytes in one zstd frame. body_digest and the hash chain are always over the LREC
-- bytes themselves, so a record's identity does not depend on how it is stored; rows
-- written before this column existed are 0.
ALTER TABLE capture_log ADD COLUMN IF NOT EXISTS body_codec TINYINT UNSIGNED NOT NULL DEFAULT 0;
