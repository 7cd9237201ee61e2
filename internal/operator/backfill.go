package operator

// Backfills (docs/design.md, "Backfills"): the runs a schedule would have
// started between two times, planned from the schedule's own spec, shown
// with their forecast and started only with consent when they exceed the
// pipeline's max_backfill_runs or a budget's free amount; and the watch
// that follows them in the ledger until each has its episode.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/timestamppb"

	"allot"
	"allot/internal/ledger"
	"allot/internal/livespec"
	"allot/pipeline"
)

// BackfillInput is a range of nominal times to run, [From, To).
type BackfillInput struct {
	Pipeline string
	From, To time.Time
	// Override may carry a max_backfill or max_backfill_runs for this
	// request.
	Override pipeline.Schedule
	// Yes consents to more runs than the pipeline's max_backfill_runs.
	Yes bool
	// DryRun counts the runs and looks their keys up in the ledger
	// (Schedules.Ledger), sending nothing.
	DryRun bool
	// Sent, when set, is called with the result once a backfill through
	// the Schedule is sent, before its runs are followed.
	Sent func(BackfillResult)
	// Flags are the flags beside --yes and --dry-run that the printed
	// commands carry (e.g. --via-schedule), so that a remedy runs the same
	// backfill.
	Flags []string

	// The fast backfill's (BackfillDirect's) settings.
	//
	// Rate caps the runs started per second (0: DefaultBackfillRate).
	Rate float64
	// MaxInFlight caps the runs started and not yet ended (0:
	// DefaultBackfillMaxInFlight).
	MaxInFlight int
	// The settings of both backfills.
	//
	// NoWait returns once the backfill is sent (through the Schedule) or
	// every run is started (fast), without following the runs to their
	// end. Following them reads the ledger (Schedules.Ledger).
	NoWait bool
	// Report, when set, is called with the progress as it changes (at most
	// every ReportEvery, default 200 ms for the fast backfill, 1 s through
	// the Schedule) and once at the end.
	Report      func(BackfillProgress)
	ReportEvery time.Duration
}

// BackfillResult says what a backfill starts (or, dry, would start).
type BackfillResult struct {
	ScheduleID string    `json:"schedule_id"`
	From       time.Time `json:"from"`
	To         time.Time `json:"to"` // exclusive
	// Runs is how many runs the backfill starts: the schedule's times in
	// [From, To) as the server computes them (jitter included).
	Runs    int       `json:"runs"`
	First   time.Time `json:"first,omitzero"` // the first and last nominal times
	Last    time.Time `json:"last,omitzero"`
	MaxRuns int       `json:"max_backfill_runs"`
	// Existing is how many of the runs' keys already have an episode (a
	// dry run with a ledger); those runs get their episode back.
	Existing *int `json:"existing_episodes,omitempty"`
	DryRun   bool `json:"dry_run,omitempty"`
	Sent     bool `json:"sent"`
	// Keys are the runs' allocation keys, in time order; nil when
	// NominalUnknown.
	Keys []string `json:"-"`
	// NominalUnknown: the schedule has jitter and a spec whose nominal
	// times cannot be worked back from the server's jittered action times
	// (First and Last are then action times), so the runs' keys are not
	// known here and their progress cannot be followed.
	NominalUnknown bool `json:"nominal_unknown,omitempty"`
	// Progress is filled by the caller that waits for the runs (and by
	// BackfillDirect).
	Progress *BackfillProgress `json:"progress,omitempty"`
	// AlreadyDone is, for the fast backfill with a ledger, how many of the
	// runs' keys already have an episode or a recorded run: they count as
	// done and are not started again.
	AlreadyDone *int `json:"already_done,omitempty"`
	// Direct: the runs were (or, dry, would be) started by allot itself
	// (BackfillDirect), not by the Schedule.
	Direct bool `json:"direct,omitempty"`
	// Interrupted: the fast backfill stopped starting runs when its
	// context ended; Resume is the command that goes on where it stopped.
	Interrupted bool   `json:"interrupted,omitempty"`
	Resume      string `json:"resume,omitempty"`
	// Budgets forecast what the runs that allocate new episodes would
	// reserve in each budget period, against what it has free; over a
	// budget's free amount, the backfill needs --yes.
	Budgets []BudgetForecast `json:"budgets,omitempty"`
}

