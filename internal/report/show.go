package report

// starter episode show: one episode from the ledger, and what Temporal says
// of its workflow (described and queried, never signalled).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
	"allot/workflows"
)

// ShowResult is everything the ledger knows about one episode, and what
// its workflow is doing.
type ShowResult struct {
	Episode   EpisodeView               `json:"episode"`
	Steps     []ledger.StepRecord       `json:"steps"`
	PaidTasks []ledger.PaidTask         `json:"paid_tasks"`
	Costs     []ledger.CostEntry        `json:"costs"`
	Totals    map[string]int64          `json:"totals"` // by currency, minor units
	Decisions []ledger.OperatorDecision `json:"decisions"`
	Workflow  *WorkflowStatus           `json:"workflow,omitempty"`
	// StepKinds are the kinds of the steps of the episode's pinned plan
	// (paid tasks are paid or effect steps' tasks).
	StepKinds map[string]allot.StepKind `json:"step_kinds,omitempty"`
	// Next are the commands that move a waiting episode on: at the
	// approval gate, its approve and reject (a parked episode's are its
	// attention's remedies).
	Next []string `json:"next,omitempty"`
	// VendorNow is the state now of the vendor a step waits for (the
	// workflow's recorded wait is as of when it was recorded).
	VendorNow *VendorNow `json:"vendor_now,omitempty"`
	// Batches are the vendor batches that carried the episode's paid
	// tasks (steps in batch mode), oldest first.
	Batches []ShowBatch `json:"batches,omitempty"`
}

// ShowBatch is one vendor batch that carried a task of the episode: the
// batch, what became of the task in it, and what happens next.
type ShowBatch struct {
	Step          string                 `json:"step"`
	Revision      int                    `json:"revision"`
	Key           string                 `json:"batch_key"`
	VendorBatchID string                 `json:"vendor_batch_id,omitempty"`
	State         allot.BatchState       `json:"state"`
	Status        string                 `json:"status,omitempty"`
	Items         int                    `json:"items"`
	Settled       int                    `json:"settled"`
	Outcome       allot.BatchItemOutcome `json:"outcome,omitempty"` // this task's, once the batch ended
	Next          string                 `json:"next"`
}

// batchNext says what happens next to a task in a batch, in words.
func batchNext(b ledger.PaidBatch, outcome allot.BatchItemOutcome) string {
	switch {
	case b.State == allot.BatchOpen && !b.LookOnlyUntil.IsZero():
		return fmt.Sprintf("the create got no answer (%s): the vendor's list is read for the batch's key until %s, then the create is tried again under the same key", b.Error, b.LookOnlyUntil.Format(time.RFC3339))
	case b.State == allot.BatchOpen:
		return "the collector creates the batch at the vendor"
	case b.State == allot.BatchCreated:
		return "the collector asks the vendor about the batch on a timer; when it ends, this task's result and cost are recorded"
	case b.State == allot.BatchNotCreated:
		return "the vendor refused the batch (" + b.Error + "): the task went back to the queue for another batch"
	}
	switch outcome {
	case allot.BatchItemSucceeded:
		return "done: its result and billed cost are recorded under the task"
	case allot.BatchItemFailed:
		return "the vendor says it failed: the episode parks with the failure"
	case allot.BatchItemNotProcessed:
		return "the vendor did not run it (" + b.Status + "): it went into the next batch under its same key"
	case allot.BatchItemResultLost:
		return "its result files are gone and it may have been billed: the episode parks OutcomeUnknown; ask the vendor, then adopt or abandon"
	}
	return ""
}

// WorkflowStatus is the Episode workflow's status and, while it runs, its
// state and the activities it waits for.
type WorkflowStatus struct {
	WorkflowID string                  `json:"workflow_id"`
	RunID      string                  `json:"run_id"`
	Status     string                  `json:"status"`
	State      *workflows.EpisodeState `json:"state,omitempty"`
	// NoWorker is set when the workflow has a workflow task that no
	// worker has picked up and no worker polls its task queue.
	NoWorker *NoWorker `json:"no_worker,omitempty"`
	// PendingActivities are what Temporal knows of the activities the
	// workflow waits for: a step that keeps failing shows its attempt count
	// and last failure here from its second attempt on, before the
	// workflow itself reports it as retrying.
	PendingActivities []PendingActivity `json:"pending_activities,omitempty"`
}

// PendingActivity is one activity an Episode waits for, as Temporal's
// DescribeWorkflowExecution reports it.
type PendingActivity struct {
	ActivityType string `json:"activity_type"`
	State        string `json:"state"` // scheduled, started, cancel_requested
	Attempt      int32  `json:"attempt"`
	// LastFailure is the last attempt's error ("" before any failed);
	// LastFailureType its application error type, if any.
	LastFailure     string    `json:"last_failure,omitempty"`
	LastFailureType string    `json:"last_failure_type,omitempty"`
	LastStarted     time.Time `json:"last_started,omitzero"`
	NextAttempt     time.Time `json:"next_attempt,omitzero"`
}

