package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/allottest"
	"allot/internal/operator"
	"allot/pipeline"
	"allot/workflows"
)

// readmeCommands returns the `temporal ...` commands of docs/operating.md, each as its
// flags (flag -> values), keyed by the subcommand ("workflow start", ...).
func readmeCommands(t *testing.T) map[string]map[string][]string {
	t.Helper()
	data, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	out := map[string]map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "temporal ") {
			continue
		}
		words := allottest.SplitCommand(t, line)
		var sub []string
		i := 1
		for ; i < len(words) && !strings.HasPrefix(words[i], "--"); i++ {
			sub = append(sub, words[i])
		}
		flags := map[string][]string{}
		for ; i < len(words); i++ {
			name := strings.TrimPrefix(words[i], "--")
			if i+1 < len(words) && !strings.HasPrefix(words[i+1], "--") {
				flags[name] = append(flags[name], words[i+1])
				i++
			} else {
				flags[name] = append(flags[name], "true")
			}
		}
		out[strings.Join(sub, " ")] = flags
	}
	return out
}

func one(t *testing.T, flags map[string][]string, name string) string {
	t.Helper()
	if len(flags[name]) != 1 {
		t.Fatalf("docs command: --%s given %d times", name, len(flags[name]))
	}
	return flags[name][0]
}

// searchAttributes turns --search-attribute 'K="v"' flags into typed ones.
func searchAttributes(t *testing.T, flags map[string][]string) temporal.SearchAttributes {
	t.Helper()
	var updates []temporal.SearchAttributeUpdate
	for _, kv := range flags["search-attribute"] {
		k, v, ok := strings.Cut(kv, "=")
		var s string
		if !ok || json.Unmarshal([]byte(v), &s) != nil || k != workflows.PipelineAttr.GetName() {
			t.Fatalf("docs search attribute %q", kv)
		}
		updates = append(updates, workflows.PipelineAttr.ValueSet(s))
	}
	return temporal.NewSearchAttributes(updates...)
}

var cliConflict = map[string]enumspb.WorkflowIdConflictPolicy{
	"Fail": enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL, "UseExisting": enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	"TerminateExisting": enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING,
}
var cliReuse = map[string]enumspb.WorkflowIdReusePolicy{
	"AllowDuplicate": enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, "AllowDuplicateFailedOnly": enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
	"RejectDuplicate": enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
}
var cliOverlap = map[string]enumspb.ScheduleOverlapPolicy{
	"Skip": enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, "BufferOne": enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
	"BufferAll": enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL, "AllowAll": enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
}

