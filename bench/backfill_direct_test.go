package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/operator"
	"allot/pipeline"
)

// The fast backfill (`starter schedule backfill`, operator.BackfillDirect)
// against the Schedule's own (--via-schedule), against the server's rate for
// bare workflows of the same shape, and the start delay of scheduled runs
// during it. Each runs on the embedded server in memory with allot's worker
// in this process on a SQLite ledger, ALLOT_BENCH_BACKFILL_RUNS times
// (default 2,000, hourly), once:
//
//	go test -run '^$' -bench 'BackfillFastVsSchedule' -benchtime 1x -timeout 30m ./bench/
//	go test -run '^$' -bench 'BackfillFastVsBare' -benchtime 1x -timeout 30m ./bench/
//	go test -run '^$' -bench 'ScheduledDelayDuringBackfill' -benchtime 1x -timeout 30m ./bench/
//
// The 100,000-time run (not run in CI; about 20 minutes at 100 runs/s, much
// longer on 2 cores):
//
//	ALLOT_BENCH_BACKFILL_RUNS=100000 go test -run '^$' -bench 'BackfillFastVsBare' -benchtime 1x -timeout 6h ./bench/
//
// It checks, as the benchmark ends, that no key has two episodes and that
// every time has an outcome.

// benchSchedules creates the bench pipeline's Schedule (hourly, paused: only
// backfills act) and returns the schedule operations.
func benchSchedules(b *testing.B, st *stack, w *allotWorker) *operator.Schedules {
	b.Helper()
	s := &operator.Schedules{
		Client: st.Client, Pipelines: w.Pipelines, TaskQueue: w.TaskQueue, Namespace: st.Namespace,
		Ledger: w.Ledger, LedgerID: w.Ledger.ID(),
	}
	if _, err := s.Create(context.Background(), operator.ScheduleInput{
		Pipeline: benchPipeline, Paused: true, Note: "backfill benchmark",
		Override: pipeline.Schedule{Interval: "1h"},
	}); err != nil {
		b.Fatal(err)
	}
	return s
}

// fastBackfill runs the fast backfill of runs hours from from, with 20 in
// flight and no rate cap (the server's pace is measured, not the
// throttle's), and returns how long until every run recorded its outcome.
func fastBackfill(b *testing.B, s *operator.Schedules, from time.Time, runs int) (time.Duration, []string) {
	b.Helper()
	start := time.Now()
	res, err := s.BackfillDirect(context.Background(), operator.BackfillInput{
		Pipeline: benchPipeline, From: from, To: from.Add(time.Duration(runs) * time.Hour), Yes: true,
		Rate: 1e6, MaxInFlight: operator.DefaultBackfillMaxInFlight, Override: longRange,
	})
	if err != nil {
		b.Fatal(err)
	}
	if p := res.Progress; p == nil || p.Allocated != runs || p.Done != runs {
		b.Fatalf("fast backfill %+v, want %d allocated", p, runs)
	}
	return time.Since(start), res.Keys
}

// longRange lets one backfill cover 100,000 hours.
var longRange = pipeline.Schedule{MaxBackfill: "1000000h"}

// checkOnce fails unless every key has exactly one episode and one outcome.
func checkOnce(b *testing.B, w *allotWorker, keys []string) {
	b.Helper()
	ctx := context.Background()
	eps, err := w.Ledger.EpisodesPerKey(ctx, benchPipeline, keys)
	if err != nil {
		b.Fatal(err)
	}
	outs, err := w.Ledger.RunOutcomesOfKeys(ctx, benchPipeline, keys)
	if err != nil {
		b.Fatal(err)
	}
	runs := map[string]int{}
	for _, o := range outs {
		runs[o.AllocationKey]++
	}
	for _, k := range keys {
		if eps[k] != 1 || runs[k] != 1 {
			b.Fatalf("key %s: %d episodes, %d outcomes; want 1 and 1", k, eps[k], runs[k])
		}
	}
}

