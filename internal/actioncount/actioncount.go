// Package actioncount counts the Temporal Cloud actions that a workflow's
// event history shows, by the rules of Temporal Cloud's list of billable
// actions:
//
//	https://docs.temporal.io/cloud/actions
//
// (the same page as https://docs.temporal.io/evaluate/cloud/actions; its
// section "Actions in Workflows", https://docs.temporal.io/cloud/actions-usage,
// says the Web UI annotates a history's events with the same estimate).
// Temporal Cloud bills per action, so the count of one run's histories is
// what the run costs there. It is an estimate, as the page says of its own:
// actions that leave no event are not in a history and not counted (queries,
// activity heartbeats, workflow task heartbeats, the Schedule's create,
// update and delete, export, fairness, capacity), nor are the de-duplicated
// starts and updates that the page exempts, since they leave no event either.
//
// Count one history at a time and add the counts of a run's histories
// (Counts.Add): a child's start is counted in the child's history (its
// WorkflowExecutionStarted), the intent to start it in the parent's, and a
// signal in the history of the workflow that received it.
package actioncount

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// DocsURL is the page whose rules Count follows.
const DocsURL = "https://docs.temporal.io/cloud/actions"

// Search attributes the rules read.
const (
	// changeVersionAttribute is the search attribute the SDKs upsert for
	// GetVersion; an upsert of it alone is exempt.
	changeVersionAttribute = "TemporalChangeVersion"
	// scheduledByAttribute is set on the start of a run a Schedule started.
	scheduledByAttribute = "TemporalScheduledById"
)

// Counts is the number of actions of each documented action type that a
// history shows. Every field but Markers is a number of actions; Total adds
// them.
type Counts struct {
	// WorkflowStarted is one per WorkflowExecutionStarted ("Workflow
	// started": a client start, a Schedule's start, Continue-As-New's new
	// run, a child's start, Signal-With-Start when it starts the workflow).
	// Search attributes given at the start are no action of their own.
	WorkflowStarted int
	// ScheduleStarts is two per run a Schedule started ("Each execution of
	// a Schedule accrues three Actions: Schedule Start. This accounts for
	// two actions", the third being WorkflowStarted): a start whose search
	// attributes hold TemporalScheduledById.
	ScheduleStarts int
	// WorkflowResets is one per reset (a WorkflowTaskFailed of cause
	// RESET_WORKFLOW). The events before it in the new run's history were
	// counted on the original run and are not counted again.
	WorkflowResets int
	// SearchAttributeUpserts is one per UpsertWorkflowSearchAttributes
	// event, however many attributes it sets, except an upsert of
	// TemporalChangeVersion alone, which is exempt.
	SearchAttributeUpserts int
	// OptionsUpdates is one per WorkflowExecutionOptionsUpdated event.
	OptionsUpdates int
	// ChildWorkflowsInitiated is one per StartChildWorkflowExecutionInitiated
	// event: the parent durably recording the intent to start a child. The
	// page counts two actions for it, "one for durably storing the intent
	// to start a Child Workflow and one for the attempt to start it"; the
	// attempt is the child's WorkflowStarted, counted in the child's
	// history, or ChildWorkflowStartsFailed.
	ChildWorkflowsInitiated int
	// ChildWorkflowStartsFailed is one per StartChildWorkflowExecutionFailed
	// event: the attempt to start a child that did not start, which has no
	// history of its own to count it in.
	ChildWorkflowStartsFailed int
	// ActivitiesScheduled is one per ActivityTaskScheduled event ("Activity
	// started or retried", the first attempt).
	ActivitiesScheduled int
	// ActivityRetries is the attempts after the first: the attempt field of
	// each ActivityTaskStarted event, less one. The history keeps only the
	// last attempt's started event, and none for an attempt still waiting
	// to retry when the workflow ended.
	ActivityRetries int
	// MarkerBatches is one per workflow task that recorded one marker or
	// more ("All Local Activities associated with one Workflow Task count
	// as a single Action ... Temporal Cloud counts all RecordMarkers from
	// each Workflow Task as one action"): local activities, side effects,
	// mutable side effects (recorded only when the value changes) and
	// version markers alike.
	MarkerBatches int
	// LocalActivityRetries is the local activity attempts after the first
	// that began in a later workflow task than their first: the
	// WorkflowTaskCompleted events' metering_metadata
	// .nonfirst_local_activity_execution_attempts.
	LocalActivityRetries int
	// TimersStarted is one per TimerStarted event, the SDK's implicit
	// timers (timeouts of Await and its kin) included.
	TimersStarted int
	// SignalsReceived is one per WorkflowExecutionSignaled event, from a
	// client or from a workflow (SignalExternalWorkflowExecutionInitiated in
	// the sender's history counts nothing, as the Web UI shows it). The
	// signal of a Signal-With-Start that started the workflow is the same
	// action as its WorkflowStarted ("one total action occurs for any
	// Signal-With-Start") and is not counted again.
	SignalsReceived int
	// Updates is one per WorkflowExecutionUpdateAccepted or
	// WorkflowExecutionUpdateRejected event (the page says the latter is
	// never written to a history; a rejected update is an action all the
	// same, and missing from this count).
	Updates int
	// NexusOperationsScheduled is one per NexusOperationScheduled event.
	NexusOperationsScheduled int
	// NexusCancelRequests is one per NexusOperationCancelRequested event.
	NexusCancelRequests int

	// Markers counts the MarkerRecorded events by marker name
	// ("LocalActivity", "SideEffect", "MutableSideEffect", "Version"). They
	// are no actions of their own, MarkerBatches is; they say what the
	// batches held.
	Markers map[string]int
}

