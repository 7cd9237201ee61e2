package operator

import (
	"fmt"
	"slices"
	"testing"
	"time"

	schedulepb "go.temporal.io/api/schedule/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/service/worker/scheduler"
	"google.golang.org/protobuf/types/known/durationpb"
)

// serverBackfillTimes are the action and nominal times the embedded
// server's own spec code gives a backfill of [from, to) of a cron spec, as
// ListScheduleMatchingTimes lists them (from 1 ms before from, each next
// time after the previous action time, up to to less 1 ms).
func serverBackfillTimes(t *testing.T, cron, zone string, jitter time.Duration, seed string, from, to time.Time) (actual, nominal []time.Time) {
	t.Helper()
	b := scheduler.NewSpecBuilder(func() int { return 0 }, func() int { return 0 })
	cs, err := b.NewCompiledSpec(&schedulepb.ScheduleSpec{CronString: []string{cron}, TimezoneName: zone, Jitter: durationpb.New(jitter)})
	if err != nil {
		t.Fatal(err)
	}
	after, end := from.Add(-time.Millisecond), to.Add(-time.Millisecond)
	for {
		res, err := cs.GetNextTime(seed, after)
		if err != nil {
			t.Fatal(err)
		}
		if res.Next.IsZero() || res.Next.After(end) {
			return actual, nominal
		}
		actual, nominal = append(actual, res.Next.UTC()), append(nominal, res.Nominal.UTC())
		after = res.Next
	}
}

// The fast backfill's keys are the server's: held against the server's
// own schedule code, the nominal times it works back from the jittered
// action times are exactly the server's, every one inside [from, to), or
// it refuses (and the backfill prints the --via-schedule command). A
// 15-minute cron with 20 minutes of jitter (longer than the gap: the
// server caps each time's jitter at it) is worked back exactly, from a
// from that is not on a time of the spec; daily 01:30 in New York with 2 h
// of jitter is exact in October and refused across the fall-back day,
// when the server runs 01:30 twice.
func TestFastBackfillKeysAreTheServers(t *testing.T) {
	day := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	cases := []struct {
		name, cron, zone string
		jitter           time.Duration
		from, to         time.Time
		exact            bool
	}{
		{"15m cron, 20m jitter", "*/15 * * * *", "", 20 * time.Minute, day("2026-08-03T00:05:00Z"), day("2026-08-03T06:05:00Z"), true},
		{"15m cron, 20m jitter, from on a time", "*/15 * * * *", "", 20 * time.Minute, day("2026-08-03T00:00:00Z"), day("2026-08-03T06:00:00Z"), true},
		{"hourly in Berlin, 3h jitter", "0 * * * *", "Europe/Berlin", 3 * time.Hour, day("2026-08-03T00:30:00Z"), day("2026-08-05T00:30:00Z"), true},
		{"daily 01:30 New York, 2h jitter, October", "30 1 * * *", "America/New_York", 2 * time.Hour, day("2026-10-01T00:00:00Z"), day("2026-10-28T00:00:00Z"), true},
		{"daily 01:30 New York, 2h jitter, fall-back day", "30 1 * * *", "America/New_York", 2 * time.Hour, day("2026-10-28T00:00:00Z"), day("2026-11-05T00:00:00Z"), false},
	}
	for _, tc := range cases {
		for i := range 40 {
			seed := fmt.Sprintf("default-allot-schedule-%d", i)
			actual, want := serverBackfillTimes(t, tc.cron, tc.zone, tc.jitter, seed, tc.from, tc.to)
			spec := &client.ScheduleSpec{CronExpressions: []string{tc.cron}, TimeZoneName: tc.zone, Jitter: tc.jitter}
			got, ok := nominalTimes(spec, actual, tc.from, tc.to)
			if !tc.exact {
				if ok {
					t.Errorf("%s, seed %s: nominal times %v worked out, want a refusal (the server's are %v)", tc.name, seed, got, want)
				}
				continue
			}
			if !ok || !slices.EqualFunc(got, want, time.Time.Equal) {
				t.Errorf("%s, seed %s: nominal times %v (ok %v), the server's %v", tc.name, seed, got, ok, want)
			}
		}
	}
	// Why the fall-back day is refused: the server's times hold 01:30
	// twice on 2026-11-01 (05:30Z in EDT, 06:30Z in EST).
	_, nov := serverBackfillTimes(t, "30 1 * * *", "America/New_York", 2*time.Hour, "s", day("2026-11-01T00:00:00Z"), day("2026-11-02T00:00:00Z"))
	if want := []time.Time{day("2026-11-01T05:30:00Z"), day("2026-11-01T06:30:00Z")}; !slices.EqualFunc(nov, want, time.Time.Equal) {
		t.Errorf("the server's times on the fall-back day: %v, want %v", nov, want)
	}
}
