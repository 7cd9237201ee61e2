package console

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/pipeline"
)

// benchLedger is the budget fixture's pipelines on a ledger with n
// completed episodes of history (imported, as an old system's runs are),
// before the current week, then the same current week at every size: a
// few waiting episodes and runs.
func benchLedger(b *testing.B, n int) ReadInput {
	b.Helper()
	ctx := context.Background()
	led, err := ledger.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "allot.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { led.Close() })
	set, err := pipeline.Parse([]byte(ledgertest.BudgetSet), "bench")
	if err != nil {
		b.Fatal(err)
	}
	p, err := set.Get("weekly")
	if err != nil {
		b.Fatal(err)
	}
	now := ledgertest.BudgetMonday
	const batch = 5000
	for start := 0; start < n; start += batch {
		ib := ledger.ImportBatch{Pipeline: "weekly", Plan: p.Plan(), At: now, KeyFor: allot.IdempotencyKey}
		for i := start; i < min(start+batch, n); i++ {
			old := fmt.Sprintf("old-%d", i)
			nominal := now.Add(-time.Duration(i+200) * time.Hour)
			ib.Records = append(ib.Records, ledger.ImportRecord{OldID: old, Source: "bench", Digest: old, Key: allot.LegacyKey("weekly", old),
				Period: p.PeriodOf(nominal), NominalTime: nominal, Outcome: allot.OutcomeCompleted, Reason: "imported", CompletedAt: nominal})
		}
		if _, err := led.Import(ctx, ib); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 10 {
		res, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly", Key: fmt.Sprintf("weekly/now-%d", i), Period: p.PeriodOf(now), NominalTime: now})
		if err != nil {
			b.Fatal(err)
		}
		if err := led.RecordEpisodeOutcome(ctx, "weekly", res.Episode.ID, allot.OutcomeNeedsAttention, "OutcomeUnknown", now); err != nil {
			b.Fatal(err)
		}
		if _, err := led.RecordRunOutcome(ctx, ledger.RunOutcome{Pipeline: "weekly", AllocationKey: res.Episode.AllocationKey, RunID: "r",
			Outcome: allot.OutcomeAllocated, Reason: ledger.ReasonNewEpisode, EpisodeID: res.Episode.ID, Period: res.Episode.Period, RecordedAt: now}); err != nil {
			b.Fatal(err)
		}
	}
	return ReadInput{Ledger: led, Pipelines: set, Now: now.Add(time.Hour), WebUI: "http://ui.test"}
}

// BenchmarkBoard reads and renders the page at 1k and at 100k episodes of
// history, side by side in one run; it reports each size's time per page,
// their ratio (the page reads indexed pages, so history should cost
// little), and at 100k what rendering costs against the ledger reads.
//
//	go test -run '^$' -bench BenchmarkBoard -benchtime 200x ./internal/console
func BenchmarkBoard(b *testing.B) {
	sizes := []int{1_000, 100_000}
	ins := make([]ReadInput, len(sizes))
	for i, n := range sizes {
		ins[i] = benchLedger(b, n)
	}
	ctx := context.Background()
	read := make([]time.Duration, len(sizes))
	render := make([]time.Duration, len(sizes))
	iterations := 0
	for b.Loop() {
		iterations++
		for i, in := range ins {
			t0 := time.Now()
			board, err := Read(ctx, in)
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := pageTemplate.ExecuteTemplate(io.Discard, "page", view{Board: board}); err != nil {
				b.Fatal(err)
			}
			read[i] += t1.Sub(t0)
			render[i] += time.Since(t1)
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(iterations) }
	b.ReportMetric(per(read[0]+render[0]), "µs/page-1k")
	b.ReportMetric(per(read[1]+render[1]), "µs/page-100k")
	b.ReportMetric(float64(read[1]+render[1])/float64(read[0]+render[0]), "t100k/t1k")
	b.ReportMetric(float64(render[1])/float64(read[1]), "render/read-100k")
	b.ReportMetric(0, "ns/op") // the two sizes together: see the metrics above
}
