-- allot ledger v24, PostgreSQL: charges a person acknowledged outside a budget's
-- records (docs/design.md, "Budgets"; issue 41 §1). A paid task the budget
-- covers that reached the vendor without an entry in it (sent before the
-- budget covered its step, or without an admission) is spend the budget's
-- figures leave out; check flags it (charge_unreserved) until a person
-- acknowledges it with a name and a reason. The first acknowledgement
-- stands.
--
-- amount, currency: the charge as it was when acknowledged.
CREATE TABLE charge_acks (
    budget     TEXT COLLATE "C" NOT NULL CHECK (budget <> ''),
    period     TEXT COLLATE "C" NOT NULL CHECK (period <> ''),
    pipeline   TEXT COLLATE "C" NOT NULL,
    episode_id TEXT COLLATE "C" NOT NULL,
    step       TEXT COLLATE "C" NOT NULL,
    revision   INTEGER   NOT NULL CHECK (revision >= 0),
    amount     BIGINT    NOT NULL CHECK (amount >= 0),
    currency   TEXT      NOT NULL,
    acked_by   TEXT      NOT NULL CHECK (acked_by <> ''),
    reason     TEXT      NOT NULL CHECK (reason <> ''),
    acked_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (budget, pipeline, episode_id, step, revision)
);
