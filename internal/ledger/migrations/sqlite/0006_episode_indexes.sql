-- allot ledger v6, SQLite: an allocation writes fewer b-tree pages. Every
-- b-tree an insert touches is one more page in the commit, so:
--
-- 1. episodes becomes a WITHOUT ROWID table, clustered on its primary key
--    (pipeline, episode_id): the rows live in the primary key's b-tree, and
--    the separate rowid table goes. Columns, types, defaults, NOT NULLs,
--    CHECKs and the primary key are exactly those of v5.
-- 2. Only the episodes with a reported outcome enter the outcome index: the
--    needs-attention gauge asks for one reported outcome, never for '', so a
--    new episode (outcome '' until the Episode workflow reports one) has no
--    entry to write. SQLite uses a partial index only for a query whose
--    WHERE clause implies its condition, so the gauge's query repeats the
--    "<> ''" term.
--
-- SQLite cannot change a table's storage in place: the table is rebuilt (a
-- copy of its rows, DROP, CREATE under the same name, the rows back, its
-- indexes again). The child tables (step_records, paid_tasks, cost_entries,
-- operator_decisions) name episodes in their foreign keys, by name, so they
-- refer to the new table as soon as it exists; nothing in them is rewritten.
-- Every episode is copied twice and checked against its child rows twice,
-- so on a large ledger this migration takes a while, once.
--
-- Foreign keys: the ledger's connections run with foreign_keys on, and that
-- pragma cannot change inside the migration's transaction. This one can:
-- with defer_foreign_keys on, the DROP (an implicit DELETE of every episode)
-- counts the child rows it orphans instead of failing, and copying the
-- episodes back into the new table counts each of them back as its parent
-- reappears. If any were left orphaned, COMMIT fails and the migration rolls
-- back whole. (A connection with foreign_keys off counts nothing, and the
-- rows come back just the same.) The pragma ends itself at COMMIT; it is not
-- switched off here, because switching it off forgets the count. Until then
-- it holds for the migrations after this one in the same transaction too,
-- which only moves their foreign-key checks to that COMMIT.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE episodes_v5_copy AS SELECT
    pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status, completed_at,
    outcome, outcome_reason, outcome_at, plan
FROM episodes;

DROP TABLE episodes;

CREATE TABLE episodes (
    pipeline       TEXT    NOT NULL,
    episode_id     TEXT    NOT NULL,
    period         TEXT    NOT NULL,
    sequence       INTEGER NOT NULL CHECK (sequence >= 0),
    allocation_key TEXT    NOT NULL,
    nominal_time   TEXT    NOT NULL,
    created_at     TEXT    NOT NULL,
    status         TEXT    NOT NULL DEFAULT 'allocated' CHECK (status IN ('allocated', 'completed')),
    completed_at   TEXT,
    outcome        TEXT    NOT NULL DEFAULT '',
    outcome_reason TEXT    NOT NULL DEFAULT '',
    outcome_at     TEXT,
    plan           TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (pipeline, episode_id)
) WITHOUT ROWID;

-- In primary-key order: the clustered b-tree is built by appending.
INSERT INTO episodes (
    pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status, completed_at,
    outcome, outcome_reason, outcome_at, plan)
SELECT
    pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status, completed_at,
    outcome, outcome_reason, outcome_at, plan
FROM episodes_v5_copy
ORDER BY pipeline, episode_id;

DROP TABLE episodes_v5_copy;

-- The indexes of 0001 and 0003, as they were but for the outcome index's
-- condition; see there for what each one serves.
CREATE UNIQUE INDEX episodes_pipeline_key_uniq ON episodes (pipeline, allocation_key);
CREATE UNIQUE INDEX episodes_pipeline_period_seq_uniq ON episodes (pipeline, period, sequence);
CREATE INDEX episodes_outcome_pipeline ON episodes (outcome, pipeline) WHERE outcome <> '';
CREATE INDEX episodes_pipeline_created ON episodes (pipeline, created_at);
