package workflows

import (
	"testing"
	"time"

	"go.temporal.io/sdk/workflow"

	"allot/activities"
)

// Issue 7: a killed worker's activity is retried elsewhere within 30 s.
// An attempt that dies is noticed by its heartbeat timeout, or else by its
// start-to-close timeout; every option set allot's own activities run with
// bounds one of them by 30 s. (An activity step of another team's worker
// heartbeats as its TOML says: that worker's kill is its own.)
func TestEveryActivityOfAKilledWorkerResumesWithin30s(t *testing.T) {
	const bound = 30 * time.Second
	for name, o := range map[string]workflow.ActivityOptions{
		"allocation":           allocationActivityOptions(),
		"ledger":               ledgerActivityOptions(),
		"vendor":               vendorActivityOptions(),
		"await":                awaitActivityOptions(),
		"go step":              stepActivityOptions(&activities.StepRun{}),
		"exec step of an hour": stepActivityOptions(&activities.StepRun{Timeout: time.Hour}),
	} {
		noticed := o.StartToCloseTimeout
		if o.HeartbeatTimeout > 0 && o.HeartbeatTimeout < noticed {
			noticed = o.HeartbeatTimeout
		}
		if noticed <= 0 || noticed > bound {
			t.Errorf("%s activities: a killed attempt is noticed after %s (start-to-close %s, heartbeat %s), want at most %s",
				name, noticed, o.StartToCloseTimeout, o.HeartbeatTimeout, bound)
		}
		if o.RetryPolicy == nil || o.RetryPolicy.InitialInterval > 5*time.Second {
			t.Errorf("%s activities: retry policy %+v: the retry of a killed attempt waits too long", name, o.RetryPolicy)
		}
	}
}