// ErrBackfillNeedsConsent means the backfill would start more runs than the
// pipeline's max_backfill_runs, or reserve more than a budget has free, and
// --yes was not given.
var ErrBackfillNeedsConsent = errors.New("backfill needs consent")

// Backfill runs the schedule's nominal times in [From, To) through the
// schedule itself, so every run gets the key its scheduled run would have:
// times that already ran get their episodes back from the ledger; the rest
// allocate. It is one request carrying the whole range (back-to-back
// requests can overwrite each other).
//
// Before anything is sent it counts the runs the range starts, with the
// server's own computation (ListScheduleMatchingTimes over the range the
// backfill request covers), and refuses more than the pipeline's
// max_backfill_runs unless in.Yes (invariant 15). Temporal's backfill end
// is inclusive: the request ends 1 ms before To, so a time that falls on
// To does not run. Unless in.NoWait, it then follows the runs in the
// ledger until each has recorded its outcome (in.Report sees the
// progress), and a watched backfill without a ledger is refused before
// anything is contacted.
func (s *Schedules) Backfill(ctx context.Context, in BackfillInput) (BackfillResult, error) {
	pl, err := s.planBackfill(ctx, in, !in.DryRun && !in.NoWait)
	if err != nil {
		return BackfillResult{}, err
	}
	out := pl.out
	if in.DryRun {
		return out, nil
	}
	if err := pl.consent(in); err != nil {
		return out, err
	}
	if out.Runs == 0 {
		return out, nil
	}
	// Followed, the runs are read from the ledger: the keys' runs so far
	// are noted before the backfill is sent, so that only the runs it
	// starts count.
	var watch *backfillWatch
	if !in.NoWait && !out.NominalUnknown {
		if watch, err = watchBackfill(ctx, s.Ledger, pl.p.Name, out.Keys); err != nil {
			return BackfillResult{}, err
		}
	}
	if err := pl.h.Backfill(ctx, client.ScheduleBackfillOptions{Backfill: []client.ScheduleBackfill{{
		Start: pl.start, End: pl.end, Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
	}}}); err != nil {
		return BackfillResult{}, fmt.Errorf("backfill schedule %s: %w", pl.h.GetID(), err)
	}
	out.Sent = true
	if in.Sent != nil {
		in.Sent(out)
	}
	if watch == nil {
		return out, nil
	}
	every := in.ReportEvery
	if every <= 0 {
		every = time.Second
	}
	// Stopped while it follows, the backfill goes on: the progress so far
	// is the answer.
	progress, err := watch.Wait(ctx, every, in.Report)
	out.Progress = &progress
	if err != nil && ctx.Err() == nil {
		return out, err
	}
	return out, nil
}

// ErrTimeNotYet means a backfill or a catch-up asked for times that have not
// come yet.
var ErrTimeNotYet = errors.New("time has not come yet")

// CheckBackfillRange refuses a backfill range that reaches past now: a time
// that has not come yet is the Schedule's to start when it comes, and a
// backfill would pay for it now (docs/design.md, "Backfills"). flags are
// the flags the printed command carries beside the range.
func CheckBackfillRange(pipelineName string, from, to, now time.Time, flags ...string) error {
	if !to.After(now) {
		return nil
	}
	now = now.UTC().Truncate(time.Second)
	fix := "the whole range is still to come: its times run when they come, from the schedule; nothing to backfill"
	if from.Before(now) {
		fix = fmt.Sprintf("end it at now at the latest: `%s`", allot.BackfillCommand(pipelineName, from, now, flags...))
	}
	return allot.Wrapf(ErrTimeNotYet, allot.InvalidInput, "backfill of %s refused, nothing was started: --to %s is after now (%s), so the range holds times that have not come yet; %s",
		pipelineName, to.UTC().Format(time.RFC3339), now.Format(time.RFC3339), fix)
}

