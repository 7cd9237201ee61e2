package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
//	go test -run '^$' -bench Allocate -benchtime 2s ./internal/ledger/
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

// benchDrivers is SQLite, and PostgreSQL when ALLOT_TEST_POSTGRES_DSN is set.
func benchDrivers() []string {
	drivers := []string{"sqlite"}
	if os.Getenv(postgresDSNEnv) != "" {
		drivers = append(drivers, "postgres")
	}
	return drivers
}

func BenchmarkAllocate(b *testing.B) {
	for _, driver := range benchDrivers() {
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

// BenchmarkAllocateVsRawCommit sets Allocate beside the simplest durable
// write of the same database: one single-row INSERT into a scratch table (a
// key and a note; a table and its primary-key index on both databases),
// committed per transaction. Both run on the ledger's own writer pool and
// transaction options, so they share everything but the SQL: on SQLite the
// DSN and its pragmas (WAL, synchronous=FULL), the single writer connection
// and BEGIN IMMEDIATE; on PostgreSQL the server, the connection settings and
// synchronous_commit. An allocation can be no faster than such a commit, so
// the ratio of the two rates says how much of Allocate's time is its own
// work rather than the commit's:
//
//	go test -run '^$' -bench AllocateVsRawCommit -benchtime 3s -count 5 ./internal/ledger/
//
// The ratio cannot reach 1 even for free reads: committing an episode
// writes a page of every b-tree its row enters, where the scratch row
// writes two. On SQLite (migration 0006) those are four: the table,
// clustered on its primary key, and the key, period-sequence and created_at
// indexes (the outcome index holds only reported outcomes). With b-tree
// rebalancing that is about 5.3 WAL frames per allocation against 2.1 per
// raw commit. On PostgreSQL they are five: the heap, its primary key and
// the same three indexes.
//
// Each iteration does one raw commit and one allocation (a new key in one
// pipeline, 100 to a period), in alternating order, and times each, so that
// both rates come from the same run under the same conditions (WAL size,
// checkpoints, disk cache, other load). It reports raw-commits/s, allocs/s
// and ratio-vs-raw-commit (allocs/s ÷ raw-commits/s); ns/op is one raw
// commit plus one allocation.
//
// One caller allocates, so group commit (allocbatch.go) has nothing to
// group: each allocation runs alone, as before it; BenchmarkGroupCommit
// measures concurrent callers.
//
// The ledger is fresh for every run and holds 1,000 episodes of history
// first. On PostgreSQL it is then analyzed, as autovacuum does to a live
// ledger within its first minute: without statistics the planner cannot
// tell the key's unique index from the pipeline's created_at index, and a
// plan it caches meanwhile may look the key up by scanning the pipeline's
// history, which is not what a running ledger does.
func BenchmarkAllocateVsRawCommit(b *testing.B) {
	for _, driver := range benchDrivers() {
		b.Run(driver, func(b *testing.B) {
			ctx := context.Background()
			l := freshBenchLedger(b, driver)
			if err := seedEpisodes(ctx, l, "bench", 1_000, 100); err != nil {
				b.Fatal(err)
			}
			if driver == "postgres" {
				if _, err := l.w.ExecContext(ctx, `ANALYZE episodes`); err != nil {
					b.Fatal(err)
				}
			}
			rawCommit := rawCommitter(b, l)
			nominal := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			allocate := func(i int64) error {
				r, err := l.Allocate(ctx, AllocateInput{
					Pipeline: "bench", Key: "vs-raw-" + strconv.FormatInt(i, 10),
					Period: "V" + strconv.FormatInt(i/100, 10), NominalTime: nominal,
				})
				if err == nil && r.Decision != DecisionAllocated {
					err = fmt.Errorf("decision %s, want allocated", r.Decision)
				}
				return err
			}
			var (
				rawTime, allocTime time.Duration
				n                  int64
			)
			for b.Loop() {
				n++
				start := time.Now()
				var mid, end time.Time
				if n%2 == 0 {
					if err := rawCommit(ctx, n); err != nil {
						b.Fatalf("raw commit: %v", err)
					}
					mid = time.Now()
					if err := allocate(n); err != nil {
						b.Fatalf("allocate: %v", err)
					}
					end = time.Now()
					rawTime += mid.Sub(start)
					allocTime += end.Sub(mid)
				} else {
					if err := allocate(n); err != nil {
						b.Fatalf("allocate: %v", err)
					}
					mid = time.Now()
					if err := rawCommit(ctx, n); err != nil {
						b.Fatalf("raw commit: %v", err)
					}
					end = time.Now()
					allocTime += mid.Sub(start)
					rawTime += end.Sub(mid)
				}
			}
			rawRate := float64(n) / rawTime.Seconds()
			allocRate := float64(n) / allocTime.Seconds()
			b.ReportMetric(rawRate, "raw-commits/s")
			b.ReportMetric(allocRate, "allocs/s")
			b.ReportMetric(allocRate/rawRate, "ratio-vs-raw-commit")
		})
	}
}

// freshBenchLedger opens an empty ledger of the driver for one benchmark
// run, closed (and its files or schema removed) when the run ends.
func freshBenchLedger(b *testing.B, driver string) *Ledger {
	b.Helper()
	var url string
	switch driver {
	case "sqlite":
		url = "sqlite:" + filepath.Join(b.TempDir(), "ledger.db")
	case "postgres":
		dsn, drop := newPostgresSchema(b)
		b.Cleanup(drop) // runs after Close: cleanups run last first
		url = dsn
	default:
		b.Fatalf("unknown driver %q", driver)
	}
	l, err := Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// rawCommitter returns the baseline of BenchmarkAllocateVsRawCommit: one
// transaction on l's writer pool, begun as the ledger begins its own (BEGIN
// IMMEDIATE on SQLite, READ COMMITTED on PostgreSQL), that inserts one row
// into a scratch table through a statement prepared once, then commits. It first makes sure that a SQLite commit is durable
// (synchronous=FULL in WAL mode) and logs PostgreSQL's durability settings,
// since a baseline without fsync would make any ratio meaningless.
func rawCommitter(b *testing.B, l *Ledger) func(ctx context.Context, id int64) error {
	b.Helper()
	ctx := context.Background()
	switch l.d.name {
	case "sqlite":
		for pragma, want := range map[string]string{"synchronous": "2", "journal_mode": "wal"} {
			var got string
			if err := l.w.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
				b.Fatal(err)
			}
			if !strings.EqualFold(got, want) {
				b.Fatalf("the ledger's writer has PRAGMA %s = %s, want %s: the benchmark measures durable commits", pragma, got, want)
			}
		}
	case "postgres":
		var settings []string
		for _, name := range []string{"fsync", "synchronous_commit", "wal_sync_method"} {
			var v string
			if err := l.w.QueryRowContext(ctx, "SHOW "+name).Scan(&v); err != nil {
				b.Fatal(err)
			}
			settings = append(settings, name+"="+v)
		}
		b.Logf("postgres: %s", strings.Join(settings, " "))
	}
	if _, err := l.w.ExecContext(ctx, `CREATE TABLE bench_raw_commit (id BIGINT PRIMARY KEY, note TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	stmt, err := l.w.PrepareContext(ctx, l.d.q(`INSERT INTO bench_raw_commit (id, note) VALUES (?, ?)`))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stmt.Close() })
	return func(ctx context.Context, id int64) error {
		tx, err := l.w.BeginTx(ctx, l.txOptions)
		if err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, id, "raw-"+strconv.FormatInt(id, 10)); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
}

// BenchmarkGroupCommit measures group commit (allocbatch.go): allocations
// by 1 and by 32 concurrent callers in one pipeline, batched (the default)
// and unbatched (each its own transaction, as before), beside the raw
// durable single-row commit of BenchmarkAllocateVsRawCommit by one caller
// and by as many callers as allocate, all on the same ledger and in the
// same run:
//
//	ALLOT_TEST_POSTGRES_DSN=... go test -run '^$' -bench GroupCommit -benchtime 10s ./internal/ledger/
//
// An iteration is a round of phases of groupCommitPhase operations each
// (raw commits by one caller; with several callers raw commits by them all;
// batched and unbatched allocations by the callers), in an order that rotates from
// round to round, so that every rate sees the same conditions (WAL size,
// checkpoints, other load). It reports the rates of each (raw-commits/s is
// one caller's, raw-commits-concurrent/s the callers'; allocs/s is
// batched, unbatched-allocs/s not), allocs/tx (requests per batched
// transaction) and the ratios of allocs/s to the others. The goal of group
// commit: at 32 callers allocs/s at least twice raw-commits/s; at 1 caller
// allocs/s no lower than unbatched-allocs/s.
func BenchmarkGroupCommit(b *testing.B) {
	for _, driver := range benchDrivers() {
		for _, callers := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/callers=%d", driver, callers), func(b *testing.B) {
				benchGroupCommit(b, driver, callers)
			})
		}
	}
}

// groupCommitPhase is the number of operations of each phase of a round:
// one for one caller, so that its three rates alternate call by call, and
// 8 per caller for several, so that every caller stays busy.
func groupCommitPhase(callers int) int {
	if callers == 1 {
		return 1
	}
	return 8 * callers
}

func benchGroupCommit(b *testing.B, driver string, callers int) {
	ctx := context.Background()
	l := freshBenchLedger(b, driver)
	if err := seedEpisodes(ctx, l, "bench", 1_000, 100); err != nil {
		b.Fatal(err)
	}
	if driver == "postgres" {
		if _, err := l.w.ExecContext(ctx, `ANALYZE episodes`); err != nil {
			b.Fatal(err)
		}
	}
	rawCommit := rawCommitter(b, l)
	var rawIDs atomic.Int64
	raw := func() error { return rawCommit(ctx, rawIDs.Add(1)) }
	nominal := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	allocate := func() error {
		i := benchKeys.Add(1)
		r, err := l.Allocate(ctx, AllocateInput{
			Pipeline: "bench", Key: "gc-" + strconv.FormatInt(i, 10),
			Period: "G" + strconv.FormatInt(i/100, 10), NominalTime: nominal,
		})
		if err == nil && r.Decision != DecisionAllocated {
			err = fmt.Errorf("decision %s, want allocated", r.Decision)
		}
		return err
	}
	type phase struct {
		name    string
		callers int
		off     bool // unbatched
		op      func() error
		time    time.Duration
		txs     int64
	}
	phases := []*phase{
		{name: "raw commits by one caller", callers: 1, op: raw},
		{name: "batched allocations", callers: callers, op: allocate},
		{name: "unbatched allocations", callers: callers, off: true, op: allocate},
	}
	if callers > 1 {
		phases = append(phases, &phase{name: "concurrent raw commits", callers: callers, op: raw})
	}
	rounds := 0
	for b.Loop() {
		for k := range phases {
			p := phases[(rounds+k)%len(phases)]
			// Set between phases, while no allocation runs.
			l.alloc.off = p.off
			txs := l.alloc.txs.Load()
			d, err := runConcurrently(p.callers, groupCommitPhase(callers), p.op)
			if err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
			p.time += d
			p.txs += l.alloc.txs.Load() - txs
		}
		rounds++
	}
	l.alloc.off = false
	ops := float64(rounds * groupCommitPhase(callers))
	rate := func(p *phase) float64 { return ops / p.time.Seconds() }
	raw1, batched, unbatched := rate(phases[0]), rate(phases[1]), rate(phases[2])
	b.ReportMetric(raw1, "raw-commits/s")
	b.ReportMetric(batched, "allocs/s")
	b.ReportMetric(unbatched, "unbatched-allocs/s")
	b.ReportMetric(ops/float64(phases[1].txs), "allocs/tx")
	b.ReportMetric(batched/raw1, "ratio-vs-raw-commit")
	b.ReportMetric(batched/unbatched, "ratio-vs-unbatched")
	if callers > 1 {
		rawN := rate(phases[3])
		b.ReportMetric(rawN, "raw-commits-concurrent/s")
		b.ReportMetric(batched/rawN, "ratio-vs-concurrent-raw")
	}
}

// runConcurrently runs op n times from callers goroutines and returns how
// long that took, or the first error.
func runConcurrently(callers, n int, op func() error) (time.Duration, error) {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := op(); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), first
}
