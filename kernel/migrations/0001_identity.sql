-- The state store's own identity: a random token written once. install looks for this
-- row through the SOURCE connection: if the source server can read it, the state store
-- is on the source server (MariaDB has no server_uuid; DESIGN §2).
CREATE TABLE IF NOT EXISTS state_identity (
    singleton TINYINT NOT NULL PRIMARY KEY,
    token CHAR(32) NOT NULL,
    created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB;
