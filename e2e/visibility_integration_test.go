package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/pipelinetest"
	"allot/internal/report"
	"allot/paidvendor"
	"allot/workflows"
)

// stuckPipelines: a paid pipeline that reports a step retrying for more
// than 2 s as stalled, and a free one with nothing to report.
const stuckPipelines = `
[[pipeline]]
name = "stuck-paid"
auto_approve = true
stall_after = "2s"
  [[pipeline.step]]
  name = "video"
  kind = "paid"

[[pipeline]]
name = "weekly-video"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`

// starterCmd runs the real starter binary against the cluster and returns
// its exit code and output.
func starterCmd(t *testing.T, bin string, c *allottest.Cluster, pipelinesFile string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanenv.Environ(
		"TEMPORAL_ADDRESS="+c.Server.GetFrontendHostPort(),
		"TEMPORAL_NAMESPACE="+c.Namespace,
		"ALLOT_LEDGER="+c.LedgerURL,
		"ALLOT_PIPELINES="+pipelinesFile,
	)
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("starter %v: %v", args, err)
	}
	return 0, string(out)
}

// writeFile writes a pipeline file to a directory of its own.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	return pipelinetest.Write(t, t.TempDir(), content)
}

// An unreachable vendor (connection refused) is visible where the operator
// looks: `episode show` (the pending activity's attempts and last failure,
// and the workflow's retrying step), `stats` and the metrics (stalled past
// the pipeline's stall_after), with the real pipeline names as labels.
func TestUnreachableVendorShowsAsRetryingThenStalled(t *testing.T) {
	c := allottest.NewClusterWithPipelines(t, []byte(stuckPipelines))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	c.Activities.NewVendor = paidvendor.HTTPClientFactory(dead)
	ctx := c.Ctx()
	c.Allocate("weekly-video", monday())
	ep := c.Allocate("stuck-paid", monday())

	// While Temporal retries the activity, the pending activity shows the
	// attempts and the last failure.
	var pending report.PendingActivity
	deadline := allottest.Deadline(t, 60*time.Second)
	for pending.Attempt < 2 || !strings.Contains(pending.LastFailure, "connection refused") {
		if time.Now().After(deadline) {
			t.Fatalf("episode show never showed a failing pending activity; last %+v", pending)
		}
		time.Sleep(100 * time.Millisecond)
		show, err := report.Show(ctx, c.Ledger, c.Client, "stuck-paid", ep)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range show.Workflow.PendingActivities {
			if p.Attempt > pending.Attempt {
				pending = p
			}
		}
	}
	if pending.ActivityType == "" || pending.State == "" {
		t.Fatalf("pending activity %+v", pending)
	}

	// Then the workflow reports the step as retrying, in its state, the
	// ledger and the status column.
	st := c.WaitStage("stuck-paid", ep, allot.StageRetrying)
	if r := st.Retrying; r == nil || r.Step != "video" || r.Attempts < 4 || !strings.Contains(r.Error, "connection refused") || r.Since.IsZero() {
		t.Fatalf("retrying %+v", st.Retrying)
	}
	// The ledger hears of it right after the state query does.
	deadline = allottest.Deadline(t, 30*time.Second)
	for {
		show, err := report.Show(ctx, c.Ledger, c.Client, "stuck-paid", ep)
		if err != nil {
			t.Fatal(err)
		}
		if show.Episode.Status == string(allot.OutcomeRetrying) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("show: status %q, want retrying", show.Episode.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Retrying for more than stall_after (2 s): stalled in stats.
	stats, err := report.Stats(ctx, c.Ledger, report.StatsInput{Pipeline: "stuck-paid", Pipelines: c.Pipelines})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats.Stalled) != 1 || stats.Stalled[0].EpisodeID != ep || stats.StallAfter != "2s" {
		t.Fatalf("stats: stalled %+v after %s, want %s", stats.Stalled, stats.StallAfter, ep)
	}
	stalledCounted := false
	for _, e := range stats.Episodes {
		stalledCounted = stalledCounted || e.Outcome == allot.OutcomeStalled && e.Count == 1
	}
	if !stalledCounted {
		t.Fatalf("stats episodes %+v, want the episode counted as stalled", stats.Episodes)
	}

	// The metrics: the gauge per pipeline, 0 where there is none, real names.
	want := []string{
		`allot_episodes_stalled{pipeline="stuck-paid"} 1`,
		`allot_episodes_stalled{pipeline="weekly-video"} 0`,
		`allot_episodes_needing_attention{pipeline="stuck-paid"} 0`,
		`allot_episodes_needing_attention{pipeline="weekly-video"} 0`,
		`pipeline="weekly-video"`, // a counter's label, no longer weekly_video
	}
	deadline = allottest.Deadline(t, 30*time.Second)
	for {
		body := scrapeMetrics(t, c)
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" && !strings.Contains(body, "weekly_video") && !strings.Contains(body, "stuck_paid") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %q (or show sanitized names):\n%s", missing, grepAllot(body))
		}
		time.Sleep(300 * time.Millisecond)
	}

	// `starter episode show` and `starter stats` print it for people.
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := writeFile(t, stuckPipelines)
	code, out := starterCmd(t, bin, c, pipelinesFile, "episode", "show", "--pipeline", "stuck-paid", "--episode", ep)
	if code != 0 || !strings.Contains(out, "status") || !strings.Contains(out, "retrying") ||
		!strings.Contains(out, "connection refused") || !strings.Contains(out, "attempts since") {
		t.Fatalf("starter episode show: exit %d\n%s", code, out)
	}
	code, out = starterCmd(t, bin, c, pipelinesFile, "stats", "--pipeline", "stuck-paid")
	if code != 0 || !strings.Contains(out, "STALLED (1)") || !strings.Contains(out, ep) {
		t.Fatalf("starter stats: exit %d\n%s", code, out)
	}
}

