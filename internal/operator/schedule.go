package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/forecast"
	"allot/internal/ledger"
	"allot/internal/livespec"
	"allot/pipeline"
	"allot/workflows"
)

// Schedules manages pipelines' Temporal Schedules. A schedule's action starts
// ScheduledRun with the workflow ID allot.ScheduleActionID(pipeline), so
// every run it starts (scheduled, triggered or backfilled) is keyed exactly
// as `starter run` keys a manual run for the same nominal time.
type Schedules struct {
	Client    client.Client
	Pipelines *pipeline.Set
	TaskQueue string
	// LedgerID is the identity of the ledger the scheduled runs must be
	// allocated in; "" leaves it to the worker.
	LedgerID string
	// Namespace is the client's namespace ("" = default), for the calls
	// the SDK makes through the raw service (counting a backfill's runs).
	Namespace string
	// Ledger, when set, is read (never written) by a dry-run backfill for
	// the times that already have episodes.
	Ledger *ledger.Ledger
	// HoldLedger, when set, is the ledger a change of schedule (create,
	// update, pause, unpause, delete) writes the budgets' holds for their
	// scheduled runs in at once (docs/design.md, "Scheduled work funded
	// first"); nil leaves them to the worker's next pass
	// (forecast.HoldEvery).
	HoldLedger *ledger.Ledger

	// startWorkflow and sleep replace the client's start and the back-off's
	// wait in tests.
	startWorkflow func(context.Context, client.StartWorkflowOptions, workflows.ScheduledRunInput) (client.WorkflowRun, error)
	sleep         func(context.Context, time.Duration) error
	// now replaces the wall clock in tests.
	now func() time.Time
}

func (s *Schedules) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// ScheduleInput names a pipeline's schedule and overrides its configured
// settings (empty fields keep the pipeline's configuration).
type ScheduleInput struct {
	Pipeline string
	Override pipeline.Schedule
	Paused   bool
	Note     string
	// By is who acts (allot.Actor resolves it); create, and update with a
	// Note, send the note as "by NAME: NOTE".
	By string
}

// ScheduleNote is an operator's note on a schedule and who wrote it.
type ScheduleNote struct {
	By   string // who acts; "" resolves as allot.Actor does
	Text string // why; may be empty
}

// note is the note sent to Temporal: its schedule state keeps one note and
// no actor, so the actor goes in the note ("by alice: reason"), and
// describe and list show it.
func (n ScheduleNote) note() (string, error) {
	if err := checkTexts("--note", n.Text); err != nil {
		return "", err
	}
	by, err := allot.Actor(n.By)
	if err != nil {
		return "", &allot.Error{Type: allot.InvalidInput, Message: err.Error()}
	}
	if n.Text == "" {
		return "by " + by, nil
	}
	return "by " + by + ": " + n.Text, nil
}

// ScheduleResult describes a pipeline's schedule.
type ScheduleResult struct {
	ScheduleID       string                `json:"schedule_id"`
	Pipeline         string                `json:"pipeline"`
	Spec             pipeline.ScheduleSpec `json:"spec"`
	Paused           bool                  `json:"paused"`
	Note             string                `json:"note,omitempty"`
	Actions          int                   `json:"actions"`
	SkippedOverlap   int                   `json:"skipped_overlap"`
	MissedCatchup    int                   `json:"missed_catchup_window"`
	NextActionTimes  []time.Time           `json:"next_action_times"`
	RecentActions    []ScheduledAction     `json:"recent_actions"`
	RunningWorkflows []string              `json:"running_workflows"`
	// Triggered is the workflow ID of the run a trigger started (Trigger
	// only).
	Triggered string `json:"triggered_workflow_id,omitempty"`
	// Holds are the periods of the budgets that hold for their scheduled
	// runs, as a change of schedule left them (HoldLedger); HoldError says
	// why they were not written again (the worker's next pass writes
	// them).
	Holds     []ledger.BudgetPeriod `json:"holds,omitempty"`
	HoldError string                `json:"hold_error,omitempty"`
}

