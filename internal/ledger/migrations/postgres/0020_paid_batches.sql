-- allot ledger v20, PostgreSQL: vendor batches (docs/design.md, "Batches";
-- issue 29). Text keys use the "C" collation, as in 0001.
--
-- paid_batches: one row per batch key. The key is written, with the
-- batch's items, before the vendor is asked to create anything; it travels
-- in the batch's metadata, so that a create whose answer was lost is found
-- in the vendor's list, never made twice. maybe_sent and sending_until
-- are the create's, as for a paid task; look_only_until is the window
-- after an unknown outcome in which the vendor's list is only read.
-- vendor_batch_id is the vendor's ID once it made the batch.
CREATE TABLE paid_batches (
    batch_key         TEXT COLLATE "C" NOT NULL PRIMARY KEY CHECK (batch_key <> ''),
    vendor            TEXT COLLATE "C" NOT NULL,
    kind              TEXT COLLATE "C" NOT NULL CHECK (kind <> ''),
    state             TEXT COLLATE "C" NOT NULL CHECK (state IN ('open', 'created', 'ended', 'not_created')),
    vendor_batch_id   TEXT COLLATE "C" NOT NULL DEFAULT '',
    maybe_sent        BOOLEAN          NOT NULL DEFAULT FALSE,
    sending_until     TIMESTAMPTZ,
    look_only_until   TIMESTAMPTZ,
    status            TEXT COLLATE "C" NOT NULL DEFAULT '',
    results_expire_at TIMESTAMPTZ,
    error             TEXT             NOT NULL DEFAULT '',
    created_at        TIMESTAMPTZ      NOT NULL,
    updated_at        TIMESTAMPTZ      NOT NULL,
    CHECK (state IN ('open', 'not_created') OR vendor_batch_id <> '')
);
-- One vendor batch is one batch key's.
CREATE UNIQUE INDEX paid_batches_vendor_id ON paid_batches (vendor, vendor_batch_id) WHERE vendor_batch_id <> '';
-- The batches not ended yet (the collector, check, the operator page).
CREATE INDEX paid_batches_by_state ON paid_batches (state, created_at);

-- paid_batch_items: the paid tasks a batch carries, and what became of
-- each once the batch ended (outcome, '' until then). A task is carried
-- by one batch at a time: its intent's owner is that batch.
CREATE TABLE paid_batch_items (
    batch_key  TEXT COLLATE "C" NOT NULL REFERENCES paid_batches (batch_key),
    pipeline   TEXT COLLATE "C" NOT NULL,
    episode_id TEXT COLLATE "C" NOT NULL,
    step       TEXT COLLATE "C" NOT NULL,
    revision   INTEGER          NOT NULL,
    outcome    TEXT COLLATE "C" NOT NULL DEFAULT '' CHECK (outcome IN ('', 'succeeded', 'failed', 'not_processed', 'result_lost')),
    PRIMARY KEY (batch_key, pipeline, episode_id, step, revision)
);
-- The batches that carried a task (episode show).
CREATE INDEX paid_batch_items_by_task ON paid_batch_items (pipeline, episode_id, step, revision);
