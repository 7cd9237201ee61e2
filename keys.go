package allot

import "time"

// ScheduledKey is the allocation key of a pipeline's run at a nominal time:
// "<pipeline>/scheduled-<RFC 3339 UTC, seconds>", the workflow ID the
// pipeline's Temporal Schedule forms (workflows.AllocationKey), which
// starter run and backfills form too, and which an imported scheduled run
// binds. Formed here once, so that the ledger's audit and import agree with
// the workflows on it.
func ScheduledKey(pipeline string, nominal time.Time) string {
	return pipeline + "/scheduled-" + nominal.UTC().Truncate(time.Second).Format(time.RFC3339)
}
