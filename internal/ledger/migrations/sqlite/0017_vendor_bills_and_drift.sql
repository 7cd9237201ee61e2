-- allot ledger v17, SQLite: the vendor's bill as the reconciler read it,
-- and the drift items it found (docs/design.md, "Reconciling the vendor's
-- bill"; issue 28).
--
-- bill_watermarks: one row per vendor account: the vendor's cursor after
-- the last page stored (cursor), and how many distinct lines the account
-- has (lines_read, which also numbers them: the next line's seq). A page
-- moves the cursor only from the value it was read from, so two
-- reconcilers never both store the page after one watermark.
CREATE TABLE bill_watermarks (
    account    TEXT    NOT NULL PRIMARY KEY CHECK (account <> ''),
    vendor     TEXT    NOT NULL,
    cursor     TEXT    NOT NULL,
    lines_read INTEGER NOT NULL DEFAULT 0 CHECK (lines_read >= 0),
    updated_at TEXT    NOT NULL
) WITHOUT ROWID;

-- bill_lines: every line of every account's bill, stored once however
-- often it is read. seq is the ledger's reading order within the account
-- (1, 2, ...); task_ref is the vendor's task ID and idempotency_key the key
-- the task was sent with ('' when the vendor names none); refund lines
-- (refund = 1) give the amount given back. judged_at: when the reconciler
-- compared the line with the ledger (NULL: not yet).
CREATE TABLE bill_lines (
    account         TEXT    NOT NULL,
    line_id         TEXT    NOT NULL CHECK (line_id <> ''),
    seq             INTEGER NOT NULL CHECK (seq > 0),
    vendor          TEXT    NOT NULL,
    task_ref        TEXT    NOT NULL DEFAULT '',
    idempotency_key TEXT    NOT NULL DEFAULT '',
    refund          INTEGER NOT NULL DEFAULT 0,
    amount          INTEGER NOT NULL CHECK (amount >= 0),
    currency        TEXT    NOT NULL,
    charged_at      TEXT,
    read_at         TEXT    NOT NULL,
    judged_at       TEXT,
    PRIMARY KEY (account, line_id)
) WITHOUT ROWID;
-- The reconciler's queue: an account's lines not judged yet, in order.
CREATE INDEX bill_lines_unjudged ON bill_lines (account, seq) WHERE judged_at IS NULL;
-- Earlier charges of one task, and the costs no line names (refund in
-- the index: those look-ups skip refunds without reading the line).
CREATE INDEX bill_lines_by_key ON bill_lines (account, idempotency_key, refund, seq);
CREATE INDEX bill_lines_by_task_ref ON bill_lines (account, task_ref, refund, seq);

-- drift_items: each unexplained line of a bill (line: its line_id), or
-- cost the bill does not charge (line: 'cost:' and the remote reference),
-- once per (account, line, class). pipeline, episode_id, step, revision
-- and period name the ledger's task ('' when the line names none); amount
-- is the money at stake and detail what is wrong and what to do. An
-- operator acknowledges an item (acked_at, acked_by, ack_reason): it stops
-- alerting and stays here.
CREATE TABLE drift_items (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    account         TEXT    NOT NULL CHECK (account <> ''),
    vendor          TEXT    NOT NULL,
    line            TEXT    NOT NULL CHECK (line <> ''),
    class           TEXT    NOT NULL CHECK (class IN ('charged_unrecorded', 'recorded_uncharged', 'amount_differs', 'double_charge', 'refunded')),
    pipeline        TEXT    NOT NULL DEFAULT '',
    episode_id      TEXT    NOT NULL DEFAULT '',
    step            TEXT    NOT NULL DEFAULT '',
    revision        INTEGER NOT NULL DEFAULT 0 CHECK (revision >= 0),
    period          TEXT    NOT NULL DEFAULT '',
    remote_ref      TEXT    NOT NULL DEFAULT '',
    idempotency_key TEXT    NOT NULL DEFAULT '',
    amount          INTEGER NOT NULL CHECK (amount >= 0),
    currency        TEXT    NOT NULL,
    detail          TEXT    NOT NULL,
    found_at        TEXT    NOT NULL,
    acked_at        TEXT,
    acked_by        TEXT    NOT NULL DEFAULT '',
    ack_reason      TEXT    NOT NULL DEFAULT '',
    UNIQUE (account, line, class)
);
-- What waits for an operator: listed by ID, and totalled per vendor,
-- class and currency from the index alone.
CREATE INDEX drift_items_unacked ON drift_items (id) WHERE acked_at IS NULL;
CREATE INDEX drift_items_unacked_totals ON drift_items (vendor, class, currency, amount) WHERE acked_at IS NULL;
