package report

// Period deadlines as the operator's views show them (docs/design.md,
// "Period deadlines"): runs lists a pipeline's records, stats its on-time
// ratio per month and the late periods still open, check every late period
// not completed since. The records are the DeadlineWatch workflow's; here
// they are only read.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// KindPeriodLate means a period recorded late that has not completed since.
// It needs a human as much as a parked episode: its record names the cause
// and the command that moves the period on.
const KindPeriodLate = "period_late"

// DeadlinesInput selects one pipeline's deadline records.
type DeadlinesInput struct {
	Pipeline string
	// Since keeps the records due at or after it (zero: all).
	Since time.Time
	// Pipelines gives the deadline the file declares and the zone the
	// times are shown in (UTC for a pipeline it lacks); may be nil.
	Pipelines *pipeline.Set
}

// DeadlinesResult is a pipeline's deadline and what each judged period
// came to, in the order the records were written.
type DeadlinesResult struct {
	// Deadline is the pipeline file's deadline (pipeline.DeadlineSpec); ""
	// when the file declares none (records may remain from an earlier one).
	Deadline string `json:"deadline,omitempty"`
	// Declaration is the deadline the workers read and since when: periods
	// due before its ChangedAt are not judged.
	Declaration *ledger.DeadlineDeclaration `json:"declaration,omitempty"`
	// Records have their times in the pipeline's zone.
	Records []ledger.DeadlineRecord `json:"records"`
	// Unread says why the records could not be read (no ledger there).
	Unread string `json:"unread,omitempty"`
}

// Shown reports whether there is anything to show: a declared deadline,
// or records left by one.
func (r *DeadlinesResult) Shown() bool {
	return r != nil && (r.Deadline != "" || r.Declaration != nil || len(r.Records) > 0 || r.Unread != "")
}

// zoneOf is the pipeline's time zone, UTC when the file lacks it.
func zoneOf(set *pipeline.Set, name string) *time.Location {
	if set != nil {
		if p, err := set.Get(name); err == nil {
			return p.Location()
		}
	}
	return time.UTC
}

// deadlineSpec is the file's deadline of the pipeline; "" without one.
func deadlineSpec(set *pipeline.Set, name string) string {
	if set != nil {
		if p, err := set.Get(name); err == nil {
			return p.DeadlineSpec()
		}
	}
	return ""
}

// inZone shows a record's times in loc: a deadline reads as the pipeline
// declared it ("Friday 09:00"), not in UTC.
func inZone(r ledger.DeadlineRecord, loc *time.Location) ledger.DeadlineRecord {
	r.DueAt = r.DueAt.In(loc)
	if !r.CompletedAt.IsZero() {
		r.CompletedAt = r.CompletedAt.In(loc)
	}
	r.RecordedAt = r.RecordedAt.In(loc)
	return r
}

// Deadlines reads a pipeline's deadline records, page by page to the end.
func Deadlines(ctx context.Context, led *ledger.Ledger, in DeadlinesInput) (DeadlinesResult, error) {
	if err := pipeline.ValidateName(in.Pipeline); err != nil {
		return DeadlinesResult{}, err
	}
	out := DeadlinesResult{Deadline: deadlineSpec(in.Pipelines, in.Pipeline), Records: []ledger.DeadlineRecord{}}
	d, found, err := led.DeadlineDeclaration(ctx, in.Pipeline)
	if err != nil {
		return DeadlinesResult{}, err
	}
	if found {
		out.Declaration = &d
	}
	loc := zoneOf(in.Pipelines, in.Pipeline)
	err = eachDeadlineRecord(ctx, led, ledger.DeadlineFilter{Pipeline: in.Pipeline, Since: in.Since}, func(r ledger.DeadlineRecord) {
		out.Records = append(out.Records, inZone(r, loc))
	})
	if err != nil {
		return DeadlinesResult{}, err
	}
	return out, nil
}

// eachDeadlineRecord calls fn with every record f selects, a page at a
// time, so that a long history is never held in one query.
func eachDeadlineRecord(ctx context.Context, led *ledger.Ledger, f ledger.DeadlineFilter, fn func(ledger.DeadlineRecord)) error {
	for {
		page, err := led.DeadlineRecords(ctx, f)
		if err != nil {
			return err
		}
		for _, r := range page {
			fn(r)
		}
		if len(page) == 0 {
			return nil
		}
		f.AfterID = page[len(page)-1].ID
	}
}

