-- allot ledger, SQLite. Times are fixed-width UTC RFC 3339 text
-- (2006-01-02T15:04:05.000000Z), so text order is time order.

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
    PRIMARY KEY (pipeline, episode_id)
);

-- Invariant 1: one key, one episode. A separate index (not a table
-- constraint) so that tests can drop it to simulate imported legacy data.
CREATE UNIQUE INDEX episodes_pipeline_key_uniq ON episodes (pipeline, allocation_key);

-- Invariant 2: no duplicate sequence in a period. It also serves
-- max(sequence) per (pipeline, period) with one index seek.
CREATE UNIQUE INDEX episodes_pipeline_period_seq_uniq ON episodes (pipeline, period, sequence);

CREATE TABLE step_records (
    pipeline     TEXT NOT NULL,
    episode_id   TEXT NOT NULL,
    step         TEXT NOT NULL,
    status       TEXT NOT NULL,
    artifact     TEXT NOT NULL DEFAULT '',
    sha256       TEXT NOT NULL DEFAULT '',
    completed_at TEXT NOT NULL,
    PRIMARY KEY (pipeline, episode_id, step),
    FOREIGN KEY (pipeline, episode_id) REFERENCES episodes (pipeline, episode_id)
);

CREATE TABLE run_outcomes (
    pipeline            TEXT    NOT NULL,
    allocation_key      TEXT    NOT NULL,
    run_id              TEXT    NOT NULL,
    nominal_time        TEXT,
    nominal_time_source TEXT    NOT NULL DEFAULT '',
    outcome             TEXT    NOT NULL,
    reason              TEXT    NOT NULL DEFAULT '',
    episode_id          TEXT    NOT NULL DEFAULT '',
    period              TEXT    NOT NULL DEFAULT '',
    sequence            INTEGER NOT NULL DEFAULT -1,
    recorded_at         TEXT    NOT NULL,
    PRIMARY KEY (pipeline, allocation_key, run_id)
);

CREATE INDEX run_outcomes_pipeline_recorded ON run_outcomes (pipeline, recorded_at);
