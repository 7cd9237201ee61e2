-- allot ledger v2, SQLite: paid tasks (invariant 7), cost entries
-- (invariant 8) and operator decisions.

-- One row per vendor submission of (episode, step, revision). The row is
-- written (state intent) before the vendor is called, and the remote
-- reference before the task may be retried or completed. The API keeps
-- "submitted, succeeded and failed have a remote reference"; Check audits it
-- (no CHECK constraint, so that imported data can be loaded and reported).
CREATE TABLE paid_tasks (
    pipeline        TEXT    NOT NULL,
    episode_id      TEXT    NOT NULL,
    step            TEXT    NOT NULL,
    revision        INTEGER NOT NULL CHECK (revision >= 0),
    idempotency_key TEXT    NOT NULL DEFAULT '',
    state           TEXT    NOT NULL CHECK (state IN ('planned', 'intent', 'submitted', 'succeeded', 'failed', 'abandoned')),
    remote_ref      TEXT    NOT NULL DEFAULT '',
    artifact        TEXT    NOT NULL DEFAULT '',
    sha256          TEXT    NOT NULL DEFAULT '',
    error           TEXT    NOT NULL DEFAULT '',
    request_id      TEXT    NOT NULL DEFAULT '',
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL,
    PRIMARY KEY (pipeline, episode_id, step, revision),
    FOREIGN KEY (pipeline, episode_id) REFERENCES episodes (pipeline, episode_id)
);

-- Invariant 7: one vendor idempotency key and one remote reference per paid
-- task. Separate partial indexes (empty means "not yet"), so that tests can
-- drop them to simulate imported data. Queries that should use them repeat
-- the "<> ''" term: SQLite uses a partial index only when the query's WHERE
-- clause contains its condition.
CREATE UNIQUE INDEX paid_tasks_idempotency_key_uniq ON paid_tasks (idempotency_key) WHERE idempotency_key <> '';
CREATE UNIQUE INDEX paid_tasks_remote_ref_uniq ON paid_tasks (remote_ref) WHERE remote_ref <> '';

-- An operator request plans at most one revision of a step.
CREATE UNIQUE INDEX paid_tasks_request_uniq ON paid_tasks (pipeline, episode_id, step, request_id) WHERE request_id <> '';

-- Invariant 8: one cost entry per remote reference, holding an absolute
-- amount in minor units (upserted, never incremented).
CREATE TABLE cost_entries (
    remote_ref  TEXT    NOT NULL PRIMARY KEY CHECK (remote_ref <> ''),
    pipeline    TEXT    NOT NULL,
    episode_id  TEXT    NOT NULL,
    step        TEXT    NOT NULL,
    revision    INTEGER NOT NULL CHECK (revision >= 0),
    amount      INTEGER NOT NULL CHECK (amount >= 0),
    currency    TEXT    NOT NULL CHECK (currency <> ''),
    recorded_at TEXT    NOT NULL,
    FOREIGN KEY (pipeline, episode_id) REFERENCES episodes (pipeline, episode_id)
);

CREATE INDEX cost_entries_episode ON cost_entries (pipeline, episode_id, step, revision);

-- Operator decisions, each keyed by the request (Temporal update ID) that
-- made it, within its episode; id keeps recording order for equal times.
CREATE TABLE operator_decisions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id  TEXT    NOT NULL CHECK (request_id <> ''),
    pipeline    TEXT    NOT NULL,
    episode_id  TEXT    NOT NULL,
    step        TEXT    NOT NULL DEFAULT '',
    revision    INTEGER NOT NULL DEFAULT 0 CHECK (revision >= 0),
    action      TEXT    NOT NULL,
    remote_ref  TEXT    NOT NULL DEFAULT '',
    reason      TEXT    NOT NULL DEFAULT '',
    decided_at  TEXT    NOT NULL,
    FOREIGN KEY (pipeline, episode_id) REFERENCES episodes (pipeline, episode_id)
);

CREATE UNIQUE INDEX operator_decisions_request_uniq ON operator_decisions (pipeline, episode_id, request_id);
