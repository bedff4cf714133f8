-- How a job's sealed pages hold text (issue 15): 'utf8mb4' for jobs installed by a build
-- whose read views returned every string re-encoded as utf8mb4 (their pages of other
-- charsets' columns must not be written as those columns' own bytes), 'stored' for jobs
-- whose pages hold each column's stored bytes (SET NAMES binary). Existing rows get the
-- former, every later install the latter.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS page_text VARCHAR(16) NOT NULL DEFAULT 'utf8mb4';
ALTER TABLE jobs ALTER COLUMN page_text SET DEFAULT 'stored';
