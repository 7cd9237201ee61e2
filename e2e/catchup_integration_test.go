package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/allottest"
	"allot/internal/catchup"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/pipeline"
	"allot/workflows"
)

// catchUpPolicies are the pipelines of the catch-up tests, one per policy.
var catchUpPolicies = map[string]string{
	"cu-skip":    allot.CatchUpSkip,
	"cu-latest":  allot.CatchUpLatest,
	"cu-all":     allot.CatchUpAll,
	"cu-up-to-2": "up_to:2",
}

func catchUpPipelines(interval, grace string) []byte {
	var b strings.Builder
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range catchUpPolicies {
			if !yield(n) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, `[[pipeline]]
name = %q
  [pipeline.schedule]
  interval       = %q
  catchup_window = "10s"
  catch_up       = %q
  catch_up_grace = %q
  [[pipeline.step]]
  name = "plan"
  kind = "local"

`, name, interval, catchUpPolicies[name], grace)
	}
	return []byte(b.String())
}

// promised says whether the policy runs the i-th (from 0, oldest first)
// of k missed times.
func promised(policy string, i, k int) bool {
	later := k - 1 - i
	switch policy {
	case allot.CatchUpSkip:
		return false
	case allot.CatchUpLatest:
		return later == 0
	case "up_to:2":
		return later < 2
	}
	return true
}