// Show reads one episode from the ledger, and its workflow from Temporal
// when a client is given.
func Show(ctx context.Context, led *ledger.Ledger, c client.Client, pipelineName, episodeID string) (ShowResult, error) {
	if err := pipeline.ValidateName(pipelineName); err != nil {
		return ShowResult{}, err
	}
	if episodeID == "" {
		return ShowResult{}, errors.New("--episode is required")
	}
	ep, err := led.Episode(ctx, pipelineName, episodeID)
	if err != nil {
		return ShowResult{}, err
	}
	out := ShowResult{Episode: ViewEpisode(ep), Totals: map[string]int64{}}
	if out.Steps, err = led.Steps(ctx, pipelineName, episodeID); err != nil {
		return ShowResult{}, err
	}
	if out.PaidTasks, err = led.PaidTasks(ctx, pipelineName, episodeID); err != nil {
		return ShowResult{}, err
	}
	if out.Decisions, err = led.Decisions(ctx, pipelineName, episodeID); err != nil {
		return ShowResult{}, err
	}
	for _, t := range out.PaidTasks {
		batches, err := led.TaskBatches(ctx, t.PaidTaskRef)
		if err != nil {
			return ShowResult{}, err
		}
		for _, b := range batches {
			var outcome allot.BatchItemOutcome
			for _, it := range b.Items {
				if it.PaidTaskRef == t.PaidTaskRef {
					outcome = it.Outcome
				}
			}
			out.Batches = append(out.Batches, ShowBatch{Step: t.Step, Revision: t.Revision, Key: b.Key, VendorBatchID: b.VendorBatchID,
				State: b.State, Status: b.Status, Items: len(b.Items), Settled: b.Settled(), Outcome: outcome, Next: batchNext(b, outcome)})
		}
	}
	costs, err := led.Costs(ctx, pipelineName, ep.Period)
	if err != nil {
		return ShowResult{}, err
	}
	for _, c := range costs {
		if c.EpisodeID == episodeID {
			out.Costs = append(out.Costs, c)
			if err := allot.AddTo(out.Totals, allot.Money{Amount: c.Amount, Currency: c.Currency}); err != nil {
				return ShowResult{}, fmt.Errorf("episode %s of %s: %w: a cost entry is absurd; run starter check --pipeline %s", episodeID, pipelineName, err, pipelineName)
			}
		}
	}
	if plan, err := led.EpisodePlan(ctx, pipelineName, episodeID); err == nil && plan != "" {
		var steps []pipeline.Step
		if json.Unmarshal([]byte(plan), &steps) == nil {
			out.StepKinds = map[string]allot.StepKind{}
			for _, s := range steps {
				out.StepKinds[s.Name] = s.Kind
			}
		}
	}
	if c != nil {
		if out.Workflow, err = EpisodeWorkflow(ctx, c, pipelineName, episodeID); err != nil {
			return ShowResult{}, err
		}
		if w := out.Workflow; w != nil && w.State != nil && w.State.Stage == allot.StageWaitingApproval {
			out.Next = ApprovalCommands(pipelineName, episodeID)
		}
		if w := out.Workflow; w != nil && w.State != nil && w.State.Waiting != nil {
			if out.VendorNow, err = vendorNow(ctx, led, w.State.Waiting.Vendor); err != nil {
				return ShowResult{}, err
			}
		}
	}
	return out, nil
}

// ApprovalCommands approve and reject an episode at its approval gate, as
// complete commands.
func ApprovalCommands(pipelineName, episodeID string) []string {
	return []string{
		allot.ApproveCommand(pipelineName, episodeID),
		allot.RejectCommand(pipelineName, episodeID, "rejected at the approval step"),
	}
}

// EpisodeWorkflow is what Temporal says of an episode's workflow: its
// status, its state while it runs, and what it waits for; nil when it has
// none.
func EpisodeWorkflow(ctx context.Context, c client.Client, pipelineName, episodeID string) (*WorkflowStatus, error) {
	id := allot.EpisodeWorkflowID(pipelineName, episodeID)
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe workflow %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	ws := &WorkflowStatus{WorkflowID: id, RunID: info.GetExecution().GetRunId(), Status: info.GetStatus().String()}
	if wt := desc.GetPendingWorkflowTask(); wt != nil && wt.GetState() == enumspb.PENDING_WORKFLOW_TASK_STATE_SCHEDULED {
		queue := desc.GetExecutionConfig().GetTaskQueue().GetName()
		if polled, err := HasWorkflowPollers(ctx, c, queue); err == nil && !polled {
			ws.NoWorker = &NoWorker{TaskQueue: queue}
		}
	}
	for _, pa := range desc.GetPendingActivities() {
		p := PendingActivity{
			ActivityType: pa.GetActivityType().GetName(),
			State:        strings.ToLower(strings.TrimPrefix(pa.GetState().String(), "PENDING_ACTIVITY_STATE_")),
			Attempt:      pa.GetAttempt(),
		}
		if f := pa.GetLastFailure(); f != nil {
			p.LastFailure = f.GetMessage()
			p.LastFailureType = f.GetApplicationFailureInfo().GetType()
		}
		if t := pa.GetLastStartedTime(); t != nil {
			p.LastStarted = t.AsTime()
		}
		if t := pa.GetScheduledTime(); t != nil && pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED {
			p.NextAttempt = t.AsTime()
		}
		ws.PendingActivities = append(ws.PendingActivities, p)
	}
	if v, err := c.QueryWorkflow(ctx, id, ws.RunID, workflows.StateQuery); err == nil {
		var st workflows.EpisodeState
		if v.Get(&st) == nil {
			ws.State = &st
		}
	}
	return ws, nil
}

// NoWorker says that no worker polls the task queue a workflow waits on:
// it waits, in silence, until one does.
type NoWorker struct {
	TaskQueue string `json:"task_queue"`
	Namespace string `json:"namespace,omitempty"`
}

// HasWorkflowPollers reports whether a worker has polled taskQueue for
// workflow tasks lately (Temporal remembers pollers for a few minutes).
func HasWorkflowPollers(ctx context.Context, c client.Client, taskQueue string) (bool, error) {
	resp, err := c.DescribeTaskQueue(ctx, taskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return false, fmt.Errorf("describe task queue %q: %w", taskQueue, err)
	}
	return len(resp.GetPollers()) > 0, nil
}
