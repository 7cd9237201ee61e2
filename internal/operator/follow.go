package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/report"
	"allot/workflows"
)

// DefaultNoWorkerAfter is how long a wait for a run goes on before it
// checks whether any worker polls the task queue the run waits on.
const DefaultNoWorkerAfter = 10 * time.Second

// watchForWorker calls r.OnNoWorker once, from another goroutine, if the
// wait it guards is still going after r.NoWorkerAfter and no worker polls
// the task queue; it looks again every NoWorkerAfter until it has called
// it or stop is called. Without OnNoWorker it does nothing.
func (r *Runs) watchForWorker(ctx context.Context) (stop func()) {
	if r.OnNoWorker == nil {
		return func() {}
	}
	every := r.NoWorkerAfter
	if every <= 0 {
		every = DefaultNoWorkerAfter
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if polled, err := report.HasWorkflowPollers(ctx, r.Client, r.TaskQueue); err == nil && !polled && ctx.Err() == nil {
				r.OnNoWorker(report.NoWorker{TaskQueue: r.TaskQueue, Namespace: r.Namespace})
				return
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// FollowEpisode is the package's FollowEpisode on the runs' client,
// saying (OnNoWorker) when it waits on a task queue no worker polls.
func (r *Runs) FollowEpisode(ctx context.Context, pipelineName, episodeID string) (workflows.EpisodeState, error) {
	defer r.watchForWorker(ctx)()
	return FollowEpisode(ctx, r.Client, pipelineName, episodeID, 0)
}

// FollowEpisode waits until an episode's workflow stops needing nothing
// but time: it finished (completed, rejected, failed), or it waits for an
// operator (an approval, or a parked step). It returns the state it ended
// at. A script that starts a run and must know when its work is done (a
// crontab line moved to allot) follows the episode; an approval can take
// days, so the wait ends there instead of with the workflow.
func FollowEpisode(ctx context.Context, c client.Client, pipelineName, episodeID string, poll time.Duration) (workflows.EpisodeState, error) {
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	id := allot.EpisodeWorkflowID(pipelineName, episodeID)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		ws, err := report.EpisodeWorkflow(ctx, c, pipelineName, episodeID)
		switch {
		case err != nil:
			return workflows.EpisodeState{}, err
		case ws == nil:
			// The ScheduledRun starts the Episode right after allocating;
			// until then there is nothing to describe.
		case ws.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING.String():
			var st workflows.EpisodeState
			if err := c.GetWorkflow(ctx, id, ws.RunID).Get(ctx, &st); err != nil {
				return workflows.EpisodeState{}, fmt.Errorf("episode workflow %s ended %s: %w", id, ws.Status, err)
			}
			return st, nil
		case ws.State != nil && waitsForOperator(ws.State.Stage):
			return *ws.State, nil
		}
		select {
		case <-ctx.Done():
			return workflows.EpisodeState{}, fmt.Errorf("follow episode %s: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

func waitsForOperator(s allot.Stage) bool {
	return s == allot.StageWaitingApproval || s == allot.StageNeedsAttention
}
