package ledger

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests against PostgreSQL read ALLOT_TEST_POSTGRES_DSN, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable, and skip if it is
// unset. Each test gets a fresh schema (via search_path), so tests run in
// parallel and repeatedly against one database.
const postgresDSNEnv = "ALLOT_TEST_POSTGRES_DSN"

func postgresDSN(tb testing.TB) string {
	dsn := os.Getenv(postgresDSNEnv)
	if dsn == "" {
		tb.Skipf("%s is not set; set it to a PostgreSQL URL to run the PostgreSQL tests", postgresDSNEnv)
	}
	return dsn
}

// newPostgresSchema creates an empty schema and returns a ledger URL whose
// connections use it, and a function that drops it.
func newPostgresSchema(tb testing.TB) (string, func()) {
	dsn := postgresDSN(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "allot_test_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		_ = admin.Close()
		tb.Fatalf("create schema in %s: %v", postgresDSNEnv, err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("%s is not a URL: %v", postgresDSNEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			tb.Logf("drop schema %s: %v", schema, err)
		}
		_ = admin.Close()
	}
	return u.String(), drop
}

// newPostgresURL returns the URL of a fresh schema, dropped when the test
// ends (after the ledgers opened on it are closed: cleanups run last first).
func newPostgresURL(t *testing.T) string {
	t.Helper()
	dsn, drop := newPostgresSchema(t)
	t.Cleanup(drop)
	return dsn
}

func openPostgresT(t *testing.T) *Ledger {
	t.Helper()
	return openURLT(t, newPostgresURL(t))
}

func TestPostgresConformance(t *testing.T) {
	postgresDSN(t)
	runConformance(t, newPostgresURL)
}

// Invariant 5: a transaction holding pipeline A's lock does not block an
// allocation in pipeline B, and does block one in A.
func TestPostgresPipelinesDoNotWaitForEachOther(t *testing.T) {
	l := openPostgresT(t)
	tx, err := l.w.BeginTx(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctxT(t), l.d.q(l.d.lockPipeline), lockKey("alpha")); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := l.Allocate(ctx, AllocateInput{Pipeline: "beta", Key: "k", Period: "2026-W32", NominalTime: t0})
	if err != nil {
		t.Fatalf("pipeline beta waited for alpha's lock: %v", err)
	}
	if r.Episode.ID != "2026-W32-0" {
		t.Fatalf("beta: %+v", r)
	}

	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	if _, err := l.Allocate(short, AllocateInput{Pipeline: "alpha", Key: "k", Period: "2026-W32", NominalTime: t0}); err == nil {
		t.Fatal("pipeline alpha allocated while another transaction held its lock")
	}

	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if r := alloc(t, l, "alpha", "k", "2026-W32", 0); r.Decision != DecisionAllocated || r.Episode.ID != "2026-W32-0" {
		t.Fatalf("alpha after the lock was released: %+v", r)
	}
}

func TestPostgresReadOnly(t *testing.T) {
	dsn, drop := newPostgresSchema(t)
	defer drop()
	if _, err := OpenReadOnly(ctxT(t), dsn); err == nil || !strings.Contains(err.Error(), "no allot schema") {
		t.Fatalf("OpenReadOnly of an empty schema = %v, want an error saying there is no schema", err)
	}
	l, err := Open(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	_ = l.Close()

	ro, err := OpenReadOnly(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got, err := ro.Episode(ctxT(t), "weekly", ep.ID); err != nil || got != ep {
		t.Fatalf("read-only Episode = %+v, %v", got, err)
	}
	if _, err := ro.w.ExecContext(ctxT(t), `DELETE FROM episodes`); err == nil {
		t.Fatal("a read-only connection deleted rows")
	}
}

func TestPostgresBadURL(t *testing.T) {
	_, err := Open(ctxT(t), "postgres://allot:s3cret@127.0.0.1:1/nope?sslmode=disable&connect_timeout=2")
	if err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

// withRuntimeParam adds a PostgreSQL runtime parameter to a ledger URL's
// query: pgx passes query parameters it does not know to the server.
func withRuntimeParam(t *testing.T, rawURL, name, value string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += name + "=" + strings.ReplaceAll(url.QueryEscape(value), "+", "%20")
	return u.String()
}

// A server (or role, or database) whose default isolation is REPEATABLE
// READ must not break the ledger: its transactions name READ COMMITTED, so
// that each statement after the advisory lock sees what the lock's previous
// holder committed. Under REPEATABLE READ the snapshot is taken before the
// lock is granted, and concurrent allocations compute the same sequence.
func TestPostgresRepeatableReadDefault(t *testing.T) {
	dsn := withRuntimeParam(t, newPostgresURL(t), "default_transaction_isolation", "repeatable read")
	l := openURLT(t, dsn)
	ctx := ctxT(t)
	var def string
	if err := l.w.QueryRowContext(ctx, `SHOW default_transaction_isolation`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if def != "repeatable read" {
		t.Fatalf("default_transaction_isolation = %q: the runtime parameter did not take effect", def)
	}
	var inTx string
	if err := l.writeTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SHOW transaction_isolation`).Scan(&inTx)
	}); err != nil {
		t.Fatal(err)
	}
	if inTx != "read committed" {
		t.Errorf("the ledger's write transactions run %q, want read committed", inTx)
	}

	const n = 32
	results := make([]AllocateResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = l.Allocate(ctx, AllocateInput{Pipeline: "weekly", Key: fmt.Sprintf("rr-%02d", i), Period: "2026-W32", NominalTime: t0})
		})
	}
	close(start)
	wg.Wait()
	var seqs []int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("allocation %d under a REPEATABLE READ default: %v", i, errs[i])
		}
		if results[i].Decision != DecisionAllocated {
			t.Fatalf("allocation %d: %+v", i, results[i])
		}
		seqs = append(seqs, results[i].Episode.Sequence)
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		if s != i {
			t.Fatalf("sequences are not 0..%d without gap or duplicate: %v", n-1, seqs)
		}
	}

	// The episode lock's check-then-write paths too: one decision per
	// request, one owner per intent.
	ep := results[0].Episode
	r := paidRef(ep, "render", 0)
	intents := make([]PaidTask, n)
	decided := make([]bool, n)
	start = make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			if i%2 == 0 {
				intents[i], errs[i] = l.WriteIntent(ctx, r, testKey(r), fmt.Sprintf("attempt-%02d", i))
			} else {
				_, decided[i], errs[i] = l.Decide(ctx, reworkReq(ep, "voice", "req-same"))
			}
		})
	}
	close(start)
	wg.Wait()
	applied := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d under a REPEATABLE READ default: %v", i, errs[i])
		}
		if i%2 == 0 && intents[i].Owner != intents[0].Owner {
			t.Fatalf("intent owners %q and %q", intents[i].Owner, intents[0].Owner)
		}
		if decided[i] {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("%d concurrent copies of one request applied, want 1", applied)
	}
	mustCheckClean(t, l, "")
}

// Invariant 20: an admission waits for the lock of its (budget, period),
// held by a transaction that may be admitting into it, and not for another
// period's. (The 32 concurrent admissions of the conformance suite rarely
// overlap on a busy machine; this shows the lock is taken.)
func TestPostgresBudgetAdmissionsWaitForEachOther(t *testing.T) {
	l := openPostgresT(t)
	eps := episodes(t, l, "weekly", "2026-W32", 2)
	tx, err := l.w.BeginTx(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctxT(t), l.d.q(l.d.lockEpisode), budgetLockKey("video-weekly", "2026-W32")); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := paidRef(eps[0], "video", 0)
	if _, err := l.WriteIntentReserving(ctx, r, testKey(r), testOwner, []Reservation{usd("video-weekly", "2026-W33", 1000, 100)}); err != nil {
		t.Fatalf("an admission into another period waited for W32's lock: %v", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	r = paidRef(eps[1], "video", 0)
	if _, err := l.WriteIntentReserving(short, r, testKey(r), testOwner, []Reservation{usd("video-weekly", "2026-W32", 1000, 100)}); err == nil {
		t.Fatal("an admission into W32 went ahead while another transaction held W32's lock")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	mustReserve(t, l, r, usd("video-weekly", "2026-W32", 1000, 100))
}