// backfillPlan is what both backfill paths work out before they send or
// start anything: the times, their keys, what the ledger already has of
// them, and the budget forecast.
type backfillPlan struct {
	p          *pipeline.Pipeline
	h          client.ScheduleHandle
	start, end time.Time // the Schedule backfill request's range, both inclusive
	nominal    []time.Time
	out        BackfillResult
	// episodes is, with a ledger and known nominal times, the keys that
	// already have an episode (and how many).
	episodes map[string]int
}

// planBackfill checks the request and the range, asks the server for the
// times, maps them to nominal times and keys, looks the keys up in the
// ledger (a few batched queries, however many keys) and forecasts the
// budgets. It sends nothing. followInLedger: the runs will be followed in
// the ledger, so a missing one is refused before Temporal is contacted.
func (s *Schedules) planBackfill(ctx context.Context, in BackfillInput, followInLedger bool) (*backfillPlan, error) {
	p, err := s.Pipelines.Get(in.Pipeline)
	if err != nil {
		return nil, err
	}
	var configured pipeline.Schedule
	if p.Schedule != nil {
		configured = *p.Schedule
	}
	merged := configured.Merge(in.Override)
	maxBackfill, err := merged.MaxBackfillDuration()
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	maxRuns, err := merged.MaxBackfillRunCount()
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	switch {
	case in.From.IsZero() || in.To.IsZero():
		return nil, allot.Errorf(allot.InvalidInput, "backfill needs --from and --to (RFC3339)")
	case !in.From.Before(in.To):
		return nil, allot.Errorf(allot.InvalidInput, "backfill range is reversed or empty: --from %s is not before --to %s", in.From.Format(time.RFC3339), in.To.Format(time.RFC3339))
	case in.To.Sub(in.From) > maxBackfill:
		return nil, allot.Errorf(allot.InvalidInput, "backfill range of %s is longer than pipeline %s's max_backfill of %s: split it, or raise max_backfill", in.To.Sub(in.From), p.Name, maxBackfill)
	}
	if err := CheckBackfillRange(p.Name, in.From, in.To, s.clock(), backfillFlagsWith(in)...); err != nil {
		return nil, err
	}
	if followInLedger && s.Ledger == nil {
		return nil, allot.Errorf(allot.NotReady, "backfill of %s refused, nothing was sent: its progress is read from the ledger, and there is none yet (the worker's first start creates it); to send it without following it: `%s`",
			p.Name, allot.BackfillCommand(p.Name, in.From, in.To, backfillFlagsWith(in, "--no-wait")...))
	}
	h, err := s.handle(ctx, p.Name)
	if err != nil {
		return nil, err
	}
	from, to := in.From.UTC(), in.To.UTC()
	// The request's range: Temporal starts the times in [start, end], both
	// inclusive (it looks from start-1ms on), so end is To-1ms.
	start, end := from, to.Add(-time.Millisecond)
	times, err := s.matchingTimes(ctx, h.GetID(), start.Add(-time.Millisecond), end)
	if err != nil {
		return nil, err
	}
	pl := &backfillPlan{p: p, h: h, start: start, end: end}
	pl.out = BackfillResult{ScheduleID: h.GetID(), From: from, To: to, Runs: len(times), MaxRuns: maxRuns, DryRun: in.DryRun}
	out := &pl.out
	if len(times) > 0 {
		desc, err := h.Describe(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe schedule %s: %w", h.GetID(), err)
		}
		var ok bool
		pl.nominal, ok = nominalTimes(desc.Schedule.Spec, times, from, to)
		out.First, out.Last, out.NominalUnknown = pl.nominal[0], pl.nominal[len(pl.nominal)-1], !ok
		if ok {
			out.Keys = make([]string, len(pl.nominal))
			for i, t := range pl.nominal {
				out.Keys[i] = allot.AllocationKey(p.Name, t)
			}
		}
		now := s.clock()
		for _, t := range []time.Time{out.First, out.Last} {
			if err := p.CheckNominalTime(t, now); err != nil {
				return nil, fmt.Errorf("backfill refused, nothing sent: %w", err)
			}
		}
	}
	if s.Ledger != nil && !out.NominalUnknown && len(out.Keys) > 0 {
		if pl.episodes, err = s.Ledger.EpisodesPerKey(ctx, p.Name, out.Keys); err != nil {
			return nil, err
		}
	}
	if out.Budgets, err = s.backfillForecast(ctx, p.Name, pl.nominal, out.Keys, pl.episodes); err != nil {
		return nil, err
	}
	if in.DryRun && s.Ledger != nil && !out.NominalUnknown {
		n := len(pl.episodes)
		out.Existing = &n
	}
	return pl, nil
}

