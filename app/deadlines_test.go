package app

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"allot"
	"allot/internal/deadline"
	"allot/internal/ledgertest"
	"allot/pipeline"
	"allot/workflows"
)

const deadlineFile = `
[[pipeline]]
name = "weekly"
period = "iso-week"
time_zone = "UTC"
deadline = "4d9h"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`

func deadlineTestSet(t *testing.T) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse([]byte(deadlineFile), "test")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func scheduleClient(t *testing.T, cl *mocks.Client, desc *client.ScheduleDescription, err error) {
	h := mocks.NewScheduleHandle(t)
	h.On("Describe", mock.Anything).Return(desc, err)
	sc := mocks.NewScheduleClient(t)
	sc.On("GetHandle", mock.Anything, allot.ScheduleID("weekly")).Return(h)
	cl.On("ScheduleClient").Return(sc)
}

// running describes a running workflow whose workflow task waits (or not)
// on queue.
func running(waiting bool, queue string) *workflowservice.DescribeWorkflowExecutionResponse {
	d := &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, Execution: &commonpb.WorkflowExecution{}},
		ExecutionConfig:       &workflowpb.WorkflowExecutionConfig{TaskQueue: &taskqueuepb.TaskQueue{Name: queue}},
	}
	if waiting {
		d.PendingWorkflowTask = &workflowpb.PendingWorkflowTaskInfo{State: enumspb.PENDING_WORKFLOW_TASK_STATE_SCHEDULED}
	}
	return d
}

func pollers(n int) *workflowservice.DescribeTaskQueueResponse {
	r := &workflowservice.DescribeTaskQueueResponse{}
	for range n {
		r.Pollers = append(r.Pollers, &taskqueuepb.PollerInfo{Identity: "w"})
	}
	return r
}

// The Schedule source says paused with its note, and no Schedule when
// Temporal has none; other errors are returned for the activity to retry.
func TestDeadlineSourcesSchedule(t *testing.T) {
	ctx := context.Background()
	cl := mocks.NewClient(t)
	scheduleClient(t, cl, &client.ScheduleDescription{Schedule: client.Schedule{State: &client.ScheduleState{Paused: true, Note: "holiday"}}}, nil)
	got, err := DeadlineSources(cl, deadlineTestSet(t)).Schedule(ctx, "weekly")
	if err != nil || got != (deadline.Schedule{Exists: true, Paused: true, Note: "holiday"}) {
		t.Errorf("paused: %+v, %v", got, err)
	}
	cl = mocks.NewClient(t)
	scheduleClient(t, cl, nil, serviceerror.NewNotFound("no schedule"))
	if got, err := DeadlineSources(cl, deadlineTestSet(t)).Schedule(ctx, "weekly"); err != nil || got.Exists {
		t.Errorf("none: %+v, %v", got, err)
	}
	cl = mocks.NewClient(t)
	scheduleClient(t, cl, nil, serviceerror.NewUnavailable("down"))
	if _, err := DeadlineSources(cl, deadlineTestSet(t)).Schedule(ctx, "weekly"); err == nil {
		t.Error("Temporal down: no error")
	}
}

// Of the Schedule's recent runs, those of the period whose workflow task
// waits on a queue no worker polls are unpicked; runs of other periods
// are not asked about.
func TestDeadlineSourcesUnpicked(t *testing.T) {
	w32 := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	w31 := w32.AddDate(0, 0, -7)
	action := func(at time.Time) client.ScheduleActionResult {
		return client.ScheduleActionResult{ScheduleTime: at, StartWorkflowResult: &client.ScheduleWorkflowExecution{WorkflowID: allot.AllocationKey("weekly", at), FirstExecutionRunID: "r-" + at.Format("0102")}}
	}
	cl := mocks.NewClient(t)
	scheduleClient(t, cl, &client.ScheduleDescription{Info: client.ScheduleInfo{RecentActions: []client.ScheduleActionResult{
		action(w31), action(w32), action(w32.Add(time.Hour)), action(w32.Add(2 * time.Hour)),
	}}}, nil)
	cl.On("DescribeWorkflowExecution", mock.Anything, allot.AllocationKey("weekly", w32), "r-0803").Return(running(true, "allot-video"), nil)
	cl.On("DescribeWorkflowExecution", mock.Anything, allot.AllocationKey("weekly", w32.Add(time.Hour)), "r-0803").Return(running(true, "allot"), nil)
	cl.On("DescribeWorkflowExecution", mock.Anything, allot.AllocationKey("weekly", w32.Add(2*time.Hour)), "r-0803").Return(nil, serviceerror.NewNotFound("gone"))
	cl.On("DescribeTaskQueue", mock.Anything, "allot-video", enumspb.TASK_QUEUE_TYPE_WORKFLOW).Return(pollers(0), nil)
	cl.On("DescribeTaskQueue", mock.Anything, "allot", enumspb.TASK_QUEUE_TYPE_WORKFLOW).Return(pollers(1), nil)
	got, err := DeadlineSources(cl, deadlineTestSet(t)).Unpicked(context.Background(), "weekly", "2026-W32")
	if err != nil || len(got) != 1 || got[0] != (deadline.UnpickedRun{WorkflowID: allot.AllocationKey("weekly", w32), TaskQueue: "allot-video"}) {
		t.Errorf("unpicked %+v, %v; want only the run waiting on allot-video", got, err)
	}
}

