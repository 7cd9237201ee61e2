package actioncount

import (
	"reflect"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// history numbers the events from 1, as a server does.
func history(events ...*historypb.HistoryEvent) []*historypb.HistoryEvent {
	for i, e := range events {
		e.EventId = int64(i + 1)
	}
	return events
}

func ev(t enumspb.EventType) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: t}
}

func started(searchAttributes ...string) *historypb.HistoryEvent {
	attrs := &historypb.WorkflowExecutionStartedEventAttributes{
		WorkflowType: &commonpb.WorkflowType{Name: "W"},
	}
	if len(searchAttributes) > 0 {
		attrs.SearchAttributes = searchAttrs(searchAttributes...)
	}
	return &historypb.HistoryEvent{
		EventType:  enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: attrs},
	}
}

func childStarted(parentID string) *historypb.HistoryEvent {
	e := started()
	e.GetWorkflowExecutionStartedEventAttributes().ParentWorkflowExecution = &commonpb.WorkflowExecution{WorkflowId: parentID, RunId: "r"}
	return e
}

func searchAttrs(names ...string) *commonpb.SearchAttributes {
	fields := map[string]*commonpb.Payload{}
	for _, n := range names {
		fields[n] = &commonpb.Payload{Data: []byte(`"x"`)}
	}
	return &commonpb.SearchAttributes{IndexedFields: fields}
}

func upsert(names ...string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{
		EventType: enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
		Attributes: &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{
			UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{SearchAttributes: searchAttrs(names...)},
		},
	}
}

// task is a workflow task that completed: scheduled, started, completed.
func task() []*historypb.HistoryEvent {
	return []*historypb.HistoryEvent{
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
	}
}

// taskWithLocalRetries is a workflow task whose completion reports n local
// activity attempts after the first that began in it.
func taskWithLocalRetries(n uint32) []*historypb.HistoryEvent {
	t := task()
	t[2].Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{
		WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{
			MeteringMetadata: &commonpb.MeteringMetadata{NonfirstLocalActivityExecutionAttempts: n},
		},
	}
	return t
}

// marker is a MarkerRecorded event of the workflow task completed by event
// taskCompleted (0: the event does not say).
func marker(name string, taskCompleted int64) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{
		EventType: enumspb.EVENT_TYPE_MARKER_RECORDED,
		Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{
			MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: name, WorkflowTaskCompletedEventId: taskCompleted},
		},
	}
}

func activityStarted(attempt int32) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{
		EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
		Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
			ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: attempt},
		},
	}
}

func taskFailed(cause enumspb.WorkflowTaskFailedCause) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{
		EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED,
		Attributes: &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{
			WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{Cause: cause},
		},
	}
}

// seq flattens events and groups of events into one history.
func seq(parts ...any) []*historypb.HistoryEvent {
	var out []*historypb.HistoryEvent
	for _, p := range parts {
		switch p := p.(type) {
		case *historypb.HistoryEvent:
			out = append(out, p)
		case []*historypb.HistoryEvent:
			out = append(out, p...)
		default:
			panic("seq: not an event")
		}
	}
	return history(out...)
}

