-- allot ledger, PostgreSQL. Text keys use the "C" collation: byte order,
-- as in SQLite, so that listings sort the same on both drivers whatever the
-- database's locale.

CREATE TABLE episodes (
    pipeline       TEXT COLLATE "C" NOT NULL,
    episode_id     TEXT COLLATE "C" NOT NULL,
    period         TEXT COLLATE "C" NOT NULL,
    sequence       INTEGER          NOT NULL CHECK (sequence >= 0),
    allocation_key TEXT COLLATE "C" NOT NULL,
    nominal_time   TIMESTAMPTZ      NOT NULL,
    created_at     TIMESTAMPTZ      NOT NULL,
    status         TEXT             NOT NULL DEFAULT 'allocated' CHECK (status IN ('allocated', 'completed')),
    completed_at   TIMESTAMPTZ,
    PRIMARY KEY (pipeline, episode_id)
);

-- Invariant 1: one key, one episode. A separate index (not a table
-- constraint) so that tests can drop it to simulate imported legacy data.
CREATE UNIQUE INDEX episodes_pipeline_key_uniq ON episodes (pipeline, allocation_key);

-- Invariant 2: no duplicate sequence in a period. It also serves
-- max(sequence) per (pipeline, period) with one index seek.
CREATE UNIQUE INDEX episodes_pipeline_period_seq_uniq ON episodes (pipeline, period, sequence);

CREATE TABLE step_records (
    pipeline     TEXT COLLATE "C" NOT NULL,
    episode_id   TEXT COLLATE "C" NOT NULL,
    step         TEXT COLLATE "C" NOT NULL,
    status       TEXT             NOT NULL,
    artifact     TEXT             NOT NULL DEFAULT '',
    sha256       TEXT             NOT NULL DEFAULT '',
    completed_at TIMESTAMPTZ      NOT NULL,
    PRIMARY KEY (pipeline, episode_id, step),
    FOREIGN KEY (pipeline, episode_id) REFERENCES episodes (pipeline, episode_id)
);

CREATE TABLE run_outcomes (
    pipeline            TEXT COLLATE "C" NOT NULL,
    allocation_key      TEXT COLLATE "C" NOT NULL,
    run_id              TEXT COLLATE "C" NOT NULL,
    nominal_time        TIMESTAMPTZ,
    nominal_time_source TEXT             NOT NULL DEFAULT '',
    outcome             TEXT             NOT NULL,
    reason              TEXT             NOT NULL DEFAULT '',
    episode_id          TEXT COLLATE "C" NOT NULL DEFAULT '',
    period              TEXT COLLATE "C" NOT NULL DEFAULT '',
    sequence            INTEGER          NOT NULL DEFAULT -1,
    recorded_at         TIMESTAMPTZ      NOT NULL,
    PRIMARY KEY (pipeline, allocation_key, run_id)
);

CREATE INDEX run_outcomes_pipeline_recorded ON run_outcomes (pipeline, recorded_at);
