-- allot ledger v11, PostgreSQL: money budgets (invariant 20 of docs/design.md).
--
-- 1. One entry per (budget, period, paid task) that the budget covers: the
--    reservation written with the task's intent (held), the cost recorded
--    with its reference (settled), or given back when the vendor is known
--    not to have charged (released). Amounts in minor units of currency.
CREATE TABLE budget_entries (
    budget     TEXT COLLATE "C" NOT NULL CHECK (budget <> ''),
    period     TEXT COLLATE "C" NOT NULL CHECK (period <> ''),
    pipeline   TEXT COLLATE "C" NOT NULL,
    episode_id TEXT COLLATE "C" NOT NULL,
    step       TEXT COLLATE "C" NOT NULL,
    revision   INTEGER NOT NULL CHECK (revision >= 0),
    state      TEXT    NOT NULL CHECK (state IN ('held', 'settled', 'released')),
    currency   TEXT    NOT NULL CHECK (currency <> ''),
    reserved   BIGINT  NOT NULL CHECK (reserved >= 0),
    settled    BIGINT  NOT NULL DEFAULT 0 CHECK (settled >= 0),
    -- The part of the cost the budget admitted: the reservation, lowered to
    -- the lowest cost recorded (a lower cost frees the rest for others).
    -- settled - granted, when positive, is an overrun: money booked beyond
    -- what any admission allowed.
    granted    BIGINT  NOT NULL DEFAULT 0 CHECK (granted >= 0),
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
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
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id   TEXT COLLATE "C" NOT NULL UNIQUE CHECK (request_id <> ''),
    budget       TEXT COLLATE "C" NOT NULL CHECK (budget <> ''),
    period       TEXT COLLATE "C" NOT NULL CHECK (period <> ''),
    limit_amount BIGINT  NOT NULL CHECK (limit_amount > 0),
    currency     TEXT    NOT NULL CHECK (currency <> ''),
    reason       TEXT    NOT NULL CHECK (reason <> ''),
    raised_by    TEXT    NOT NULL CHECK (raised_by <> ''),
    raised_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX budget_raises_period ON budget_raises (budget, period, id);

-- 3. Soft thresholds crossed, once per (budget, period, threshold): the
--    alert is logged and counted by the write that inserts the row.
CREATE TABLE budget_alerts (
    budget       TEXT COLLATE "C" NOT NULL,
    period       TEXT COLLATE "C" NOT NULL,
    threshold    INTEGER NOT NULL CHECK (threshold > 0 AND threshold < 10000), -- basis points of the limit
    limit_amount BIGINT  NOT NULL,
    settled      BIGINT  NOT NULL,
    currency     TEXT    NOT NULL,
    crossed_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (budget, period, threshold)
);
