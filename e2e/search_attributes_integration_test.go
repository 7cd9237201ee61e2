package e2e

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"allot"
	"allot/internal/allottest"
	"allot/internal/operator"
	"allot/workflows"
)

// A run and its episode end with every allot search attribute the Web UI
// filters on, and each workflow upserts them once: the start gives what it
// knows (the run its pipeline; the episode all but its final outcome), and
// the lean workflows (docs/design.md, "What a run costs") upsert only what
// changes. Every upsert is a visibility write of the server, several per
// backfilled run before this (issue 18).
func TestRunAndEpisodeUpsertOnlyWhatChanges(t *testing.T) {
	c := allottest.NewCluster(t)
	res, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: monday(), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Result
	episodeWF := allot.EpisodeWorkflowID("weekly-video", r.EpisodeID)
	c.WaitEpisode("weekly-video", r.EpisodeID)

	for _, tc := range []struct {
		workflowID string
		outcome    allot.Outcome
	}{
		{res.WorkflowID, allot.OutcomeAllocated},
		{episodeWF, allot.OutcomeCompleted},
	} {
		got := describedAttributes(t, c, tc.workflowID)
		want := map[string]any{
			workflows.PipelineAttr.GetName(): "weekly-video",
			workflows.EpisodeAttr.GetName():  r.EpisodeID,
			workflows.PeriodAttr.GetName():   r.Period,
			workflows.SequenceAttr.GetName(): int64(r.Sequence),
			workflows.OutcomeAttr.GetName():  string(tc.outcome),
		}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s: search attribute %s = %v, want %v", tc.workflowID, name, got[name], w)
			}
		}
		if n := allotUpserts(t, c, tc.workflowID); n != 1 {
			t.Errorf("%s: %d upserts of allot's search attributes, want 1 (the outcome's)", tc.workflowID, n)
		}
	}
}

// describedAttributes decodes a workflow's search attributes as the server
// holds them (keywords as strings, integers as int64).
func describedAttributes(t *testing.T, c *allottest.Cluster, id string) map[string]any {
	t.Helper()
	d, err := c.Client.WorkflowService().DescribeWorkflowExecution(c.Ctx(), &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: c.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: id}})
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	out := map[string]any{}
	for name, p := range d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields() {
		var v any
		if name == workflows.SequenceAttr.GetName() {
			var n int64
			v = &n
		} else {
			var s string
			v = &s
		}
		if err := converter.GetDefaultDataConverter().FromPayload(p, v); err != nil {
			continue // the server's own attributes of other types
		}
		switch x := v.(type) {
		case *int64:
			out[name] = *x
		case *string:
			out[name] = *x
		}
	}
	return out
}

// allotUpserts counts the upsert events of a workflow's history that set
// one of allot's search attributes (the SDK's TemporalChangeVersion upserts
// of workflow.GetVersion are not allot's).
func allotUpserts(t *testing.T, c *allottest.Cluster, id string) int {
	t.Helper()
	allots := workflows.SearchAttributeTypes()
	n := 0
	it := c.Client.GetWorkflowHistory(c.Ctx(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		for name := range e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields() {
			if _, ok := allots[name]; ok {
				n++
				break
			}
		}
	}
	return n
}