// TypeCount is the actions of one action type.
type TypeCount struct {
	Type    string // the name of the Counts field
	Actions int
}

// ByType returns the actions of every action type, zeros included, in the
// order of the Counts fields.
func (c Counts) ByType() []TypeCount {
	return []TypeCount{
		{"WorkflowStarted", c.WorkflowStarted},
		{"ScheduleStarts", c.ScheduleStarts},
		{"WorkflowResets", c.WorkflowResets},
		{"SearchAttributeUpserts", c.SearchAttributeUpserts},
		{"OptionsUpdates", c.OptionsUpdates},
		{"ChildWorkflowsInitiated", c.ChildWorkflowsInitiated},
		{"ChildWorkflowStartsFailed", c.ChildWorkflowStartsFailed},
		{"ActivitiesScheduled", c.ActivitiesScheduled},
		{"ActivityRetries", c.ActivityRetries},
		{"MarkerBatches", c.MarkerBatches},
		{"LocalActivityRetries", c.LocalActivityRetries},
		{"TimersStarted", c.TimersStarted},
		{"SignalsReceived", c.SignalsReceived},
		{"Updates", c.Updates},
		{"NexusOperationsScheduled", c.NexusOperationsScheduled},
		{"NexusCancelRequests", c.NexusCancelRequests},
	}
}

// Total returns the number of actions of every type.
func (c Counts) Total() int {
	n := 0
	for _, t := range c.ByType() {
		n += t.Actions
	}
	return n
}

// Add returns the sum of c and o: the actions of two histories.
func (c Counts) Add(o Counts) Counts {
	sum := Counts{
		WorkflowStarted:           c.WorkflowStarted + o.WorkflowStarted,
		ScheduleStarts:            c.ScheduleStarts + o.ScheduleStarts,
		WorkflowResets:            c.WorkflowResets + o.WorkflowResets,
		SearchAttributeUpserts:    c.SearchAttributeUpserts + o.SearchAttributeUpserts,
		OptionsUpdates:            c.OptionsUpdates + o.OptionsUpdates,
		ChildWorkflowsInitiated:   c.ChildWorkflowsInitiated + o.ChildWorkflowsInitiated,
		ChildWorkflowStartsFailed: c.ChildWorkflowStartsFailed + o.ChildWorkflowStartsFailed,
		ActivitiesScheduled:       c.ActivitiesScheduled + o.ActivitiesScheduled,
		ActivityRetries:           c.ActivityRetries + o.ActivityRetries,
		MarkerBatches:             c.MarkerBatches + o.MarkerBatches,
		LocalActivityRetries:      c.LocalActivityRetries + o.LocalActivityRetries,
		TimersStarted:             c.TimersStarted + o.TimersStarted,
		SignalsReceived:           c.SignalsReceived + o.SignalsReceived,
		Updates:                   c.Updates + o.Updates,
		NexusOperationsScheduled:  c.NexusOperationsScheduled + o.NexusOperationsScheduled,
		NexusCancelRequests:       c.NexusCancelRequests + o.NexusCancelRequests,
	}
	for _, m := range []map[string]int{c.Markers, o.Markers} {
		for name, n := range m {
			if sum.Markers == nil {
				sum.Markers = map[string]int{}
			}
			sum.Markers[name] += n
		}
	}
	return sum
}

