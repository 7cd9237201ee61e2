package operator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"allot/pipeline"
	"allot/workflows"
)

// Schedules manages pipelines' Temporal Schedules. A schedule's action starts
// ScheduledRun with the workflow ID workflows.ScheduleActionID(pipeline), so
// every run it starts (scheduled, triggered or backfilled) is keyed exactly
// as `starter run` keys a manual run for the same nominal time.
type Schedules struct {
	Client    client.Client
	Pipelines *pipeline.Set
	TaskQueue string
}

// ScheduleInput names a pipeline's schedule and overrides its configured
// settings (empty fields keep the pipeline's configuration).
type ScheduleInput struct {
	Pipeline string
	Override pipeline.Schedule
	Paused   bool
	Note     string
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
		ID:                    workflows.ScheduleActionID(p.Name),
		Workflow:              workflows.ScheduledRunWorkflow,
		Args:                  []any{workflows.ScheduledRunInput{Pipeline: p.Name}},
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
	sched := s.temporalSchedule(p, spec, in.Paused, in.Note)
	_, err = s.Client.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:                    workflows.ScheduleID(p.Name),
		Spec:                  *sched.Spec,
		Action:                sched.Action,
		Overlap:               sched.Policy.Overlap,
		CatchupWindow:         sched.Policy.CatchupWindow,
		Paused:                in.Paused,
		Note:                  in.Note,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.PipelineAttr.ValueSet(p.Name)),
	})
	if errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return ScheduleResult{}, fmt.Errorf("%w: pipeline %s already has one (%s): change it with `starter schedule update`", ErrScheduleExists, p.Name, workflows.ScheduleID(p.Name))
	}
	if err != nil {
		return ScheduleResult{}, fmt.Errorf("create schedule %s: %w", workflows.ScheduleID(p.Name), err)
	}
	return s.Describe(ctx, p.Name)
}

// Update replaces the schedule's spec, action and policies with the
// pipeline's (and the overrides'); its paused state is kept.
func (s *Schedules) Update(ctx context.Context, in ScheduleInput) (ScheduleResult, error) {
	p, spec, err := s.spec(in)
	if err != nil {
		return ScheduleResult{}, err
	}
	h, err := s.handle(ctx, p.Name)
	if err != nil {
		return ScheduleResult{}, err
	}
	if err := h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(cur client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		state := cur.Description.Schedule.State
		sched := s.temporalSchedule(p, spec, state != nil && state.Paused, noteOf(state))
		return &client.ScheduleUpdate{Schedule: &sched}, nil
	}}); err != nil {
		return ScheduleResult{}, fmt.Errorf("update schedule %s: %w", h.GetID(), err)
	}
	return s.Describe(ctx, p.Name)
}

// ErrScheduleExists: create found the pipeline's schedule already there.
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

