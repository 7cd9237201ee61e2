package ledger

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
)

// The health queries (health.go) and the write reports counters rely on,
// on both drivers.
func runHealthConformance(t *testing.T, newURL func(t *testing.T) string) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, l *Ledger)
	}{
		{"RunOutcomeReportsInsert", testRunOutcomeReportsInsert},
		{"SubmissionReportsAddedCost", testSubmissionReportsAddedCost},
		{"RetryingAndStalled", testRetryingAndStalled},
		{"PipelinesHeld", testPipelinesHeld},
		{"RunOutcomesOfKeys", testRunOutcomesOfKeys},
		{"EpisodesPerKey", testEpisodesPerKey},
		{"CheckWritable", testCheckWritable},
		{"RetryingIsIndexed", testRetryingIsIndexed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, openURLT(t, newURL(t)))
		})
	}
}

func TestSQLiteHealth(t *testing.T) { runHealthConformance(t, newSQLiteURL) }

func TestPostgresHealth(t *testing.T) {
	postgresDSN(t)
	runHealthConformance(t, newPostgresURL)
}

// A run's first record reports an insert, every later record of the same
// run (a retried activity) a replacement: counters count the run once.
func testRunOutcomeReportsInsert(t *testing.T, l *Ledger) {
	o := RunOutcome{Pipeline: "weekly", AllocationKey: "weekly/k", RunID: "run-1", NominalTime: t0,
		Outcome: allot.OutcomeAllocated, Reason: allot.ReasonNewEpisode, EpisodeID: "2026-W32-0", Period: "2026-W32"}
	for i, want := range []bool{true, false, false} {
		inserted, err := l.RecordRunOutcome(ctxT(t), o)
		if err != nil || inserted != want {
			t.Fatalf("record %d: inserted %v, %v; want %v", i, inserted, err, want)
		}
		o.Reason = allot.ReasonNewEpisode + fmt.Sprint(i) // a replacement still replaces
	}
	o.RunID = "run-2"
	if inserted, err := l.RecordRunOutcome(ctxT(t), o); err != nil || !inserted {
		t.Fatalf("another run of the key: inserted %v, %v", inserted, err)
	}
	outs, err := l.RunOutcomes(ctxT(t), "weekly", time.Time{})
	if err != nil || len(outs) != 2 || outs[0].Reason != "new_episode1" {
		t.Fatalf("run outcomes %+v, %v; want two, the first replaced by its last record", outs, err)
	}
}

// The cost a submission adds is reported once: the amount when new, the
// rise of a corrected amount, nothing when recorded again or lowered.
func testSubmissionReportsAddedCost(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntent(t, l, r)
	for i, c := range []struct {
		amount, added int64
	}{{1250, 1250}, {1250, 0}, {1400, 150}, {1000, 0}, {1000, 0}} {
		_, added, err := l.RecordSubmissionAdded(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: "vr-1", Amount: c.amount, Currency: "EUR"})
		if err != nil || added != c.added {
			t.Fatalf("record %d (%d EUR): added %d, %v; want %d", i, c.amount, added, err, c.added)
		}
	}
	// An effect's submission has no cost entry and adds nothing.
	e := paidRef(ep, "publish", 0)
	mustIntent(t, l, e)
	if _, added, err := l.RecordSubmissionAdded(ctxT(t), Submission{PaidTaskRef: e, RemoteRef: "pub-1"}); err != nil || added != 0 {
		t.Fatalf("effect submission: added %d, %v", added, err)
	}
}

