-- allot ledger v3, SQLite: every run says why (invariant 10), for episodes
-- too. The Episode workflow reports each episode's current outcome and its
-- reason; '' means "not reported yet". outcome_at is when the outcome or
-- reason last changed (NULL until the first report).

ALTER TABLE episodes ADD COLUMN outcome        TEXT NOT NULL DEFAULT '';
ALTER TABLE episodes ADD COLUMN outcome_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE episodes ADD COLUMN outcome_at     TEXT;

-- The needs-attention gauge is read on every scrape: "outcome = ? GROUP BY
-- pipeline" is one range of this index, read without touching the table.
CREATE INDEX episodes_outcome_pipeline ON episodes (outcome, pipeline);

-- Episode outcome counts since a time: a range per pipeline.
CREATE INDEX episodes_pipeline_created ON episodes (pipeline, created_at);

-- Run outcome counts since a time across all pipelines; per pipeline,
-- run_outcomes_pipeline_recorded (0001) serves them.
CREATE INDEX run_outcomes_recorded ON run_outcomes (recorded_at);
