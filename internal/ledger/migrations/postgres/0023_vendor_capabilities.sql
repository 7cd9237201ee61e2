-- allot ledger v23, PostgreSQL: what each vendor can promise, as the last
-- worker to start recorded it (docs/design.md, "What a vendor can
-- promise"), so that `starter vendor show` says it for a Go adapter,
-- which only its worker links.
--
-- capabilities: allot.VendorCapabilities as JSON.
CREATE TABLE vendor_capabilities (
    vendor       TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    capabilities TEXT             NOT NULL,
    worker       TEXT             NOT NULL,
    recorded_at  TIMESTAMPTZ      NOT NULL
);
