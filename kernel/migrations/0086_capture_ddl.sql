-- Every DDL of a captured table the reader paused it at (DESIGN §16): the L record, the
-- table, the statement's position and text. An index of L (written in the transaction
-- that appends the record), so finding the next DDL of a table after a point reads this
-- table, not L's bodies. Records appended before this migration have no rows here: their
-- DDLs stay pauses.
CREATE TABLE IF NOT EXISTS capture_ddl (
    stream VARCHAR(64) NOT NULL,
    seq BIGINT UNSIGNED NOT NULL,
    schema_name VARCHAR(64) NOT NULL,
    table_name VARCHAR(64) NOT NULL,
    at_file VARCHAR(255) NOT NULL,
    at_pos BIGINT UNSIGNED NOT NULL,
    default_schema VARCHAR(64) NOT NULL,
    statement MEDIUMTEXT NOT NULL,
    PRIMARY KEY (stream, schema_name, table_name, seq)
) ENGINE=InnoDB;