// rewriteHolds writes the budgets' holds again after a change of
// schedule, into res (HoldLedger). The change stands either way: a
// failure is reported beside it, not as the command's.
func (s *Schedules) rewriteHolds(ctx context.Context, res ScheduleResult, err error) (ScheduleResult, error) {
	if err != nil || s.HoldLedger == nil {
		return res, err
	}
	holds, herr := forecast.Holds(ctx, forecast.Input{Ledger: s.HoldLedger, Pipelines: s.Pipelines, Schedule: forecast.TemporalSchedules(s.Client, s.Pipelines), Now: s.clock()})
	if herr != nil {
		res.HoldError = herr.Error()
	}
	res.Holds = holds
	return res, nil
}

// ScheduledAction is one run a schedule started.
type ScheduledAction struct {
	NominalTime time.Time `json:"nominal_time"`
	ActualTime  time.Time `json:"actual_time"`
	WorkflowID  string    `json:"workflow_id"`
}

var overlapPolicies = map[string]enumspb.ScheduleOverlapPolicy{
	"skip":            enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
	"buffer_one":      enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
	"buffer_all":      enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL,
	"cancel_other":    enumspb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER,
	"terminate_other": enumspb.SCHEDULE_OVERLAP_POLICY_TERMINATE_OTHER,
	"allow_all":       enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
}

func overlapName(p enumspb.ScheduleOverlapPolicy) string {
	for name, v := range overlapPolicies {
		if v == p {
			return name
		}
	}
	return p.String()
}

// spec resolves the pipeline and its effective schedule settings; bad
// settings fail here, before anything is sent.
func (s *Schedules) spec(in ScheduleInput) (*pipeline.Pipeline, pipeline.ScheduleSpec, error) {
	if err := checkTexts("--note", in.Note); err != nil {
		return nil, pipeline.ScheduleSpec{}, err
	}
	p, err := s.Pipelines.Get(in.Pipeline)
	if err != nil {
		return nil, pipeline.ScheduleSpec{}, err
	}
	var configured pipeline.Schedule
	if p.Schedule != nil {
		configured = *p.Schedule
	}
	spec, err := configured.Merge(in.Override).Spec()
	if err != nil {
		return nil, pipeline.ScheduleSpec{}, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	return p, spec, nil
}

func (s *Schedules) temporalSchedule(p *pipeline.Pipeline, spec pipeline.ScheduleSpec, paused bool, note string) client.Schedule {
	var ts client.ScheduleSpec
	if spec.Cron != "" {
		ts.CronExpressions = []string{spec.Cron}
	} else {
		ts.Intervals = []client.ScheduleIntervalSpec{{Every: spec.Interval}}
	}
	ts.Jitter = spec.Jitter
	if p.TimeZone != "" && spec.Cron != "" {
		ts.TimeZoneName = p.TimeZone
	}
	return client.Schedule{
		Spec:   &ts,
		Action: s.action(p),
		Policy: &client.SchedulePolicies{Overlap: overlapPolicies[spec.Overlap], CatchupWindow: spec.CatchupWindow},
		State:  &client.ScheduleState{Paused: paused, Note: note},
	}
}

func (s *Schedules) action(p *pipeline.Pipeline) *client.ScheduleWorkflowAction {
	return &client.ScheduleWorkflowAction{
		ID:                    allot.ScheduleActionID(p.Name),
		Workflow:              workflows.ScheduledRunWorkflow,
		Args:                  []any{workflows.ScheduledRunInput{Pipeline: p.Name, LedgerID: s.LedgerID}},
		TaskQueue:             s.TaskQueue,
		StaticSummary:         p.Name + " scheduled run",
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.PipelineAttr.ValueSet(p.Name)),
	}
}