// consent refuses, unless in.Yes, a backfill of more runs than the
// pipeline's max_backfill_runs or that would reserve more than a budget
// has free (invariant 15). The printed commands carry in.Flags.
func (pl *backfillPlan) consent(in BackfillInput) error {
	out, p := pl.out, pl.p
	from, to := out.From, out.To
	dry := allot.BackfillCommand(p.Name, from, to, append(slices.Clone(in.Flags), "--dry-run")...)
	yes := allot.BackfillCommand(p.Name, from, to, append(slices.Clone(in.Flags), "--yes")...)
	if out.Runs > out.MaxRuns && !in.Yes {
		return allot.Wrapf(ErrBackfillNeedsConsent, allot.ConsentRequired, "backfilling %s from %s to %s starts %d runs (%s to %s), more than pipeline %s's max_backfill_runs of %d; nothing was sent. Check the range with `%s`, then send it with `%s` (or raise max_backfill_runs)",
			p.Name, from.Format(time.RFC3339), to.Format(time.RFC3339), out.Runs,
			out.First.Format(time.RFC3339), out.Last.Format(time.RFC3339), p.Name, out.MaxRuns, dry, yes)
	}
	if over := OverBudget(out.Budgets); len(over) > 0 && !in.Yes {
		lines := make([]string, len(over))
		for i, f := range over {
			lines[i] = f.String()
		}
		return allot.Wrapf(ErrBackfillNeedsConsent, allot.ConsentRequired, "backfilling %s from %s to %s would reserve more than its budgets have free, or an amount not known before the runs: %s; nothing was sent. Check it with `%s`, raise the budget (`starter budget raise`), or send it anyway with `%s` (the runs beyond the budget park until it has room)",
			p.Name, from.Format(time.RFC3339), to.Format(time.RFC3339), strings.Join(lines, "; "), dry, yes)
	}
	return nil
}

// matchingTimes asks the server for the schedule's action times after
// after and up to end (inclusive), the computation its backfill uses. The
// server answers at most 1000 at a time, so it asks again from the last.
func (s *Schedules) matchingTimes(ctx context.Context, scheduleID string, after, end time.Time) ([]time.Time, error) {
	ns := s.Namespace
	if ns == "" {
		ns = client.DefaultNamespace
	}
	var out []time.Time
	for {
		resp, err := s.Client.WorkflowService().ListScheduleMatchingTimes(ctx, &workflowservice.ListScheduleMatchingTimesRequest{
			Namespace: ns, ScheduleId: scheduleID, StartTime: timestamppb.New(after), EndTime: timestamppb.New(end),
		})
		if err != nil {
			return nil, fmt.Errorf("count the times of schedule %s: %w", scheduleID, err)
		}
		page := resp.GetStartTime()
		for _, t := range page {
			out = append(out, t.AsTime().UTC())
		}
		if len(page) == 0 || !out[len(out)-1].After(after) {
			return out, nil
		}
		after = out[len(out)-1]
		if !after.Before(end) {
			return out, nil
		}
	}
}

