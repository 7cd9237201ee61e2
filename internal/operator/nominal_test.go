package operator

import (
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// A backfill's keys are the nominal times behind the server's jittered
// action times: worked back for an interval and a cron, and reported as
// unknown (never guessed) for a spec that cannot be worked back, so that
// the starter does not wait for keys no run will ever record.
func TestNominalTimesBehindJitter(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	jittered := []time.Time{at("2026-08-03T02:03:10Z"), at("2026-08-03T03:00:59Z")}
	hourly := []time.Time{at("2026-08-03T02:00:00Z"), at("2026-08-03T03:00:00Z")}
	for name, tc := range map[string]struct {
		spec   *client.ScheduleSpec
		times  []time.Time
		want   []time.Time
		wantOK bool
	}{
		"no jitter":         {&client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: time.Hour}}}, hourly, hourly, true},
		"interval":          {&client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: time.Hour}}, Jitter: 5 * time.Minute}, jittered, hourly, true},
		"cron":              {&client.ScheduleSpec{CronExpressions: []string{"0 * * * *"}, Jitter: 5 * time.Minute}, jittered, hourly, true},
		"two intervals":     {&client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: time.Hour}, {Every: 90 * time.Minute}}, Jitter: 5 * time.Minute}, jittered, jittered, false},
		"beyond the jitter": {&client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: time.Hour}}, Jitter: time.Minute}, jittered, jittered, false},
	} {
		got, ok := nominalTimes(tc.spec, tc.times, at("2026-08-03T02:00:00Z"), at("2026-08-03T04:00:00Z"))
		if ok != tc.wantOK || !slices.EqualFunc(got, tc.want, time.Time.Equal) {
			t.Errorf("%s: nominalTimes = %v, %v; want %v, %v", name, got, ok, tc.want, tc.wantOK)
		}
	}
}
