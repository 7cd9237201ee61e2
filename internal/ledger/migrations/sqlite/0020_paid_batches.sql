-- allot ledger v20, SQLite: vendor batches (docs/design.md, "Batches";
-- issue 29).
--
-- paid_batches: one row per batch key. The key is written, with the
-- batch's items, before the vendor is asked to create anything; it travels
-- in the batch's metadata, so that a create whose answer was lost is found
-- in the vendor's list, never made twice. maybe_sent and sending_until
-- are the create's, as for a paid task; look_only_until is the window
-- after an unknown outcome in which the vendor's list is only read.
-- vendor_batch_id is the vendor's ID once it made the batch.
CREATE TABLE paid_batches (
    batch_key         TEXT    NOT NULL PRIMARY KEY CHECK (batch_key <> ''),
    vendor            TEXT    NOT NULL,
    kind              TEXT    NOT NULL CHECK (kind <> ''),
    state             TEXT    NOT NULL CHECK (state IN ('open', 'created', 'ended', 'not_created')),
    vendor_batch_id   TEXT    NOT NULL DEFAULT '',
    maybe_sent        INTEGER NOT NULL DEFAULT 0,
    sending_until     TEXT,
    look_only_until   TEXT,
    status            TEXT    NOT NULL DEFAULT '',
    results_expire_at TEXT,
    error             TEXT    NOT NULL DEFAULT '',
    created_at        TEXT    NOT NULL,
    updated_at        TEXT    NOT NULL,
    CHECK (state IN ('open', 'not_created') OR vendor_batch_id <> '')
) WITHOUT ROWID;
-- One vendor batch is one batch key's.
CREATE UNIQUE INDEX paid_batches_vendor_id ON paid_batches (vendor, vendor_batch_id) WHERE vendor_batch_id <> '';
-- The batches not ended yet (the collector, check, the operator page).
CREATE INDEX paid_batches_by_state ON paid_batches (state, created_at);

-- paid_batch_items: the paid tasks a batch carries, and what became of
-- each once the batch ended (outcome, '' until then). A task is carried
-- by one batch at a time: its intent's owner is that batch.
CREATE TABLE paid_batch_items (
    batch_key  TEXT    NOT NULL REFERENCES paid_batches (batch_key),
    pipeline   TEXT    NOT NULL,
    episode_id TEXT    NOT NULL,
    step       TEXT    NOT NULL,
    revision   INTEGER NOT NULL,
    outcome    TEXT    NOT NULL DEFAULT '' CHECK (outcome IN ('', 'succeeded', 'failed', 'not_processed', 'result_lost')),
    PRIMARY KEY (batch_key, pipeline, episode_id, step, revision)
) WITHOUT ROWID;
-- The batches that carried a task (episode show).
CREATE INDEX paid_batch_items_by_task ON paid_batch_items (pipeline, episode_id, step, revision);
