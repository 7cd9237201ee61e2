-- allot ledger v4, SQLite: the paid-task state machine without dead ends
-- (invariants 7, 13 and 14 of docs/design.md).

-- owner: the attempt (an activity attempt's token) that wrote the intent;
-- only the owner sends it, anyone else looks it up by idempotency key first.
-- maybe_sent: a send to the vendor began and its answer never came, so the
-- vendor may hold the task: before any new send the vendor is asked, and if
-- it cannot tell, the episode parks (OutcomeUnknown). It survives an
-- operator's retry. sending_until: the deadline of the latest send; until it
-- has passed the send may still reach the vendor, so a look-up that finds
-- nothing proves nothing yet. resubmit_request: the operator request that
-- allowed one send without asking (resolve --resubmit); the send consumes
-- it.
ALTER TABLE paid_tasks ADD COLUMN owner            TEXT    NOT NULL DEFAULT '';
ALTER TABLE paid_tasks ADD COLUMN maybe_sent       INTEGER NOT NULL DEFAULT 0;
ALTER TABLE paid_tasks ADD COLUMN sending_until    TEXT;
ALTER TABLE paid_tasks ADD COLUMN resubmit_request TEXT    NOT NULL DEFAULT '';

-- An intent written by an earlier build may have been sent: say so.
UPDATE paid_tasks SET maybe_sent = 1 WHERE state = 'intent';

-- The step plan (names, kinds, params) pinned when the episode was
-- allocated, as JSON; '' for episodes allocated before v4, which pin the
-- plan their first load sees.
ALTER TABLE episodes ADD COLUMN plan TEXT NOT NULL DEFAULT '';
