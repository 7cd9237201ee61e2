-- allot ledger v10, SQLite: an import owns the nominal times it imports.
--
-- 1. scheduled: the old run was its pipeline's scheduled run for its
--    nominal time, so its episode is bound to the key the Schedule,
--    starter run and backfills form for that time
--    (<pipeline>/scheduled-<RFC 3339 UTC>) and a later run for the time
--    gets it back instead of paying again. 0: the record said
--    "scheduled": false and the episode keeps <pipeline>/legacy/<old id>.
--    over_cap: the episode was imported beyond its pipeline's
--    max_episodes_per_period, which starter import --over-cap allowed.
ALTER TABLE imports ADD COLUMN scheduled INTEGER NOT NULL DEFAULT 1 CHECK (scheduled IN (0, 1));
ALTER TABLE imports ADD COLUMN over_cap  INTEGER NOT NULL DEFAULT 0 CHECK (over_cap IN (0, 1));

-- 2. Episodes imported before v10 got <pipeline>/legacy/<old id> only, so
--    a run for their nominal time allocated (and paid) again. Each is
--    rebound to its time's scheduled key where that is safe: no episode
--    holds the key yet (a run after the import may have) and no other
--    imported episode has the same nominal time (to the second; the ledger
--    will not guess which of them was the scheduled run). The rest keep
--    their legacy key, and starter check reports them (import_key).
--    nominal_time is fixed-width UTC text, 2006-01-02T15:04:05.000000Z: its
--    first 19 characters and a Z are the time's RFC 3339 form to the second.
UPDATE episodes
    SET allocation_key = pipeline || '/scheduled-' || substr(nominal_time, 1, 19) || 'Z'
    WHERE EXISTS (SELECT 1 FROM imports i
            WHERE i.pipeline = episodes.pipeline AND i.episode_id = episodes.episode_id
              AND episodes.allocation_key = i.pipeline || '/legacy/' || i.old_id)
      AND NOT EXISTS (SELECT 1 FROM episodes o
            WHERE o.pipeline = episodes.pipeline
              AND o.allocation_key = episodes.pipeline || '/scheduled-' || substr(episodes.nominal_time, 1, 19) || 'Z')
      AND NOT EXISTS (SELECT 1 FROM imports j JOIN episodes o ON o.pipeline = j.pipeline AND o.episode_id = j.episode_id
            WHERE j.pipeline = episodes.pipeline AND o.episode_id <> episodes.episode_id
              AND substr(o.nominal_time, 1, 19) = substr(episodes.nominal_time, 1, 19));
