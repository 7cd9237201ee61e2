package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx", for the raw-commit baseline and schemas
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	_ "modernc.org/sqlite" // driver "sqlite", for the raw-commit baseline

	"allot"
	"allot/activities"
	"allot/app"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/temporalserver"
	"allot/pipeline"
	"allot/workflows"
)

// benchPipeline is the pipeline every benchmark runs: three local steps
// (allot's built-in plan, assemble, publish), ISO weeks, no cap, no
// approval: an episode runs from start to completion without a person.
const benchPipeline = "bench-local"

const benchPipelinesTOML = `
[[pipeline]]
name = "bench-local"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
  [[pipeline.step]]
  name = "assemble"
  kind = "local"
  [[pipeline.step]]
  name = "publish"
  kind = "local"

[[pipeline]]
name = "bench-two"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
  [[pipeline.step]]
  name = "assemble"
  kind = "local"
`

// Temporal stores a benchmark can run on (ALLOT_BENCH_TEMPORAL_STORE, or a
// sub-benchmark of each):
//   - memory: the server's SQLite in memory, as temporaltest and the
//     integration tests run it; nothing it persists reaches a disk;
//   - file: the server's SQLite in a file, as `go run ./devserver` runs it
//     (rollback journal, synchronous=FULL: every persistence write is
//     fsynced), the closest this machine gets to a durable Temporal.
const (
	storeMemory = "memory"
	storeFile   = "file"
)

// benchStores is the stores a benchmark runs on: both, or the one that
// ALLOT_BENCH_TEMPORAL_STORE names.
func benchStores() []string {
	if s := os.Getenv("ALLOT_BENCH_TEMPORAL_STORE"); s != "" {
		return []string{s}
	}
	return []string{storeMemory, storeFile}
}

// defaultStore is the store of the benchmarks that run on one only:
// ALLOT_BENCH_TEMPORAL_STORE, else memory.
func defaultStore() string {
	if s := os.Getenv("ALLOT_BENCH_TEMPORAL_STORE"); s != "" {
		return s
	}
	return storeMemory
}

var discardLogger = slog.New(slog.DiscardHandler)

// stack is an embedded Temporal server with a client on it, stopped when the
// benchmark ends.
type stack struct {
	Server    *temporalserver.Server
	Client    client.Client
	Namespace string
	Store     string
}

// startTemporal starts allot's embedded Temporal server (the devserver's,
// without the Web UI) on free ports, with allot's search attributes.
func startTemporal(tb testing.TB, store string) *stack {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs an embedded Temporal server")
	}
	cfg := temporalserver.Config{
		Port: temporalserver.FreePort, DisableUI: true,
		SearchAttributes: workflows.SearchAttributeTypes(),
	}
	switch store {
	case storeMemory:
	case storeFile:
		cfg.DataDir = tb.TempDir()
	default:
		tb.Fatalf("unknown Temporal store %q: use %s or %s", store, storeMemory, storeFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := temporalserver.Start(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			tb.Logf("stop the Temporal server: %v", err)
		}
	})
	c, err := client.DialContext(ctx, client.Options{
		HostPort: srv.FrontendAddress(), Namespace: srv.Namespace(),
		Logger: tlog.NewStructuredLogger(discardLogger),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return &stack{Server: srv, Client: c, Namespace: srv.Namespace(), Store: store}
}

// allotWorker is allot's worker in this process (app.Serve with allot's
// activities, as internal/allottest.NewCluster runs it) on a SQLite ledger
// in a temporary directory.
type allotWorker struct {
	Ledger    *ledger.Ledger
	LedgerURL string
	Pipelines *pipeline.Set
	Dir       string
	TaskQueue string
}

func startAllotWorker(tb testing.TB, st *stack) *allotWorker {
	tb.Helper()
	dir := tb.TempDir()
	url := "sqlite:" + filepath.Join(dir, "allot.db")
	ctx := context.Background()
	led, err := ledger.Open(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = led.Close() })
	set, err := pipeline.Parse([]byte(benchPipelinesTOML), "bench")
	if err != nil {
		tb.Fatal(err)
	}
	acts := &activities.Activities{
		Ledger: led, Pipelines: set, ArtifactsDir: filepath.Join(dir, "artifacts"), Temporal: st.Client,
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Serve(wctx, st.Client, workflows.TaskQueue, acts) }()
	tb.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
	return &allotWorker{Ledger: led, LedgerURL: url, Pipelines: set, Dir: dir, TaskQueue: workflows.TaskQueue}
}

