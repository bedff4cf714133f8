-- When each window's progress row was first written (issue 17 item 5): `status` of a fleet
-- shows rows/s and an ETA during the bootstrap from the rows applied over the time since the
-- first window started (MIN(started_at) .. MAX(updated_at)). A counter's timestamp, never
-- evidence; the upsert of `window_progress` never changes it, so a retried window keeps it.
ALTER TABLE window_progress
    ADD COLUMN IF NOT EXISTS started_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6);