// Create creates the pipeline's schedule; it fails if one exists (use Update).
func (s *Schedules) Create(ctx context.Context, in ScheduleInput) (ScheduleResult, error) {
	p, spec, err := s.spec(in)
	if err != nil {
		return ScheduleResult{}, err
	}
	note, err := ScheduleNote{By: in.By, Text: in.Note}.note()
	if err != nil {
		return ScheduleResult{}, err
	}
	sched := s.temporalSchedule(p, spec, in.Paused, note)
	_, err = s.Client.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:                    allot.ScheduleID(p.Name),
		Spec:                  *sched.Spec,
		Action:                sched.Action,
		Overlap:               sched.Policy.Overlap,
		CatchupWindow:         sched.Policy.CatchupWindow,
		Paused:                in.Paused,
		Note:                  note,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.PipelineAttr.ValueSet(p.Name)),
	})
	if errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return ScheduleResult{}, fmt.Errorf("%w: pipeline %s already has one (%s): change it with `starter schedule update`", ErrScheduleExists, p.Name, allot.ScheduleID(p.Name))
	}
	if err != nil {
		return ScheduleResult{}, fmt.Errorf("create schedule %s: %w", allot.ScheduleID(p.Name), err)
	}
	res, err := s.Describe(ctx, p.Name)
	return s.rewriteHolds(ctx, res, err)
}

// Update replaces the schedule's spec, action and policies with the
// pipeline's (and the overrides'); its paused state is kept, and its note
// unless in.Note gives a new one (sent as "by NAME: NOTE").
func (s *Schedules) Update(ctx context.Context, in ScheduleInput) (ScheduleResult, error) {
	p, spec, err := s.spec(in)
	if err != nil {
		return ScheduleResult{}, err
	}
	note := ""
	if in.Note != "" {
		if note, err = (ScheduleNote{By: in.By, Text: in.Note}).note(); err != nil {
			return ScheduleResult{}, err
		}
	}
	h, err := s.handle(ctx, p.Name)
	if err != nil {
		return ScheduleResult{}, err
	}
	if err := h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(cur client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		state := cur.Description.Schedule.State
		if note == "" {
			note = noteOf(state)
		}
		sched := s.temporalSchedule(p, spec, state != nil && state.Paused, note)
		return &client.ScheduleUpdate{Schedule: &sched}, nil
	}}); err != nil {
		return ScheduleResult{}, fmt.Errorf("update schedule %s: %w", h.GetID(), err)
	}
	res, err := s.Describe(ctx, p.Name)
	return s.rewriteHolds(ctx, res, err)
}

// ErrScheduleExists means create found the pipeline's schedule already
// there.
var ErrScheduleExists = errors.New("schedule exists")

// Ensure creates the schedule, or updates it when it exists.
func (s *Schedules) Ensure(ctx context.Context, in ScheduleInput) (ScheduleResult, error) {
	res, err := s.Create(ctx, in)
	if errors.Is(err, ErrScheduleExists) {
		return s.Update(ctx, in)
	}
	return res, err
}

func noteOf(st *client.ScheduleState) string {
	if st == nil {
		return ""
	}
	return st.Note
}

// ErrNoSchedule means the pipeline has no Schedule (never created, or
// deleted).
var ErrNoSchedule = errors.New("the pipeline has no schedule")

// noScheduleError says which pipeline has no schedule and how to create
// it, and is ErrNoSchedule.
type noScheduleError struct{ error }

func (e noScheduleError) Is(target error) bool { return target == ErrNoSchedule }

