package e2e

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/operator"
	"allot/pipeline"
)

// hourlyPaused creates weekly-video's schedule, hourly and paused, so only
// backfills act.
func hourlyPaused(t *testing.T, c *allottest.Cluster) *operator.Schedules {
	t.Helper()
	s := c.Schedules()
	s.LedgerID = c.Ledger.ID()
	if _, err := s.Create(c.Ctx(), operator.ScheduleInput{Pipeline: "weekly-video", Override: pipeline.Schedule{Interval: "1h"}, Paused: true}); err != nil {
		t.Fatal(err)
	}
	return s
}

func hourKeys(from time.Time, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = allot.AllocationKey("weekly-video", from.Add(time.Duration(i)*time.Hour))
	}
	return keys
}

// priorityOf is the task priority key of a workflow's latest run (0: none).
func priorityOf(t *testing.T, c *allottest.Cluster, id string) int32 {
	t.Helper()
	d, err := c.Client.WorkflowService().DescribeWorkflowExecution(c.Ctx(), &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: c.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: id}})
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	return d.GetWorkflowExecutionInfo().GetPriority().GetPriorityKey()
}

// The fast backfill gives every time the key the Schedule gives it: a time
// the Schedule already ran and a time run by hand keep their episodes and
// are not started again; the rest allocate once each, at the backfill's
// lower priority, which their episodes inherit.
func TestFastBackfillUsesTheSchedulesKeys(t *testing.T) {
	c := allottest.NewCluster(t)
	s := hourlyPaused(t, c)
	ctx := c.Ctx()
	from := monday().Truncate(24 * time.Hour)
	keys := hourKeys(from, 5)

	// The Schedule runs the first time itself; the second runs by hand.
	if _, err := s.Backfill(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from, To: from.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	manual := c.Allocate("weekly-video", from.Add(time.Hour))
	byScheduleDeadline := allottest.Deadline(t, time.Minute)
	for c.KeysRun("weekly-video")[keys[0]] == 0 {
		if time.Now().After(byScheduleDeadline) {
			t.Fatalf("the Schedule's run of %s recorded no outcome", keys[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
	scheduled, err := c.Ledger.EpisodeByKey(ctx, "weekly-video", keys[0])
	if err != nil {
		t.Fatal(err)
	}

	var reports []operator.BackfillProgress
	res, err := s.BackfillDirect(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from, To: from.Add(5 * time.Hour),
		Report: func(p operator.BackfillProgress) { reports = append(reports, p) }})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Progress
	if res.Runs != 5 || !res.Direct || res.AlreadyDone == nil || *res.AlreadyDone != 2 || p == nil ||
		*p != (operator.BackfillProgress{Total: 5, Done: 5, AlreadyDone: 2, Started: 3, Allocated: 3}) {
		t.Fatalf("fast backfill %+v, progress %+v", res, p)
	}
	if len(reports) == 0 || reports[len(reports)-1] != *p {
		t.Fatalf("reports %+v", reports)
	}
	runs := c.KeysRun("weekly-video")
	for i, k := range keys {
		if runs[k] != 1 {
			t.Fatalf("key %d (%s) ran %d times, want once: %v", i, k, runs[k], runs)
		}
		ep, err := c.Ledger.EpisodeByKey(ctx, "weekly-video", k)
		if err != nil {
			t.Fatalf("key %s: %v", k, err)
		}
		switch i {
		case 0:
			if ep.ID != scheduled.ID {
				t.Fatalf("the Schedule's time got episode %s, had %s", ep.ID, scheduled.ID)
			}
		case 1:
			if ep.ID != manual {
				t.Fatalf("the manual time got episode %s, had %s", ep.ID, manual)
			}
		default:
			// Backfilled at the lower priority, its episode lower still.
			if got := priorityOf(t, c, k); got != operator.PriorityBackfill {
				t.Fatalf("backfilled run %s has priority %d, want %d", k, got, operator.PriorityBackfill)
			}
			if got := priorityOf(t, c, allot.EpisodeWorkflowID("weekly-video", ep.ID)); got != operator.PriorityBackfillEpisode {
				t.Fatalf("backfilled run %s's episode has priority %d, want %d", k, got, operator.PriorityBackfillEpisode)
			}
		}
	}
	// The Schedule's own run and its episode carry no priority: the
	// server's default, above the backfill's.
	if got, ep := priorityOf(t, c, keys[0]), priorityOf(t, c, allot.EpisodeWorkflowID("weekly-video", scheduled.ID)); got != 0 || ep != 0 ||
		operator.PriorityScheduled >= operator.PriorityBackfill {
		t.Fatalf("the Schedule's run has priority %d, its episode %d", got, ep)
	}
	// Again: everything is done, nothing starts.
	again, err := s.BackfillDirect(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from, To: from.Add(5 * time.Hour)})
	if err != nil || again.Progress.Started != 0 || again.Progress.Done != 5 || again.Sent {
		t.Fatalf("the same backfill again: %+v (%+v), %v", again, again.Progress, err)
	}
	c.MustCheck()
}

// Interrupted midway and run again, the fast backfill resumes: every time
// runs once, and the progress counts the times already done.
func TestFastBackfillResumesAfterInterruption(t *testing.T) {
	c := allottest.NewCluster(t)
	s := hourlyPaused(t, c)
	from := monday().Truncate(24 * time.Hour)
	const n = 12
	keys := hourKeys(from, n)
	in := operator.BackfillInput{Pipeline: "weekly-video", From: from, To: from.Add(n * time.Hour), MaxInFlight: 2, ReportEvery: time.Millisecond}

	ctx, cancel := context.WithCancel(c.Ctx())
	first := in
	first.Report = func(p operator.BackfillProgress) {
		if p.Done >= 4 {
			cancel()
		}
	}
	res, err := s.BackfillDirect(ctx, first)
	if !errors.Is(err, context.Canceled) || !res.Interrupted || res.Progress == nil || res.Progress.Started >= n ||
		res.Resume != allot.BackfillCommand("weekly-video", from, from.Add(n*time.Hour)) {
		t.Fatalf("interrupted backfill: %+v (%+v), %v", res, res.Progress, err)
	}
	// The runs it started go on and record their outcomes. A start whose
	// call the cancellation cut off may still have reached the server, so
	// the server can hold one more run per slot than the progress counted;
	// the resumed backfill finds it done, or starts it again on its own
	// workflow ID, and either way it runs once.
	started := res.Progress.Started
	deadline := allottest.Deadline(t, time.Minute)
	for len(c.KeysRun("weekly-video")) < started {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d started runs recorded", len(c.KeysRun("weekly-video")), started)
		}
		time.Sleep(50 * time.Millisecond)
	}

	res, err = s.BackfillDirect(c.Ctx(), in)
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Progress; p.Done != n || p.AlreadyDone < started || p.AlreadyDone > started+in.MaxInFlight ||
		p.AlreadyDone+p.Started != n || p.Allocated != p.Started || p.Failed != 0 {
		t.Fatalf("resumed: %+v, want %d done, at least %d of them already", p, n, started)
	}
	runs := c.KeysRun("weekly-video")
	for _, k := range keys {
		if runs[k] != 1 {
			t.Fatalf("key %s ran %d times: %v", k, runs[k], runs)
		}
		if _, err := c.Ledger.EpisodeByKey(c.Ctx(), "weekly-video", k); err != nil {
			t.Fatalf("key %s: %v", k, err)
		}
	}
	c.MustCheck()
}

// A dry run over 100,000 times counts them with the server, looks every key
// up in the ledger in batches, and starts nothing.
func TestFastBackfillDryRunOf100000Times(t *testing.T) {
	c := allottest.NewCluster(t)
	s := c.Schedules()
	ctx := c.Ctx()
	if _, err := s.Create(ctx, operator.ScheduleInput{Pipeline: "weekly-video", Override: pipeline.Schedule{Interval: "1m"}, Paused: true}); err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	from := monday().Truncate(24 * time.Hour).Add(-n * time.Minute)
	to := from.Add(n * time.Minute)
	c.Allocate("weekly-video", from)
	c.Allocate("weekly-video", to.Add(-time.Minute))
	c.Allocate("weekly-video", to) // outside [from, to)
	before := c.CountWorkflows(`WorkflowType = "ScheduledRun"`)
	start := time.Now()
	res, err := s.BackfillDirect(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from, To: to, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a dry run of %d times answered in %s", n, time.Since(start).Round(time.Millisecond)) // logged, never asserted
	if res.Runs != n || !res.First.Equal(from) || !res.Last.Equal(to.Add(-time.Minute)) || len(res.Keys) != n ||
		res.Existing == nil || *res.Existing != 2 || res.AlreadyDone == nil || *res.AlreadyDone != 2 || res.Sent || res.Progress != nil {
		t.Fatalf("dry run: runs %d, first %s, last %s, existing %v, already done %v, sent %v", res.Runs, res.First, res.Last, res.Existing, res.AlreadyDone, res.Sent)
	}
	if res.Keys[n-1] != allot.AllocationKey("weekly-video", to.Add(-time.Minute)) {
		t.Fatalf("last key %s", res.Keys[n-1])
	}
	// Over max_backfill_runs without --yes: refused, nothing started.
	_, err = s.BackfillDirect(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from, To: to})
	if !errors.Is(err, operator.ErrBackfillNeedsConsent) || allot.ErrorType(err) != allot.ConsentRequired {
		t.Fatalf("without consent: %v", err)
	}
	if after := c.CountWorkflows(`WorkflowType = "ScheduledRun"`); after != before {
		t.Fatalf("a dry run or a refusal started runs: %d -> %d", before, after)
	}
}

// The starter: the fast backfill is the default; Ctrl-C stops it, prints
// the command that resumes and exits 130; that command, run as printed,
// finishes the range with every time once.
func TestStarterFastBackfillCtrlCResumes(t *testing.T) {
	c := allottest.NewCluster(t)
	hourlyPaused(t, c)
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := allottest.WritePipelines(t, t.TempDir())
	from := monday().Truncate(24 * time.Hour)
	const n = 20
	to := from.Add(n * time.Hour)
	env := cleanenv.Environ("TEMPORAL_ADDRESS="+c.Server.GetFrontendHostPort(), "TEMPORAL_NAMESPACE="+c.Namespace,
		"ALLOT_LEDGER="+c.LedgerURL, "ALLOT_PIPELINES="+pipelinesFile)

	cmd := exec.Command(bin, "schedule", "backfill", "--pipeline", "weekly-video", "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339),
		"--rate", "4", "--max-in-flight", "1", "--progress-interval", "50ms")
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !signalled && strings.HasPrefix(sc.Text(), "2/") {
				signalled = true
				_ = cmd.Process.Signal(syscall.SIGINT)
			}
		}
	}()
	wg.Wait()
	err = cmd.Wait()
	if cmd.ProcessState.ExitCode() != 130 {
		t.Fatalf("Ctrl-C: exit %d (%v)\nstdout:\n%s\nstderr:\n%s", cmd.ProcessState.ExitCode(), err, out.String(), stderr.String())
	}
	printed := regexp.MustCompile(`(?m)^\s+(starter schedule backfill .*)$`).FindStringSubmatch(stderr.String())
	if printed == nil || !strings.Contains(printed[1], "--rate 4") {
		t.Fatalf("no resume command:\n%s", stderr.String())
	}
	// The runs it started go on; once they have recorded, the resumed
	// backfill finds them done.
	m := regexp.MustCompile(`the (\d+) runs started go on`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("the interruption does not say what it started:\n%s", stderr.String())
	}
	started, _ := strconv.Atoi(m[1])
	deadline := allottest.Deadline(t, time.Minute)
	for len(c.KeysRun("weekly-video")) < started {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d started runs recorded", len(c.KeysRun("weekly-video")), started)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, again := starterCmd(t, bin, c, pipelinesFile, append(allottest.SplitCommand(t, printed[1])[1:], "--progress-interval", "1h")...)
	if code != 0 || !regexp.MustCompile(`progress\s+20/20 done, processed: \d+ allocated, 0 reused, 0 skipped, 0 failed, [1-9]\d* already done`).MatchString(again) {
		t.Fatalf("resumed as printed: exit %d\n%s", code, again)
	}
	runs := c.KeysRun("weekly-video")
	for _, k := range hourKeys(from, n) {
		if runs[k] != 1 {
			t.Fatalf("key %s ran %d times: %v", k, runs[k], runs)
		}
	}
	c.MustCheck()
}

// A schedule whose jitter hides its nominal times (here two cron
// expressions, as the temporal CLI can set them) cannot be backfilled on
// keys allot forms itself: the fast backfill refuses, starts nothing, and
// prints the --via-schedule command, which runs the range.
func TestFastBackfillRefusesUnknownNominalTimes(t *testing.T) {
	c := allottest.NewCluster(t)
	s := hourlyPaused(t, c)
	ctx := c.Ctx()
	h := c.Client.ScheduleClient().GetHandle(ctx, allot.ScheduleID("weekly-video"))
	if err := h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		sched := in.Description.Schedule
		sched.Spec = &client.ScheduleSpec{CronExpressions: []string{"0 2 * * *", "0 14 * * *"}, Jitter: time.Minute}
		return &client.ScheduleUpdate{Schedule: &sched}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	from := monday().Truncate(24 * time.Hour)
	to := from.Add(24 * time.Hour)
	_, err := s.BackfillDirect(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from, To: to})
	if !errors.Is(err, operator.ErrNominalTimesUnknown) || allot.ErrorType(err) != allot.NominalTimesUnknown {
		t.Fatalf("fast backfill of a schedule with hidden nominal times: %v", err)
	}
	if n := len(c.KeysRun("weekly-video")); n != 0 {
		t.Fatalf("the refusal started %d runs", n)
	}
	printed := regexp.MustCompile("`(starter schedule backfill [^`]*)`").FindStringSubmatch(err.Error())
	if printed == nil || !strings.Contains(printed[1], "--via-schedule") {
		t.Fatalf("the refusal prints no --via-schedule command: %v", err)
	}
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := allottest.WritePipelines(t, t.TempDir())
	code, out := starterCmd(t, bin, c, pipelinesFile, allottest.SplitCommand(t, printed[1])[1:]...)
	if code != 0 || !regexp.MustCompile(`(?m)^runs\s+2 \(`).MatchString(out) {
		t.Fatalf("the printed command, run as printed: exit %d\n%s", code, out)
	}
	deadline := allottest.Deadline(t, time.Minute)
	for len(c.KeysRun("weekly-video")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the Schedule's backfill recorded %d runs, want 2", len(c.KeysRun("weekly-video")))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