// TestTemporalCLICommandsInDocsMatchStarter sends the `temporal`
// commands as the same requests through the SDK client, and checks they do
// what the starter does.
func TestTemporalCLICommandsInDocsMatchStarter(t *testing.T) {
	cmds := readmeCommands(t)
	c := allottest.NewClusterWithPipelines(t, pipeline.DefaultConfig)
	ctx := c.Ctx()

	// temporal operator search-attribute create: exactly allot's attributes.
	sa := cmds["operator search-attribute create"]
	if len(sa["name"]) != len(sa["type"]) {
		t.Fatalf("search-attribute create: %d names, %d types", len(sa["name"]), len(sa["type"]))
	}
	want := workflows.SearchAttributeTypes()
	cliType := map[string]enumspb.IndexedValueType{"Keyword": enumspb.INDEXED_VALUE_TYPE_KEYWORD, "Int": enumspb.INDEXED_VALUE_TYPE_INT}
	for i, name := range sa["name"] {
		if want[name] != cliType[sa["type"][i]] {
			t.Fatalf("docs/operating.md registers %s as %s; allot needs %s", name, sa["type"][i], want[name])
		}
		delete(want, name)
	}
	if len(want) != 0 {
		t.Fatalf("docs/operating.md does not register %v", want)
	}

	// temporal workflow start: the same options as `starter run`.
	ws := cmds["workflow start"]
	var input workflows.ScheduledRunInput
	if err := json.Unmarshal([]byte(one(t, ws, "input")), &input); err != nil {
		t.Fatal(err)
	}
	opts := client.StartWorkflowOptions{
		ID:                                       one(t, ws, "workflow-id"),
		TaskQueue:                                one(t, ws, "task-queue"),
		WorkflowIDConflictPolicy:                 cliConflict[one(t, ws, "id-conflict-policy")],
		WorkflowIDReusePolicy:                    cliReuse[one(t, ws, "id-reuse-policy")],
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    searchAttributes(t, ws),
	}
	starterOpts := workflows.ScheduledRunStartOptions(operator.RunReusePolicy, workflows.ScheduledRunStart{Pipeline: input.Pipeline, Run: allot.RunKey{Key: allot.AllocationKey(input.Pipeline, input.NominalTime), Nominal: input.NominalTime}, TaskQueue: workflows.TaskQueue})
	if opts.ID != starterOpts.ID || opts.TaskQueue != starterOpts.TaskQueue || opts.WorkflowIDConflictPolicy != starterOpts.WorkflowIDConflictPolicy || opts.WorkflowIDReusePolicy != starterOpts.WorkflowIDReusePolicy {
		t.Fatalf("docs start options %+v differ from starter's %+v", opts, starterOpts)
	}
	run, err := c.Client.ExecuteWorkflow(ctx, opts, one(t, ws, "type"), json.RawMessage(one(t, ws, "input")))
	if err != nil {
		t.Fatal(err)
	}
	var viaCLI workflows.ScheduledRunResult
	if err := run.Get(ctx, &viaCLI); err != nil {
		t.Fatal(err)
	}
	viaStarter, err := c.Runs.Run(ctx, operator.RunInput{Pipeline: input.Pipeline, NominalTime: input.NominalTime})
	if err != nil {
		t.Fatal(err)
	}
	if viaStarter.Action != operator.RunExisting || viaStarter.RunID != run.GetRunID() || *viaStarter.Result != viaCLI {
		t.Fatalf("CLI start %+v, then starter run %+v / %+v: want the same run reported", viaCLI, viaStarter, viaStarter.Result)
	}

	// temporal workflow update execute: the same update as `starter episode approve`.
	up := cmds["workflow update execute"]
	if one(t, up, "workflow-id") != allot.EpisodeWorkflowID(viaCLI.Pipeline, viaCLI.EpisodeID) {
		t.Fatalf("docs update targets %s, the run's episode is %s", one(t, up, "workflow-id"), viaCLI.EpisodeID)
	}
	c.WaitStage(viaCLI.Pipeline, viaCLI.EpisodeID, allot.StageWaitingApproval)
	var req workflows.DecisionRequest
	if err := json.Unmarshal([]byte(one(t, up, "input")), &req); err != nil {
		t.Fatal(err)
	}
	handle, err := c.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: one(t, up, "workflow-id"), UpdateName: one(t, up, "name"),
		Args: []any{json.RawMessage(one(t, up, "input"))}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		t.Fatal(err)
	}
	var afterApprove workflows.EpisodeState
	if err := handle.Get(ctx, &afterApprove); err != nil {
		t.Fatal(err)
	}
	final := c.WaitEpisode(viaCLI.Pipeline, viaCLI.EpisodeID)
	if final.Stage != allot.StageCompleted {
		t.Fatalf("after the CLI approve: %+v", final)
	}
	decisions, err := c.Ledger.Decisions(ctx, viaCLI.Pipeline, viaCLI.EpisodeID)
	if err != nil || len(decisions) != 1 || decisions[0].Reason != req.Reason {
		t.Fatalf("decisions after the CLI approve: %+v, %v", decisions, err)
	}

	// temporal schedule create: the schedule `starter schedule create` makes.
	sc := cmds["schedule create"]
	if one(t, sc, "schedule-id") != allot.ScheduleID("weekly-video") || one(t, sc, "workflow-id") != allot.ScheduleActionID("weekly-video") {
		t.Fatalf("docs schedule IDs %v", sc)
	}
	catchup, err := time.ParseDuration(one(t, sc, "catchup-window"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Client.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:   one(t, sc, "schedule-id"),
		Spec: client.ScheduleSpec{CronExpressions: []string{one(t, sc, "cron")}, TimeZoneName: one(t, sc, "time-zone")},
		Action: &client.ScheduleWorkflowAction{
			ID: one(t, sc, "workflow-id"), Workflow: one(t, sc, "type"), TaskQueue: one(t, sc, "task-queue"),
			Args: []any{json.RawMessage(one(t, sc, "input"))}, TypedSearchAttributes: searchAttributes(t, sc),
		},
		Overlap:       cliOverlap[one(t, sc, "overlap-policy")],
		CatchupWindow: catchup,
	})
	if err != nil {
		t.Fatal(err)
	}
	schedDocs := describeSchedule(t, c, "weekly-video")
	if err := c.Schedules().Delete(ctx, "weekly-video"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Schedules().Create(ctx, operator.ScheduleInput{Pipeline: "weekly-video"}); err != nil {
		t.Fatal(err)
	}
	schedStarter := describeSchedule(t, c, "weekly-video")
	if !reflect.DeepEqual(schedDocs, schedStarter) {
		t.Fatalf("the docs' schedule differs from starter's:\ndocs:    %+v\nstarter: %+v", schedDocs, schedStarter)
	}
	if d, err := c.Schedules().Describe(ctx, "weekly-video"); err != nil || d.Spec.Cron != "0 2 * * 1" {
		t.Fatalf("describe shows cron %q (%v), want the calendar of \"0 2 * * MON\"", d.Spec.Cron, err)
	}

	// temporal schedule backfill: one Monday 02:00 in the range; its run is
	// keyed like `starter run` and a manual run reports it.
	bf := cmds["schedule backfill"]
	start, _ := time.Parse(time.RFC3339, one(t, bf, "start-time"))
	end, _ := time.Parse(time.RFC3339, one(t, bf, "end-time"))
	h := c.Client.ScheduleClient().GetHandle(ctx, one(t, bf, "schedule-id"))
	if err := h.Backfill(ctx, client.ScheduleBackfillOptions{Backfill: []client.ScheduleBackfill{{Start: start, End: end, Overlap: cliOverlap[one(t, bf, "overlap-policy")]}}}); err != nil {
		t.Fatal(err)
	}
	monday := time.Date(2026, 7, 27, 2, 0, 0, 0, time.UTC)
	if monday.Before(start) || !monday.Before(end) {
		t.Fatalf("the docs' backfill range %s..%s should hold %s", start, end, monday)
	}
	key := allot.AllocationKey("weekly-video", monday)
	var backfilled workflows.ScheduledRunResult
	deadline := allottest.Deadline(t, 30*time.Second)
	for {
		if err := c.Client.GetWorkflow(ctx, key, "").Get(ctx, &backfilled); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backfill never ran %s", key)
		}
		time.Sleep(200 * time.Millisecond)
	}
	manual, err := c.Runs.Run(ctx, operator.RunInput{Pipeline: "weekly-video", NominalTime: monday})
	if err != nil {
		t.Fatal(err)
	}
	if manual.Action != operator.RunExisting || manual.Result.EpisodeID != backfilled.EpisodeID || backfilled.Period != "2026-W31" {
		t.Fatalf("backfilled %+v, manual %+v", backfilled, manual.Result)
	}
	_ = h.Delete(ctx)
}