func TestCountFollowsTheDocumentedRules(t *testing.T) {
	completed := ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
	for _, tc := range []struct {
		name   string
		events []*historypb.HistoryEvent
		want   Counts
	}{{
		name:   "a client start is one action; workflow tasks and the completion none",
		events: seq(started(), task(), completed),
		want:   Counts{WorkflowStarted: 1},
	}, {
		name:   "search attributes given at the start are no action of their own",
		events: seq(started("AllotPipeline", "AllotEpisode"), task(), completed),
		want:   Counts{WorkflowStarted: 1},
	}, {
		name:   "a run a Schedule started: its start and two for the Schedule",
		events: seq(started("TemporalScheduledById", "TemporalScheduledStartTime"), task(), completed),
		want:   Counts{WorkflowStarted: 1, ScheduleStarts: 2},
	}, {
		name:   "continue-as-new: the new run's start counts, the old run's event does not",
		events: seq(started(), task(), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)),
		want:   Counts{WorkflowStarted: 1},
	}, {
		name:   "a Signal-With-Start that started the workflow is one action in all",
		events: seq(started(), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), task(), completed),
		want:   Counts{WorkflowStarted: 1},
	}, {
		name: "every signal received is an action, sending one is not",
		events: seq(started(), task(), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), task(),
			ev(enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED), ev(enumspb.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED),
			ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), task(), completed),
		want: Counts{WorkflowStarted: 1, SignalsReceived: 2},
	}, {
		name: "every timer started is an action; fired or canceled none",
		events: seq(started(), task(), ev(enumspb.EVENT_TYPE_TIMER_STARTED), ev(enumspb.EVENT_TYPE_TIMER_FIRED), task(),
			ev(enumspb.EVENT_TYPE_TIMER_STARTED), ev(enumspb.EVENT_TYPE_TIMER_CANCELED), completed),
		want: Counts{WorkflowStarted: 1, TimersStarted: 2},
	}, {
		name: "one action per upsert however many attributes; TemporalChangeVersion alone exempt",
		events: seq(started(), task(), upsert("TemporalChangeVersion"), upsert("AllotEpisode", "AllotPeriod", "AllotSequence"), task(),
			upsert("TemporalChangeVersion", "AllotOutcome"), completed),
		want: Counts{WorkflowStarted: 1, SearchAttributeUpserts: 2},
	}, {
		name: "an activity: one when scheduled, one per retry that the last started event's attempt shows",
		events: seq(started(), task(),
			ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), activityStarted(1), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED), task(),
			ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), activityStarted(3), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED), task(),
			ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED), completed),
		want: Counts{WorkflowStarted: 1, ActivitiesScheduled: 3, ActivityRetries: 2},
	}, {
		name: "an activity started event without an attempt (older servers) is its first",
		events: seq(started(), task(),
			ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), activityStarted(0), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED), completed),
		want: Counts{WorkflowStarted: 1, ActivitiesScheduled: 1},
	}, {
		// Events 2-4 are the first task (completed: 4), 8-10 the second
		// (10), 12-14 the third (14).
		name: "all the markers of one workflow task are one action, whatever they record",
		events: seq(started(), task(), marker("Version", 4), marker("LocalActivity", 4), marker("LocalActivity", 4),
			task(), marker("SideEffect", 10), task(), marker("MutableSideEffect", 14), marker("LocalActivity", 14), completed),
		want: Counts{WorkflowStarted: 1, MarkerBatches: 3, Markers: map[string]int{
			"Version": 1, "LocalActivity": 3, "SideEffect": 1, "MutableSideEffect": 1,
		}},
	}, {
		name: "markers that do not name their workflow task belong to the last one completed",
		events: seq(started(), task(), marker("LocalActivity", 0), marker("LocalActivity", 0),
			task(), marker("LocalActivity", 0), completed),
		want: Counts{WorkflowStarted: 1, MarkerBatches: 2, Markers: map[string]int{"LocalActivity": 3}},
	}, {
		name: "local activity attempts after the first, as the workflow task's metering metadata reports them",
		events: seq(started(), taskWithLocalRetries(0), marker("LocalActivity", 4),
			taskWithLocalRetries(2), marker("LocalActivity", 8), completed),
		want: Counts{WorkflowStarted: 1, MarkerBatches: 2, LocalActivityRetries: 2, Markers: map[string]int{"LocalActivity": 2}},
	}, {
		name: "a parent: one for each intent to start a child, one for an attempt that failed",
		events: seq(started(), task(),
			ev(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED), ev(enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED), task(),
			ev(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED), ev(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED), task(),
			ev(enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED), completed),
		want: Counts{WorkflowStarted: 1, ChildWorkflowsInitiated: 2, ChildWorkflowStartsFailed: 1},
	}, {
		name:   "a child: its start, counted in its own history",
		events: seq(childStarted("parent"), task(), completed),
		want:   Counts{WorkflowStarted: 1},
	}, {
		name: "an update accepted or rejected is an action; admitted or completed none",
		events: seq(started(), task(), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED), task(),
			ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED),
			ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED), completed),
		want: Counts{WorkflowStarted: 1, Updates: 2},
	}, {
		name:   "every workflow execution options update is an action",
		events: seq(started(), task(), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED), completed),
		want:   Counts{WorkflowStarted: 1, OptionsUpdates: 1},
	}, {
		name: "a reset is one action; the new run's history before it was counted on the original run",
		events: seq(started(), task(), ev(enumspb.EVENT_TYPE_TIMER_STARTED), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), upsert("AllotOutcome"),
			ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
			taskFailed(enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW), task(), ev(enumspb.EVENT_TYPE_TIMER_STARTED), completed),
		want: Counts{WorkflowResets: 1, TimersStarted: 1},
	}, {
		name: "a workflow task that failed for another cause is no action and hides nothing",
		events: seq(started(), ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
			taskFailed(enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR), task(), ev(enumspb.EVENT_TYPE_TIMER_STARTED), completed),
		want: Counts{WorkflowStarted: 1, TimersStarted: 1},
	}, {
		name: "a Nexus operation scheduled and its cancellation requested are an action each",
		events: seq(started(), task(), ev(enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED), ev(enumspb.EVENT_TYPE_NEXUS_OPERATION_STARTED), task(),
			ev(enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED), ev(enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCELED), completed),
		want: Counts{WorkflowStarted: 1, NexusOperationsScheduled: 1, NexusCancelRequests: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Count(tc.events)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Count = %v\n          want %v", got, tc.want)
			}
		})
	}
}