// BenchmarkBackfillFastVsSchedule: the same number of hourly times, fast
// then through the Schedule, on one server and worker.
func BenchmarkBackfillFastVsSchedule(b *testing.B) {
	runs := backfillRuns(b)
	st := startTemporal(b, defaultStore())
	w := startAllotWorker(b, st)
	s := benchSchedules(b, st, w)
	from := time.Date(2020, 1, 6, 0, 0, 0, 0, time.UTC)
	var fast, sched, fastAll, schedAll time.Duration
	for b.Loop() {
		start := time.Now()
		d, keys := fastBackfill(b, s, from, runs)
		fast += d
		// Its episodes finish before the Schedule's backfill begins, so
		// that one does not share the worker with them.
		waitEpisodesCompleted(b, w.Ledger, keys)
		fastAll += time.Since(start)
		checkOnce(b, w, keys)
		from = from.Add(time.Duration(runs) * time.Hour)

		to := from.Add(time.Duration(runs) * time.Hour)
		start = time.Now()
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		res, err := s.Backfill(wctx, operator.BackfillInput{Pipeline: benchPipeline, From: from, To: to, Yes: true, Override: longRange, ReportEvery: 250 * time.Millisecond})
		cancel()
		if err != nil || res.Progress == nil || !res.Progress.Complete() || res.Progress.Allocated != runs {
			b.Fatalf("backfill through the Schedule: %+v, %v", res.Progress, err)
		}
		sched += time.Since(start)
		waitEpisodesCompleted(b, w.Ledger, res.Keys)
		schedAll += time.Since(start)
		checkOnce(b, w, res.Keys)
		from = to
	}
	n := float64(b.N)
	b.ReportMetric(fast.Seconds()/n, "fast-s")
	b.ReportMetric(float64(runs)*n/fast.Seconds(), "fast-runs/s")
	b.ReportMetric(sched.Seconds()/n, "schedule-s")
	b.ReportMetric(float64(runs)*n/sched.Seconds(), "schedule-runs/s")
	b.ReportMetric(sched.Seconds()/fast.Seconds(), "fast/schedule-x")
	b.ReportMetric(fastAll.Seconds()/n, "fast-episodes-s")
	b.ReportMetric(schedAll.Seconds()/n, "schedule-episodes-s")
	b.ReportMetric(schedAll.Seconds()/fastAll.Seconds(), "fast/schedule-episodes-x")
}

// BenchmarkBackfillFastVsBare: the server's rate for bare workflows of a
// backfilled run's shape (a parent that starts one child and ends; the
// child with as many activities as the run's Episode has; the parent's
// bookkeeping is local activities, inside its workflow tasks), started the
// way the fast backfill starts its runs (20 in flight, each counted when
// the parent ends), then the fast backfill of as many times. Both are
// timed until the parents (runs) ended and until the children (episodes)
// completed.
func BenchmarkBackfillFastVsBare(b *testing.B) {
	runs := backfillRuns(b)
	st := startTemporal(b, defaultStore())
	w := startAllotWorker(b, st)
	startBareWorker(b, st)
	s := benchSchedules(b, st, w)
	ctx := context.Background()
	from := time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC)
	// One backfilled run, untimed: it warms up and tells the shape.
	if _, keys := fastBackfill(b, s, from.Add(-time.Hour), 1); len(keys) == 1 {
		waitEpisodesCompleted(b, w.Ledger, keys)
		parentActs, _ := countHistory(b, st.Client, keys[0])
		ep, err := w.Ledger.EpisodeByKey(ctx, benchPipeline, keys[0])
		if err != nil {
			b.Fatal(err)
		}
		childActs, _ := countHistory(b, st.Client, allot.EpisodeWorkflowID(benchPipeline, ep.ID))
		b.Logf("a backfilled run: %d task-queue activities in ScheduledRun, %d in its Episode", parentActs, childActs)
		bareShape = bareParentInput{ParentActivities: parentActs, ChildActivities: childActs}
	}
	var bareRuns, bareAll, fastRuns, fastAll time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		children := bareBackfill(b, st.Client, fmt.Sprintf("%d", i), runs, operator.DefaultBackfillMaxInFlight)
		bareRuns += time.Since(start)
		for _, id := range children {
			if err := st.Client.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
		bareAll += time.Since(start)

		start = time.Now()
		d, keys := fastBackfill(b, s, from, runs)
		fastRuns += d
		waitEpisodesCompleted(b, w.Ledger, keys)
		fastAll += time.Since(start)
		checkOnce(b, w, keys)
		from = from.Add(time.Duration(runs) * time.Hour)
	}
	total := float64(runs * b.N)
	b.ReportMetric(total/bareRuns.Seconds(), "bare-runs/s")
	b.ReportMetric(total/fastRuns.Seconds(), "fast-runs/s")
	b.ReportMetric(bareRuns.Seconds()/fastRuns.Seconds(), "fast/bare-runs")
	b.ReportMetric(total/bareAll.Seconds(), "bare-episodes/s")
	b.ReportMetric(total/fastAll.Seconds(), "fast-episodes/s")
	b.ReportMetric(bareAll.Seconds()/fastAll.Seconds(), "fast/bare-episodes")
	b.ReportMetric(fastRuns.Seconds()/float64(b.N), "fast-s")
}

