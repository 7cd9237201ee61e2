package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/pipeline"
	"allot/workflows"
)

// Task priorities of the runs allot starts (Temporal's PriorityKey: 1 is the
// highest; the server has 5 levels by default and gives a start without one
// the middle, 3). A Schedule's own starts carry none, so they get 3, and
// their Episodes inherit it. A fast backfill's runs get 4 and their
// Episodes 5 (ScheduledRunInput.EpisodePriority): a scheduled run and its
// episode are dispatched before a backlog of backfilled work, and a
// backfill's allocations before its own episodes' steps.
const (
	PriorityScheduled       = 3
	PriorityBackfill        = 4
	PriorityBackfillEpisode = 5
)

// The fast backfill's default throttle: far below a namespace's default
// start rate (the frontend's per-namespace RPS is in the thousands), and
// enough in flight to keep a worker busy without queueing a backlog that
// scheduled runs would wait behind.
const (
	DefaultBackfillRate        = 50.0
	DefaultBackfillMaxInFlight = 20
)

// Back-off on the server's ResourceExhausted (a namespace or frontend rate
// limit): exponential from startBackoffMin, capped at startBackoffMax.
const (
	startBackoffMin = 100 * time.Millisecond
	startBackoffMax = 10 * time.Second
)

// ErrNominalTimesUnknown means the schedule's jitter hides the nominal times
// of its spec, so allot cannot form the runs' keys itself.
var ErrNominalTimesUnknown = errors.New("nominal times unknown")

// RunOptions are the options a run of p for nominal starts with when allot
// starts it itself (workflows.ScheduledRunStartOptions): the Schedule's key
// for the time (allot.ResolveRunKey), the schedule action's task queue and
// search attributes, and the priority.
func (s *Schedules) RunOptions(p *pipeline.Pipeline, nominal time.Time, priority int) client.StartWorkflowOptions {
	rk, _ := allot.ResolveRunKey(allot.RunKeyInput{Pipeline: p.Name, Nominal: nominal}) // no key: it cannot fail
	return workflows.ScheduledRunStartOptions(enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		workflows.ScheduledRunStart{Pipeline: p.Name, Run: rk, TaskQueue: s.TaskQueue, Priority: priority})
}