// runAllot starts the pipeline's ScheduledRun for nominal as `starter run`
// does (its start options, without the look-up before the start) and waits
// until the episode it starts has completed.
func (w *allotWorker) runAllot(ctx context.Context, c client.Client, nominal time.Time) error {
	key := allot.AllocationKey(benchPipeline, nominal)
	run, err := c.ExecuteWorkflow(ctx, startOptions(key, w.TaskQueue, nominal), workflows.ScheduledRunWorkflow,
		workflows.ScheduledRunInput{Pipeline: benchPipeline, NominalTime: nominal, LedgerID: w.Ledger.ID()})
	if err != nil {
		return fmt.Errorf("start %s: %w", key, err)
	}
	var res workflows.ScheduledRunResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("run %s: %w", key, err)
	}
	var ep workflows.EpisodeResult
	if err := c.GetWorkflow(ctx, allot.EpisodeWorkflowID(benchPipeline, res.EpisodeID), "").Get(ctx, &ep); err != nil {
		return fmt.Errorf("episode %s: %w", res.EpisodeID, err)
	}
	if ep.Stage != allot.StageCompleted {
		return fmt.Errorf("episode %s ended %s", res.EpisodeID, ep.Stage)
	}
	return nil
}

// startOptions are the options `starter run` starts a ScheduledRun with.
func startOptions(key, taskQueue string, nominal time.Time) client.StartWorkflowOptions {
	return workflows.ScheduledRunStartOptions(operator.RunReusePolicy, workflows.ScheduledRunStart{Pipeline: benchPipeline, Run: allot.RunKey{Key: key, Nominal: nominal}, TaskQueue: taskQueue})
}

// nominalClock hands out distinct nominal times, one minute apart, from a
// fixed start in the past: every run is a new key.
type nominalClock struct{ next time.Time }

func newNominalClock(start time.Time) *nominalClock { return &nominalClock{next: start} }

func (n *nominalClock) take() time.Time {
	t := n.next
	n.next = n.next.Add(time.Minute)
	return t
}

// buildBinary compiles the main package pkg into a temporary directory.
func buildBinary(tb testing.TB, pkg string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "allot-"+filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// postgresDSN is ALLOT_TEST_POSTGRES_DSN, or "" when PostgreSQL is not
// configured (the PostgreSQL figures are then left out).
func postgresDSN() string { return os.Getenv("ALLOT_TEST_POSTGRES_DSN") }

// newPostgresSchema creates an empty schema on ALLOT_TEST_POSTGRES_DSN and
// returns a URL whose connections use it; the schema is dropped when the
// benchmark ends.
func newPostgresSchema(tb testing.TB) string {
	tb.Helper()
	dsn := postgresDSN()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "allot_bench_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		_ = admin.Close()
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			tb.Logf("drop schema %s: %v", schema, err)
		}
		_ = admin.Close()
	})
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// rawCommitter is the durable-commit baseline of the allocation benchmark,
// as ledger.BenchmarkAllocateVsRawCommit measures it, from outside the
// ledger package: one transaction that inserts one row into a scratch table
// of the same database through a statement prepared once, then commits. On
// SQLite it runs on a connection of its own with the ledger writer's
// settings (WAL, synchronous=FULL, BEGIN IMMEDIATE); on PostgreSQL on a
// connection of the ledger's schema at READ COMMITTED.
type rawCommitter struct {
	db   *sql.DB
	stmt *sql.Stmt
	opts *sql.TxOptions
}

func newRawCommitter(tb testing.TB, ledgerURL string) *rawCommitter {
	tb.Helper()
	ctx := context.Background()
	var (
		db   *sql.DB
		err  error
		opts *sql.TxOptions
		ph   = "?"
	)
	switch {
	case strings.HasPrefix(ledgerURL, "sqlite:"):
		abs, aerr := filepath.Abs(strings.TrimPrefix(ledgerURL, "sqlite:"))
		if aerr != nil {
			tb.Fatal(aerr)
		}
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
		db, err = sql.Open("sqlite", u.String()+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_pragma=journal_mode(WAL)&_txlock=immediate")
		if err == nil {
			db.SetMaxOpenConns(1)
			var sync, mode string
			if err = db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err == nil {
				err = db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode)
			}
			if err == nil && (sync != "2" || !strings.EqualFold(mode, "wal")) {
				tb.Fatalf("raw commits would run with synchronous=%s journal_mode=%s, want 2 (FULL) and wal", sync, mode)
			}
		}
	default:
		db, err = sql.Open("pgx", ledgerURL)
		// The ledger's pool settings: connections stay open between
		// batches instead of being dialled again.
		db.SetMaxOpenConns(10)
		db.SetMaxIdleConns(10)
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
		ph = "$1, $2"
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	if _, err := db.ExecContext(ctx, `CREATE TABLE bench_raw_commit (id BIGINT PRIMARY KEY, note TEXT NOT NULL)`); err != nil {
		tb.Fatal(err)
	}
	if ph == "?" {
		ph = "?, ?"
	}
	stmt, err := db.PrepareContext(ctx, `INSERT INTO bench_raw_commit (id, note) VALUES (`+ph+`)`)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = stmt.Close() })
	return &rawCommitter{db: db, stmt: stmt, opts: opts}
}

func (r *rawCommitter) commit(ctx context.Context, id int64) error {
	tx, err := r.db.BeginTx(ctx, r.opts)
	if err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, r.stmt).ExecContext(ctx, id, fmt.Sprintf("raw-%d", id)); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
