-- Which window attempt a registered material belongs to (NULL for materials registered
-- without one). Written in the registration's own transaction, so the registry knows
-- exactly which RAW/FINAL pages and manifests an abandoned attempt left behind: they are
-- accounted as garbage and released once a later attempt seals the window.
ALTER TABLE ledger_material
    ADD COLUMN IF NOT EXISTS window_id INT UNSIGNED NULL,
    ADD COLUMN IF NOT EXISTS attempt INT UNSIGNED NULL,
    ADD INDEX IF NOT EXISTS material_owner (job_id, generation, window_id, attempt);
