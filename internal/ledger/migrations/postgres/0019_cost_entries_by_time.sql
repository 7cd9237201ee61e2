-- allot ledger v19, PostgreSQL: cost entries by the time they were recorded
-- (docs/design.md, "The operator page"; issue 27).
--
-- The page's spend chart reads the costs of the last 30 days: one range
-- of this index, however long the history.
CREATE INDEX cost_entries_recorded ON cost_entries (recorded_at);
