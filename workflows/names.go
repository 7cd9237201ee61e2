// Package workflows holds allot's two workflows and every name a caller needs
// to reach them: task queue, workflow types, queries, updates, search
// attributes and workflow-ID builders. It does no I/O.
package workflows

import (
	"time"

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

// ScheduleID is the ID of a pipeline's Temporal Schedule.
func ScheduleID(pipeline string) string { return pipeline + "/schedule" }

// ScheduleActionID is the workflow ID a pipeline's Schedule gives its action;
// Temporal appends "-<nominal time>" to it for every run.
func ScheduleActionID(pipeline string) string { return pipeline + "/scheduled" }

// AllocationKey is the key (and ScheduledRun workflow ID) for a pipeline's run
// at a nominal time: exactly the workflow ID its Schedule forms, so manual
// runs, backfills and scheduled runs deduplicate against each other.
func AllocationKey(pipeline string, nominal time.Time) string {
	return ScheduleActionID(pipeline) + "-" + nominal.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// EpisodeWorkflowID is the ID of the Episode workflow of one episode.
func EpisodeWorkflowID(pipeline, episodeID string) string {
	return pipeline + "/episode/" + episodeID
}
