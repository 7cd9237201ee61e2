package workflows

import (
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"allot"
)

func startOptions(id string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id, TaskQueue: TaskQueue}
}

// executeEpisode runs the Episode workflow under its own workflow ID, as
// every real start does.
func executeEpisode(env *testsuite.TestWorkflowEnvironment, in EpisodeInput) {
	env.SetStartWorkflowOptions(startOptions(allot.EpisodeWorkflowID(in.Pipeline, in.EpisodeID)))
	env.ExecuteWorkflow(Episode, in)
}