func TestCountOfNoEventsIsZero(t *testing.T) {
	if got := Count(nil); !reflect.DeepEqual(got, Counts{}) || got.Total() != 0 {
		t.Errorf("Count(nil) = %v", got)
	}
}

// allSet returns Counts whose every int field is distinct (1, 2, 4, ...),
// so a sum that misses or repeats a field shows.
func allSet(t *testing.T) (Counts, int) {
	t.Helper()
	var c Counts
	v := reflect.ValueOf(&c).Elem()
	want, n := 0, 1
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Int {
			f.SetInt(int64(n))
			want += n
			n *= 2
		}
	}
	c.Markers = map[string]int{"LocalActivity": 1000}
	return c, want
}

func TestTotalAndByTypeCoverEveryActionType(t *testing.T) {
	c, want := allSet(t)
	if got := c.Total(); got != want {
		t.Errorf("Total = %d, want %d (the sum of every int field; markers are no actions)", got, want)
	}
	types := c.ByType()
	v := reflect.ValueOf(c)
	var fields []string
	for i := range v.NumField() {
		if v.Field(i).Kind() == reflect.Int {
			fields = append(fields, v.Type().Field(i).Name)
		}
	}
	if len(types) != len(fields) {
		t.Fatalf("ByType lists %d types, Counts has %d int fields", len(types), len(fields))
	}
	for i, tc := range types {
		if tc.Type != fields[i] || tc.Actions != int(v.FieldByName(fields[i]).Int()) {
			t.Errorf("ByType[%d] = %+v, want %s=%d", i, tc, fields[i], v.FieldByName(fields[i]).Int())
		}
	}
}

func TestAddSumsEveryField(t *testing.T) {
	c, want := allSet(t)
	sum := c.Add(c)
	if sum.Total() != 2*want {
		t.Errorf("Add: total %d, want %d", sum.Total(), 2*want)
	}
	if sum.Markers["LocalActivity"] != 2000 {
		t.Errorf("Add: markers %v, want LocalActivity=2000", sum.Markers)
	}
	if c.Markers["LocalActivity"] != 1000 {
		t.Errorf("Add changed its receiver's markers: %v", c.Markers)
	}
	if got := (Counts{}).Add(Counts{}); got.Markers != nil {
		t.Errorf("Add of no markers made a map: %v", got.Markers)
	}
}

func TestStringNamesTheTypesWithActionsAndTheMarkers(t *testing.T) {
	c := Counts{WorkflowStarted: 2, ActivitiesScheduled: 3, Markers: map[string]int{"Version": 1, "LocalActivity": 2}}
	want := "5 actions: WorkflowStarted=2 ActivitiesScheduled=3 (markers: LocalActivity=2 Version=1)"
	if got := c.String(); got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if strings.Contains(c.String(), "TimersStarted") {
		t.Errorf("String names a type without actions: %q", c.String())
	}
}
