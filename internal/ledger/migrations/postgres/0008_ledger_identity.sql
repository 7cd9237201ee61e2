-- allot ledger v8, PostgreSQL: the ledger's identity, created once. Workers
-- stamp it on the workflows they start and check it on every activity, so
-- that two ledgers sharing one Temporal namespace and task queue fail loudly
-- (LedgerMismatch) instead of stranding each other's episodes.
CREATE TABLE ledger_identity (
    singleton  INTEGER          NOT NULL PRIMARY KEY CHECK (singleton = 1),
    ledger_id  TEXT COLLATE "C" NOT NULL CHECK (ledger_id <> ''),
    created_at TIMESTAMPTZ      NOT NULL
);
