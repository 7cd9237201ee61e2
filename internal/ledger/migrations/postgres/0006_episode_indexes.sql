-- allot ledger v6, PostgreSQL: an allocation writes fewer index entries.
--
-- Only the episodes with a reported outcome enter the outcome index: the
-- needs-attention gauge asks for one reported outcome, never for '', so a
-- new episode (outcome '' until the Episode workflow reports one) has no
-- entry to write. The gauge's query repeats the "<> ''" term so that the
-- planner matches the index's predicate whatever the parameter.
DROP INDEX episodes_outcome_pipeline;
CREATE INDEX episodes_outcome_pipeline ON episodes (outcome, pipeline) WHERE outcome <> '';