// handle finds the pipeline's schedule, or says how to create it.
func (s *Schedules) handle(ctx context.Context, pipelineName string) (client.ScheduleHandle, error) {
	if _, err := s.Pipelines.Get(pipelineName); err != nil {
		return nil, err
	}
	h := s.Client.ScheduleClient().GetHandle(ctx, allot.ScheduleID(pipelineName))
	if _, err := h.Describe(ctx); err != nil {
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return nil, noScheduleError{fmt.Errorf("pipeline %s has no schedule (%s): create it with `%s`", pipelineName, h.GetID(), allot.ScheduleCreateCommand(pipelineName))}
		}
		return nil, fmt.Errorf("describe schedule %s: %w", h.GetID(), err)
	}
	return h, nil
}

// Describe reports the schedule's settings, state and recent runs.
func (s *Schedules) Describe(ctx context.Context, pipelineName string) (ScheduleResult, error) {
	h, err := s.handle(ctx, pipelineName)
	if err != nil {
		return ScheduleResult{}, err
	}
	d, err := h.Describe(ctx)
	if err != nil {
		return ScheduleResult{}, fmt.Errorf("describe schedule %s: %w", h.GetID(), err)
	}
	out := ScheduleResult{
		ScheduleID: h.GetID(), Pipeline: pipelineName,
		Actions: d.Info.NumActions, SkippedOverlap: d.Info.NumActionsSkippedOverlap, MissedCatchup: d.Info.NumActionsMissedCatchupWindow,
		NextActionTimes: d.Info.NextActionTimes, RecentActions: []ScheduledAction{}, RunningWorkflows: []string{},
	}
	if sp := d.Schedule.Spec; sp != nil {
		switch {
		case len(sp.CronExpressions) > 0:
			out.Spec.Cron = sp.CronExpressions[0]
		case len(sp.Calendars) > 0:
			// The server keeps a cron string as a calendar; show it as one.
			out.Spec.Cron = livespec.CalendarCron(sp.Calendars[0])
		}
		if len(sp.Intervals) > 0 {
			out.Spec.Interval = sp.Intervals[0].Every
		}
		out.Spec.Jitter = sp.Jitter
	}
	if pol := d.Schedule.Policy; pol != nil {
		out.Spec.Overlap, out.Spec.CatchupWindow = overlapName(pol.Overlap), pol.CatchupWindow
	}
	if st := d.Schedule.State; st != nil {
		out.Paused, out.Note = st.Paused, st.Note
	}
	for _, a := range d.Info.RecentActions {
		sa := ScheduledAction{NominalTime: a.ScheduleTime, ActualTime: a.ActualTime}
		if a.StartWorkflowResult != nil {
			sa.WorkflowID = a.StartWorkflowResult.WorkflowID
		}
		out.RecentActions = append(out.RecentActions, sa)
	}
	for _, w := range d.Info.RunningWorkflows {
		out.RunningWorkflows = append(out.RunningWorkflows, w.WorkflowID)
	}
	return out, nil
}

// ScheduleSummary is one schedule in a list.
type ScheduleSummary struct {
	ScheduleID      string      `json:"schedule_id"`
	Pipeline        string      `json:"pipeline"`
	Paused          bool        `json:"paused"`
	Note            string      `json:"note,omitempty"` // "by NAME: why", as the last pause, unpause or create sent it
	NextActionTimes []time.Time `json:"next_action_times"`
}

// List lists the schedules of known pipelines.
func (s *Schedules) List(ctx context.Context) ([]ScheduleSummary, error) {
	iter, err := s.Client.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	byID := map[string]string{}
	for _, name := range s.Pipelines.Names() {
		byID[allot.ScheduleID(name)] = name
	}
	out := []ScheduleSummary{}
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		if name, ok := byID[e.ID]; ok {
			out = append(out, ScheduleSummary{ScheduleID: e.ID, Pipeline: name, Paused: e.Paused, Note: e.Note, NextActionTimes: e.NextActionTimes})
		}
	}
	return out, nil
}

