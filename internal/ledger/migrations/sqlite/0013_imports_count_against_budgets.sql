-- allot ledger v13, SQLite: imported costs count against budgets
-- (docs/design.md, "Imports and check").
--
-- An imported cost is a settled budget entry of every budget that covers
-- its step, written with the import. An import that takes a budget's
-- period over its limit is refused unless the operator allows it
-- (starter import --over-budget REASON): each episode whose costs count in
-- such a period records who allowed it and why.
--   over_budget_by, over_budget_reason: '' when it took no period over.
ALTER TABLE imports ADD COLUMN over_budget_by     TEXT NOT NULL DEFAULT '';
ALTER TABLE imports ADD COLUMN over_budget_reason TEXT NOT NULL DEFAULT '';