func testRetryingAndStalled(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	now := t0.Add(time.Hour)
	old := alloc(t, l, "weekly", "k-old", "2026-W32", 0).Episode
	recent := alloc(t, l, "weekly", "k-recent", "2026-W32", 0).Episode
	other := alloc(t, l, "daily", "k-other", "2026-08-03", 0).Episode
	running := alloc(t, l, "weekly", "k-running", "2026-W32", 0).Episode
	for _, o := range []struct {
		ep     Episode
		reason string
		at     time.Time
	}{
		{old, "ConnectionRefused", now.Add(-40 * time.Minute)},
		{recent, "Timeout", now.Add(-5 * time.Minute)},
		{other, "ConnectionRefused", now.Add(-20 * time.Minute)},
	} {
		if err := l.RecordEpisodeOutcome(ctx, o.ep.Pipeline, o.ep.ID, allot.OutcomeRetrying, o.reason, o.at); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.RecordEpisodeOutcome(ctx, running.Pipeline, running.ID, allot.OutcomeRunning, "", now); err != nil {
		t.Fatal(err)
	}
	eps, err := l.RetryingEpisodes(ctx, "weekly")
	if err != nil || len(eps) != 2 || eps[0].EpisodeID != old.ID || eps[0].Reason != "ConnectionRefused" ||
		!eps[0].Since.Equal(now.Add(-40*time.Minute)) || eps[1].EpisodeID != recent.ID {
		t.Fatalf("retrying episodes of weekly: %+v, %v", eps, err)
	}
	if all, err := l.RetryingEpisodes(ctx, ""); err != nil || len(all) != 3 {
		t.Fatalf("retrying episodes: %+v, %v", all, err)
	}
	stallAfter := func(p string) time.Duration {
		if p == "daily" {
			return 10 * time.Minute
		}
		return 15 * time.Minute
	}
	counts, err := l.CountStalled(ctx, stallAfter, now)
	if err != nil || len(counts) != 2 || counts["weekly"] != 1 || counts["daily"] != 1 {
		t.Fatalf("stalled counts %v, %v; want weekly 1 (40 min > 15), daily 1 (20 min > 10)", counts, err)
	}
	// Back to running: no longer retrying, no longer stalled.
	if err := l.RecordEpisodeOutcome(ctx, old.Pipeline, old.ID, allot.OutcomeRunning, "", now); err != nil {
		t.Fatal(err)
	}
	if counts, err := l.CountStalled(ctx, stallAfter, now); err != nil || counts["weekly"] != 0 {
		t.Fatalf("stalled counts after recovery %v, %v", counts, err)
	}
}

func testPipelinesHeld(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	alloc(t, l, "weekly", "k", "2026-W32", 0)
	if _, err := l.RecordRunOutcome(ctx, RunOutcome{Pipeline: "runs-only", AllocationKey: "runs-only/k", RunID: "r",
		Outcome: allot.OutcomeFailed, Reason: allot.InvalidInput, Sequence: -1}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"weekly": true, "runs-only": true, "nosuch": false} {
		if got, err := l.HasPipeline(ctx, name); err != nil || got != want {
			t.Errorf("HasPipeline(%s) = %v, %v; want %v", name, got, err, want)
		}
	}
	if names, err := l.PipelineNames(ctx); err != nil || !slices.Equal(names, []string{"runs-only", "weekly"}) {
		t.Fatalf("PipelineNames = %v, %v", names, err)
	}
}

func testRunOutcomesOfKeys(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	var keys []string
	for i := range keysPerQuery + 20 { // more than one IN list
		key := fmt.Sprintf("weekly/k%04d", i)
		keys = append(keys, key)
		if i%3 == 0 {
			continue // not run yet
		}
		if _, err := l.RecordRunOutcome(ctx, RunOutcome{Pipeline: "weekly", AllocationKey: key, RunID: "r", NominalTime: t0,
			Outcome: allot.OutcomeSkipped, Reason: allot.ReasonCapReached, Sequence: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.RecordRunOutcome(ctx, RunOutcome{Pipeline: "other", AllocationKey: keys[1], RunID: "r",
		Outcome: allot.OutcomeSkipped, Reason: allot.ReasonCapReached, Sequence: -1}); err != nil {
		t.Fatal(err)
	}
	outs, err := l.RunOutcomesOfKeys(ctx, "weekly", keys)
	if err != nil {
		t.Fatal(err)
	}
	want := len(keys) - (len(keys)+2)/3
	if len(outs) != want {
		t.Fatalf("%d outcomes, want %d", len(outs), want)
	}
	for _, o := range outs {
		if o.Pipeline != "weekly" || o.Outcome != allot.OutcomeSkipped || !o.NominalTime.Equal(t0) {
			t.Fatalf("outcome %+v", o)
		}
	}
	if outs, err := l.RunOutcomesOfKeys(ctx, "weekly", nil); err != nil || len(outs) != 0 {
		t.Fatalf("no keys: %v, %v", outs, err)
	}
}

func testEpisodesPerKey(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	var keys []string
	for i := range keysPerQuery + 20 { // more than one IN list
		key := fmt.Sprintf("weekly/k%04d", i)
		keys = append(keys, key)
		if i%3 == 0 {
			alloc(t, l, "weekly", key, "2026-W32", 0)
		}
	}
	alloc(t, l, "other", keys[1], "2026-W32", 0) // another pipeline's episode is not this one's
	got, err := l.EpisodesPerKey(ctx, "weekly", keys)
	if err != nil {
		t.Fatal(err)
	}
	if want := (len(keys) + 2) / 3; len(got) != want {
		t.Fatalf("%d keys with episodes, want %d", len(got), want)
	}
	for i, k := range keys {
		if n := got[k]; (i%3 == 0) != (n == 1) || n > 1 {
			t.Fatalf("key %s: %d episodes", k, n)
		}
	}
	if got, err := l.EpisodesPerKey(ctx, "weekly", nil); err != nil || len(got) != 0 {
		t.Fatalf("no keys: %v, %v", got, err)
	}
	if _, err := l.EpisodesPerKey(ctx, "", keys); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("no pipeline: %v, want ErrInvalidInput", err)
	}
}

func testCheckWritable(t *testing.T, l *Ledger) {
	if err := l.CheckWritable(ctxT(t)); err != nil {
		t.Fatalf("a fresh ledger: %v", err)
	}
	ro := *l
	ro.readOnly = true
	if err := ro.CheckWritable(ctxT(t)); err == nil {
		t.Fatal("a ledger opened read-only passed the check")
	}
}

// A SQLite file the worker cannot write opens (SQLite falls back to reading
// it) and used to fail only at the first allocation; CheckWritable finds it
// at once and names the fix.
func TestSQLiteCheckWritableRefusesReadOnlyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(ctxT(t), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	alloc(t, l, "weekly", "k", "2026-W32", 0)
	_ = l.Close()
	makeReadOnly(t, path)
	l, err = Open(ctxT(t), "sqlite:"+path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer l.Close()
	err = l.CheckWritable(ctxT(t))
	if err == nil || !strings.Contains(err.Error(), "cannot be written") || !strings.Contains(err.Error(), "writable by the worker's user") {
		t.Fatalf("CheckWritable on a read-only file = %v, want the refusal with its fix", err)
	}
}

// makeReadOnly makes path unwritable even for root (chattr +i, undone when
// the test ends), or by its mode for other users.
func makeReadOnly(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(path, 0o444); err != nil {
			t.Fatal(err)
		}
		return
	}
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("running as root without chattr +i (%v: %s): cannot make a file read-only", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
}

// A PostgreSQL role that may create in the schema but only read the ledger's
// tables (a common grant mistake) opens the ledger; CheckWritable refuses it.
func TestPostgresCheckWritableRefusesReadOnlyRole(t *testing.T) {
	dsn, drop := newPostgresSchema(t)
	defer drop()
	l, err := Open(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	alloc(t, l, "weekly", "k", "2026-W32", 0)
	_ = l.Close()

	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	role := "allot_ro_" + hex.EncodeToString(b)
	admin, err := sql.Open("pgx", postgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := ctxT(t)
	for _, stmt := range []string{
		`CREATE ROLE ` + role + ` LOGIN PASSWORD 'ro'`,
		`GRANT USAGE, CREATE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
	} {
		if _, err := admin.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = admin.ExecContext(c, `DROP OWNED BY `+role)
		_, _ = admin.ExecContext(c, `DROP ROLE `+role)
	}()
	u.User = url.UserPassword(role, "ro")
	ro, err := Open(ctx, u.String())
	if err != nil {
		t.Skipf("the read-only role cannot even open the ledger here (%v): nothing left for CheckWritable to find", err)
	}
	defer ro.Close()
	err = ro.CheckWritable(ctx)
	if err == nil || !strings.Contains(err.Error(), "cannot be written") || !strings.Contains(err.Error(), "grant the worker's role") {
		t.Fatalf("CheckWritable as a read-only role = %v, want the refusal with its fix", err)
	}
	// Every table but inputs writable: an allocation that claims an input
	// would fail forever, so the check names inputs.
	for _, stmt := range []string{
		`GRANT INSERT, UPDATE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
		`REVOKE INSERT, UPDATE ON ` + schema + `.inputs FROM ` + role,
	} {
		if _, err := admin.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := ro.CheckWritable(ctx); err == nil || !strings.Contains(err.Error(), "inputs") {
		t.Fatalf("CheckWritable without the right to update inputs = %v, want a refusal naming inputs", err)
	}
	if _, err := admin.ExecContext(ctx, `GRANT INSERT, UPDATE ON `+schema+`.inputs TO `+role); err != nil {
		t.Fatal(err)
	}
	if err := ro.CheckWritable(ctx); err != nil {
		t.Fatalf("CheckWritable with every right: %v", err)
	}
}

// The stalled gauge reads the retrying episodes on every scrape: a seek in
// the outcome index, never a scan of the episodes.
func testRetryingIsIndexed(t *testing.T, l *Ledger) {
	query, args := l.retryingQuery()
	plan := queryPlan(t, l, query, args...)
	seeks := strings.Contains(plan, "SEARCH") || strings.Contains(plan, "Index Cond")
	if !strings.Contains(plan, "episodes_outcome_pipeline") || !seeks || strings.Contains(plan, "Seq Scan") {
		t.Errorf("the retrying episodes do not seek episodes_outcome_pipeline:\n%s\nplan:\n%s", query, plan)
	}
}