// OnTimeMonth counts a pipeline's periods judged at deadlines of one
// month, in the pipeline's zone.
type OnTimeMonth struct {
	Month string `json:"month"` // 2026-12
	// Judged is OnTime + Late: the periods whose deadline passed after
	// the deadline was declared.
	Judged int `json:"judged"`
	OnTime int `json:"on_time"`
	Late   int `json:"late"`
	// CompletedLate counts the late periods that got their episodes since.
	CompletedLate int `json:"completed_late"`
	// Ratio is OnTime of Judged as text ("3/4 on time"), Percent rounded
	// to a whole percent ("75%"): counts, never a float.
	Ratio   string `json:"ratio"`
	Percent string `json:"percent"`
}

// onTimeMonths counts the pipeline's judged periods per month of their
// deadline, oldest month first, and lists its late periods not completed
// since.
func onTimeMonths(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, name string, since time.Time) ([]OnTimeMonth, []ledger.DeadlineRecord, error) {
	loc := zoneOf(set, name)
	byMonth := map[string]*OnTimeMonth{}
	completed := map[string]bool{}
	var late []ledger.DeadlineRecord
	err := eachDeadlineRecord(ctx, led, ledger.DeadlineFilter{Pipeline: name, Since: since}, func(r ledger.DeadlineRecord) {
		month := r.DueAt.In(loc).Format("2006-01")
		m := byMonth[month]
		if m == nil {
			m = &OnTimeMonth{Month: month}
			byMonth[month] = m
		}
		switch r.Kind {
		case allot.DeadlineOnTime:
			m.OnTime++
		case allot.DeadlineLate:
			m.Late++
			late = append(late, inZone(r, loc))
		case allot.DeadlineCompletedLate:
			m.CompletedLate++
			completed[r.Period] = true
		}
	})
	if err != nil {
		return nil, nil, err
	}
	months := []OnTimeMonth{}
	for _, m := range byMonth {
		m.Judged = m.OnTime + m.Late
		if m.Judged == 0 {
			// Only warnings so far: nothing judged this month yet.
			continue
		}
		m.Ratio = fmt.Sprintf("%d/%d on time", m.OnTime, m.Judged)
		m.Percent = fmt.Sprintf("%d%%", (m.OnTime*200+m.Judged)/(2*m.Judged))
		months = append(months, *m)
	}
	slices.SortFunc(months, func(a, b OnTimeMonth) int { return strings.Compare(a.Month, b.Month) })
	open := []ledger.DeadlineRecord{}
	for _, r := range late {
		if !completed[r.Period] {
			open = append(open, r)
		}
	}
	return months, open, nil
}

// latePeriods are the periods recorded late and not completed since, in
// scope, as check's violations: each names its cause and the complete
// command its record stores.
func latePeriods(ctx context.Context, led *ledger.Ledger, in CheckInput) ([]ledger.Violation, error) {
	open, err := led.LateOpen(ctx)
	if err != nil {
		return nil, err
	}
	var out []ledger.Violation
	for _, r := range open {
		if in.Pipeline != "" && r.Pipeline != in.Pipeline {
			continue
		}
		out = append(out, ledger.Violation{Kind: KindPeriodLate, Pipeline: r.Pipeline, Episode: r.EpisodeID,
			Detail: LateDetail(inZone(r, zoneOf(in.Pipelines, r.Pipeline))), Fix: lateFix(r)})
	}
	return out, nil
}

// LateDetail says of a late (or warning) record which period, when it was
// due, how short it was and why.
func LateDetail(r ledger.DeadlineRecord) string {
	s := fmt.Sprintf("period %s was due %s with %d of %d completed episodes: %s", r.Period, r.DueAt.Format(time.RFC3339), r.Completed, r.Needed, r.Cause)
	if r.Cause == "" {
		s += "cause unknown"
	}
	if r.Detail != "" {
		s += " (" + r.Detail + ")"
	}
	return s
}

// lateFix is the command that moves a late period on: its record's, or
// the runs listing when the record has none.
func lateFix(r ledger.DeadlineRecord) string {
	if r.Command != "" {
		return r.Command
	}
	return allot.RunsCommand(r.Pipeline)
}
