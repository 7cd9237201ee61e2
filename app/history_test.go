package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"allot"
	"allot/internal/allottest"
	"allot/operator"
	"allot/paidvendor/paidvendortest"
	"allot/workflows"
)

// TestSaveHistories writes the histories of one run of each workflow to
// ALLOT_SAVE_HISTORIES (a directory) for the replay tests in workflows/.
// Run it when a workflow changes shape on purpose, before the change:
//
//	ALLOT_SAVE_HISTORIES=$PWD/workflows/testdata/vN go test ./app -run TestSaveHistories
func TestSaveHistories(t *testing.T) {
	dir := os.Getenv("ALLOT_SAVE_HISTORIES")
	if dir == "" {
		t.Skip("set ALLOT_SAVE_HISTORIES to a directory to save workflow histories")
	}
	c := allottest.NewCluster(t)
	res, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitEpisode("weekly-video", res.Result.EpisodeID)
	save := func(name, id string) {
		var events []*historypb.HistoryEvent
		iter := c.Client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, ev)
		}
		data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	save("scheduled_run.json", res.WorkflowID)
	save("episode.json", workflows.EpisodeWorkflowID("weekly-video", res.Result.EpisodeID))

	// A paid episode that parks on an unknown outcome, is resolved, waits at
	// the approval gate and is approved: every path of the Episode workflow.
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}); err != nil {
		t.Fatal(err)
	}
	ep := c.Allocate("weekly-paid", monday())
	c.WaitStage("weekly-paid", ep, allot.StageNeedsAttention)
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send("weekly-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "video", Resolve: allot.ActionAdopt, RemoteRef: c.Vendor.Sim.Charges()[0].TaskID}); err != nil {
		t.Fatal(err)
	}
	c.WaitStage("weekly-paid", ep, allot.StageWaitingApproval)
	if _, err := c.Send("weekly-paid", ep, workflows.ApproveUpdate, workflows.DecisionRequest{Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	c.WaitEpisode("weekly-paid", ep)
	save("paid_episode.json", workflows.EpisodeWorkflowID("weekly-paid", ep))
}
