-- allot ledger v12, PostgreSQL: vendor controls (docs/design.md, "Vendor
-- controls"), shared by every worker and pipeline of the ledger.
--
-- vendor_state: one row per vendor that has had any state.
--   paused, pause_polls, pause_reason, paused_by, paused_at: an operator's
--     pause (starter vendor pause), of sends only or (pause_polls) of
--     every request;
--   failures, last_error: consecutive failures (unreachable, 5xx,
--     timeouts) and the last one's text, for the breaker;
--   tripped_at: the breaker is open since then (NULL: closed); after the
--     vendor's cool_down one probe goes: probe_holder until probe_until;
--   tokens_milli, refilled_at: the token bucket of its rate, in
--     thousandths of a submission, as of refilled_at.
-- Every change to a vendor's rows holds its advisory lock.
CREATE TABLE vendor_state (
    vendor       TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    paused       BOOLEAN          NOT NULL DEFAULT FALSE,
    pause_polls  BOOLEAN          NOT NULL DEFAULT FALSE,
    pause_reason TEXT             NOT NULL DEFAULT '',
    paused_by    TEXT             NOT NULL DEFAULT '',
    paused_at    TIMESTAMPTZ,
    failures     INTEGER          NOT NULL DEFAULT 0 CHECK (failures >= 0),
    last_error   TEXT             NOT NULL DEFAULT '',
    tripped_at   TIMESTAMPTZ,
    probe_holder TEXT COLLATE "C" NOT NULL DEFAULT '',
    probe_until  TIMESTAMPTZ,
    tokens_milli BIGINT           NOT NULL DEFAULT 0 CHECK (tokens_milli >= 0),
    refilled_at  TIMESTAMPTZ,
    updated_at   TIMESTAMPTZ      NOT NULL
);

-- vendor_leases: the requests in flight at a vendor with max_in_flight,
-- one per holder (an activity attempt, or an Episode's send), each until
-- expires_at: a killed holder's slot comes back when its lease expires.
CREATE TABLE vendor_leases (
    vendor      TEXT COLLATE "C" NOT NULL,
    holder      TEXT COLLATE "C" NOT NULL,
    kind        TEXT             NOT NULL CHECK (kind IN ('send', 'poll')),
    acquired_at TIMESTAMPTZ      NOT NULL,
    expires_at  TIMESTAMPTZ      NOT NULL,
    PRIMARY KEY (vendor, holder)
);
