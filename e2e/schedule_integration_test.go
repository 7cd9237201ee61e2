package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
	"allot/workflows"
)

func TestScheduleWithJitterAndBackfillShareKeysWithTheLedger(t *testing.T) {
	c := allottest.NewCluster(t)
	s := c.Schedules()
	ctx := c.Ctx()
	created, err := s.Create(ctx, operator.ScheduleInput{Pipeline: "weekly-video", Override: pipeline.Schedule{Interval: "1s", Jitter: "300ms"}})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Interval != time.Second || created.Spec.Jitter != 300*time.Millisecond || created.Spec.Overlap != pipeline.DefaultOverlap {
		t.Fatalf("created %+v", created.Spec)
	}
	ids := c.WaitAtLeast(`WorkflowType = "ScheduledRun" AND ExecutionStatus = "Completed" AND AllotPipeline = "weekly-video"`, 3)
	if _, err := s.Pause(ctx, "weekly-video", operator.ScheduleNote{Text: "backfill test"}); err != nil {
		t.Fatal(err)
	}
	// Let an action already fired finish: the paused schedule's own list
	// of its running workflows empties.
	h := c.Client.ScheduleClient().GetHandle(ctx, allot.ScheduleID("weekly-video"))
	for deadline := allottest.Deadline(t, time.Minute); ; {
		desc, err := h.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(desc.Info.RunningWorkflows) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the paused schedule still runs %v", desc.Info.RunningWorkflows)
		}
		time.Sleep(100 * time.Millisecond)
	}
	prefix := allot.ScheduleActionID("weekly-video") + "-"
	var first, last time.Time
	for _, id := range ids {
		nominal, err := time.Parse(time.RFC3339, strings.TrimPrefix(id, prefix))
		if err != nil || !strings.HasPrefix(id, prefix) {
			t.Fatalf("scheduled workflow ID %q is not <action id>-<nominal time>", id)
		}
		// With jitter the start moves; the key stays the nominal time.
		var res workflows.ScheduledRunResult
		if err := c.Client.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			t.Fatal(err)
		}
		if !res.NominalTime.Equal(nominal) || res.NominalTimeSource != allot.NominalFromSchedule || allot.AllocationKey("weekly-video", nominal) != id {
			t.Fatalf("run %s: result %+v", id, res)
		}
		if first.IsZero() || nominal.Before(first) {
			first = nominal
		}
		if nominal.After(last) {
			last = nominal
		}
	}
	before := c.KeysRun("weekly-video")
	episodesBefore := len(c.Episodes("weekly-video"))

	// Backfill from 3 s before the first scheduled run to just after the
	// last one: the times that ran reuse their episodes, the rest allocate.
	from, to := first.Add(-3*time.Second), last.Add(time.Second)
	// A backfill may not reach past now: wait until to has come.
	for time.Now().Before(to) {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.Backfill(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from, To: to}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for tm := from; tm.Before(to); tm = tm.Add(time.Second) {
		want = append(want, allot.AllocationKey("weekly-video", tm))
	}
	deadline := allottest.Deadline(t, 60*time.Second)
	for {
		after := c.KeysRun("weekly-video")
		done := true
		for _, k := range want {
			if after[k] < before[k]+1 {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backfill did not run every nominal time in [%s, %s): runs per key %v", from, to, after)
		}
		time.Sleep(200 * time.Millisecond)
	}
	reused, allocated := 0, 0
	for _, k := range want {
		if before[k] > 0 {
			reused++
		} else {
			allocated++
		}
	}
	if reused < 3 || allocated < 3 {
		t.Fatalf("the range should hold runs that ran (%d) and runs that did not (%d)", reused, allocated)
	}
	eps := c.Episodes("weekly-video")
	if len(eps) != episodesBefore+allocated {
		t.Fatalf("episodes %d, want %d before + %d allocated by the backfill", len(eps), episodesBefore, allocated)
	}
	byKey := map[string]ledger.Episode{}
	for _, e := range eps {
		byKey[e.AllocationKey] = e
	}
	for _, k := range want {
		if _, ok := byKey[k]; !ok {
			t.Fatalf("backfilled key %s has no episode", k)
		}
	}
	stats, err := report.Stats(context.Background(), c.Ledger, report.StatsInput{Pipeline: "weekly-video"})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, r := range stats.Runs {
		counts[string(r.Outcome)+"/"+r.Reason] = r.Count
	}
	total := 0
	for _, n := range c.KeysRun("weekly-video") {
		total += n
	}
	if counts["allocated/new_episode"] != len(eps) || counts["reused/key_bound"] != total-len(eps) || stats.RunsTotal != total {
		t.Fatalf("stats %+v; want %d allocated and %d reused of %d runs", stats.Runs, len(eps), total-len(eps), total)
	}
	c.MustCheck()
}

func TestBadScheduleInputCreatesNothing(t *testing.T) {
	c := allottest.NewCluster(t)
	s := c.Schedules()
	ctx := c.Ctx()
	for name, in := range map[string]operator.ScheduleInput{
		"bad cron":           {Pipeline: "weekly-video", Override: pipeline.Schedule{Cron: "every monday"}},
		"unknown pipeline":   {Pipeline: "monthly-podcast", Override: pipeline.Schedule{Interval: "1h"}},
		"invalid pipeline":   {Pipeline: "Weekly Video", Override: pipeline.Schedule{Interval: "1h"}},
		"no timing":          {Pipeline: "weekly-video"},
		"zero interval":      {Pipeline: "weekly-video", Override: pipeline.Schedule{Interval: "0s"}},
		"negative jitter":    {Pipeline: "weekly-video", Override: pipeline.Schedule{Interval: "1h", Jitter: "-1s"}},
		"unknown overlap":    {Pipeline: "weekly-video", Override: pipeline.Schedule{Interval: "1h", Overlap: "sometimes"}},
		"catch-up too short": {Pipeline: "weekly-video", Override: pipeline.Schedule{Interval: "1h", CatchupWindow: "1s"}},
	} {
		if _, err := s.Create(ctx, in); err == nil {
			t.Errorf("%s: created", name)
		}
	}
	if _, err := s.Create(ctx, operator.ScheduleInput{Pipeline: "weekly-video", Override: pipeline.Schedule{Interval: "1h"}, Paused: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	for name, in := range map[string]operator.BackfillInput{
		"reversed":         {Pipeline: "weekly-video", From: now, To: now.Add(-time.Hour)},
		"empty":            {Pipeline: "weekly-video", From: now, To: now},
		"over the maximum": {Pipeline: "weekly-video", From: now.Add(-100 * 24 * time.Hour), To: now},
		"unknown pipeline": {Pipeline: "monthly-podcast", From: now.Add(-time.Hour), To: now},
		"no schedule":      {Pipeline: "capped", From: now.Add(-time.Hour), To: now},
	} {
		if _, err := s.Backfill(ctx, in); err == nil {
			t.Errorf("backfill %s: accepted", name)
		}
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Pipeline != "weekly-video" {
		t.Fatalf("schedules after bad input: %+v", list)
	}
	for _, cmd := range []func() error{
		func() error { _, err := s.Describe(ctx, "capped"); return err },
		func() error { _, err := s.Pause(ctx, "capped", operator.ScheduleNote{}); return err },
		func() error { _, err := s.Trigger(ctx, "capped"); return err },
		func() error { return s.Delete(ctx, "monthly-podcast") },
	} {
		if err := cmd(); err == nil {
			t.Error("a command on a pipeline without a schedule succeeded")
		}
	}
	time.Sleep(500 * time.Millisecond)
	if n := c.CountWorkflows(`WorkflowType = "ScheduledRun"`); n != 0 {
		t.Fatalf("bad backfills started %d runs", n)
	}
}

func TestMetricsEndpointServesCounters(t *testing.T) {
	c := allottest.NewCluster(t)
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}); err != nil {
		t.Fatal(err)
	}
	parked := c.Allocate("auto-paid", monday())
	c.WaitStage("auto-paid", parked, allot.StageNeedsAttention)
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	done := c.Allocate("auto-paid", monday().Add(time.Hour))
	c.WaitEpisode("auto-paid", done)
	want := []string{
		`allot_runs_total{`, `outcome="allocated"`, `reason="new_episode"`,
		`allot_allocations_total{`, `decision="allocated"`,
		`allot_vendor_submissions_total{`, `result="accepted"`, `result="unknown"`,
		`allot_cost_minor_units_total{`, `currency="USD"`,
		`allot_episodes_needing_attention{pipeline="auto-paid"} 1`,
		`temporal_workflow_completed_total`, // the SDK's own worker metrics
	}
	deadline := allottest.Deadline(t, 30*time.Second)
	var body string
	for {
		resp, err := http.Get(c.MetricsURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %q:\n%s", missing, grepAllot(body))
		}
		time.Sleep(300 * time.Millisecond)
	}
	if strings.Contains(body, allottest.VendorKey) {
		t.Fatal("the vendor key is in the metrics")
	}
}

func grepAllot(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "allot_") || strings.HasPrefix(l, "temporal_workflow") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestSetupRegistersSearchAttributesIdempotently(t *testing.T) {
	c := allottest.NewCluster(t) // newCluster ran setup once already
	res, err := workflows.EnsureSearchAttributes(c.Ctx(), c.Client, c.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Added) != 0 || len(res.Existing) != len(workflows.SearchAttributeTypes()) {
		t.Fatalf("second setup %+v: want nothing added, all %d existing", res, len(workflows.SearchAttributeTypes()))
	}
}
