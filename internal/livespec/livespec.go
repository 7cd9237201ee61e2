// Package livespec reads the timing of a pipeline's live Temporal Schedule,
// which `starter schedule update`, Temporal's own tools or a demo may have
// set apart from the pipeline file: catch-up settles the Schedule's times,
// not the file's (docs/design.md, "Catch-up").
package livespec

import (
	"fmt"
	"strconv"
	"strings"

	"go.temporal.io/sdk/client"

	"allot/pipeline"
)

// Where a catch-up's spec came from.
const (
	FromSchedule     = "schedule"
	FromPipelineFile = "pipeline file"
)

// Of is the spec catch-up settles by: the live Schedule's timing (its
// cron or interval, time zone, jitter and catchup_window), which `starter
// schedule update`, Temporal's own tools or a demo may have set apart from
// the pipeline file, with the pipeline's catch-up settings (catch_up,
// catch_up_grace, max_backfill), which only allot has (docs/design.md,
// "Catch-up"). zone is the time zone its cron runs in. A spec allot cannot
// list the times of (several calendars or intervals, an interval offset,
// seconds or years in a calendar) is an error, never the file's instead.
func Of(file pipeline.ScheduleSpec, sched client.Schedule) (spec pipeline.ScheduleSpec, zone string, err error) {
	spec = file
	sp := sched.Spec
	if sp == nil {
		return spec, "", fmt.Errorf("the Schedule has no spec")
	}
	spec.Cron, spec.Interval = "", 0
	switch {
	case len(sp.Intervals) == 1 && len(sp.CronExpressions)+len(sp.Calendars) == 0:
		iv := sp.Intervals[0]
		if iv.Offset != 0 || iv.Every <= 0 {
			return spec, "", fmt.Errorf("the Schedule's interval (every %s, offset %s) is not one allot schedules (every N, no offset)", iv.Every, iv.Offset)
		}
		spec.Interval = iv.Every
	case len(sp.Intervals) == 0 && len(sp.CronExpressions) == 1 && len(sp.Calendars) == 0:
		spec.Cron = sp.CronExpressions[0]
	case len(sp.Intervals) == 0 && len(sp.CronExpressions) == 0 && len(sp.Calendars) == 1:
		c := sp.Calendars[0]
		if len(c.Year) > 0 || len(c.Second) > 1 || len(c.Second) == 1 && (c.Second[0].Start != 0 || c.Second[0].End > 0) {
			return spec, "", fmt.Errorf("the Schedule's calendar has seconds or years, which a five-field cron cannot say")
		}
		spec.Cron = CalendarCron(c)
	default:
		return spec, "", fmt.Errorf("the Schedule's spec has %d cron expressions, %d calendars and %d intervals; allot schedules one", len(sp.CronExpressions), len(sp.Calendars), len(sp.Intervals))
	}
	if len(sp.Skip) > 0 || !sp.StartAt.IsZero() || !sp.EndAt.IsZero() {
		return spec, "", fmt.Errorf("the Schedule's spec has exclusions or a start or end, which allot does not schedule")
	}
	spec.Jitter = sp.Jitter
	if pol := sched.Policy; pol != nil && pol.CatchupWindow > 0 {
		spec.CatchupWindow = pol.CatchupWindow
	}
	if spec.Cron != "" {
		zone = sp.TimeZoneName
	}
	return spec, zone, nil
}

// CalendarCron writes a calendar spec back as a cron expression (minute
// hour day-of-month month day-of-week): the server keeps a cron string as
// a calendar.
func CalendarCron(c client.ScheduleCalendarSpec) string {
	return strings.Join([]string{
		cronField(c.Minute, 0, 59), cronField(c.Hour, 0, 23), cronField(c.DayOfMonth, 1, 31),
		cronField(c.Month, 1, 12), cronField(c.DayOfWeek, 0, 6),
	}, " ")
}

func cronField(ranges []client.ScheduleRange, lo, hi int) string {
	if len(ranges) == 0 || len(ranges) == 1 && ranges[0].Start == lo && ranges[0].End == hi && ranges[0].Step <= 1 {
		return "*"
	}
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		p := strconv.Itoa(r.Start)
		if r.End > r.Start {
			p += "-" + strconv.Itoa(r.End)
		}
		if r.Step > 1 {
			p += "/" + strconv.Itoa(r.Step)
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

// FileSpec is the pipeline file's schedule settings that Of completes
// with the live Schedule's timing. A pipeline without a schedule in the
// file may still have a Schedule (created with --cron or --interval): its
// settings are the defaults, and its timing the Schedule's.
func FileSpec(p *pipeline.Pipeline) (pipeline.ScheduleSpec, error) {
	var configured pipeline.Schedule
	if p.Schedule != nil {
		configured = *p.Schedule
	}
	if configured.Cron == "" && configured.Interval == "" {
		configured = configured.Merge(pipeline.Schedule{Interval: "1h"}) // replaced by the live spec's timing
	}
	spec, err := configured.Spec()
	if err != nil {
		return pipeline.ScheduleSpec{}, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	return spec, nil
}
