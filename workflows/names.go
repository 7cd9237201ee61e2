// Package workflows holds allot's two workflows and every name a caller needs
// to reach them: task queue, workflow types, queries, updates, search
// attributes and workflow-ID builders. It does no I/O.
package workflows

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"allot"
)

// TaskQueue is the default task queue of the allot worker.
const TaskQueue = "allot"

// Workflow types and handler names.
const (
	ScheduledRunWorkflow = "ScheduledRun"
	EpisodeWorkflow      = "Episode"
	StateQuery           = "state"
	// BudgetRaisedSignal nudges an Episode parked on BudgetExhausted to ask
	// its budgets again at once (starter budget raise sends it); without it
	// the episode asks on a backoff timer.
	BudgetRaisedSignal = "budget-raised"
)

// Custom search attributes, on both workflows.
var (
	PipelineAttr = temporal.NewSearchAttributeKeyKeyword("AllotPipeline")
	EpisodeAttr  = temporal.NewSearchAttributeKeyKeyword("AllotEpisode")
	PeriodAttr   = temporal.NewSearchAttributeKeyKeyword("AllotPeriod")
	SequenceAttr = temporal.NewSearchAttributeKeyInt64("AllotSequence")
	OutcomeAttr  = temporal.NewSearchAttributeKeyKeyword("AllotOutcome")

	// ScheduledStartTimeAttr is set by a Schedule to the nominal time (before jitter).
	ScheduledStartTimeAttr = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")
	// ScheduledByIDAttr is set by a Schedule to its ID.
	ScheduledByIDAttr = temporal.NewSearchAttributeKeyKeyword("TemporalScheduledById")
)

// SearchAttributeTypes is what a namespace must have registered for allot.
func SearchAttributeTypes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		PipelineAttr.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		EpisodeAttr.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		PeriodAttr.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SequenceAttr.GetName(): enumspb.INDEXED_VALUE_TYPE_INT,
		OutcomeAttr.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

// ScheduledRunStartOptions are the options allot starts the ScheduledRun of
// pipeline for nominal with when it starts one itself (a fast backfill, a
// catch-up): the key the pipeline's Schedule forms for that time, so that
// the run collapses with scheduled, manual and backfilled runs of it; a new
// run only when the key has none running (allow-duplicate), a running one
// joined (use-existing); the pipeline's search attribute, as the Schedule's
// action sets it; the task priority; and a summary for the Web UI.
func ScheduledRunStartOptions(pipeline string, nominal time.Time, taskQueue string, priority int, summary string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       allot.AllocationKey(pipeline, nominal),
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            summary,
		TypedSearchAttributes:    temporal.NewSearchAttributes(PipelineAttr.ValueSet(pipeline)),
		Priority:                 temporal.Priority{PriorityKey: priority},
	}
}