// waitOutcomes waits until every key has a run outcome in the ledger and
// returns the outcomes by key.
func waitOutcomes(t *testing.T, c *allottest.Cluster, pipelineName string, keys []string) map[string][]ledger.RunOutcome {
	t.Helper()
	deadline := allottest.Deadline(t, 60*time.Second)
	for {
		runs, err := c.Ledger.RunOutcomesOfKeys(c.Ctx(), pipelineName, keys)
		if err != nil {
			t.Fatal(err)
		}
		byKey := map[string][]ledger.RunOutcome{}
		for _, r := range runs {
			byKey[r.AllocationKey] = append(byKey[r.AllocationKey], r)
		}
		if len(byKey) == len(keys) {
			return byKey
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d keys have a run outcome: %v", pipelineName, len(byKey), len(keys), byKey)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkPromise fails unless each of the missed times (oldest first) ran or
// was skipped as missed_catch_up, as the pipeline's policy promises.
func checkPromise(t *testing.T, c *allottest.Cluster, pipelineName string, missed []time.Time) {
	t.Helper()
	keys := make([]string, len(missed))
	for i, tm := range missed {
		keys[i] = allot.AllocationKey(pipelineName, tm)
	}
	byKey := waitOutcomes(t, c, pipelineName, keys)
	policy := catchUpPolicies[pipelineName]
	for i, k := range keys {
		runs := byKey[k]
		if len(runs) != 1 {
			t.Fatalf("%s (%s): key %s has %d runs, want 1: %+v", pipelineName, policy, k, len(runs), runs)
		}
		r := runs[0]
		if promised(policy, i, len(keys)) {
			if r.Outcome != allot.OutcomeAllocated || r.EpisodeID == "" {
				t.Errorf("%s (%s): missed time %d of %d (%s) should run: %+v", pipelineName, policy, i+1, len(keys), k, r)
			}
		} else if r.Outcome != allot.OutcomeSkipped || r.Reason != allot.ReasonMissedCatchUp || r.EpisodeID != "" {
			t.Errorf("%s (%s): missed time %d of %d (%s) should be skipped as missed_catch_up: %+v", pipelineName, policy, i+1, len(keys), k, r)
		}
	}
}

// The workers are down across three scheduled times of each pipeline: the
// Schedule starts the runs, which wait. When the workers come back, each
// policy runs exactly what it promises and records the rest as skipped
// (missed_catch_up) under their keys; a later manual run of a skipped time
// allocates normally.
func TestCatchUpAfterAWorkerOutage(t *testing.T) {
	const every, grace, k = 10 * time.Second, 2 * time.Second, 3
	c := allottest.NewClusterWithPipelines(t, catchUpPipelines(every.String(), grace.String()))
	ctx := c.Ctx()
	c.StopWorker()
	s := c.Schedules()
	for name := range catchUpPolicies {
		if _, err := s.Create(ctx, operator.ScheduleInput{Pipeline: name}); err != nil {
			t.Fatal(err)
		}
	}
	missed := map[string][]time.Time{}
	var last time.Time
	for name := range catchUpPolicies {
		ids := c.WaitAtLeast(fmt.Sprintf(`WorkflowType = "ScheduledRun" AND AllotPipeline = %q`, name), k)
		var times []time.Time
		for _, id := range ids {
			tm, ok := allot.NominalTimeOfKey(name, id)
			if !ok {
				t.Fatalf("scheduled run %s carries no nominal time", id)
			}
			times = append(times, tm)
		}
		slices.SortFunc(times, time.Time.Compare)
		missed[name] = times[:k]
		if times[k-1].After(last) {
			last = times[k-1]
		}
	}
	// Every missed time is past its grace before a worker begins it.
	for time.Now().Before(last.Add(grace + 500*time.Millisecond)) {
		time.Sleep(100 * time.Millisecond)
	}
	c.StartWorker()
	for name, times := range missed {
		checkPromise(t, c, name, times)
	}
	c.MustCheck()

	// A skipped time's key stays free: a manual run of it allocates.
	skipped := missed["cu-skip"][0]
	if id := c.Allocate("cu-skip", skipped); id == "" {
		t.Fatal("a manual run of a time skipped by catch-up got no episode")
	}
}

// A schedule paused across several of its times. Unpaused with `starter
// schedule unpause`, the paused times are settled at once under the
// policy (cu-all: every one runs). Unpaused without allot (as the
// `temporal` CLI would), the sweep settles them under each policy; the
// printed command that settles them later runs, and finds nothing left.
func TestCatchUpAfterAPause(t *testing.T) {
	const every, grace = 2 * time.Second, time.Second
	toml := catchUpPipelines(every.String(), grace.String())
	c := allottest.NewClusterWithPipelines(t, toml)
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := writeFile(t, string(toml))
	ctx := c.Ctx()
	s := c.Schedules()
	// Create the schedules well clear of a time of theirs, so that every
	// schedule's first time is the same.
	for time.Since(time.Now().Truncate(every)) > every/2 {
		time.Sleep(50 * time.Millisecond)
	}
	created := time.Now().Truncate(every)
	for name := range catchUpPolicies {
		if _, err := s.Create(ctx, operator.ScheduleInput{Pipeline: name, Paused: true}); err != nil {
			t.Fatal(err)
		}
	}
	for time.Now().Before(created.Add(3*every + 200*time.Millisecond)) {
		time.Sleep(100 * time.Millisecond)
	}
	pausedUntil := time.Now()
	p, err := c.Pipelines.Get("cu-all")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := p.Schedule.Spec()
	if err != nil {
		t.Fatal(err)
	}
	paused, err := spec.Times("UTC", created, pausedUntil, 0)
	if err != nil || len(paused) < 3 {
		t.Fatalf("times in the pause: %v, %v", paused, err)
	}

	// starter schedule unpause settles them itself.
	code, out := starterCmd(t, bin, c, pipelinesFile, "schedule", "unpause", "--pipeline", "cu-all")
	if code != 0 || !strings.Contains(out, "catch-up") {
		t.Fatalf("starter schedule unpause: exit %d\n%s", code, out)
	}
	checkPromise(t, c, "cu-all", paused)

	sw := &catchup.Sweeper{Client: c.Client, Pipelines: c.Pipelines, Ledger: c.Ledger, TaskQueue: workflows.TaskQueue, LedgerID: c.Ledger.ID()}
	for _, name := range []string{"cu-skip", "cu-latest", "cu-up-to-2"} {
		if err := c.Client.ScheduleClient().GetHandle(ctx, allot.ScheduleID(name)).Unpause(ctx, client.ScheduleUnpauseOptions{}); err != nil {
			t.Fatal(err)
		}
		// Applied as if it ran at the end of the pause plus the grace:
		// every paused time is past its grace, none after is.
		r, err := sw.Sweep(ctx, catchup.SweepInput{Pipeline: name, Until: pausedUntil, Now: pausedUntil.Add(grace)})
		if err != nil {
			t.Fatal(err)
		}
		if r.Policy != catchUpPolicies[name] || !slices.Equal(r.Missed, paused) {
			t.Fatalf("sweep of %s: %+v; want policy %s and missed %v", name, r, catchUpPolicies[name], paused)
		}
		checkPromise(t, c, name, r.Missed)
		again, err := sw.Sweep(ctx, catchup.SweepInput{Pipeline: name, Until: pausedUntil, Now: pausedUntil.Add(grace)})
		if err != nil || len(again.Missed) != 0 {
			t.Fatalf("a second sweep of %s settled again: %+v, %v", name, again, err)
		}
		// The command a failed catch-up prints runs, and finds nothing.
		remedy := strings.Fields(allot.CatchUpCommand(name, pausedUntil))
		code, out := starterCmd(t, bin, c, pipelinesFile, remedy[1:]...)
		if code != 0 || !strings.Contains(out, "0 missed times") {
			t.Fatalf("%s: exit %d\n%s", strings.Join(remedy, " "), code, out)
		}
	}

	// The worker's sweep at start settles only what the Schedule will not
	// start any more: times older than its catchup_window and grace.
	now := time.Now()
	first := map[string]catchup.SweepResult{}
	for _, r := range sw.SweepAll(ctx, now) {
		if r.Error != "" || !r.Until.Equal(now.Add(-(10*time.Second + grace)).UTC()) {
			t.Fatalf("worker sweep of %s: %+v", r.Pipeline, r)
		}
		first[r.Pipeline] = r
	}
	// The next sweep looks only at the times since the last one reached
	// (or since the schedule was created, when that is later).
	for _, r := range sw.SweepAll(ctx, time.Now()) {
		want := first[r.Pipeline].Until
		if first[r.Pipeline].From.After(want) {
			want = first[r.Pipeline].From
		}
		if r.Error != "" || !r.From.Equal(want) || len(r.Missed) != 0 {
			t.Fatalf("the worker's next sweep of %s starts at %s, want %s (where the last ended) with nothing missed: %+v", r.Pipeline, r.From, want, r)
		}
	}
	c.MustCheck()
}

// The Schedule's spec is not the pipeline file's: `starter schedule
// update --interval 2s` (the file says 1h) changed it before the pause.
// Unpausing with `starter schedule unpause`, and `starter schedule
// catch-up --until` after an unpause by other means, settle the times of
// the live Schedule, each under its policy; the file's spec would have
// found at most one.
func TestCatchUpAfterAPauseReadsTheLiveSchedule(t *testing.T) {
	const every, grace = 2 * time.Second, time.Second
	toml := catchUpPipelines("1h", grace.String())
	c := allottest.NewClusterWithPipelines(t, toml)
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := writeFile(t, string(toml))
	ctx := c.Ctx()
	s := c.Schedules()
	for time.Since(time.Now().Truncate(every)) > every/2 {
		time.Sleep(50 * time.Millisecond)
	}
	created := time.Now().Truncate(every)
	for _, name := range []string{"cu-all", "cu-skip"} {
		if _, err := s.Create(ctx, operator.ScheduleInput{Pipeline: name, Paused: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"cu-all", "cu-skip"} {
		code, out := starterCmd(t, bin, c, pipelinesFile, "schedule", "update", "--pipeline", name, "--interval", every.String())
		if code != 0 {
			t.Fatalf("starter schedule update: exit %d\n%s", code, out)
		}
	}
	for time.Now().Before(created.Add(3*every + 1200*time.Millisecond)) {
		time.Sleep(100 * time.Millisecond)
	}
	pausedUntil := time.Now().Truncate(time.Second)
	live, err := pipeline.ScheduleSpec{Interval: every}.Times("", created, pausedUntil, 0)
	if err != nil || len(live) < 3 {
		t.Fatalf("the live Schedule's times in the pause: %v, %v", live, err)
	}
	want := fmt.Sprintf("%d missed times", len(live))

	code, out := starterCmd(t, bin, c, pipelinesFile, "schedule", "unpause", "--pipeline", "cu-all")
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("starter schedule unpause: exit %d, want %q\n%s", code, want, out)
	}
	checkPromise(t, c, "cu-all", live)

	if err := c.Client.ScheduleClient().GetHandle(ctx, allot.ScheduleID("cu-skip")).Unpause(ctx, client.ScheduleUnpauseOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out = starterCmd(t, bin, c, pipelinesFile, strings.Fields(allot.CatchUpCommand("cu-skip", pausedUntil))[1:]...)
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("starter schedule catch-up: exit %d, want %q\n%s", code, want, out)
	}
	checkPromise(t, c, "cu-skip", live)
	c.MustCheck()
}
