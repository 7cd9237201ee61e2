package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
	"allot/internal/deadline"
)

// The DeadlineWatch (docs/design.md, "Period deadlines") judges one
// pipeline's periods at their warning times and deadlines, whether or not
// any run of the period ever started: a run's own workflow cannot say that
// it never began. It keeps nothing the ledger does not: each turn plans
// from the ledger's declaration and last judged deadline (PlanDeadline),
// waits on a durable timer, and judges (JudgeDeadline), which the ledger
// records once per (period, kind). So a watch killed, restarted or
// continued as new judges every deadline once, and a worker that was down
// judges each passed deadline in turn when it comes back.

// DeadlineWatchInput starts a pipeline's watch under
// allot.DeadlineWatchID. After is where planning starts (zero: the
// declaration); a continued watch carries the last deadline it judged.
type DeadlineWatchInput struct {
	Pipeline string    `json:"pipeline"`
	After    time.Time `json:"after,omitzero"`
	// LedgerID is the ledger whose periods the watch judges (design,
	// "Ledger identity"): its activities refuse a worker of another one.
	LedgerID string `json:"ledger_id,omitempty"`
}

// DeadlineWatchResult is how the watch ended: its pipeline declares no
// deadline any more (or is gone from the worker's file).
type DeadlineWatchResult struct {
	Pipeline string `json:"pipeline"`
	// Judged counts the deadlines this run judged.
	Judged int `json:"periods_judged"`
	// After is the last deadline judged, where a new watch would resume.
	After time.Time `json:"after,omitzero"`
}

// DeadlineState is what DeadlineStateQuery answers: the period the watch
// waits for, and the last record it got.
type DeadlineState struct {
	Pipeline string    `json:"pipeline"`
	Period   string    `json:"period,omitempty"`
	WarnAt   time.Time `json:"warn_at,omitzero"`
	DueAt    time.Time `json:"due_at,omitzero"`
	// LastPeriod, LastKind and LastCause are the last record a judgement
	// returned (a period judged before keeps its first).
	LastPeriod string             `json:"last_period,omitempty"`
	LastKind   allot.DeadlineKind `json:"last_kind,omitempty"`
	LastCause  allot.LateCause    `json:"last_cause,omitempty"`
	// Judged counts the deadlines this run judged.
	Judged int `json:"periods_judged"`
}

// deadlineWatchPeriods bounds the deadlines one run judges before it
// continues as new, so that a daily pipeline's history stays short even
// where the server does not suggest it.
const deadlineWatchPeriods = 100

// deadlineActivityOptions retry the ledger's and Temporal's trouble for
// as long as it lasts (no attempt limit, backing off to a minute): a
// judgement must eventually be written. Refusals are not retried.
func deadlineActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: append([]string{}, allot.NonRetryableErrorTypes...),
		},
	}
}

type deadlineWatch struct {
	input  DeadlineWatchInput
	after  time.Time
	state  DeadlineState
	replan workflow.ReceiveChannel
	// warned is the period whose warning this run judged: a re-plan of
	// the same period does not judge it again.
	warned string
}

// DeadlineWatch judges a pipeline's periods, one deadline after another,
// until the pipeline declares no deadline.
func DeadlineWatch(ctx workflow.Context, in DeadlineWatchInput) (DeadlineWatchResult, error) {
	w := &deadlineWatch{input: in, after: in.After}
	if err := w.setup(ctx); err != nil {
		return DeadlineWatchResult{}, err
	}
	return w.run(ctx)
}

func (w *deadlineWatch) setup(ctx workflow.Context) error {
	w.state = DeadlineState{Pipeline: w.input.Pipeline}
	if err := workflow.SetQueryHandler(ctx, DeadlineStateQuery, func() (DeadlineState, error) { return w.state, nil }); err != nil {
		return err
	}
	w.replan = workflow.GetSignalChannel(ctx, DeadlineReplanSignal)
	// Found by pipeline like the runs (the worker's start gives it; a
	// start by hand may not).
	if got, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(PipelineAttr); !ok || got != w.input.Pipeline {
		return workflow.UpsertTypedSearchAttributes(ctx, PipelineAttr.ValueSet(w.input.Pipeline))
	}
	return nil
}

