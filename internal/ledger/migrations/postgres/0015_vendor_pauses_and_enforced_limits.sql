-- allot ledger v15, PostgreSQL: the history of vendor pauses and the
-- limits the workers enforce (docs/design.md, "Vendor controls").
--
-- vendor_pauses: every operator request on a vendor's pause, oldest
-- first: action 'pause' or 'resume', with its reason, who asked (requested_by),
-- whether it paused polls too, and when (requested_at). Pausing a paused vendor keeps the
-- first pause in vendor_state; the later requests are here.
CREATE TABLE vendor_pauses (
    id     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    vendor TEXT COLLATE "C" NOT NULL,
    action TEXT             NOT NULL CHECK (action IN ('pause', 'resume')),
    reason TEXT             NOT NULL DEFAULT '',
    requested_by TEXT          NOT NULL DEFAULT '',
    polls  BOOLEAN          NOT NULL DEFAULT FALSE,
    requested_at TIMESTAMPTZ     NOT NULL
);
CREATE INDEX vendor_pauses_by_vendor ON vendor_pauses (vendor, id);

-- vendor_limits: the limits a worker enforces for a vendor, as the last
-- worker to start recorded them (limits: the vendor's controls as JSON,
-- '{}' for none), with that worker's identity and when.
CREATE TABLE vendor_limits (
    vendor      TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    limits      TEXT             NOT NULL,
    worker      TEXT             NOT NULL,
    recorded_at TIMESTAMPTZ      NOT NULL
);
