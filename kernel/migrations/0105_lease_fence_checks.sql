-- Galera (DESIGN §18, issue 18): the fencing check of every J write (ledger::lease::check_in)
-- used `SELECT token ... LOCK IN SHARE MODE`. A shared lock holds on the local node only and
-- a read is not part of a Galera write set, so a takeover committed through another node did
-- not conflict with a stale owner's J write. The check now increments this counter on the
-- lease row in the same transaction: the row is in the write set, a concurrent takeover
-- fails certification (ERROR 1213, retried) against it, and on one server the exclusive
-- row lock orders it exactly as the shared lock did. A counter, never evidence.
ALTER TABLE ledger_lease
    ADD COLUMN IF NOT EXISTS fence_checks BIGINT UNSIGNED NOT NULL DEFAULT 0;
