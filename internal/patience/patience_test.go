package patience

import (
	"testing"
	"time"
)

// fakeDeadline is a testing.TB whose binary ends at a given time.
type fakeDeadline struct {
	testing.TB
	end time.Time
}

func (f fakeDeadline) Deadline() (time.Time, bool) { return f.end, true }

func TestWithinStretchesAndStopsAtTheDeadline(t *testing.T) {
	t.Setenv(PatienceEnv, "4")
	if got := Within(fakeDeadline{t, time.Now().Add(time.Hour)}, time.Minute); got != 4*time.Minute {
		t.Errorf("a minute with patience 4 and an hour left = %s, want 4m", got)
	}
	if got := Within(fakeDeadline{t, time.Now().Add(3 * time.Minute)}, time.Minute); got > 2*time.Minute || got < time.Minute {
		t.Errorf("a minute with patience 4 and 3 minutes left = %s, want at most 2m (the margin) and at least the idle bound", got)
	}
	t.Setenv(PatienceEnv, "nonsense")
	if got := Within(fakeDeadline{t, time.Now().Add(24 * time.Hour)}, time.Second); got != DefaultPatience*time.Second {
		t.Errorf("an unreadable %s = %s, want the default %dx", PatienceEnv, got, DefaultPatience)
	}
}