// StartRun starts (or joins, when one is running) the ScheduledRun of p for
// the nominal time, keyed and routed as the pipeline's Schedule would start
// it, with the given task priority (PriorityScheduled, PriorityBackfill).
// The server's ResourceExhausted is waited out with capped exponential
// back-off until ctx ends; any other error is returned at once.
func (s *Schedules) StartRun(ctx context.Context, p *pipeline.Pipeline, nominal time.Time, priority int) (client.WorkflowRun, error) {
	opts := s.RunOptions(p, nominal, priority)
	in := workflows.ScheduledRunInput{Pipeline: p.Name, NominalTime: nominal.UTC(), LedgerID: s.LedgerID}
	if priority == PriorityBackfill {
		in.EpisodePriority = PriorityBackfillEpisode
	}
	start := s.startWorkflow
	if start == nil {
		start = func(ctx context.Context, opts client.StartWorkflowOptions, in workflows.ScheduledRunInput) (client.WorkflowRun, error) {
			return s.Client.ExecuteWorkflow(ctx, opts, workflows.ScheduledRunWorkflow, in)
		}
	}
	sleep := s.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	wait := startBackoffMin
	for {
		run, err := start(ctx, opts, in)
		var exhausted *serviceerror.ResourceExhausted
		if !errors.As(err, &exhausted) {
			if err != nil {
				return nil, fmt.Errorf("start %s: %w", opts.ID, err)
			}
			return run, nil
		}
		slog.Debug("the server is busy: backing off", "key", opts.ID, "wait", wait, "error", err)
		if err := sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("start %s: %w (the server was busy: %v)", opts.ID, err, exhausted)
		}
		wait = min(2*wait, startBackoffMax)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// BackfillDirect is the fast backfill: it runs the schedule's nominal times
// in [From, To) by starting their ScheduledRun workflows itself, at the
// backfill priority, instead of asking the Schedule to (which starts at
// most about 10 a second). The times are the server's (the same
// ListScheduleMatchingTimes count as Backfill, jitter and the spec
// included) and each run gets the key the Schedule would give it, so every
// guarantee of the Schedule's path holds: a key already run gets its
// episode back, a running one is joined, nothing allocates twice
// (invariants 1 and 15). Consent is asked exactly as Backfill asks it.
//
// It resumes: keys that already have an episode or a recorded run are
// done and not started again (AlreadyDone), except a failed run and a
// time the catch-up policy skipped (missed_catch_up), which run. Starts are throttled by
// in.Rate and in.MaxInFlight; when ctx ends it stops starting runs (the
// ones started go on) and returns the result with Interrupted and the
// command that resumes, and ctx's error.
func (s *Schedules) BackfillDirect(ctx context.Context, in BackfillInput) (BackfillResult, error) {
	switch {
	case in.Rate < 0 || math.IsNaN(in.Rate) || math.IsInf(in.Rate, 0):
		return BackfillResult{}, allot.Errorf(allot.InvalidInput, "backfill rate %v: give a positive number of starts per second, e.g. --rate %v", in.Rate, DefaultBackfillRate)
	case in.MaxInFlight < 0:
		return BackfillResult{}, allot.Errorf(allot.InvalidInput, "backfill max in flight %d: give a positive number of runs, e.g. --max-in-flight %d", in.MaxInFlight, DefaultBackfillMaxInFlight)
	}
	if in.Rate == 0 {
		in.Rate = DefaultBackfillRate
	}
	if in.MaxInFlight == 0 {
		in.MaxInFlight = DefaultBackfillMaxInFlight
	}
	pl, err := s.planBackfill(ctx, in, false)
	if err != nil {
		return BackfillResult{}, err
	}
	out := pl.out
	out.Direct = true
	p := pl.p
	if out.NominalUnknown {
		return out, allot.Wrapf(ErrNominalTimesUnknown, allot.NominalTimesUnknown, "the schedule of %s has jitter and a spec whose nominal times allot cannot work out from the server's jittered times, so it cannot form the runs' keys; nothing was started. Let the Schedule run them: `%s`",
			p.Name, allot.BackfillCommand(p.Name, out.From, out.To, backfillFlagsWith(in, "--via-schedule")...))
	}
	done := map[string]bool{}
	if s.Ledger != nil && len(out.Keys) > 0 {
		outs, err := s.Ledger.RunOutcomesOfKeys(ctx, p.Name, out.Keys)
		if err != nil {
			return BackfillResult{}, err
		}
		for _, o := range outs {
			// A failed run may be run again, and a time the catch-up
			// policy skipped is a time the backfill asks for.
			if o.Outcome == allot.OutcomeFailed || o.Outcome == allot.OutcomeSkipped && o.Reason == allot.ReasonMissedCatchUp {
				continue
			}
			done[o.AllocationKey] = true
		}
		for k := range pl.episodes {
			done[k] = true
		}
		n := len(done)
		out.AlreadyDone = &n
	}
	if in.DryRun {
		return out, nil
	}
	if err := pl.consent(in); err != nil {
		return out, err
	}
	if out.Runs == 0 {
		return out, nil
	}
	d := &directRun{
		keys: out.Keys, nominal: pl.nominal, done: done,
		rate: in.Rate, maxInFlight: in.MaxInFlight, noWait: in.NoWait,
		report: in.Report, reportEvery: in.ReportEvery,
		start: func(ctx context.Context, nominal time.Time) (client.WorkflowRun, error) {
			return s.StartRun(ctx, p, nominal, PriorityBackfill)
		},
		wait: func(ctx context.Context, run client.WorkflowRun) (allot.Outcome, error) {
			var res workflows.ScheduledRunResult
			err := run.Get(ctx, &res)
			if err != nil {
				return allot.OutcomeFailed, err
			}
			return res.Outcome, nil
		},
	}
	prog, err := d.run(ctx)
	out.Progress = &prog
	out.Sent = prog.Started > 0
	if err != nil {
		// Stopped (ctx ended) or failed: the runs started go on, and the
		// same command resumes.
		out.Interrupted = ctx.Err() != nil
		out.Resume = allot.BackfillCommand(p.Name, out.From, out.To, backfillFlagsWith(in)...)
	}
	return out, err
}

// backfillFlagsWith is the flags a printed backfill command carries:
// --yes when given, the request's own flags, then extra.
func backfillFlagsWith(in BackfillInput, extra ...string) []string {
	var flags []string
	if in.Yes {
		flags = append(flags, "--yes")
	}
	flags = append(flags, in.Flags...)
	return append(flags, extra...)
}

// directRun starts a backfill's runs and follows them to their end. Its
// start and wait are the Temporal calls (fakes in tests).
type directRun struct {
	keys        []string
	nominal     []time.Time
	done        map[string]bool // keys done before it began
	rate        float64
	maxInFlight int
	noWait      bool
	report      func(BackfillProgress)
	reportEvery time.Duration
	start       func(context.Context, time.Time) (client.WorkflowRun, error)
	wait        func(context.Context, client.WorkflowRun) (allot.Outcome, error)
	now         func() time.Time
	sleep       func(context.Context, time.Duration) error
}

// run starts every key not done, at most rate a second and maxInFlight at a
// time, and counts each run's outcome as it ends. A start that fails for
// any reason but the server's load (which StartRun waits out) stops the
// backfill: the runs already started go on, and running it again resumes.
func (d *directRun) run(ctx context.Context) (BackfillProgress, error) {
	if d.now == nil {
		d.now = time.Now
	}
	if d.sleep == nil {
		d.sleep = sleepCtx
	}
	if d.reportEvery <= 0 {
		d.reportEvery = 200 * time.Millisecond
	}
	var (
		mu       sync.Mutex
		prog     = BackfillProgress{Total: len(d.keys)}
		changed  = make(chan struct{}, 1)
		slots    = make(chan struct{}, d.maxInFlight)
		waiters  sync.WaitGroup
		startErr error
	)
	for _, k := range d.keys {
		if d.done[k] {
			prog.AlreadyDone++
		}
	}
	prog.Done = prog.AlreadyDone
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	snapshot := func() BackfillProgress {
		mu.Lock()
		defer mu.Unlock()
		return prog
	}
	// The reporter: at most one report per reportEvery, the last one when
	// the starting and waiting are over.
	reportDone := make(chan struct{})
	stopReport := make(chan struct{})
	go func() {
		defer close(reportDone)
		var last BackfillProgress
		first := true
		emit := func() {
			if p := snapshot(); first || p != last {
				first, last = false, p
				if d.report != nil {
					d.report(p)
				}
			}
		}
		for {
			select {
			case <-stopReport:
				emit()
				return
			case <-changed:
				emit()
				t := time.NewTimer(d.reportEvery)
				select {
				case <-stopReport:
					t.Stop()
					emit()
					return
				case <-t.C:
				}
			}
		}
	}()
	notify()

	// waitCtx outlives ctx for --no-wait's sake only in that waiting stops
	// when the starting is over; with ctx ended, waiting stops too.
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	interval := time.Duration(float64(time.Second) / d.rate)
	next := d.now()
	for i, k := range d.keys {
		if d.done[k] {
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		// At most rate starts a second, and no burst after a stall.
		now := d.now()
		if wait := next.Sub(now); wait > 0 {
			if err := d.sleep(ctx, wait); err != nil {
				<-slots
				break
			}
			now = next
		}
		next = now.Add(interval)
		run, err := d.start(ctx, d.nominal[i])
		if err != nil {
			<-slots
			if ctx.Err() == nil {
				startErr = err
			}
			break
		}
		mu.Lock()
		prog.Started++
		prog.InFlight++
		mu.Unlock()
		notify()
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			outcome, err := d.wait(waitCtx, run)
			<-slots
			if err != nil && waitCtx.Err() != nil {
				return // stopped following it; the run goes on
			}
			mu.Lock()
			prog.InFlight--
			prog.Done++
			switch outcome {
			case allot.OutcomeAllocated:
				prog.Allocated++
			case allot.OutcomeReused:
				prog.Reused++
			case allot.OutcomeSkipped:
				prog.Skipped++
			default:
				prog.Failed++
			}
			mu.Unlock()
			notify()
		}()
	}
	if d.noWait || ctx.Err() != nil || startErr != nil {
		stopWaiting()
	}
	waiters.Wait()
	close(stopReport)
	<-reportDone
	switch {
	case startErr != nil:
		return snapshot(), startErr
	case ctx.Err() != nil:
		return snapshot(), ctx.Err()
	}
	return snapshot(), nil
}