// nominalTimes turns the action times the server lists (jittered) for a
// backfill of [from, to) back into the nominal times the schedule keys its
// runs by. Without jitter they are the same. With jitter, the server puts
// each action time in [nominal, the spec's next time) (it caps the jitter
// at the gap to the next time, however long the spec's jitter), so the
// nominal time is the spec's latest time not after the action time:
// computed here for an interval (epoch-aligned, plus its offset) or a
// cron-like calendar. ok is false, and the action times are returned as
// they are, whenever the keys might not be the server's:
//   - any other spec (several calendars or intervals, both);
//   - a calendar in a zone whose UTC offset changes between from less
//     the jitter and to: the server matches a time of day in a repeated
//     hour twice and allot's cron once (docs/design.md, "Backfills");
//   - a time that maps back to no spec time within the jitter, to the
//     same nominal time as the one before, or outside [from, to).
func nominalTimes(spec *client.ScheduleSpec, times []time.Time, from, to time.Time) (nominal []time.Time, ok bool) {
	if spec == nil || spec.Jitter <= 0 {
		return times, true
	}
	latest := latestSpecTime(spec, from.Add(-spec.Jitter), to)
	if latest == nil {
		return times, false
	}
	out := make([]time.Time, len(times))
	for i, t := range times {
		n := latest(t)
		if n.IsZero() || n.After(t) || t.Sub(n) > spec.Jitter || n.Before(from) || !n.Before(to) || i > 0 && !n.After(out[i-1]) {
			return times, false
		}
		out[i] = n.UTC()
	}
	return out, true
}

// maxSpecSteps bounds the spec times latestSpecTime walks through for one
// action time (a jitter many times the spec's gap): past it, the nominal
// time is not worked out.
const maxSpecSteps = 10_000

// latestSpecTime returns a function giving the spec's latest time not after
// an action time, for action times in [from, to] jittered by at most
// spec.Jitter; nil when allot cannot compute the spec's times as the
// server does over that range.
func latestSpecTime(spec *client.ScheduleSpec, from, to time.Time) func(time.Time) time.Time {
	switch {
	case len(spec.Intervals) == 1 && len(spec.Calendars) == 0 && len(spec.CronExpressions) == 0:
		iv := spec.Intervals[0]
		if iv.Every <= 0 {
			return nil
		}
		return func(t time.Time) time.Time {
			since := t.Sub(time.Unix(0, 0)) - iv.Offset
			return time.Unix(0, 0).Add(since - since%iv.Every + iv.Offset)
		}
	case len(spec.Intervals) == 0 && len(spec.Calendars)+len(spec.CronExpressions) == 1:
		expr := ""
		if len(spec.CronExpressions) == 1 {
			expr = spec.CronExpressions[0]
		} else {
			c := spec.Calendars[0]
			if len(c.Year) > 0 || len(c.Second) > 1 || len(c.Second) == 1 && (c.Second[0].Start != 0 || c.Second[0].End > 0) {
				return nil // not a five-field cron
			}
			expr = livespec.CalendarCron(c)
		}
		if spec.TimeZoneName != "" {
			loc, err := time.LoadLocation(spec.TimeZoneName)
			if err != nil {
				return nil
			}
			// The zone keeps one UTC offset over the range, or the cron's
			// times may not be the server's (a repeated or skipped hour).
			if _, end := from.In(loc).ZoneBounds(); !end.IsZero() && !end.After(to) {
				return nil
			}
			expr = "CRON_TZ=" + spec.TimeZoneName + " " + expr
		}
		sched, err := cron.ParseStandard(expr)
		if err != nil {
			return nil
		}
		jitter := spec.Jitter
		return func(t time.Time) time.Time {
			// The spec's times from jitter before t up to t: the last.
			var last time.Time
			for n, steps := sched.Next(t.Add(-jitter-time.Second)), 0; !n.IsZero() && !n.After(t); n, steps = sched.Next(n), steps+1 {
				if steps == maxSpecSteps {
					return time.Time{}
				}
				last = n
			}
			return last
		}
	}
	return nil
}

