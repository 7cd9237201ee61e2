-- allot ledger v25, SQLite: what a budget holds for its scheduled runs
-- (docs/design.md, "Scheduled work funded first"; issue 41 §2). A budget
-- with hold_scheduled keeps one row per scheduled run still due in its
-- period, at what that run reserves at most, so that manual runs,
-- backfills and retries spend only what is not held. A row is open until
-- the episode under its key holds an entry in the budget period (the run
-- drew on it) or ends; the worker rewrites the rows at each period's start,
-- every minute, and when a Schedule changes.
--
-- allocation_key: the key the Schedule gives the run (allot.AllocationKey).
-- amount: what one run reserves at most, in currency's minor units.
CREATE TABLE budget_holds (
    budget         TEXT    NOT NULL CHECK (budget <> ''),
    period         TEXT    NOT NULL CHECK (period <> ''),
    pipeline       TEXT    NOT NULL CHECK (pipeline <> ''),
    allocation_key TEXT    NOT NULL CHECK (allocation_key <> ''),
    nominal_time   TEXT    NOT NULL,
    amount         INTEGER NOT NULL CHECK (amount > 0),
    currency       TEXT    NOT NULL CHECK (currency <> ''),
    held_at        TEXT    NOT NULL,
    PRIMARY KEY (budget, period, pipeline, allocation_key)
) WITHOUT ROWID;
