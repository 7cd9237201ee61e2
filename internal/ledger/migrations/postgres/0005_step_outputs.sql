-- allot ledger v5, PostgreSQL: every step records its outputs (files with
-- their sha256, or a small JSON result), and a step reopened by a rework or
-- a reassembly keeps its row with the next revision instead of losing it.

ALTER TABLE step_records ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
-- outputs: JSON list of {"path", "sha256"}; '' for none.
ALTER TABLE step_records ADD COLUMN outputs  TEXT    NOT NULL DEFAULT '';
-- result: the step's small JSON result; '' for none.
ALTER TABLE step_records ADD COLUMN result   TEXT    NOT NULL DEFAULT '';
