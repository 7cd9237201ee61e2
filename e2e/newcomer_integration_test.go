package e2e

// Issue 15, "the CLI in a newcomer's first hour": what the starter says
// while it waits on a task queue no worker polls, on Ctrl-C, at the
// approval gate and after it, and for a command an ended episode cannot
// take.

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/workflows"
)

// processEnv is what the starter and worker processes of these tests run
// with: the cluster's server, ledger and vendor, the test pipelines.
func processEnv(t *testing.T, c *allottest.Cluster) []string {
	t.Helper()
	return cleanenv.Environ(
		"TEMPORAL_ADDRESS="+c.Server.GetFrontendHostPort(),
		"TEMPORAL_NAMESPACE="+c.Namespace,
		"TEMPORAL_CONFIG_FILE="+filepath.Join(c.Dir, "no-temporal-config.toml"),
		"ALLOT_LEDGER="+c.LedgerURL,
		"ALLOT_PIPELINES="+allottest.WritePipelines(t, t.TempDir()),
		"ALLOT_DATA_DIR="+c.Dir,
		"ALLOT_VENDOR_URL="+c.Vendor.URL,
		"ALLOT_VENDOR_API_KEY="+allottest.VendorKey,
	)
}

// `starter run --follow` on a task queue no worker polls says so, with the
// queue, the namespace and the command that starts a worker for it, instead
// of waiting in silence; Ctrl-C then says the run goes on, prints the
// command that follows it again and exits 130. Both printed commands run as
// printed: the worker picks the run up, and the follow command reports the
// run and its completed episode.
func TestRunWithoutAWorkerSaysSoAndCtrlCLeavesItRunning(t *testing.T) {
	c := allottest.NewCluster(t)
	starterBin := allottest.BuildBinary(t, "allot/starter")
	workerBin := allottest.BuildBinary(t, "allot/worker")
	env := processEnv(t, c)
	const queue = "nobody-polls-this"

	cmd := exec.Command(starterBin, "run", "--pipeline", "weekly-video", "--nominal-time", "2026-08-03T02:00:00Z", "--follow", "--task-queue", queue)
	cmd.Env = env
	run := allottest.StartProcess(t, cmd)
	hint := run.WaitOutput(t, regexp.MustCompile(`no worker polls task queue "`+queue+`" in namespace "`+regexp.QuoteMeta(c.Namespace)+`".*\n  (go run ./worker [^\n]*)\n`), 2*time.Minute)
	run.Signal(t, syscall.SIGINT)
	var exit *exec.ExitError
	if err := run.Wait(t, time.Minute); !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("starter run after Ctrl-C: %v, want exit 130\n%s", err, run.Output.String())
	}
	m := regexp.MustCompile(`stopped watching; the run goes on.*\n  (starter run [^\n]*)\n`).FindStringSubmatch(run.Output.String())
	if m == nil || strings.Contains(run.Output.String(), "context canceled") {
		t.Fatalf("starter run after Ctrl-C printed:\n%s", run.Output.String())
	}

	worker := allottest.SplitCommand(t, hint[1])
	wcmd := exec.Command(workerBin, worker[3:]...) // after "go run ./worker"
	wcmd.Env = env
	allottest.StartProcess(t, wcmd).WaitOutput(t, regexp.MustCompile(`allot worker starting`), time.Minute)

	again := allottest.SplitCommand(t, m[1])
	follow := exec.Command(starterBin, again[1:]...)
	follow.Env = env
	out, err := follow.CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^(attached|existing)\s+weekly-video/scheduled-2026-08-03T02:00:00Z$`).Match(out) ||
		!regexp.MustCompile(`episode stage\s+completed`).Match(out) {
		t.Fatalf("%s: %v\n%s", m[1], err, out)
	}
}

// `episode show` of an episode whose workflow task no worker picks up says
// that no worker polls its task queue, and how to start one; an episode a
// worker serves does not.
func TestShowSaysWhenNoWorkerPollsTheEpisode(t *testing.T) {
	c := allottest.NewCluster(t)
	ctx := c.Ctx()
	nominal := time.Date(2026, 8, 7, 5, 0, 0, 0, time.UTC)
	alloc, err := c.Ledger.Allocate(ctx, ledger.AllocateInput{Pipeline: "capped", Key: allot.AllocationKey("capped", nominal), Period: "2026-08-07", NominalTime: nominal, MaxPerPeriod: 1})
	if err != nil {
		t.Fatal(err)
	}
	const queue = "nobody-polls-this"
	lonely := &operator.EpisodeCommands{Client: c.Client, Pipelines: c.Pipelines, TaskQueue: queue, Ledger: c.Ledger}
	if _, err := lonely.Resume(ctx, "capped", alloc.Episode.ID); err != nil {
		t.Fatal(err)
	}
	show, err := report.Show(ctx, c.Ledger, c.Client, "capped", alloc.Episode.ID)
	if err != nil || show.Workflow == nil || show.Workflow.NoWorker == nil || show.Workflow.NoWorker.TaskQueue != queue {
		t.Fatalf("show of an episode on a queue nobody polls: %+v, %v", show.Workflow, err)
	}
	cmd := exec.Command(allottest.BuildBinary(t, "allot/starter"), "episode", "show", "--pipeline", "capped", "--episode", alloc.Episode.ID)
	cmd.Env = processEnv(t, c)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `no worker polls task queue "`+queue+`" in namespace "`+c.Namespace+`"`) ||
		!strings.Contains(string(out), "go run ./worker --task-queue "+queue+" --namespace "+c.Namespace) {
		t.Fatalf("starter episode show: %v\n%s", err, out)
	}

	// A run waiting on that queue says so once NoWorkerAfter has passed.
	said := make(chan report.NoWorker, 1)
	runs := &operator.Runs{Client: c.Client, Pipelines: c.Pipelines, TaskQueue: queue, LedgerID: c.Ledger.ID(),
		Namespace: c.Namespace, NoWorkerAfter: 100 * time.Millisecond, OnNoWorker: func(nw report.NoWorker) { said <- nw }}
	waitCtx, stopWaiting := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := runs.Run(waitCtx, operator.RunInput{Pipeline: "weekly-video", NominalTime: monday().Add(time.Hour), Wait: true})
		waited <- err
	}()
	select {
	case nw := <-said:
		if nw != (report.NoWorker{TaskQueue: queue, Namespace: c.Namespace}) {
			t.Fatalf("the run waiting on %s said %+v", queue, nw)
		}
	case err := <-waited:
		t.Fatalf("the run on a queue nobody polls returned %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the run on a queue nobody polls never said so")
	}
	stopWaiting()
	if err := <-waited; err == nil {
		t.Fatal("the stopped wait returned no error")
	}

	served := c.Allocate("weekly-video", monday())
	c.WaitEpisode("weekly-video", served)
	if show, err := report.Show(ctx, c.Ledger, c.Client, "weekly-video", served); err != nil || show.Workflow == nil || show.Workflow.NoWorker != nil {
		t.Fatalf("show of a served episode: %+v, %v", show.Workflow, err)
	}
}

// At the approval gate `episode show` lists the approve and reject
// commands; each runs as printed and prints the state after it took
// effect (not waiting_approval). A second approve says the episode is past
// approval, while its workflow runs and once it has completed.
func TestApprovalGateCommandsAndAfter(t *testing.T) {
	c := allottest.NewCluster(t)
	s := newStarterEnv(t, c)
	approved, rejected := c.Allocate("weekly-paid", monday()), c.Allocate("weekly-paid", monday().Add(time.Hour))
	next := map[string][]string{}
	for _, ep := range []string{approved, rejected} {
		c.WaitStage("weekly-paid", ep, allot.StageWaitingApproval)
		show, err := report.Show(c.Ctx(), c.Ledger, c.Client, "weekly-paid", ep)
		if err != nil || len(show.Next) != 2 {
			t.Fatalf("show at the gate: next %q, %v", show.Next, err)
		}
		next[ep] = show.Next
	}
	out := s.run(next[approved][0])
	if !strings.HasPrefix(next[approved][0], "starter episode approve ") || !regexp.MustCompile(`(?m)^stage\s+(running|completed)$`).MatchString(out) {
		t.Fatalf("%s printed\n%s", next[approved][0], out)
	}
	out = s.run(next[rejected][1])
	if !strings.HasPrefix(next[rejected][1], "starter episode reject ") || !regexp.MustCompile(`(?m)^stage\s+rejected$`).MatchString(out) {
		t.Fatalf("%s printed\n%s", next[rejected][1], out)
	}

	_, err := c.Send("weekly-paid", approved, workflows.ApproveUpdate, workflows.DecisionRequest{})
	if allottest.ErrorType(err) != allot.NotReady || !strings.Contains(err.Error(), "already approved and past approval") {
		t.Fatalf("a second approve: %v, want %s saying the episode is past approval", err, allot.NotReady)
	}
	if final := c.WaitEpisode("weekly-paid", approved); final.Stage != allot.StageCompleted {
		t.Fatalf("the approved episode ended %+v", final)
	}
	_, err = c.Send("weekly-paid", approved, workflows.ApproveUpdate, workflows.DecisionRequest{})
	if allottest.ErrorType(err) != allot.NotReady || !strings.Contains(err.Error(), "already approved and past approval") {
		t.Fatalf("approve of the completed episode: %v, want %s saying the episode is past approval", err, allot.NotReady)
	}
}

// failingStepPipelines: an episode whose go step's function no worker
// registered fails (StepNotFound) every time its workflow runs.
const failingStepPipelines = `
[[pipeline]]
name = "tally"
  [[pipeline.step]]
  name = "count"
  kind = "go"
  func = "count-nothing"
`

// resolve --abandon on an episode whose workflow has ended failed answers
// with a plain refusal (NotReady, saying how it stands and where to look),
// not Temporal's AcceptedUpdateCompletedWorkflow.
func TestCommandOnAnEndedEpisodeIsAPlainRefusal(t *testing.T) {
	c := allottest.NewClusterWithPipelines(t, []byte(failingStepPipelines))
	ep := c.Allocate("tally", monday())
	ctx := c.Ctx()
	if err := c.Client.GetWorkflow(ctx, allot.EpisodeWorkflowID("tally", ep), "").Get(ctx, nil); allottest.ErrorType(err) != allot.StepNotFound {
		t.Fatalf("episode %s ended with %v, want it failed with %s", ep, err, allot.StepNotFound)
	}
	_, err := c.Send("tally", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "count", Resolve: allot.ActionAbandon, Reason: "no such function"})
	if allottest.ErrorType(err) != allot.NotReady || !strings.Contains(err.Error(), "starter episode show --pipeline tally --episode "+ep) {
		t.Fatalf("resolve --abandon on the failed episode: %v, want %s naming `starter episode show`", err, allot.NotReady)
	}
}
