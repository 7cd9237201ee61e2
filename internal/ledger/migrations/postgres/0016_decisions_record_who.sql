-- allot ledger v16, PostgreSQL: who made each operator decision.
--
-- decided_by: the operator who sent the command (--by, else $USER, else
-- the operating system's user name; allot.Actor). Decisions recorded
-- before v16, automatic approvals and imports without one read ''.
ALTER TABLE operator_decisions ADD COLUMN decided_by TEXT NOT NULL DEFAULT '';