// handle finds the pipeline's schedule, or says how to create it.
func (s *Schedules) handle(ctx context.Context, pipelineName string) (client.ScheduleHandle, error) {
	if _, err := s.Pipelines.Get(pipelineName); err != nil {
		return nil, err
	}
	h := s.Client.ScheduleClient().GetHandle(ctx, workflows.ScheduleID(pipelineName))
	if _, err := h.Describe(ctx); err != nil {
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return nil, fmt.Errorf("pipeline %s has no schedule (%s): create it with `starter schedule create --pipeline %s`", pipelineName, h.GetID(), pipelineName)
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
			out.Spec.Cron = calendarCron(sp.Calendars[0])
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

// calendarCron writes a calendar spec back as a cron expression
// (minute hour day-of-month month day-of-week).
func calendarCron(c client.ScheduleCalendarSpec) string {
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

// ScheduleSummary is one schedule in a list.
type ScheduleSummary struct {
	ScheduleID      string      `json:"schedule_id"`
	Pipeline        string      `json:"pipeline"`
	Paused          bool        `json:"paused"`
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
		byID[workflows.ScheduleID(name)] = name
	}
	out := []ScheduleSummary{}
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		if name, ok := byID[e.ID]; ok {
			out = append(out, ScheduleSummary{ScheduleID: e.ID, Pipeline: name, Paused: e.Paused, NextActionTimes: e.NextActionTimes})
		}
	}
	return out, nil
}

// Pause stops the schedule's future actions. Times missed while paused are
// not caught up: backfill them to run them.
func (s *Schedules) Pause(ctx context.Context, pipelineName, note string) (ScheduleResult, error) {
	h, err := s.handle(ctx, pipelineName)
	if err != nil {
		return ScheduleResult{}, err
	}
	if err := h.Pause(ctx, client.SchedulePauseOptions{Note: note}); err != nil {
		return ScheduleResult{}, fmt.Errorf("pause schedule %s: %w", h.GetID(), err)
	}
	return s.Describe(ctx, pipelineName)
}

// Unpause resumes the schedule.
func (s *Schedules) Unpause(ctx context.Context, pipelineName, note string) (ScheduleResult, error) {
	h, err := s.handle(ctx, pipelineName)
	if err != nil {
		return ScheduleResult{}, err
	}
	if err := h.Unpause(ctx, client.ScheduleUnpauseOptions{Note: note}); err != nil {
		return ScheduleResult{}, fmt.Errorf("unpause schedule %s: %w", h.GetID(), err)
	}
	return s.Describe(ctx, pipelineName)
}

// Trigger starts one run now; its nominal time is the trigger's time.
func (s *Schedules) Trigger(ctx context.Context, pipelineName string) (ScheduleResult, error) {
	h, err := s.handle(ctx, pipelineName)
	if err != nil {
		return ScheduleResult{}, err
	}
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL}); err != nil {
		return ScheduleResult{}, fmt.Errorf("trigger schedule %s: %w", h.GetID(), err)
	}
	return s.Describe(ctx, pipelineName)
}

// BackfillInput is a range of nominal times to run, [From, To).
type BackfillInput struct {
	Pipeline string
	From, To time.Time
	// Override may carry a max_backfill for this request.
	Override pipeline.Schedule
}

// BackfillResult echoes what was asked of the schedule.
type BackfillResult struct {
	ScheduleID string    `json:"schedule_id"`
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
}

// Backfill runs the schedule's nominal times in [From, To) through the
// schedule itself, so every run gets the key its scheduled run would have:
// times that already ran get their episodes back from the ledger; the rest
// allocate. It is one request carrying the whole range (back-to-back
// requests can overwrite each other).
func (s *Schedules) Backfill(ctx context.Context, in BackfillInput) (BackfillResult, error) {
	p, err := s.Pipelines.Get(in.Pipeline)
	if err != nil {
		return BackfillResult{}, err
	}
	var configured pipeline.Schedule
	if p.Schedule != nil {
		configured = *p.Schedule
	}
	maxBackfill, err := configured.Merge(in.Override).MaxBackfillDuration()
	if err != nil {
		return BackfillResult{}, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	switch {
	case in.From.IsZero() || in.To.IsZero():
		return BackfillResult{}, errors.New("backfill needs --from and --to (RFC3339)")
	case !in.From.Before(in.To):
		return BackfillResult{}, fmt.Errorf("backfill range is reversed or empty: --from %s is not before --to %s", in.From.Format(time.RFC3339), in.To.Format(time.RFC3339))
	case in.To.Sub(in.From) > maxBackfill:
		return BackfillResult{}, fmt.Errorf("backfill range of %s is longer than pipeline %s's max_backfill of %s: split it, or raise max_backfill", in.To.Sub(in.From), p.Name, maxBackfill)
	}
	h, err := s.handle(ctx, p.Name)
	if err != nil {
		return BackfillResult{}, err
	}
	if err := h.Backfill(ctx, client.ScheduleBackfillOptions{Backfill: []client.ScheduleBackfill{{
		Start: in.From.UTC(), End: in.To.UTC(), Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
	}}}); err != nil {
		return BackfillResult{}, fmt.Errorf("backfill schedule %s: %w", h.GetID(), err)
	}
	return BackfillResult{ScheduleID: h.GetID(), From: in.From.UTC(), To: in.To.UTC()}, nil
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
	return nil
}
