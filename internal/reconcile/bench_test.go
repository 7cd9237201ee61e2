package reconcile_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the benchmark loads its ledger with plain SQL

	"allot/internal/ledger"
	"allot/internal/reconcile"
	"allot/paidvendor"
	"allot/pipeline"
)

// BenchmarkReconcileBill reconciles a bill of 1,000 and one of 100,000
// charges, side by side, each against a SQLite ledger holding exactly those
// tasks and costs (every line explained: the common case), and reports the
// cost per charge of each, their ratio (goal: 100k/1k <= 1.5), and the peak
// heap of each pass (streaming: bounded by the page, not the bill).
//
//	go test -run '^$' -bench ReconcileBill -benchtime 1x ./internal/reconcile/
func BenchmarkReconcileBill(b *testing.B) {
	sizes := []int{1_000, 100_000}
	perLine := map[int]float64{}
	peak := map[int]uint64{}
	for _, n := range sizes {
		led := billedLedger(b, n)
		var total time.Duration
		for range b.N {
			// A fresh account each pass: the whole bill is read and judged.
			acct := fmt.Sprintf("bench-%d-%d", n, time.Now().UnixNano())
			r := &reconcile.Reconciler{Ledger: led, Pipelines: benchSet(b), PageSize: 500, Now: func() time.Time { return time.Now().Add(2 * time.Hour) },
				Vendors: []reconcile.Vendor{{Name: pipeline.DefaultVendor, Names: []string{pipeline.DefaultVendor}, Account: acct, Bill: generatedBill{n: n}}}}
			runtime.GC()
			stop := sampleHeap()
			start := time.Now()
			res := r.Run(context.Background())
			total += time.Since(start)
			if p := stop(); p > peak[n] {
				peak[n] = p
			}
			if len(res) != 1 || !res[0].Reconciled || res[0].Judged != n || len(res[0].Drift) != 0 {
				b.Fatalf("%d charges: %+v", n, res)
			}
		}
		perLine[n] = float64(total.Microseconds()) / float64(b.N*n)
		b.ReportMetric(perLine[n], fmt.Sprintf("µs/charge@%d", n))
		b.ReportMetric(float64(peak[n])/(1<<20), fmt.Sprintf("MiB-peak-heap@%d", n))
	}
	b.ReportMetric(perLine[sizes[1]]/perLine[sizes[0]], "per-charge-ratio-100k/1k")
	b.ReportMetric(float64(peak[sizes[1]])/float64(peak[sizes[0]]), "peak-heap-ratio-100k/1k")
}

// sampleHeap samples the heap in use until the returned func is called,
// which returns the largest sample.
func sampleHeap() func() uint64 {
	var max atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > max.Load() {
				max.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); <-stopped; return max.Load() }
}

func benchSet(b *testing.B) *pipeline.Set {
	set, err := pipeline.Parse([]byte("[[pipeline]]\nname = \"bulk\"\n  [[pipeline.step]]\n  name = \"eval\"\n  kind = \"paid\"\n"), "bench")
	if err != nil {
		b.Fatal(err)
	}
	return set
}

// The i-th task of the bench: its episode, key, reference and price.
func benchEpisode(i int) string { return fmt.Sprintf("2026-W32-%d", i) }
func benchKey(i int) string     { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
func benchRef(i int) string     { return fmt.Sprintf("vt_%016x", i) }

const benchPrice = 125

// billedLedger is a SQLite ledger holding n succeeded paid tasks of
// pipeline "bulk" with their costs, loaded with plain SQL in one
// transaction (the ledger's API would take minutes for 100,000).
func billedLedger(b *testing.B, n int) *ledger.Ledger {
	b.Helper()
	path := filepath.Join(b.TempDir(), "allot.db")
	led, err := ledger.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		b.Fatal(err)
	}
	led.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC).Format("2006-01-02T15:04:05.000000Z07:00")
	for i := range n {
		ep := benchEpisode(i)
		if _, err := tx.Exec(`INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at) VALUES ('bulk', ?, '2026-W32', ?, ?, ?, ?)`,
			ep, i, "bulk/k"+strconv.Itoa(i), at, at); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO paid_tasks (pipeline, episode_id, step, revision, idempotency_key, state, remote_ref, created_at, updated_at) VALUES ('bulk', ?, 'eval', 0, ?, 'succeeded', ?, ?, ?)`,
			ep, benchKey(i), benchRef(i), at, at); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO cost_entries (remote_ref, pipeline, episode_id, step, revision, amount, currency, recorded_at) VALUES (?, 'bulk', ?, 'eval', 0, ?, 'USD', ?)`,
			benchRef(i), ep, benchPrice, at); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	led, err = ledger.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { led.Close() })
	return led
}

// generatedBill is a vendor's bill of n charges, one per bench task,
// generated page by page: the reader holds no more than a page either.
type generatedBill struct{ n int }

func (g generatedBill) ReadBill(_ context.Context, in paidvendor.ReadBillInput) (paidvendor.BillPage, error) {
	from := 0
	if in.After != "" {
		var err error
		if from, err = strconv.Atoi(in.After); err != nil {
			return paidvendor.BillPage{}, err
		}
	}
	to := min(g.n, from+in.Limit)
	page := paidvendor.BillPage{Next: in.After, HasMore: to < g.n}
	for i := from; i < to; i++ {
		page.Lines = append(page.Lines, paidvendor.Charge{ID: fmt.Sprintf("ch_%09d", i+1), TaskID: benchRef(i), IdempotencyKey: benchKey(i), Amount: benchPrice, Currency: "USD"})
	}
	if to > from {
		page.Next = strconv.Itoa(to)
	}
	return page, nil
}
