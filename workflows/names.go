// Package workflows holds allot's workflows and every name a caller needs
// to reach them. The workflows:
//
//   - ScheduledRun (scheduled_run.go): one run of a pipeline, whoever
//     started it; it resolves its allocation key to an episode, once;
//   - Episode (episode*.go): the episode's steps in order, its paid and
//     effect steps through the paid protocol, batch steps through the
//     collector, and the operators' updates while it waits on them;
//   - BatchCollector (batch_collector.go): a vendor's batch items from any
//     number of episodes, sent in vendor batches and settled once each;
//   - DeadlineWatch (deadline_watch.go): a pipeline's periods judged at
//     their warnings and deadlines.
//
// Beside them: the task queue, workflow types, queries, updates, signals
// and search attributes (this file; searchattrs.go registers them), the
// activity options sized to the work (options.go), the remedies a parked
// step prints (remedy.go) and every GetVersion marker (versions.go). The
// workflow IDs are the allocation keys' rules, so they are built in the
// root (allot's keys.go). Saved histories of every shape a running
// workflow may have are under testdata/v*/. The workflows do no I/O.
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

	// DeadlineWatchWorkflow judges a pipeline's periods at their warning
	// times and deadlines (deadline_watch.go), under
	// allot.DeadlineWatchID.
	DeadlineWatchWorkflow = "DeadlineWatch"
	// DeadlineReplanSignal makes the watch plan its next deadline again
	// from the ledger's declaration: every worker start sends it (with
	// the start, SignalWithStart), after declaring the deadline it read.
	DeadlineReplanSignal = "deadline-replan"
	// DeadlineStateQuery answers the watch's DeadlineState: the same name
	// as the other workflows' state query, so one command reads any.
	DeadlineStateQuery = StateQuery
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

// ScheduledRunStart is one start of a ScheduledRun that allot makes: a
// manual run, a fast backfill's, a catch-up's, or the one the docs' `temporal
// workflow start` command makes.
type ScheduledRunStart struct {
	Pipeline string
	// Run is the key (the workflow ID) and nominal time, from
	// allot.ResolveRunKey, so that the run collapses with the scheduled,
	// manual and backfilled runs of its time.
	Run       allot.RunKey
	TaskQueue string
	// Priority is the task priority (0, the server's default, for runs
	// dispatched like the Schedule's own).
	Priority int
	// Summary is the Web UI's summary; "" is "<pipeline> run for <nominal
	// time>".
	Summary string
}

// ScheduledRunStartOptions are the options of every ScheduledRun start
// allot makes, so that they cannot drift apart: a start of a running key
// joins it (conflict policy use-existing; a caller that must know whether it
// started may set Fail), the pipeline's search attribute as the Schedule's
// action sets it, and a summary. The ID-reuse policy is the caller's
// decision, so it is an argument:
//   - ALLOW_DUPLICATE_FAILED_ONLY for a manual run: a finished key is never
//     run again, a failed one may be (the ledger then hands back the same
//     episode);
//   - ALLOW_DUPLICATE for allot's own starts of a time it found missing (a
//     fast backfill, a catch-up), which looked at the key first.
func ScheduledRunStartOptions(reuse enumspb.WorkflowIdReusePolicy, s ScheduledRunStart) client.StartWorkflowOptions {
	summary := s.Summary
	if summary == "" {
		summary = s.Pipeline + " run"
		if !s.Run.Nominal.IsZero() {
			summary += " for " + s.Run.Nominal.UTC().Format(time.RFC3339)
		}
	}
	return client.StartWorkflowOptions{
		ID:                       s.Run.Key,
		TaskQueue:                s.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    reuse,
		// Only a start the reuse policy refuses (a finished key) errs:
		// use-existing answers a running key with its run.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            summary,
		TypedSearchAttributes:                    temporal.NewSearchAttributes(PipelineAttr.ValueSet(s.Pipeline)),
		Priority:                                 temporal.Priority{PriorityKey: s.Priority},
	}
}
