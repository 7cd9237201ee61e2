package livespec

import (
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot"
	"allot/pipeline"
)

// A sweep takes the live Schedule's timing (a cron the server keeps as a
// calendar, its zone, jitter and catchup_window) and keeps the file's
// catch-up settings; a spec it cannot list the times of is an error, never
// the file's spec instead.
func TestOfIsTheSchedulesTiming(t *testing.T) {
	file, err := pipeline.Schedule{Interval: "1h", CatchUp: "latest", CatchUpGrace: "30s"}.Spec()
	if err != nil {
		t.Fatal(err)
	}
	// `30 1 * * *` in New York, as the server describes it.
	cal := client.ScheduleCalendarSpec{
		Second: []client.ScheduleRange{{Start: 0}}, Minute: []client.ScheduleRange{{Start: 30}}, Hour: []client.ScheduleRange{{Start: 1}},
		DayOfMonth: []client.ScheduleRange{{Start: 1, End: 31}}, Month: []client.ScheduleRange{{Start: 1, End: 12}}, DayOfWeek: []client.ScheduleRange{{Start: 0, End: 6}},
	}
	live := client.Schedule{
		Spec:   &client.ScheduleSpec{Calendars: []client.ScheduleCalendarSpec{cal}, TimeZoneName: "America/New_York", Jitter: 2 * time.Hour},
		Policy: &client.SchedulePolicies{CatchupWindow: 3 * time.Hour},
	}
	spec, zone, err := Of(file, live)
	if err != nil || spec.Cron != "30 1 * * *" || spec.Interval != 0 || zone != "America/New_York" || spec.Jitter != 2*time.Hour || spec.CatchupWindow != 3*time.Hour ||
		spec.CatchUp.Mode != allot.CatchUpLatest || spec.CatchUpGrace != 30*time.Second {
		t.Fatalf("live spec %+v in %q, %v", spec, zone, err)
	}
	spec, zone, err = Of(file, client.Schedule{Spec: &client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: 2 * time.Second}}, TimeZoneName: "UTC"}})
	if err != nil || spec.Interval != 2*time.Second || spec.Cron != "" || zone != "" || spec.CatchupWindow != file.CatchupWindow {
		t.Fatalf("live interval %+v in %q, %v", spec, zone, err)
	}
	for name, sp := range map[string]*client.ScheduleSpec{
		"none":          nil,
		"offset":        {Intervals: []client.ScheduleIntervalSpec{{Every: time.Hour, Offset: time.Minute}}},
		"two crons":     {CronExpressions: []string{"0 * * * *", "30 * * * *"}},
		"seconds":       {Calendars: []client.ScheduleCalendarSpec{{Second: []client.ScheduleRange{{Start: 15}}}}},
		"an exclusion":  {CronExpressions: []string{"0 * * * *"}, Skip: []client.ScheduleCalendarSpec{cal}},
		"cron and more": {CronExpressions: []string{"0 * * * *"}, Intervals: []client.ScheduleIntervalSpec{{Every: time.Hour}}},
	} {
		if _, _, err := Of(file, client.Schedule{Spec: sp}); err == nil {
			t.Errorf("%s: a spec allot cannot list was read", name)
		}
	}
}