func (w *deadlineWatch) run(ctx workflow.Context) (DeadlineWatchResult, error) {
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, deadlineActivityOptions())
	// The signal a start comes with (SignalWithStart) asks for nothing the
	// first plan does not do.
	w.drainReplans()
	for {
		if w.state.Judged >= deadlineWatchPeriods || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			// A replan asked now is answered by the new run, which
			// plans from the ledger anyway.
			w.drainReplans()
			return DeadlineWatchResult{}, workflow.NewContinueAsNewError(ctx, DeadlineWatch, DeadlineWatchInput{Pipeline: w.input.Pipeline, After: w.after, LedgerID: w.input.LedgerID})
		}
		var plan deadline.PlanResult
		if err := workflow.ExecuteActivity(actx, a.PlanDeadline, deadline.PlanInput{Pipeline: w.input.Pipeline, After: w.after, LedgerID: w.input.LedgerID}).Get(ctx, &plan); err != nil {
			return DeadlineWatchResult{}, err
		}
		if !plan.Declared {
			workflow.GetLogger(ctx).Info("the pipeline declares no deadline: the watch ends", "pipeline", w.input.Pipeline)
			return DeadlineWatchResult{Pipeline: w.input.Pipeline, Judged: w.state.Judged, After: w.after}, nil
		}
		w.state.Period, w.state.WarnAt, w.state.DueAt = plan.Period, plan.WarnAt, plan.DueAt
		workflow.SetCurrentDetails(ctx, "Waiting for the deadline of period "+plan.Period+" at "+plan.DueAt.UTC().Format(time.RFC3339)+".")
		if !plan.WarnAt.IsZero() && w.warned != plan.Period {
			if fired, err := w.waitUntil(ctx, plan.WarnAt); err != nil {
				return DeadlineWatchResult{}, err
			} else if !fired {
				continue
			}
			if err := w.judge(ctx, actx, plan, allot.DeadlineWarning); err != nil {
				return DeadlineWatchResult{}, err
			}
			w.warned = plan.Period
		}
		if fired, err := w.waitUntil(ctx, plan.DueAt); err != nil {
			return DeadlineWatchResult{}, err
		} else if !fired {
			continue
		}
		if err := w.judge(ctx, actx, plan, allot.DeadlineLate); err != nil {
			return DeadlineWatchResult{}, err
		}
		w.after = plan.DueAt
		w.state.Judged++
	}
}

// waitUntil waits for t on a timer, or for a replan signal: false when
// one came (then the caller plans again, from the same After; a changed
// deadline applies through the ledger's declaration). A time already
// passed does not wait: a watch that was down judges every passed
// deadline in turn. The error is the watch's cancellation.
func (w *deadlineWatch) waitUntil(ctx workflow.Context, t time.Time) (bool, error) {
	if w.drainReplans() {
		return false, nil
	}
	d := t.Sub(workflow.Now(ctx))
	if d <= 0 {
		return true, nil
	}
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	var (
		fired bool
		err   error
	)
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(tctx, d), func(f workflow.Future) { fired, err = true, f.Get(ctx, nil) })
	sel.AddReceive(w.replan, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		w.drainReplans()
	})
	sel.Select(ctx)
	return fired, err
}

// drainReplans reads every replan signal that came: any number of them
// asks one plan. It reports whether there was one.
func (w *deadlineWatch) drainReplans() bool {
	got := false
	for w.replan.ReceiveAsync(nil) {
		got = true
	}
	return got
}

func (w *deadlineWatch) judge(ctx, actx workflow.Context, plan deadline.PlanResult, kind allot.DeadlineKind) error {
	var a *activities.Activities
	var res deadline.JudgeResult
	if err := workflow.ExecuteActivity(actx, a.JudgeDeadline, deadline.JudgeInput{
		Pipeline: w.input.Pipeline, Period: plan.Period, Kind: kind, DueAt: plan.DueAt, LedgerID: w.input.LedgerID,
	}).Get(ctx, &res); err != nil {
		return err
	}
	if res.Found {
		w.state.LastPeriod, w.state.LastKind, w.state.LastCause = res.Record.Period, res.Record.Kind, res.Record.Cause
	}
	return nil
}
