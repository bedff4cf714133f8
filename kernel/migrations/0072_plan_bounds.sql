-- Window bounds of every key type (DESIGN §14): a bound that is not a single signed
-- integer is stored as its typed key values with their sort key (`KBND` envelope) in
-- lower_bound/upper_bound, and lower_key/upper_key stay NULL; a single signed integer
-- bound keeps the BIGINT columns, as every plan installed before.
ALTER TABLE plan_windows
    ADD COLUMN IF NOT EXISTS lower_bound MEDIUMBLOB NULL,
    ADD COLUMN IF NOT EXISTS upper_bound MEDIUMBLOB NULL;
