-- Where each serve keeps materials (`--materials state|local`, DESIGN §18): a serve
-- refuses to start beside a live serve of the same state store that keeps them elsewhere
-- (a job taken over from a `local` serve would find its materials missing). NULL: a row
-- written by an older build (not compared).
ALTER TABLE serve_processes ADD COLUMN IF NOT EXISTS materials VARCHAR(8) NULL;
