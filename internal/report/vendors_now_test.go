package report

import (
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// What a step waiting for its vendor waits for now is the ledger's state
// under the limits the workers recorded: a breaker whose trip_after was
// removed (and the worker restarted) stops nobody, whatever probe time the
// workflow recorded.
func TestVendorNowIsTheWorkersState(t *testing.T) {
	at := time.Date(2026, 8, 3, 12, 19, 0, 0, time.UTC)
	tripped := ledger.VendorState{Vendor: "videogen", Failures: 3, LastError: "503", TrippedAt: at.Add(-9 * time.Minute)}
	recorded := func(l pipeline.VendorLimits) EnforcedLimits {
		return EnforcedLimits{Limits: l, Known: true, Worker: "1@host", At: at.Add(-5 * time.Minute)}
	}
	for _, c := range []struct {
		name     string
		state    ledger.VendorState
		enforced EnforcedLimits
		status   string
		want     string
	}{
		{"breaker removed", tripped, recorded(pipeline.VendorLimits{}), "active", "its breaker is no longer configured (no trip_after in the limits worker 1@host recorded at 2026-08-03T12:14:00Z); the wait ends at the step's next attempt"},
		{"cool-down running", tripped, recorded(pipeline.VendorLimits{TripAfter: 3, CoolDown: "1h"}), "tripped", "one probe goes at 2026-08-03T13:10:00Z"},
		{"cool-down over", tripped, recorded(pipeline.VendorLimits{TripAfter: 3, CoolDown: "1m"}), "tripped", "its cool-down is over: the step's next attempt is the probe"},
		{"no worker recorded", tripped, EnforcedLimits{}, "tripped", "no worker has recorded the limits it enforces"},
		{"resumed", ledger.VendorState{Vendor: "videogen"}, recorded(pipeline.VendorLimits{TripAfter: 3}), "active", "active: the wait ends at the step's next attempt"},
		{"paused", ledger.VendorState{Vendor: "videogen", Paused: true, PauseReason: "bills twice", PausedBy: "alice", PausedAt: at}, EnforcedLimits{}, "paused", "by alice: bills twice; its steps go on after: " + allot.VendorResumeCommand("videogen")},
	} {
		got := VendorNowOf(c.state, c.enforced, at)
		if got.Status != c.status || !strings.Contains(got.Message, c.want) || !got.At.Equal(at) {
			t.Errorf("%s: %+v, want status %s and %q", c.name, got, c.status, c.want)
		}
	}
}
