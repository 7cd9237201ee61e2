package main

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"allot/internal/chaos"
)

// TestSmallScale is how CI runs the chaos test: the small scale once, on
// PostgreSQL with three workers when ALLOT_TEST_POSTGRES_DSN is set (as
// the README's test command sets it), else on SQLite with one worker. It
// fails on any violation. CHAOS_SEED picks another seed (default 1).
func TestSmallScale(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: builds and runs the Temporal server, vendors and workers as processes for about two minutes")
	}
	seed := uint64(1)
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		seed = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	progress := &logWriter{t: t}
	sum, err := chaos.Run(ctx, chaos.Config{
		Scale:    chaos.Scales["small"],
		Seed:     seed,
		Postgres: os.Getenv("ALLOT_TEST_POSTGRES_DSN"),
		Progress: progress,
		Bins:     testBinaries(t),
	})
	progress.flush()
	if err != nil {
		t.Fatalf("chaos run: %v", err)
	}
	t.Log(sum.Line())
	for _, v := range sum.Violations {
		t.Errorf("violation: %s", v)
	}
	if sum.Episodes == 0 || sum.PaidTasks == 0 || sum.WorkerKills == 0 || sum.TemporalRestarts != 1 || sum.VendorRestarts != 1 ||
		sum.VendorPauses != 2 || sum.VendorTrips == 0 || sum.VendorMaxInFlight == 0 {
		t.Errorf("the run did not do what it should have: %s", sum.Line())
	}
	// The activity-adapter vendor took tasks through its activities, and
	// its pipeline's budget parked some episodes.
	if sum.ActivityCharges == 0 || sum.ActivityRefusals == 0 {
		t.Errorf("activity-adapter vendor: %s", sum.Line())
	}
	if sum.Charges != sum.PaidTasks {
		t.Errorf("%d charges for %d paid tasks", sum.Charges, sum.PaidTasks)
	}
	// chaos-batch's items went through vendor batches, each charged once
	// (check's violations), and some batches ended half way, so their
	// unfinished items went again in later batches under the same keys.
	if sum.Batches == 0 || sum.BatchItems == 0 || sum.BatchCharges != sum.BatchItems || sum.BatchesEndedEarly == 0 || sum.BatchItemsResent == 0 {
		t.Errorf("batches: %s", sum.Line())
	}
	// The budgets are sized below the load: some ran out, none was
	// exceeded, and the bill is the ledger's.
	if sum.BudgetsExhausted == 0 || sum.BudgetRefusals == 0 || sum.BudgetsOverLimit != 0 || sum.BudgetUseMin < 990 || sum.Bill != sum.Costs {
		t.Errorf("budgets: %s", sum.Line())
	}
}

// TestBrokenVendorIsCaught is the checks' self-test: the strict vendor
// ignores idempotency keys, so the resubmit a person runs for an episode
// parked on a lost response charges a second time. The run must report the
// double charge and the cost the ledger does not have; without those
// checks it would pass. It runs on SQLite with one worker, so CI covers
// that ledger too. Seed 3's strict vendor loses responses of its first
// submissions (the fault sequence is a function of the seed).
func TestBrokenVendorIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: builds and runs the Temporal server, vendors and workers as processes for about two minutes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	progress := &logWriter{t: t}
	sum, err := chaos.Run(ctx, chaos.Config{
		Scale:        chaos.Scales["small"],
		Seed:         3,
		Progress:     progress,
		BrokenVendor: true,
		Bins:         testBinaries(t),
	})
	progress.flush()
	if err != nil {
		t.Fatalf("chaos run: %v", err)
	}
	t.Log(sum.Line())
	var charged, unrecorded bool
	for _, v := range sum.Violations {
		charged = charged || strings.Contains(v, "times (") && strings.HasPrefix(v, "vendor charged idempotency key")
		unrecorded = unrecorded || strings.Contains(v, "has no cost in the ledger")
	}
	if sum.Parked == 0 || !charged || !unrecorded || sum.Charges <= sum.PaidTasks {
		t.Fatalf("a vendor that ignores idempotency keys went unnoticed: %s; violations %q", sum.Line(), sum.Violations)
	}
}

// The binaries are built once for the package's chaos runs (a cold build
// links the Temporal server into devserver: minutes on a busy machine,
// hence the runs' generous timeouts).
var (
	binsOnce sync.Once
	bins     chaos.Binaries
	binsDir  string
	binsErr  error
)

func testBinaries(t *testing.T) chaos.Binaries {
	t.Helper()
	binsOnce.Do(func() {
		if binsDir, binsErr = os.MkdirTemp("", "allot-chaos-test-bin-"); binsErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		bins, binsErr = chaos.BuildBinaries(ctx, binsDir)
	})
	if binsErr != nil {
		t.Fatalf("building the chaos run's binaries: %v", binsErr)
	}
	return bins
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binsDir != "" {
		os.RemoveAll(binsDir)
	}
	os.Exit(code)
}

func TestBadCommandLines(t *testing.T) {
	for _, args := range [][]string{{"--scale", "huge"}, {"extra"}, {"--seed", "x"}} {
		if code := run(args); code != 2 {
			t.Errorf("chaos %s exited %d, want 2", strings.Join(args, " "), code)
		}
	}
}

// logWriter sends progress lines to the test's log.
type logWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			break
		}
		w.t.Log(strings.TrimRight(line, "\n"))
	}
	return len(p), nil
}

func (w *logWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() > 0 {
		w.t.Log(w.buf.String())
		w.buf.Reset()
	}
}