// scheduleShape is what matters of a schedule: when, what, and how.
type scheduleShape struct {
	Calendars     []client.ScheduleCalendarSpec
	Cron          []string
	TimeZone      string
	Jitter        time.Duration
	ActionID      string
	Workflow      any
	TaskQueue     string
	Overlap       enumspb.ScheduleOverlapPolicy
	CatchupWindow time.Duration
	Args          string
}

func describeSchedule(t *testing.T, c *allottest.Cluster, pipelineName string) scheduleShape {
	t.Helper()
	d, err := c.Client.ScheduleClient().GetHandle(context.Background(), allot.ScheduleID(pipelineName)).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction)
	if !ok {
		t.Fatalf("schedule action %T", d.Schedule.Action)
	}
	var args []string
	for _, p := range a.Args {
		args = append(args, fmt.Sprint(p))
	}
	return scheduleShape{
		Calendars: d.Schedule.Spec.Calendars, Cron: d.Schedule.Spec.CronExpressions, TimeZone: d.Schedule.Spec.TimeZoneName,
		Jitter: d.Schedule.Spec.Jitter, ActionID: a.ID, Workflow: a.Workflow, TaskQueue: a.TaskQueue,
		Overlap: d.Schedule.Policy.Overlap, CatchupWindow: d.Schedule.Policy.CatchupWindow, Args: strings.Join(args, ","),
	}
}
