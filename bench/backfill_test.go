package bench

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/pipeline"
)

// backfillRuns is how many nominal times BenchmarkBackfill runs:
// ALLOT_BENCH_BACKFILL_RUNS, default 2,000.
func backfillRuns(tb testing.TB) int {
	if s := os.Getenv("ALLOT_BENCH_BACKFILL_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			tb.Fatalf("ALLOT_BENCH_BACKFILL_RUNS=%q is not a positive number", s)
		}
		return n
	}
	return 2_000
}

// BenchmarkBackfill times a backfill of 2,000 nominal times of one pipeline
// through the real path: the pipeline's Schedule (an hourly interval spec,
// paused, so that only the backfill acts), operator.Schedules.Backfill with
// consent (Yes, as `starter schedule backfill --yes` sends it), and allot's
// worker in this process on a SQLite ledger. A backfill is done when every
// one of its keys has a run outcome in the ledger that it did not have
// before (Backfill follows them unless NoWait, as `starter schedule
// backfill --via-schedule` does); the clock starts before Backfill counts the times:
//
//	go test -run '^$' -bench Backfill -benchtime 1x -timeout 30m ./bench/
//
// It reports backfill-s and runs/s until every run recorded its outcome,
// and episodes-s until every episode the backfill allocated has completed
// its three local steps. Each iteration backfills the next 2,000 hours
// (ALLOT_BENCH_BACKFILL_RUNS changes the count); every time allocates.
//
// Temporal's scheduler starts a backfill's runs at most
// BackfillsPerIteration (10) per iteration of its workflow and sleeps a
// second between iterations when an allow_all backfill is pending
// (go.temporal.io/server/service/worker/scheduler, v1.32.1), so no backfill
// goes faster than about 10 runs/s, whatever the worker does: the
// benchmark also reports scheduler-floor-s, runs ÷ 10.
func BenchmarkBackfill(b *testing.B) {
	runs := backfillRuns(b)
	st := startTemporal(b, defaultStore())
	w := startAllotWorker(b, st)
	ctx := context.Background()
	s := &operator.Schedules{
		Client: st.Client, Pipelines: w.Pipelines, TaskQueue: w.TaskQueue, Namespace: st.Namespace,
		Ledger: w.Ledger, LedgerID: w.Ledger.ID(),
	}
	if _, err := s.Create(ctx, operator.ScheduleInput{
		Pipeline: benchPipeline, Paused: true, Note: "backfill benchmark",
		Override: pipeline.Schedule{Interval: "1h"},
	}); err != nil {
		b.Fatal(err)
	}
	from := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)
	var backfillTime, episodesTime time.Duration
	var total int
	for b.Loop() {
		to := from.Add(time.Duration(runs) * time.Hour)
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
		res, err := s.Backfill(wctx, operator.BackfillInput{
			Pipeline: benchPipeline, From: from, To: to, Yes: true, ReportEvery: 250 * time.Millisecond,
		})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if res.Runs != runs || !res.Sent || res.Progress == nil {
			b.Fatalf("backfill %+v, want %d runs sent and followed", res, runs)
		}
		backfillTime += time.Since(start)
		if p := *res.Progress; !p.Complete() || p.Allocated != runs {
			b.Fatalf("backfill progress %+v, want %d allocated", p, runs)
		}
		waitEpisodesCompleted(b, w.Ledger, res.Keys)
		episodesTime += time.Since(start)
		total += runs
		from = to
	}
	b.ReportMetric(backfillTime.Seconds()/float64(b.N), "backfill-s")
	b.ReportMetric(float64(total)/backfillTime.Seconds(), "runs/s")
	b.ReportMetric(episodesTime.Seconds()/float64(b.N), "episodes-s")
	b.ReportMetric(float64(runs)/10, "scheduler-floor-s")
}

// waitEpisodesCompleted waits (20 minutes) until every key's episode has
// completed.
func waitEpisodesCompleted(tb testing.TB, led *ledger.Ledger, keys []string) {
	tb.Helper()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	deadline := time.Now().Add(20 * time.Minute)
	for {
		eps, err := led.ListEpisodes(context.Background(), benchPipeline, "")
		if err != nil {
			tb.Fatal(err)
		}
		done := 0
		for _, e := range eps {
			if want[e.AllocationKey] && e.Status == ledger.EpisodeCompleted {
				done++
			}
		}
		if done == len(want) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d episodes completed", done, len(want))
		}
		time.Sleep(250 * time.Millisecond)
	}
}