// jsonValue is a query's answer.
type jsonValue struct{ v any }

func (j jsonValue) HasValue() bool { return true }
func (j jsonValue) Get(ptr any) error {
	b, err := json.Marshal(j.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

// An episode's workflow gives its remedies and the vendor it waits for;
// one whose task no worker picks up names the queue and is not queried.
func TestDeadlineSourcesEpisode(t *testing.T) {
	ctx := context.Background()
	id := allot.EpisodeWorkflowID("weekly", "2026-W32-0")
	cl := mocks.NewClient(t)
	cl.On("DescribeWorkflowExecution", mock.Anything, id, "").Return(running(false, "allot"), nil)
	cl.On("QueryWorkflow", mock.Anything, id, "", workflows.StateQuery).Return(jsonValue{workflows.EpisodeState{
		Attention: &workflows.Attention{Remedies: []string{"first", "second"}},
		Waiting:   &workflows.WaitingVendor{Vendor: "render-farm"},
	}}, nil)
	got, err := DeadlineSources(cl, deadlineTestSet(t)).Episode(ctx, "weekly", deadline.Episode{ID: "2026-W32-0", Outcome: allot.OutcomeNeedsAttention})
	if err != nil || len(got.Remedies) != 2 || got.Remedies[0] != "first" || got.Vendor != "render-farm" || got.NoWorker != "" || got.Outcome != allot.OutcomeNeedsAttention {
		t.Errorf("episode %+v, %v", got, err)
	}

	cl = mocks.NewClient(t)
	cl.On("DescribeWorkflowExecution", mock.Anything, id, "").Return(running(true, "allot-video"), nil)
	cl.On("DescribeTaskQueue", mock.Anything, "allot-video", enumspb.TASK_QUEUE_TYPE_WORKFLOW).Return(pollers(0), nil)
	if got, err := DeadlineSources(cl, deadlineTestSet(t)).Episode(ctx, "weekly", deadline.Episode{ID: "2026-W32-0"}); err != nil || got.NoWorker != "allot-video" {
		t.Errorf("no worker: %+v, %v", got, err)
	}

	cl = mocks.NewClient(t)
	cl.On("DescribeWorkflowExecution", mock.Anything, id, "").Return(nil, serviceerror.NewUnavailable("down"))
	if _, err := DeadlineSources(cl, deadlineTestSet(t)).Episode(ctx, "weekly", deadline.Episode{ID: "2026-W32-0"}); err == nil || !errors.As(err, new(*serviceerror.Unavailable)) {
		t.Errorf("Temporal down: %v, want its error", err)
	}
}

// At start the worker declares each deadline of its file and starts or
// signals one watch per pipeline under its ID; a pipeline without a
// deadline has its old watch told to end.
func TestDeadlineDeclarerDeclaresAndSignalsWithStart(t *testing.T) {
	ctx := context.Background()
	set, err := pipeline.Parse([]byte(deadlineFile+`
[[pipeline]]
name = "daily"
period = "day"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	led := ledgertest.New(t).Led
	cl := mocks.NewClient(t)
	var opts client.StartWorkflowOptions
	cl.On("SignalWithStartWorkflow", mock.Anything, allot.DeadlineWatchID("weekly"), workflows.DeadlineReplanSignal, nil, mock.Anything, mock.Anything, workflows.DeadlineWatchInput{Pipeline: "weekly", LedgerID: led.ID()}).
		Run(func(args mock.Arguments) { opts = args.Get(4).(client.StartWorkflowOptions) }).Return(nil, nil).Twice()
	cl.On("SignalWorkflow", mock.Anything, allot.DeadlineWatchID("daily"), "", workflows.DeadlineReplanSignal, nil).Return(serviceerror.NewNotFound("none")).Twice()
	var logs strings.Builder
	// A second worker start declares nothing new, and says nothing of it.
	deadlineDeclarer(cl, led, set, "allot-video", slog.New(slog.NewTextHandler(&logs, nil))).Run(ctx)
	deadlineDeclarer(cl, led, set, "allot-video", slog.New(slog.NewTextHandler(&logs, nil))).Run(ctx)
	if n := strings.Count(logs.String(), "deadline declared"); n != 1 || strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("logs %q: want the declaration said once, no error", logs.String())
	}
	if opts.ID != allot.DeadlineWatchID("weekly") || opts.TaskQueue != "allot-video" {
		t.Errorf("started with %+v", opts)
	}
	if v, ok := opts.TypedSearchAttributes.GetKeyword(workflows.PipelineAttr); !ok || v != "weekly" {
		t.Errorf("search attributes %v, want AllotPipeline=weekly", opts.TypedSearchAttributes)
	}
	p, _ := set.Get("weekly")
	if d, found, err := led.DeadlineDeclaration(ctx, "weekly"); err != nil || !found || d.Spec != p.DeadlineSpec() {
		t.Errorf("declaration %+v, %v, %v; want %q", d, found, err, p.DeadlineSpec())
	}
	if _, found, _ := led.DeadlineDeclaration(ctx, "daily"); found {
		t.Error("a pipeline without a deadline was declared")
	}
}
