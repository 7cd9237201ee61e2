// Package forecast says what a budget's period will cost by its end,
// knowing the schedules (docs/design.md, "The forecast"): what it has
// settled, what it holds reserved, and what the runs still to come will
// reserve: the Schedules' nominal times left in the period (a paused
// Schedule starts none; each pipeline's max_episodes_per_period caps
// them) and the episodes already allocated that have reserved nothing
// yet, each at what one episode reserves at most (the sum of its covered
// steps' max_cost). Every figure says where it comes from, so the page
// and the metrics can show settled, reserved and forecast apart.
package forecast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/ledger"
	"allot/internal/livespec"
	"allot/pipeline"
)

// Schedule is a pipeline's Schedule as a forecast reads it: its live spec
// and zone, and whether it is paused.
type Schedule struct {
	Found  bool
	Paused bool
	Spec   pipeline.ScheduleSpec
	Zone   string
}

// Input is what a forecast reads.
type Input struct {
	Ledger    *ledger.Ledger
	Pipelines *pipeline.Set
	// Schedule describes a pipeline's live Schedule (TemporalSchedules);
	// nil reads the pipelines file's schedule, never paused.
	Schedule func(ctx context.Context, pipeline string) (Schedule, error)
	// Now is when the forecast is made; zero is the wall clock.
	Now time.Time
}

// Runs is one pipeline's share of a budget period's forecast.
type Runs struct {
	Pipeline string `json:"pipeline"`
	// PerRun is what one episode reserves in the budget at most.
	PerRun int64 `json:"per_run"`
	// Times are the Schedule's nominal times left in the period; Runs
	// those of them the pipeline's cap lets start an episode.
	Times int `json:"times"`
	Runs  int `json:"runs"`
	// Pending are the period's episodes already allocated that have
	// reserved nothing yet.
	Pending int `json:"pending"`
	// Paused: the Schedule is paused and starts none of its times;
	// NoSchedule: the pipeline has none.
	Paused     bool `json:"paused,omitempty"`
	NoSchedule bool `json:"no_schedule,omitempty"`
	// Quoted are covered steps without a max_cost: priced by their
	// vendor's quote only, they make the forecast no upper bound.
	Quoted []string `json:"quoted,omitempty"`
}

// Period is one budget period's forecast, in minor units of Currency.
type Period struct {
	Budget   string `json:"budget"`
	Period   string `json:"period"`
	Currency string `json:"currency"`
	Limit    int64  `json:"limit"`
	// Settled and Reserved are the ledger's; Upcoming is what the runs
	// still to come will reserve ((Runs + Pending) x PerRun, summed over
	// Pipelines); Forecast is their sum.
	Settled  int64 `json:"settled"`
	Reserved int64 `json:"reserved"`
	Upcoming int64 `json:"upcoming"`
	Forecast int64 `json:"forecast"`
	// Over: the forecast exceeds the limit. Unbounded: a covered step is
	// priced only by a quote, so the forecast may be short.
	Over      bool   `json:"over"`
	Unbounded bool   `json:"unbounded,omitempty"`
	Pipelines []Runs `json:"pipelines"`
	// Admitted and Refused split the runs to come, in the order they
	// come (the pending episodes first, then the scheduled times): a run
	// is admitted when what it reserves at most fits in what the limit
	// leaves after settled, reserved and the runs admitted before it, as
	// the budget admits each reservation; the rest would park, waiting for
	// a raise. AdmittedAmount and RefusedAmount are what they would
	// reserve; Upcoming is their sum.
	Admitted       int   `json:"admitted_runs"`
	Refused        int   `json:"refused_runs"`
	AdmittedAmount int64 `json:"admitted"`
	RefusedAmount  int64 `json:"refused"`
	// Scheduled are the Schedules' runs still to come in the period, each
	// with what it reserves at most: what a budget with hold_scheduled
	// holds (Holds).
	Scheduled []ledger.ScheduledRun `json:"-"`
}

// run is one run to come of a pipeline, at its nominal time (zero for an
// episode already allocated, which comes first).
type run struct {
	at     time.Time
	name   string
	perRun int64
}

func (in Input) now() time.Time {
	if in.Now.IsZero() {
		return time.Now()
	}
	return in.Now
}

