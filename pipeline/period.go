package pipeline

import (
	"fmt"
	"time"
)

// CheckPeriodOf is the one check of a period given on the command line
// (episodes, costs, budget show and raise): text that is not a period of
// kind in canonical form, "2026-08-07" (day), "2026-W32" (iso-week) or
// "2026-08" (month), is refused with how to write one; owner names what
// counts in that kind ("pipeline weekly", "budget video").
func CheckPeriodOf(kind PeriodKind, owner, period string) error {
	var start time.Time
	switch kind {
	case Day:
		t, err := time.Parse("2006-01-02", period)
		if err != nil {
			return fmt.Errorf("%s counts days: period %q is not one; write it like 2026-08-07", owner, period)
		}
		start = t
	case Month:
		t, err := time.Parse("2006-01", period)
		if err != nil {
			return fmt.Errorf("%s counts months: period %q is not one; write it like 2026-08", owner, period)
		}
		start = t
	default:
		var year, week int
		if n, err := fmt.Sscanf(period, "%4d-W%2d", &year, &week); err != nil || n != 2 || week < 1 || week > 53 {
			return fmt.Errorf("%s counts ISO weeks: period %q is not one; write it like 2026-W32", owner, period)
		}
		jan4 := time.Date(year, time.January, 4, 12, 0, 0, 0, time.UTC)
		start = jan4.AddDate(0, 0, -((int(jan4.Weekday())+6)%7)+(week-1)*7)
	}
	if got := PeriodOf(kind, start.Add(12*time.Hour)); got != period {
		return fmt.Errorf("%s: period %q is not a %s period (did you mean %s?)", owner, period, kind, got)
	}
	return nil
}

// CheckPeriod refuses text that is not one of the pipeline's periods
// (CheckPeriodOf).
func (p *Pipeline) CheckPeriod(period string) error {
	return CheckPeriodOf(p.Period, "pipeline "+p.Name, period)
}
