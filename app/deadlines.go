package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/deadline"
	"allot/internal/ledger"
	"allot/pipeline"
	"allot/workflows"
)

// deadlineDeclarer is the worker's start of the deadlines (deadline.Declarer,
// docs/design.md, "Period deadlines"), with its two calls to Temporal: one
// watch per pipeline, however many workers start, since SignalWithStart
// starts it only when none runs under allot.DeadlineWatchID.
func deadlineDeclarer(c client.Client, led *ledger.Ledger, set *pipeline.Set, taskQueue string, logger *slog.Logger) *deadline.Declarer {
	return &deadline.Declarer{
		Ledger: led, Pipelines: set, TaskQueue: taskQueue, Logger: logger,
		Watch: func(ctx context.Context, name string) error {
			id := allot.DeadlineWatchID(name)
			_, err := c.SignalWithStartWorkflow(ctx, id, workflows.DeadlineReplanSignal, nil, client.StartWorkflowOptions{
				ID:                    id,
				TaskQueue:             taskQueue,
				StaticSummary:         name + " deadline watch",
				TypedSearchAttributes: temporal.NewSearchAttributes(workflows.PipelineAttr.ValueSet(name)),
			}, workflows.DeadlineWatch, workflows.DeadlineWatchInput{Pipeline: name, LedgerID: led.ID()})
			if err != nil {
				return fmt.Errorf("start or signal workflow %s: %w", id, err)
			}
			return nil
		},
		Unwatch: func(ctx context.Context, name string) error {
			err := c.SignalWorkflow(ctx, allot.DeadlineWatchID(name), "", workflows.DeadlineReplanSignal, nil)
			var notFound *serviceerror.NotFound
			if errors.As(err, &notFound) {
				return nil
			}
			return err
		},
	}
}

// deadlineQueryTimeout bounds the ask of an episode's state: a workflow
// whose worker is slow to answer leaves the cause to the ledger's outcome
// rather than holding the judgement.
const deadlineQueryTimeout = 10 * time.Second

// DeadlineSources are the deadline watcher's questions to Temporal
// through c. Errors that describe Temporal's trouble are returned, and the
// judging activity retries them. (The worker may not link internal/report,
// whose episode reader the reports use: this is the part a judgement
// needs.)
func DeadlineSources(c client.Client, set *pipeline.Set) deadline.Sources {
	return deadline.Sources{
		Schedule: func(ctx context.Context, pipelineName string) (deadline.Schedule, error) {
			desc, err := c.ScheduleClient().GetHandle(ctx, allot.ScheduleID(pipelineName)).Describe(ctx)
			var notFound *serviceerror.NotFound
			switch {
			case errors.As(err, &notFound):
				return deadline.Schedule{}, nil
			case err != nil:
				return deadline.Schedule{}, fmt.Errorf("describe schedule %s: %w", allot.ScheduleID(pipelineName), err)
			}
			s := deadline.Schedule{Exists: true}
			if st := desc.Schedule.State; st != nil {
				s.Paused, s.Note = st.Paused, st.Note
			}
			return s, nil
		},
		Unpicked: func(ctx context.Context, pipelineName, period string) ([]deadline.UnpickedRun, error) {
			p, err := set.Get(pipelineName)
			if err != nil {
				return nil, err
			}
			desc, err := c.ScheduleClient().GetHandle(ctx, allot.ScheduleID(pipelineName)).Describe(ctx)
			var notFound *serviceerror.NotFound
			switch {
			case errors.As(err, &notFound):
				return nil, nil
			case err != nil:
				return nil, fmt.Errorf("describe schedule %s: %w", allot.ScheduleID(pipelineName), err)
			}
			var out []deadline.UnpickedRun
			for _, a := range desc.Info.RecentActions {
				if a.StartWorkflowResult == nil || p.PeriodOf(a.ScheduleTime) != period {
					continue
				}
				queue, waits, err := waitsForWorker(ctx, c, a.StartWorkflowResult.WorkflowID, a.StartWorkflowResult.FirstExecutionRunID)
				if err != nil {
					return nil, err
				}
				if waits {
					out = append(out, deadline.UnpickedRun{WorkflowID: a.StartWorkflowResult.WorkflowID, TaskQueue: queue})
				}
			}
			return out, nil
		},
		Episode: func(ctx context.Context, pipelineName string, ep deadline.Episode) (deadline.Episode, error) {
			id := allot.EpisodeWorkflowID(pipelineName, ep.ID)
			queue, waits, err := waitsForWorker(ctx, c, id, "")
			if err != nil || waits {
				ep.NoWorker = queue
				return ep, err
			}
			qctx, cancel := context.WithTimeout(ctx, deadlineQueryTimeout)
			defer cancel()
			v, err := c.QueryWorkflow(qctx, id, "", workflows.StateQuery)
			var st workflows.EpisodeState
			if err != nil || v.Get(&st) != nil {
				// Not running, or not answering: the ledger's outcome
				// names the cause.
				return ep, nil
			}
			if at := st.Attention; at != nil {
				ep.Remedies = at.Remedies
				if len(ep.Remedies) == 0 && at.Remedy != "" {
					ep.Remedies = []string{at.Remedy}
				}
			}
			if st.Waiting != nil {
				ep.Vendor = st.Waiting.Vendor
			}
			// At the approval gate the judgement names the approve
			// command itself, the first `episode show` prints.
			return ep, nil
		},
	}
}

// waitsForWorker reports whether a running workflow's next task waits on
// a task queue no worker polls, and which; a workflow that does not exist
// waits for nothing.
func waitsForWorker(ctx context.Context, c client.Client, workflowID, runID string) (queue string, waits bool, err error) {
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("describe workflow %s: %w", workflowID, err)
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return "", false, nil
	}
	wt := desc.GetPendingWorkflowTask()
	if wt == nil || wt.GetState() != enumspb.PENDING_WORKFLOW_TASK_STATE_SCHEDULED {
		return "", false, nil
	}
	queue = desc.GetExecutionConfig().GetTaskQueue().GetName()
	tq, err := c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return "", false, fmt.Errorf("describe task queue %q: %w", queue, err)
	}
	return queue, len(tq.GetPollers()) == 0, nil
}