// Budgets forecasts every budget's current period (the one now falls in,
// in the budget's zone).
func Budgets(ctx context.Context, in Input) ([]Period, error) {
	var out []Period
	for _, b := range in.Pipelines.Budgets() {
		p, err := Of(ctx, in, b, b.PeriodOf(in.now()))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Of forecasts one budget period. Only the times after now count: a
// period that has ended forecasts what it settled and holds.
func Of(ctx context.Context, in Input, b pipeline.Budget, period string) (Period, error) {
	start, end, err := b.PeriodBounds(period)
	if err != nil {
		return Period{}, err
	}
	bp, err := in.Ledger.BudgetPeriodOf(ctx, ledger.LimitOf(b), period)
	if err != nil {
		return Period{}, err
	}
	out := Period{Budget: b.Name, Period: period, Currency: b.Limit.Currency, Limit: bp.Limit, Settled: bp.Settled, Reserved: bp.Reserved, Pipelines: []Runs{}}
	from := in.now()
	if from.Before(start) {
		from = start.Add(-time.Nanosecond) // Times lists (after, until]
	}
	var runs []run
	for _, name := range in.Pipelines.Names() {
		p, err := in.Pipelines.Get(name)
		if err != nil {
			return Period{}, err
		}
		perRun, quoted, covers, err := b.PerRun(p)
		if err != nil {
			return Period{}, err
		}
		if !covers {
			continue
		}
		r := Runs{Pipeline: name, PerRun: perRun, Quoted: quoted}
		if r.Pending, err = in.Ledger.UnreservedEpisodes(ctx, name, start, end); err != nil {
			return Period{}, err
		}
		for range r.Pending {
			runs = append(runs, run{name: name, perRun: perRun})
		}
		if end.After(from) {
			times, err := in.upcoming(ctx, &r, p, b, period, from, end)
			if err != nil {
				return Period{}, err
			}
			for _, t := range times {
				runs = append(runs, run{at: t, name: name, perRun: perRun})
				out.Scheduled = append(out.Scheduled, ledger.ScheduledRun{Pipeline: name, At: t, Amount: perRun})
			}
		}
		up, err := mulAmount(int64(r.Runs+r.Pending), perRun)
		if err != nil {
			return Period{}, fmt.Errorf("budget %s period %s, pipeline %s: %w", b.Name, period, name, err)
		}
		if out.Upcoming, err = allot.AddAmount(out.Upcoming, up); err != nil {
			return Period{}, fmt.Errorf("budget %s period %s: %w", b.Name, period, err)
		}
		out.Unbounded = out.Unbounded || len(quoted) > 0
		out.Pipelines = append(out.Pipelines, r)
	}
	if out.Forecast, err = allot.AddAmounts(out.Settled, out.Reserved, out.Upcoming); err != nil {
		return Period{}, fmt.Errorf("budget %s period %s: %w", b.Name, period, err)
	}
	out.Over = out.Forecast > out.Limit
	out.admit(runs)
	return out, nil
}

// admit splits runs into those the limit admits and those it would refuse
// (see Period.Admitted). The sums cannot overflow: each is at most
// Upcoming.
func (p *Period) admit(runs []run) {
	slices.SortStableFunc(runs, func(a, b run) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	room := max(p.Limit-p.Settled-p.Reserved, 0)
	for _, r := range runs {
		if r.perRun <= room {
			room -= r.perRun
			p.Admitted++
			p.AdmittedAmount += r.perRun
			continue
		}
		p.Refused++
		p.RefusedAmount += r.perRun
	}
}

// upcoming counts the pipeline's scheduled times in (from, end) that fall
// in the budget period, and of them the runs its cap lets start (the
// first of each pipeline period), whose times it returns.
func (in Input) upcoming(ctx context.Context, r *Runs, p *pipeline.Pipeline, b pipeline.Budget, period string, from, end time.Time) ([]time.Time, error) {
	s, err := in.schedule(ctx, p)
	if err != nil {
		return nil, err
	}
	switch {
	case !s.Found:
		r.NoSchedule = true
		return nil, nil
	case s.Paused:
		r.Paused = true
		return nil, nil
	}
	times, err := s.Spec.Times(s.Zone, from, end.Add(-time.Nanosecond), 0)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	perPeriod := map[string][]time.Time{}
	var order []string
	for _, t := range times {
		if b.PeriodOf(t) != period {
			continue
		}
		r.Times++
		pp := p.PeriodOf(t)
		if len(perPeriod[pp]) == 0 {
			order = append(order, pp)
		}
		perPeriod[pp] = append(perPeriod[pp], t)
	}
	var kept []time.Time
	for _, pp := range order {
		ts := perPeriod[pp]
		if p.MaxPerPeriod > 0 {
			held, err := in.Ledger.EpisodeCount(ctx, p.Name, pp)
			if err != nil {
				return nil, err
			}
			ts = ts[:min(len(ts), max(p.MaxPerPeriod-held, 0))]
		}
		r.Runs += len(ts)
		kept = append(kept, ts...)
	}
	return kept, nil
}

func (in Input) schedule(ctx context.Context, p *pipeline.Pipeline) (Schedule, error) {
	if in.Schedule != nil {
		return in.Schedule(ctx, p.Name)
	}
	if p.Schedule == nil {
		return Schedule{}, nil
	}
	spec, err := p.Schedule.Spec()
	if err != nil {
		return Schedule{}, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	return Schedule{Found: true, Spec: spec, Zone: p.TimeZone}, nil
}

// mulAmount is n x per, refused beyond allot.MaxAmount x n's range.
func mulAmount(n, per int64) (int64, error) {
	if n < 0 || per < 0 {
		return 0, fmt.Errorf("a forecast of %d runs at %d is negative", n, per)
	}
	if per > 0 && n > math.MaxInt64/per {
		return 0, fmt.Errorf("%d runs at %d minor units each overflow a forecast", n, per)
	}
	return n * per, nil
}

// TemporalSchedules reads each pipeline's live Schedule through c: its
// spec as Temporal holds it (a `schedule update` or another tool may have
// changed it), and whether it is paused.
func TemporalSchedules(c client.Client, set *pipeline.Set) func(ctx context.Context, name string) (Schedule, error) {
	return func(ctx context.Context, name string) (Schedule, error) {
		p, err := set.Get(name)
		if err != nil {
			return Schedule{}, err
		}
		desc, err := c.ScheduleClient().GetHandle(ctx, allot.ScheduleID(name)).Describe(ctx)
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return Schedule{}, nil
		}
		if err != nil {
			return Schedule{}, fmt.Errorf("describe schedule %s: %w", allot.ScheduleID(name), err)
		}
		fileSpec, err := livespec.FileSpec(p)
		if err != nil {
			return Schedule{}, err
		}
		spec, zone, err := livespec.Of(fileSpec, desc.Schedule)
		if err != nil {
			return Schedule{}, fmt.Errorf("schedule %s: %w", allot.ScheduleID(name), err)
		}
		paused := desc.Schedule.State != nil && desc.Schedule.State.Paused
		return Schedule{Found: true, Paused: paused, Spec: spec, Zone: zone}, nil
	}
}