// String returns the total and the action types that have actions, then
// the markers by name: "5 actions: WorkflowStarted=1 ... (markers:
// LocalActivity=2)".
func (c Counts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d actions:", c.Total())
	for _, t := range c.ByType() {
		if t.Actions != 0 {
			fmt.Fprintf(&b, " %s=%d", t.Type, t.Actions)
		}
	}
	if len(c.Markers) > 0 {
		b.WriteString(" (markers:")
		for _, name := range slices.Sorted(maps.Keys(c.Markers)) {
			fmt.Fprintf(&b, " %s=%d", name, c.Markers[name])
		}
		b.WriteString(")")
	}
	return b.String()
}

// Count returns the actions that the events of one workflow execution's
// history show. Events that are no action (workflow tasks, an activity's
// completion, a timer firing, a child's completion, ...) count nothing.
func Count(events []*historypb.HistoryEvent) Counts {
	var c Counts
	// After a reset, the new run's history begins with the events it kept
	// of the original run, whose actions were counted there.
	first := 0
	for i, e := range events {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED &&
			e.GetWorkflowTaskFailedEventAttributes().GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
			first = i
		}
	}
	batches := map[int64]bool{} // the workflow tasks that recorded a marker
	var lastTaskCompleted int64
	for i := first; i < len(events); i++ {
		e := events[i]
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			c.WorkflowStarted++
			if _, ok := e.GetWorkflowExecutionStartedEventAttributes().GetSearchAttributes().GetIndexedFields()[scheduledByAttribute]; ok {
				c.ScheduleStarts += 2
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			if e.GetWorkflowTaskFailedEventAttributes().GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
				c.WorkflowResets++
			}
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			fields := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
			if _, ok := fields[changeVersionAttribute]; !ok || len(fields) > 1 {
				c.SearchAttributeUpserts++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED:
			c.OptionsUpdates++
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			c.ChildWorkflowsInitiated++
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED:
			c.ChildWorkflowStartsFailed++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			c.ActivitiesScheduled++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if a := e.GetActivityTaskStartedEventAttributes().GetAttempt(); a > 1 {
				c.ActivityRetries += int(a) - 1
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			lastTaskCompleted = e.GetEventId()
			c.LocalActivityRetries += int(e.GetWorkflowTaskCompletedEventAttributes().GetMeteringMetadata().GetNonfirstLocalActivityExecutionAttempts())
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			attrs := e.GetMarkerRecordedEventAttributes()
			task := attrs.GetWorkflowTaskCompletedEventId()
			if task == 0 {
				task = lastTaskCompleted
			}
			batches[task] = true
			if c.Markers == nil {
				c.Markers = map[string]int{}
			}
			c.Markers[attrs.GetMarkerName()]++
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			c.TimersStarted++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			// Signal-With-Start writes the start and the signal together,
			// before anything else.
			if i == 1 && events[0].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
				continue
			}
			c.SignalsReceived++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED:
			c.Updates++
		case enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED:
			c.NexusOperationsScheduled++
		case enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED:
			c.NexusCancelRequests++
		}
	}
	c.MarkerBatches = len(batches)
	return c
}
