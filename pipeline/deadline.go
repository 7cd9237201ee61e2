package pipeline

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Period deadlines (docs/design.md, "Period deadlines"). A pipeline may say
// when each period's work is due, as an offset from the period's start in
// its time zone ("4d9h": Friday 09:00 of an ISO week), how many completed
// episodes the period needs (deadline_episodes, default 1) and how long
// before the deadline to warn (warn_before). The days of the offset are
// calendar days and the rest is wall-clock time, so a deadline is at the
// same local hour in a week whose clocks change.

// maxDeadlineDays bounds the days of a deadline: a period's work is due
// within a year of its start.
const maxDeadlineDays = 366

// parseDeadline parses "4d9h", "9h30m", "2d" into calendar days and a
// wall-clock offset from midnight.
func parseDeadline(v string) (days int, clock time.Duration, err error) {
	rest := strings.TrimSpace(v)
	if d, after, ok := strings.Cut(rest, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > maxDeadlineDays {
			return 0, 0, fmt.Errorf("days %q are not a whole number from 0 to %d", d, maxDeadlineDays)
		}
		days, rest = n, after
	}
	if rest != "" {
		if clock, err = time.ParseDuration(rest); err != nil || clock < 0 {
			return 0, 0, fmt.Errorf("%q is not a duration of hours, minutes or seconds", rest)
		}
		if clock%time.Second != 0 {
			return 0, 0, fmt.Errorf("%q has a fraction of a second", rest)
		}
		if clock >= 24*time.Hour {
			// "4d25h" could mean Saturday 01:00 or a typo for "4d5h":
			// the time of day is written as one.
			d := days + int(clock/(24*time.Hour))
			return 0, 0, fmt.Errorf("%q is not a time of day (0h to 23h59m59s): write the whole days before the \"d\", e.g. %q", rest, deadlineText(d, clock%(24*time.Hour)))
		}
	}
	if days == 0 && clock == 0 {
		return 0, 0, fmt.Errorf("the offset is zero")
	}
	return days, clock, nil
}

// deadlineText writes days and a time of day as a deadline is written:
// "5d1h", "9h30m", "2d".
func deadlineText(days int, clock time.Duration) string {
	s := ""
	if days > 0 {
		s = strconv.Itoa(days) + "d"
	}
	h, m, sec := int(clock/time.Hour), int(clock%time.Hour/time.Minute), int(clock%time.Minute/time.Second)
	for _, part := range []struct {
		n    int
		unit string
	}{{h, "h"}, {m, "m"}, {sec, "s"}} {
		if part.n > 0 {
			s += strconv.Itoa(part.n) + part.unit
		}
	}
	if s == "" {
		return "0h"
	}
	return s
}

func (p *Pipeline) normalizeDeadline() error {
	if p.Deadline == "" {
		if p.DeadlineEpisodes != 0 || p.WarnBefore != "" {
			return fmt.Errorf("pipeline %q: deadline_episodes and warn_before need a deadline: add deadline = \"4d9h\" (Friday 09:00 of an ISO week) or remove them", p.Name)
		}
		return nil
	}
	days, clock, err := parseDeadline(p.Deadline)
	if err != nil {
		return fmt.Errorf("pipeline %q: deadline %q: %v: write the offset from the period's start like \"4d9h\" (Friday 09:00 of an ISO week) or \"9h30m\"", p.Name, p.Deadline, err)
	}
	if p.DeadlineEpisodes < 0 {
		return fmt.Errorf("pipeline %q: deadline_episodes is %d: use the number of completed episodes a period needs (default 1)", p.Name, p.DeadlineEpisodes)
	}
	// An explicit deadline_episodes = 0 is refused by the file's parse
	// (explicitZeros): here 0 is "not written".
	if p.DeadlineEpisodes == 0 {
		p.DeadlineEpisodes = 1
	}
	if p.MaxPerPeriod > 0 && p.DeadlineEpisodes > p.MaxPerPeriod {
		return fmt.Errorf("pipeline %q: deadline_episodes is %d but max_episodes_per_period is %d: a period could never have enough; lower deadline_episodes or raise the cap", p.Name, p.DeadlineEpisodes, p.MaxPerPeriod)
	}
	var warn time.Duration
	if p.WarnBefore != "" {
		if warn, err = time.ParseDuration(p.WarnBefore); err != nil || warn <= 0 {
			return fmt.Errorf("pipeline %q: warn_before %q is not a positive duration: write it like \"2h\" or \"24h\"", p.Name, p.WarnBefore)
		}
		if offset := deadlineOffset(days, clock); warn > offset {
			return fmt.Errorf("pipeline %q: warn_before %q is longer than the deadline %q, %s after the period's start: the warning would come before the period begins; give warn_before = %q or less",
				p.Name, p.WarnBefore, p.Deadline, offset, deadlineText(0, offset))
		}
	}
	p.deadlineDays, p.deadlineClock, p.warnBefore = days, clock, warn
	return nil
}

// deadlineOffset is how long after a period's start its deadline is, days
// counted as 24 hours (a day a clock change shortens or lengthens is off
// by its hour).
func deadlineOffset(days int, clock time.Duration) time.Duration {
	return time.Duration(days)*24*time.Hour + clock
}

// checkBatchWait refuses a batch step whose batch may wait for items
// longer than the pipeline's deadline: the period would be due while its
// batch was still forming.
func (p *Pipeline) checkBatchWait(s Step) error {
	if !p.HasDeadline() || !s.Batch {
		return nil
	}
	offset, wait := deadlineOffset(p.deadlineDays, p.deadlineClock), s.BatchMaxWaitDuration()
	if wait <= offset {
		return nil
	}
	written := fmt.Sprintf("batch_max_wait %q", s.BatchMaxWait)
	if s.BatchMaxWait == "" {
		written = fmt.Sprintf("batch_max_wait (by default %s)", DefaultBatchMaxWait)
	}
	return fmt.Errorf("%s is longer than the pipeline's deadline %q, %s after the period's start: the period would be due while a batch still waits for items; give batch_max_wait = %q or less, or a later deadline",
		written, p.Deadline, offset, deadlineText(0, offset))
}

