package operator

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/workflows"
)

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
	id := workflows.EpisodeWorkflowID(pipelineName, episodeID)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		ws, err := episodeWorkflow(ctx, c, pipelineName, episodeID)
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