func scrapeMetrics(t *testing.T, c *allottest.Cluster) string {
	t.Helper()
	resp, err := http.Get(c.MetricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// `starter runs` lists a pipeline's ScheduledRun and Episode executions
// through visibility, page by page: 1,500 executions came back incomplete
// or timed out in one page of 1000 on the embedded server. Here 300
// executions in pages of 100: every page token is followed, nothing twice.
func TestRunsListsEveryExecutionPageByPage(t *testing.T) {
	c := allottest.NewCluster(t)
	ctx, cancel := allottest.Context(t, 5*time.Minute)
	defer cancel()
	ep := c.Allocate("weekly-video", monday())
	c.WaitEpisode("weekly-video", ep)

	// ScheduledRuns of the pipeline on a queue nobody polls: they stay
	// running and cost nothing.
	const n = 300
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ids := make(chan int, n)
	for i := range n {
		ids <- i
	}
	close(ids)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				_, err := c.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
					ID: fmt.Sprintf("weekly-video/list-%04d", i), TaskQueue: "nobody-polls",
					TypedSearchAttributes: temporal.NewSearchAttributes(workflows.PipelineAttr.ValueSet("weekly-video")),
				}, workflows.ScheduledRunWorkflow, workflows.ScheduledRunInput{Pipeline: "weekly-video"})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var res report.RunsResult
	deadline := allottest.Deadline(t, 2*time.Minute)
	for {
		var err error
		res, err = report.ListRuns(ctx, c.Client, report.RunsInput{Pipeline: "weekly-video", PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Executions) >= n+2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	seen := map[string]bool{}
	types := map[string]int{}
	for _, e := range res.Executions {
		if seen[e.WorkflowID+"/"+e.RunID] {
			t.Fatalf("execution %s listed twice", e.WorkflowID)
		}
		seen[e.WorkflowID+"/"+e.RunID] = true
		types[e.Type]++
	}
	if len(res.Executions) != n+2 || types[workflows.ScheduledRunWorkflow] != n+1 || types[workflows.EpisodeWorkflow] != 1 {
		t.Fatalf("listed %d executions (%v), want %d ScheduledRuns and 1 Episode", len(res.Executions), types, n+1)
	}

	// Filtered by status, through the real starter with --json.
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := allottest.WritePipelines(t, t.TempDir())
	code, out := starterCmd(t, bin, c, pipelinesFile, "runs", "--pipeline", "weekly-video", "--status", "completed", "--json")
	var done report.RunsResult
	if code != 0 || json.Unmarshal([]byte(out), &done) != nil {
		t.Fatalf("starter runs --status completed: exit %d\n%s", code, out)
	}
	if len(done.Executions) != 2 || !strings.Contains(done.Query, `ExecutionStatus = "Completed"`) {
		t.Fatalf("completed executions %+v (query %s), want the ScheduledRun and its Episode", done.Executions, done.Query)
	}
	for _, e := range done.Executions {
		if e.Type == workflows.EpisodeWorkflow && (e.Episode != ep || e.Outcome != string(allot.OutcomeCompleted)) {
			t.Fatalf("episode execution %+v, want episode %s completed", e, ep)
		}
	}
	code, out = starterCmd(t, bin, c, pipelinesFile, "runs", "--pipeline", "weekly-video", "--json", "--since", monday().Add(-time.Hour).Format(time.RFC3339))
	var all report.RunsResult
	if code != 0 || json.Unmarshal([]byte(out), &all) != nil || len(all.Executions) != n+2 {
		t.Fatalf("starter runs: exit %d, %d executions\n%.500s", code, len(all.Executions), out)
	}
}
