package ledger

import (
	"context"
	"strconv"
	"testing"
	"time"

	"allot"
)

// BenchmarkAdmissionWithHold is what the hold for scheduled runs costs an
// admission (budget_holds.go): a manual run's paid task admitted by a
// budget holding for 48 scheduled runs still due, against the same
// admission by a budget that holds nothing, side by side in one ledger,
// alternating which goes first. The admission reads the open hold in its
// transaction; this says what that read adds to the write it guards. The
// ledger holds 1,000 episodes of history first.
//
//	ALLOT_TEST_POSTGRES_DSN=... go test -run '^$' -bench AdmissionWithHold -benchtime 2000x ./internal/ledger/
func BenchmarkAdmissionWithHold(b *testing.B) {
	for _, driver := range benchDrivers() {
		b.Run(driver, func(b *testing.B) {
			ctx := context.Background()
			l := freshBenchLedger(b, driver)
			if err := seedEpisodes(ctx, l, "bench", 1_000, 100); err != nil {
				b.Fatal(err)
			}
			start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			var runs []ScheduledRun
			for h := range 48 {
				runs = append(runs, ScheduledRun{Pipeline: "bench", At: start.Add(time.Duration(h+1) * time.Hour), Amount: 100})
			}
			limit := allot.MaxBudgetLimit
			held, err := l.HoldScheduled(ctx, HoldInput{Budget: BudgetLimit{Budget: "held", Currency: "USD", Limit: limit}, Period: "P", Runs: runs, At: start})
			if err != nil || held.HeldRuns != 48 {
				b.Fatalf("hold: %+v, %v", held, err)
			}
			if driver == "postgres" {
				// As autovacuum does to a live ledger within its first
				// minute (BenchmarkAllocateVsRawCommit): a plan PostgreSQL
				// caches for the hold's read while the tables are empty
				// scans them, and it is made again only once they are
				// analyzed.
				if _, err := l.w.ExecContext(ctx, `ANALYZE`); err != nil {
					b.Fatal(err)
				}
			}
			var n int64
			admit := func(budget string) time.Duration {
				n++
				key := "bench/manual-" + strconv.FormatInt(n, 10)
				res, err := l.Allocate(ctx, AllocateInput{Pipeline: "bench", Key: key, Period: "P" + strconv.FormatInt(n/100, 10), NominalTime: start})
				if err != nil {
					b.Fatal(err)
				}
				ref := PaidTaskRef{Pipeline: "bench", EpisodeID: res.Episode.ID, Step: "video"}
				began := time.Now()
				if _, err := l.WriteIntentReserving(ctx, ref, allot.IdempotencyKey("bench", res.Episode.ID, "video", 0), "bench",
					[]Reservation{{Budget: budget, Period: "P", Currency: "USD", Limit: limit, Amount: 1}}); err != nil {
					b.Fatal(err)
				}
				return time.Since(began)
			}
			var withHold, without time.Duration
			i := 0
			for b.Loop() {
				i++
				if i%2 == 0 {
					withHold += admit("held")
					without += admit("plain")
				} else {
					without += admit("plain")
					withHold += admit("held")
				}
			}
			b.ReportMetric(float64(withHold.Microseconds())/float64(i), "µs/held-admission")
			b.ReportMetric(float64(without.Microseconds())/float64(i), "µs/plain-admission")
			b.ReportMetric(withHold.Seconds()/without.Seconds(), "ratio-held/plain")
		})
	}
}