// BackfillProgress counts how far a backfill has come, from the ledger's run
// outcomes of its keys: a key is done once a run of it that was not in the
// ledger when the backfill was sent has recorded its outcome.
type BackfillProgress struct {
	Total int `json:"total"`
	Done  int `json:"done"`
	// AlreadyDone (fast backfill): of Done, the keys that had an episode
	// or a recorded run before it began; Started: the runs it started (or
	// joined); InFlight: of those, the ones not ended yet.
	AlreadyDone int `json:"already_done,omitempty"`
	Started     int `json:"started,omitempty"`
	InFlight    int `json:"in_flight,omitempty"`
	Allocated   int `json:"allocated"`
	Reused      int `json:"reused"`
	Skipped     int `json:"skipped"`
	Failed      int `json:"failed"`
}

// Complete reports whether every run has recorded its outcome.
func (p BackfillProgress) Complete() bool { return p.Done >= p.Total }

// backfillWatch follows a backfill's runs in the ledger.
type backfillWatch struct {
	led      *ledger.Ledger
	pipeline string
	keys     []string
	before   map[string]map[string]bool // key -> run IDs recorded before the backfill
	done     map[string]allot.Outcome
}

// watchBackfill notes the runs the keys already have; call it before the
// backfill is sent.
func watchBackfill(ctx context.Context, led *ledger.Ledger, pipelineName string, keys []string) (*backfillWatch, error) {
	w := &backfillWatch{led: led, pipeline: pipelineName, keys: keys, before: map[string]map[string]bool{}, done: map[string]allot.Outcome{}}
	outs, err := led.RunOutcomesOfKeys(ctx, pipelineName, keys)
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		if w.before[o.AllocationKey] == nil {
			w.before[o.AllocationKey] = map[string]bool{}
		}
		w.before[o.AllocationKey][o.RunID] = true
	}
	return w, nil
}

// Progress reads the runs recorded since the watch began.
func (w *backfillWatch) Progress(ctx context.Context) (BackfillProgress, error) {
	var pending []string
	for _, k := range w.keys {
		if _, ok := w.done[k]; !ok {
			pending = append(pending, k)
		}
	}
	outs, err := w.led.RunOutcomesOfKeys(ctx, w.pipeline, pending)
	if err != nil {
		return BackfillProgress{}, err
	}
	latest := map[string]ledger.RunOutcome{}
	for _, o := range outs {
		if w.before[o.AllocationKey][o.RunID] {
			continue
		}
		if cur, ok := latest[o.AllocationKey]; !ok || o.RecordedAt.After(cur.RecordedAt) {
			latest[o.AllocationKey] = o
		}
	}
	for k, o := range latest {
		w.done[k] = o.Outcome
	}
	p := BackfillProgress{Total: len(w.keys), Done: len(w.done)}
	for _, o := range w.done {
		switch o {
		case allot.OutcomeAllocated:
			p.Allocated++
		case allot.OutcomeReused:
			p.Reused++
		case allot.OutcomeSkipped:
			p.Skipped++
		default:
			p.Failed++
		}
	}
	return p, nil
}

// Wait polls Progress every interval, calling report when it changes,
// until every run has recorded its outcome or ctx ends.
func (w *backfillWatch) Wait(ctx context.Context, interval time.Duration, report func(BackfillProgress)) (BackfillProgress, error) {
	var last BackfillProgress
	first := true
	for {
		p, err := w.Progress(ctx)
		if err != nil {
			return last, err
		}
		if first || p != last {
			first = false
			if report != nil {
				report(p)
			}
		}
		last = p
		if p.Complete() {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(interval):
		}
	}
}
