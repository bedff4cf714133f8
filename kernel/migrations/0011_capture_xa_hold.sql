-- XA holds (DESIGN §3.8): a prepared XA group touching a captured table is stored in L as
-- Held records (kind 3), not as changes of any table. The record that ends the prepared
-- group registers the hold here, in the same transaction that moves D past the XA
-- PREPARE; the record that ends its XA COMMIT group (the held chunks appended again, at
-- the commit's position) or its XA ROLLBACK (a Dropped record, kind 4) removes it, in the
-- same transaction that moves D past that statement. The holds therefore always describe
-- exactly the prepared groups open at D, which is what a restarted reader needs.
CREATE TABLE IF NOT EXISTS capture_xa_hold (
    stream VARCHAR(64) NOT NULL,
    -- the xid as the server logs it: X'gtrid',X'bqual',formatID
    xid VARBINARY(512) NOT NULL,
    -- the L records holding the group's chunks, first_seq..=last_seq
    first_seq BIGINT UNSIGNED NOT NULL,
    last_seq BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (stream, xid)
) ENGINE=InnoDB;
