-- allot ledger v9, SQLite.
--
-- 1. The run that allocated an episode: a retry of that same run (its
--    Allocate committed, its reply was lost) gets its own answer back,
--    allocated/new_episode, as an idempotency store replays a saved
--    response; any other run of the key is reused/key_bound. '' for
--    episodes allocated before v9.
ALTER TABLE episodes ADD COLUMN allocated_by_run TEXT NOT NULL DEFAULT '';

-- 2. Every outcome has a reason. Before v9 the Episode workflow reported
--    running, waiting_approval, completed and rejected with none.
UPDATE episodes SET outcome_reason = CASE outcome
        WHEN 'running'          THEN 'in_progress'
        WHEN 'waiting_approval' THEN 'awaiting_approval'
        WHEN 'completed'        THEN 'steps_completed'
        WHEN 'rejected'         THEN 'approval_rejected'
        ELSE outcome_reason END
    WHERE outcome_reason = '' AND outcome <> '';

-- 3. Inputs a pipeline consumes ([pipeline.inputs] claim = "oldest_ready"):
--    each is ready from ready_at, claimed by at most one episode, in the
--    allocation's transaction, and an episode claims at most one.
CREATE TABLE inputs (
    pipeline     TEXT NOT NULL,
    ref          TEXT NOT NULL CHECK (ref <> ''),
    ready_at     TEXT NOT NULL,
    payload      TEXT NOT NULL DEFAULT '',
    state        TEXT NOT NULL CHECK (state IN ('ready', 'claimed', 'withdrawn')),
    episode_id   TEXT,
    added_at     TEXT NOT NULL,
    claimed_at   TEXT,
    withdrawn_at TEXT,
    PRIMARY KEY (pipeline, ref),
    CHECK ((state = 'claimed') = (episode_id IS NOT NULL)),
    CONSTRAINT inputs_episode_fk FOREIGN KEY (pipeline, episode_id) REFERENCES episodes (pipeline, episode_id)
);

-- The claim: the oldest ready input, one seek.
CREATE INDEX inputs_ready ON inputs (pipeline, ready_at, ref) WHERE state = 'ready';
-- One input per episode, and an episode's input found by a seek.
CREATE UNIQUE INDEX inputs_episode_uniq ON inputs (pipeline, episode_id) WHERE episode_id IS NOT NULL;
