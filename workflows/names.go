// Package workflows holds allot's two workflows and every name a caller needs
// to reach them: task queue, workflow types, queries, updates, search
// attributes and workflow-ID builders. It does no I/O.
package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
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