// bareShape is the bare pair's activities, set from a backfilled run.
var bareShape = bareParentInput{ParentActivities: 0, ChildActivities: 3}

// bareBackfill starts n bare parents, at most inFlight at a time, each
// waited for until it ends; it returns the children's IDs.
func bareBackfill(b *testing.B, c client.Client, batch string, n, inFlight int) []string {
	b.Helper()
	ctx := context.Background()
	slots := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	children := make([]string, n)
	for i := range n {
		slots <- struct{}{}
		id := fmt.Sprintf("bare-backfill/%s/%d", batch, i)
		in := bareShape
		in.ChildID = id + "/child"
		children[i] = in.ChildID
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: bareQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}, bareParentWF, in)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := run.Get(ctx, nil); err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return children
}

// BenchmarkScheduledDelayDuringBackfill: scheduled runs (started as the
// Schedule starts them, at the scheduled priority) every 500 ms while a
// fast backfill runs, against the same probes on the idle server. Each
// probe's start delay is from its start to its first workflow task's start
// (history event times); its latency is until its ScheduledRun ended.
func BenchmarkScheduledDelayDuringBackfill(b *testing.B) {
	runs := backfillRuns(b)
	st := startTemporal(b, defaultStore())
	w := startAllotWorker(b, st)
	s := benchSchedules(b, st, w)
	p, err := w.Pipelines.Get(benchPipeline)
	if err != nil {
		b.Fatal(err)
	}
	probeAt := time.Date(2010, 1, 4, 0, 0, 0, 0, time.UTC)
	probe := func() (delay, latency time.Duration) {
		nominal := probeAt
		probeAt = probeAt.Add(time.Minute)
		start := time.Now()
		run, err := s.StartRun(context.Background(), p, nominal, operator.PriorityScheduled)
		if err != nil {
			b.Fatal(err)
		}
		if err := run.Get(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
		latency = time.Since(start)
		return firstTaskDelay(b, st.Client, run.GetID()), latency
	}
	idleDelay, idleLatency := []time.Duration{}, []time.Duration{}
	for range 10 {
		d, l := probe()
		idleDelay, idleLatency = append(idleDelay, d), append(idleLatency, l)
		time.Sleep(100 * time.Millisecond)
	}
	from := time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC)
	var delays, latencies []time.Duration
	for b.Loop() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			fastBackfill(b, s, from, runs)
		}()
		tick := time.NewTicker(500 * time.Millisecond)
	probes:
		for {
			select {
			case <-done:
				break probes
			case <-tick.C:
				d, l := probe()
				delays, latencies = append(delays, d), append(latencies, l)
			}
		}
		tick.Stop()
		from = from.Add(time.Duration(runs) * time.Hour)
	}
	b.ReportMetric(p95(delays).Seconds(), "delay-p95-s")
	b.ReportMetric(p95(latencies).Seconds(), "latency-p95-s")
	b.ReportMetric(p95(idleDelay).Seconds(), "idle-delay-p95-s")
	b.ReportMetric(p95(idleLatency).Seconds(), "idle-latency-p95-s")
	b.ReportMetric(float64(len(delays)), "probes")
}

// firstTaskDelay is the time from a workflow's start to its first workflow
// task's start, from its history.
func firstTaskDelay(b *testing.B, c client.Client, id string) time.Duration {
	b.Helper()
	var started time.Time
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			started = e.GetEventTime().AsTime()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			return e.GetEventTime().AsTime().Sub(started)
		}
	}
	b.Fatalf("%s: no workflow task started", id)
	return 0
}

func p95(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*95+99)/100-1]
}
