package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
)

// TestReplaySavedHistories replays histories recorded by earlier versions of
// the workflows (testdata/v*/, saved by app's TestSaveHistories). A change
// that would break a running workflow fails here until it is put behind
// workflow.GetVersion.
func TestReplaySavedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "v*", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no saved histories under testdata/")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(ScheduledRun)
			r.RegisterWorkflow(Episode)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatal(err)
			}
		})
	}
}
