-- Materials in the state store (ledger::material::state, DESIGN §18, issue 18): every
-- serve sharing the state store can read every material, so another host can take a job
-- over from its evidence. Chunk layout 1 (ledger::material::chunks): 512 KiB chunks
-- numbered from 0, written a few per transaction; the head row, inserted in the same
-- transaction as the last chunks, is what makes a material present. Headless chunks are
-- the leftovers of a crash mid-write and are never read.
CREATE TABLE IF NOT EXISTS material_blobs (
    digest BINARY(32) NOT NULL,
    chunk_no INT UNSIGNED NOT NULL,
    bytes MEDIUMBLOB NOT NULL,
    PRIMARY KEY (digest, chunk_no)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS material_blob_heads (
    digest BINARY(32) NOT NULL PRIMARY KEY,
    layout SMALLINT UNSIGNED NOT NULL,
    size BIGINT UNSIGNED NOT NULL,
    chunks INT UNSIGNED NOT NULL,
    created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB;
