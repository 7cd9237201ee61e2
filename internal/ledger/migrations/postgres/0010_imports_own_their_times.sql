-- allot ledger v10, PostgreSQL: an import owns the nominal times it imports.
--
-- 1. scheduled: the old run was its pipeline's scheduled run for its
--    nominal time, so its episode is bound to the key the Schedule,
--    starter run and backfills form for that time
--    (<pipeline>/scheduled-<RFC 3339 UTC>) and a later run for the time
--    gets it back instead of paying again. FALSE: the record said
--    "scheduled": false and the episode keeps <pipeline>/legacy/<old id>.
--    over_cap: the episode was imported beyond its pipeline's
--    max_episodes_per_period, which starter import --over-cap allowed.
ALTER TABLE imports ADD COLUMN scheduled BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE imports ADD COLUMN over_cap  BOOLEAN NOT NULL DEFAULT FALSE;

-- 2. Episodes imported before v10 got <pipeline>/legacy/<old id> only, so
--    a run for their nominal time allocated (and paid) again. Each is
--    rebound to its time's scheduled key where that is safe: no episode
--    holds the key yet (a run after the import may have) and no other
--    imported episode has the same nominal time (to the second; the ledger
--    will not guess which of them was the scheduled run). The rest keep
--    their legacy key, and starter check reports them (import_key).
UPDATE episodes e
    SET allocation_key = e.pipeline || '/scheduled-' || to_char(e.nominal_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
    FROM imports i
    WHERE i.pipeline = e.pipeline AND i.episode_id = e.episode_id
      AND e.allocation_key = i.pipeline || '/legacy/' || i.old_id
      AND NOT EXISTS (SELECT 1 FROM episodes o
            WHERE o.pipeline = e.pipeline
              AND o.allocation_key = e.pipeline || '/scheduled-' || to_char(e.nominal_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
      AND NOT EXISTS (SELECT 1 FROM imports j JOIN episodes o ON o.pipeline = j.pipeline AND o.episode_id = j.episode_id
            WHERE j.pipeline = e.pipeline AND o.episode_id <> e.episode_id
              AND date_trunc('second', o.nominal_time) = date_trunc('second', e.nominal_time));