// Pause stops the schedule's future actions. Temporal skips the times that
// come while paused; unpausing settles them under the pipeline's catch_up
// policy (package catchup, run by `starter schedule unpause`).
func (s *Schedules) Pause(ctx context.Context, pipelineName string, n ScheduleNote) (ScheduleResult, error) {
	note, err := n.note()
	if err != nil {
		return ScheduleResult{}, err
	}
	h, err := s.handle(ctx, pipelineName)
	if err != nil {
		return ScheduleResult{}, err
	}
	if err := h.Pause(ctx, client.SchedulePauseOptions{Note: note}); err != nil {
		return ScheduleResult{}, fmt.Errorf("pause schedule %s: %w", h.GetID(), err)
	}
	res, err := s.Describe(ctx, pipelineName)
	return s.rewriteHolds(ctx, res, err)
}

// Unpause resumes the schedule.
func (s *Schedules) Unpause(ctx context.Context, pipelineName string, n ScheduleNote) (ScheduleResult, error) {
	note, err := n.note()
	if err != nil {
		return ScheduleResult{}, err
	}
	h, err := s.handle(ctx, pipelineName)
	if err != nil {
		return ScheduleResult{}, err
	}
	if err := h.Unpause(ctx, client.ScheduleUnpauseOptions{Note: note}); err != nil {
		return ScheduleResult{}, fmt.Errorf("unpause schedule %s: %w", h.GetID(), err)
	}
	res, err := s.Describe(ctx, pipelineName)
	return s.rewriteHolds(ctx, res, err)
}

// TriggerWait bounds how long Trigger waits for the schedule to record the
// run it started.
var TriggerWait = 30 * time.Second

// Trigger starts one run now; its nominal time is the trigger's time.
// Temporal starts it even while the schedule is paused (a pause holds the
// schedule's own times, not a trigger), and starts it asynchronously:
// Trigger waits until the schedule records the run and returns its
// workflow ID in Triggered, or says that none started.
func (s *Schedules) Trigger(ctx context.Context, pipelineName string) (ScheduleResult, error) {
	h, err := s.handle(ctx, pipelineName)
	if err != nil {
		return ScheduleResult{}, err
	}
	before, err := s.Describe(ctx, pipelineName)
	if err != nil {
		return ScheduleResult{}, err
	}
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL}); err != nil {
		return ScheduleResult{}, fmt.Errorf("trigger schedule %s: %w", h.GetID(), err)
	}
	seen := map[string]bool{}
	for _, a := range before.RecentActions {
		seen[a.WorkflowID] = true
	}
	waitCtx, cancel := context.WithTimeout(ctx, TriggerWait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := s.Describe(waitCtx, pipelineName)
		if err == nil && res.Actions > before.Actions {
			for _, a := range res.RecentActions {
				if !seen[a.WorkflowID] && a.WorkflowID != "" {
					res.Triggered = a.WorkflowID // the newest new one: actions come oldest first
				}
			}
			if res.Triggered != "" {
				return res, nil
			}
		}
		select {
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return ScheduleResult{}, ctx.Err()
			}
			why := ""
			if before.Paused {
				why = fmt.Sprintf(" (the schedule is paused: its own times run again after `%s`)", allot.ScheduleUnpauseCommand(pipelineName))
			}
			return ScheduleResult{}, fmt.Errorf("trigger schedule %s: no run started within %s%s: see what the schedule did with `starter schedule describe --pipeline %s`",
				h.GetID(), TriggerWait, why, pipelineName)
		case <-tick.C:
		}
	}
}

// Delete removes the schedule; runs it started are not affected.
func (s *Schedules) Delete(ctx context.Context, pipelineName string) error {
	h, err := s.handle(ctx, pipelineName)
	if err != nil {
		return err
	}
	if err := h.Delete(ctx); err != nil {
		return fmt.Errorf("delete schedule %s: %w", h.GetID(), err)
	}
	// A deleted Schedule starts nothing more: its hold goes with it (a
	// failure leaves it to the worker's next pass).
	_, _ = s.rewriteHolds(ctx, ScheduleResult{}, nil)
	return nil
}
