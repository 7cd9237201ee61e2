-- allot ledger v14, PostgreSQL: when a paid task was first sent.
--
-- first_sent_at: the first time a send of the task began (MarkSending);
-- NULL while it was never sent. The vendor's idempotency horizon counts
-- from it (docs/design.md, "Vendor controls", idempotency horizon): a task
-- that waited on its budget for days before its first send was not known
-- to the vendor meanwhile.
ALTER TABLE paid_tasks ADD COLUMN first_sent_at TIMESTAMPTZ;

-- Tasks sent before v13 do not say when: their creation is the earliest
-- time they can have been sent, so the horizon counts from it, as before.
UPDATE paid_tasks SET first_sent_at = created_at
    WHERE maybe_sent OR sending_until IS NOT NULL OR remote_ref <> '';
