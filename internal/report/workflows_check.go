package report

// check --temporal: every episode the ledger holds that is not settled must
// have an Episode workflow of this ledger. One that never started (or was
// deleted) leaves the episode allocated forever; one started by another
// ledger on the same namespace and task queue runs that ledger's episode,
// not this one's. Both are found by describing workflows: read-only.

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/activities"
	"allot/internal/ledger"
)

// Violation kinds found by asking Temporal.
const (
	// KindWorkflowMissing: an unsettled episode without an Episode workflow.
	KindWorkflowMissing = "workflow_missing"
	// KindWorkflowEnded: an unsettled episode whose Episode workflow ended
	// (failed, terminated, timed out) and was not started again.
	KindWorkflowEnded = "workflow_ended"
	// KindWorkflowForeign: the episode's workflow ID runs another ledger's
	// Episode.
	KindWorkflowForeign = "workflow_foreign"
)

// WorkflowCheckInput is what checkWorkflows needs.
type WorkflowCheckInput struct {
	Client   client.Client
	LedgerID string
	// Grace: an episode allocated less than this ago may not have its
	// workflow yet (the ScheduledRun starts it right after allocating).
	Grace time.Duration
	Now   time.Time
}

// CheckWorkflows describes the Episode workflow of every unsettled episode
// of the pipelines and reports the ones missing, ended, or another
// ledger's.
func CheckWorkflows(ctx context.Context, led *ledger.Ledger, pipelines []string, in WorkflowCheckInput) ([]ledger.Violation, error) {
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	var vs []ledger.Violation
	for _, p := range pipelines {
		eps, err := led.ListEpisodes(ctx, p, "")
		if err != nil {
			return nil, err
		}
		for _, ep := range eps {
			if ep.Settled() || in.Now.Sub(ep.CreatedAt) < in.Grace {
				continue
			}
			v, err := checkEpisodeWorkflow(ctx, in, p, ep)
			if err != nil {
				return nil, err
			}
			if v != nil {
				vs = append(vs, *v)
			}
		}
	}
	return vs, nil
}

func checkEpisodeWorkflow(ctx context.Context, in WorkflowCheckInput, p string, ep ledger.Episode) (*ledger.Violation, error) {
	id := allot.EpisodeWorkflowID(p, ep.ID)
	resume := allot.ResumeCommand(p, ep.ID)
	desc, err := in.Client.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return &ledger.Violation{Kind: KindWorkflowMissing, Pipeline: p, Episode: ep.ID,
			Detail: fmt.Sprintf("episode %s is %s but workflow %s does not exist: it never started, or its history was deleted; nothing will move it on", ep.ID, ep.OutcomeOrStatus(), id),
			Fix:    resume}, nil
	case err != nil:
		return nil, fmt.Errorf("describe workflow %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if owner := activities.LedgerOfMemo(info.GetMemo().GetFields()); owner != "" && in.LedgerID != "" && owner != in.LedgerID {
		return &ledger.Violation{Kind: KindWorkflowForeign, Pipeline: p, Episode: ep.ID,
			Detail: fmt.Sprintf("workflow %s belongs to ledger %s, not to this ledger %s: two ledgers share the namespace and task queue, and this episode cannot run", id, owner, in.LedgerID),
			Fix:    "give each ledger its own task queue (ALLOT_TASK_QUEUE) or namespace; then " + resume}, nil
	}
	if st := info.GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED && st != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
		return &ledger.Violation{Kind: KindWorkflowEnded, Pipeline: p, Episode: ep.ID,
			Detail: fmt.Sprintf("episode %s is %s but its workflow %s ended %s", ep.ID, ep.OutcomeOrStatus(), id, st),
			Fix:    resume}, nil
	}
	return nil, nil
}
