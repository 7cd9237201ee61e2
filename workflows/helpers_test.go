package workflows

import "go.temporal.io/sdk/client"

func startOptions(id string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id, TaskQueue: TaskQueue}
}
