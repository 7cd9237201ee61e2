-- allot ledger v11, SQLite: money budgets (invariant 20 of docs/design.md).
--
-- 1. One entry per (budget, period, paid task) that the budget covers: the
--    reservation written with the task's intent (held), the cost recorded
--    with its reference (settled), or given back when the vendor is known
--    not to have charged (released). Amounts in minor units of currency.
CREATE TABLE budget_entries (
    budget     TEXT    NOT NULL CHECK (budget <> ''),
    period     TEXT    NOT NULL CHECK (period <> ''),
    pipeline   TEXT    NOT NULL,
    episode_id TEXT    NOT NULL,
    step       TEXT    NOT NULL,
    revision   INTEGER NOT NULL CHECK (revision >= 0),
    state      TEXT    NOT NULL CHECK (state IN ('held', 'settled', 'released')),
    currency   TEXT    NOT NULL CHECK (currency <> ''),
    reserved   INTEGER NOT NULL CHECK (reserved >= 0),
    settled    INTEGER NOT NULL DEFAULT 0 CHECK (settled >= 0),
    -- The part of the cost the budget admitted: the reservation, lowered to
    -- the lowest cost recorded (a lower cost frees the rest for others).
    -- settled - granted, when positive, is an overrun: money booked beyond
    -- what any admission allowed.
    granted    INTEGER NOT NULL DEFAULT 0 CHECK (granted >= 0),
    created_at TEXT    NOT NULL,
    updated_at TEXT    NOT NULL,
    PRIMARY KEY (budget, period, pipeline, episode_id, step, revision),
    FOREIGN KEY (pipeline, episode_id, step, revision) REFERENCES paid_tasks (pipeline, episode_id, step, revision)
);
-- A task's entries, found when it settles or is released.
CREATE INDEX budget_entries_task ON budget_entries (pipeline, episode_id, step, revision);
-- The periods holding reservations, which the metrics export.
CREATE INDEX budget_entries_held ON budget_entries (budget, period) WHERE state = 'held';

-- 2. Raises: the latest row per (budget, period) is that period's limit,
--    instead of the pipeline file's; other periods keep theirs.
CREATE TABLE budget_raises (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id   TEXT    NOT NULL UNIQUE CHECK (request_id <> ''),
    budget       TEXT    NOT NULL CHECK (budget <> ''),
    period       TEXT    NOT NULL CHECK (period <> ''),
    limit_amount INTEGER NOT NULL CHECK (limit_amount > 0),
    currency     TEXT    NOT NULL CHECK (currency <> ''),
    reason       TEXT    NOT NULL CHECK (reason <> ''),
    raised_by    TEXT    NOT NULL CHECK (raised_by <> ''),
    raised_at    TEXT    NOT NULL
);
CREATE INDEX budget_raises_period ON budget_raises (budget, period, id);

-- 3. Soft thresholds crossed, once per (budget, period, threshold): the
--    alert is logged and counted by the write that inserts the row.
CREATE TABLE budget_alerts (
    budget       TEXT    NOT NULL,
    period       TEXT    NOT NULL,
    threshold    INTEGER NOT NULL CHECK (threshold > 0 AND threshold < 10000), -- basis points of the limit
    limit_amount INTEGER NOT NULL,
    settled      INTEGER NOT NULL,
    currency     TEXT    NOT NULL,
    crossed_at   TEXT    NOT NULL,
    PRIMARY KEY (budget, period, threshold)
);
