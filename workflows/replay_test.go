package workflows

import (
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"allot"
)

// TestReplaySavedHistories replays histories recorded by earlier versions of
// the workflows (testdata/v*/, saved by the integration tests'
// TestSaveHistories). A change that would break a running workflow fails
// here until it is put behind workflow.GetVersion.
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
			history := loadHistory(t, f)
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(ScheduledRun)
			r.RegisterWorkflow(Episode)
			r.RegisterWorkflow(BatchCollector)
			// The saved JSON holds the events only; the workflows check
			// their own workflow ID, so replay under the one they had.
			if err := r.ReplayWorkflowHistoryWithOptions(nil, history, worker.ReplayWorkflowHistoryOptions{
				OriginalExecution: workflow.Execution{ID: originalWorkflowID(t, history), RunID: "replay"},
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func loadHistory(t *testing.T, file string) *historypb.History {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var h historypb.History
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}
	return &h
}

// originalWorkflowID derives the workflow ID a saved history ran under from
// its start event, the way the callers form it.
func originalWorkflowID(t *testing.T, h *historypb.History) string {
	t.Helper()
	start := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	dc := converter.GetDefaultDataConverter()
	switch start.GetWorkflowType().GetName() {
	case EpisodeWorkflow:
		var in EpisodeInput
		if err := dc.FromPayload(start.GetInput().GetPayloads()[0], &in); err != nil {
			t.Fatal(err)
		}
		return allot.EpisodeWorkflowID(in.Pipeline, in.EpisodeID)
	case ScheduledRunWorkflow:
		var in ScheduledRunInput
		if err := dc.FromPayload(start.GetInput().GetPayloads()[0], &in); err != nil {
			t.Fatal(err)
		}
		return allot.AllocationKey(in.Pipeline, in.NominalTime)
	case BatchCollectorWorkflow:
		var in BatchCollectorInput
		if err := dc.FromPayload(start.GetInput().GetPayloads()[0], &in); err != nil {
			t.Fatal(err)
		}
		return allot.BatchCollectorID(in.Vendor, in.Kind)
	}
	t.Fatalf("saved history of unknown workflow type %q", start.GetWorkflowType().GetName())
	return ""
}