// HasDeadline reports whether the pipeline declares a deadline.
func (p *Pipeline) HasDeadline() bool { return p.Deadline != "" }

// DeadlineSpec is the pipeline's deadline as one canonical line: what the
// ledger records as declared, so that a change shows as a new
// declaration; "" without a deadline.
func (p *Pipeline) DeadlineSpec() string {
	if !p.HasDeadline() {
		return ""
	}
	s := fmt.Sprintf("deadline=%dd%s episodes=%d period=%s zone=%s", p.deadlineDays, p.deadlineClock, p.DeadlineEpisodes, p.Period, p.Location())
	if p.warnBefore > 0 {
		s += " warn_before=" + p.warnBefore.String()
	}
	return s
}

// DeadlineEpisodesNeeded is how many completed episodes a period needs by
// its deadline (0 without a deadline).
func (p *Pipeline) DeadlineEpisodesNeeded() int {
	if !p.HasDeadline() {
		return 0
	}
	return p.DeadlineEpisodes
}

// PeriodStart is the start of one of the pipeline's periods in its zone:
// midnight of the day, or of the ISO week's Monday.
func (p *Pipeline) PeriodStart(period string) (time.Time, error) {
	if err := p.CheckPeriod(period); err != nil {
		return time.Time{}, err
	}
	loc := p.Location()
	if p.Period == Day {
		t, _ := time.Parse("2006-01-02", period)
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc), nil
	}
	var year, week int
	_, _ = fmt.Sscanf(period, "%4d-W%2d", &year, &week)
	jan4 := time.Date(year, time.January, 4, 0, 0, 0, 0, time.UTC)
	monday := jan4.AddDate(0, 0, -((int(jan4.Weekday())+6)%7)+(week-1)*7)
	return time.Date(monday.Year(), monday.Month(), monday.Day(), 0, 0, 0, 0, loc), nil
}

// Due is when a period's work is due, and when to warn (zero without
// warn_before). It is an error to ask of a pipeline without a deadline.
func (p *Pipeline) Due(period string) (due, warn time.Time, err error) {
	if !p.HasDeadline() {
		return time.Time{}, time.Time{}, fmt.Errorf("pipeline %q declares no deadline: add deadline = \"4d9h\" to it", p.Name)
	}
	start, err := p.PeriodStart(period)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	due = p.dueFrom(start)
	if p.warnBefore > 0 {
		warn = due.Add(-p.warnBefore)
	}
	return due, warn, nil
}

// dueFrom is the deadline of the period starting at start: calendar days,
// then wall-clock time (time.Date normalises hours past 24 on the wall
// clock, not in elapsed time).
func (p *Pipeline) dueFrom(start time.Time) time.Time {
	sec := int(p.deadlineClock / time.Second)
	return time.Date(start.Year(), start.Month(), start.Day()+p.deadlineDays, 0, 0, sec, 0, p.Location())
}

// NextDue is the first period whose deadline is after after: its name,
// its deadline and its warning time (zero without warn_before).
func (p *Pipeline) NextDue(after time.Time) (period string, due, warn time.Time, err error) {
	if !p.HasDeadline() {
		return "", time.Time{}, time.Time{}, fmt.Errorf("pipeline %q declares no deadline: add deadline = \"4d9h\" to it", p.Name)
	}
	// Start from a period early enough that its deadline, up to
	// deadlineDays+1 days past its start, is not after after; walk on.
	local := after.In(p.Location())
	back := p.deadlineDays + int(p.deadlineClock/(24*time.Hour)) + 8
	cand := PeriodOf(p.Period, time.Date(local.Year(), local.Month(), local.Day()-back, 12, 0, 0, 0, p.Location()))
	for range back + 16 {
		start, err := p.PeriodStart(cand)
		if err != nil {
			return "", time.Time{}, time.Time{}, err
		}
		if d := p.dueFrom(start); d.After(after) {
			due, warn, err = p.Due(cand)
			return cand, due, warn, err
		}
		cand = p.nextPeriod(start)
	}
	return "", time.Time{}, time.Time{}, fmt.Errorf("pipeline %q: no deadline after %s", p.Name, after.Format(time.RFC3339))
}

// nextPeriod is the period after the one starting at start.
func (p *Pipeline) nextPeriod(start time.Time) string {
	days := 7
	if p.Period == Day {
		days = 1
	}
	return PeriodOf(p.Period, time.Date(start.Year(), start.Month(), start.Day()+days, 12, 0, 0, 0, p.Location()))
}

// NominalIn is a nominal time whose period is period: the first whole hour
// from the period's start on that falls in it after the pipeline's
// period_offset (a run at that time counts in the period).
func (p *Pipeline) NominalIn(period string) (time.Time, error) {
	start, err := p.PeriodStart(period)
	if err != nil {
		return time.Time{}, err
	}
	// An offset moves the period by up to its days (or its duration)
	// either way: look that far around the start.
	span := time.Duration(p.offsetDays)*24*time.Hour + p.offset
	span = max(span, -span) + 8*24*time.Hour
	for t := start.Add(-span); !t.After(start.Add(span)); t = t.Add(time.Hour) {
		if p.PeriodOf(t) == period {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("pipeline %q: no nominal time falls in period %s", p.Name, period)
}
