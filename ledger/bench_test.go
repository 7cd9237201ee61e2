package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Allocate's cost must not grow with the ledger's history. The benchmarks
// allocate new keys in ledgers seeded with 1,000 and 1,000,000 episodes, by
// one caller and by 32 concurrent callers:
//
//	go test -run '^$' -bench Allocate -benchtime 2s ./ledger/
//
// Seeded ledgers are built once per process and shared by the sub-benchmarks.

func TestMain(m *testing.M) {
	code := m.Run()
	benchLedgers.cleanup()
	os.Exit(code)
}

type benchCache struct {
	sync.Mutex
	m        map[string]*Ledger
	cleanups []func()
}

var benchLedgers = &benchCache{m: map[string]*Ledger{}}

func (c *benchCache) cleanup() {
	c.Lock()
	defer c.Unlock()
	// Reverse order: close ledgers before removing their files or schemas.
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
}

// benchLedger returns a ledger of the driver seeded with size episodes.
func benchLedger(b *testing.B, driver string, size int) *Ledger {
	b.Helper()
	benchLedgers.Lock()
	defer benchLedgers.Unlock()
	name := fmt.Sprintf("%s/%d", driver, size)
	if l, ok := benchLedgers.m[name]; ok {
		return l
	}
	ctx := context.Background()
	var (
		l   *Ledger
		err error
	)
	switch driver {
	case "sqlite":
		dir, derr := os.MkdirTemp("", "allot-ledger-bench-")
		if derr != nil {
			b.Fatal(derr)
		}
		benchLedgers.cleanups = append(benchLedgers.cleanups, func() { _ = os.RemoveAll(dir) })
		l, err = Open(ctx, "sqlite:"+filepath.Join(dir, "ledger.db"))
	case "postgres":
		dsn, drop := newPostgresSchema(b)
		benchLedgers.cleanups = append(benchLedgers.cleanups, drop)
		l, err = Open(ctx, dsn)
	}
	if err != nil {
		b.Fatal(err)
	}
	benchLedgers.cleanups = append(benchLedgers.cleanups, func() { _ = l.Close() })
	start := time.Now()
	if err := seedEpisodes(ctx, l, "bench", size, 100); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %s with %d episodes in %v", driver, size, time.Since(start).Round(time.Millisecond))
	benchLedgers.m[name] = l
	return l
}

// seedEpisodes bulk-inserts n episodes, perPeriod to a period, in one
// transaction through one prepared multi-row statement: the fast way to a
// large history, and valid data (dense sequences, one key per episode).
func seedEpisodes(ctx context.Context, l *Ledger, pipeline string, n, perPeriod int) error {
	const rowsPerStmt = 500
	const cols = 7
	stmtFor := func(rows int) string {
		row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ", 'allocated')"
		return l.d.q(`INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status) VALUES ` +
			strings.TrimSuffix(strings.Repeat(row+", ", rows), ", "))
	}
	tx, err := l.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	full, err := tx.PrepareContext(ctx, stmtFor(rowsPerStmt))
	if err != nil {
		return err
	}
	defer full.Close()
	base := time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC)
	args := make([]any, 0, rowsPerStmt*cols)
	for i := 0; i < n; {
		args = args[:0]
		rows := min(rowsPerStmt, n-i)
		for r := 0; r < rows; r, i = r+1, i+1 {
			p, seq := i/perPeriod, i%perPeriod
			period := fmt.Sprintf("S%07d", p)
			at := l.d.timeArg(base.Add(time.Duration(p) * time.Hour))
			args = append(args, pipeline, EpisodeID(period, seq), period, seq, fmt.Sprintf("seed-%d", i), at, at)
		}
		if rows == rowsPerStmt {
			_, err = full.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, stmtFor(rows), args...)
		}
		if err != nil {
			return err
		}
	}
	return tx.Commit()
}

// benchKeys is process-wide so that every run of a benchmark function, which
// the testing package repeats with growing b.N, allocates fresh keys.
var benchKeys atomic.Int64

func BenchmarkAllocate(b *testing.B) {
	drivers := []string{"sqlite"}
	if os.Getenv(postgresDSNEnv) != "" {
		drivers = append(drivers, "postgres")
	}
	for _, driver := range drivers {
		for _, size := range []int{1_000, 1_000_000} {
			for _, callers := range []int{1, 32} {
				b.Run(fmt.Sprintf("%s/episodes=%d/callers=%d", driver, size, callers), func(b *testing.B) {
					benchAllocate(b, benchLedger(b, driver, size), callers)
				})
			}
		}
	}
}

func benchAllocate(b *testing.B, l *Ledger, callers int) {
	ctx := context.Background()
	// New keys, 100 to a period as in the seeded history, so each call is
	// the full allocation path: look-up, max(sequence), insert, commit.
	allocate := func() error {
		i := benchKeys.Add(1)
		r, err := l.Allocate(ctx, AllocateInput{
			Pipeline: "bench", Key: fmt.Sprintf("bench-%d", i), Period: fmt.Sprintf("B%07d", i/100),
			NominalTime: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		})
		if err == nil && r.Decision != DecisionAllocated {
			err = fmt.Errorf("decision %s, want allocated", r.Decision)
		}
		return err
	}
	if callers == 1 {
		for b.Loop() {
			if err := allocate(); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	// RunParallel starts parallelism*GOMAXPROCS goroutines.
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((callers + procs - 1) / procs)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := allocate(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
