// Package ledgertest builds ledgers for the tests of every package that
// reads or writes one (activities, workflows, the operator's commands, the
// reports, the importer, the reconciler, the page and others), as pgxtest
// does for pgx:
//
//   - New: a SQLite ledger in the test's temporary directory, with
//     Allocate to bind a Schedule's key to an episode as ScheduledRun does;
//   - Open and DriverURL: a ledger on either driver (PostgreSQL in a
//     schema of its own, dropped when the test ends);
//   - WriteSource: an import's source files;
//   - BudgetPipelines and BudgetLedger: the budget fixture the operator's,
//     the reports' and the page's tests share.
//
// Production code never imports it.
package ledgertest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// Ledger is a SQLite ledger in the test's temporary directory, closed when
// the test ends.
type Ledger struct {
	T    *testing.T
	Path string
	Led  *ledger.Ledger
}

// New opens a fresh SQLite ledger for t.
func New(t *testing.T) *Ledger {
	t.Helper()
	path := filepath.Join(t.TempDir(), "allot.db")
	return &Ledger{T: t, Path: path, Led: Open(t, "sqlite:"+path)}
}

// Open opens the ledger at url for t and closes it when t ends.
func Open(t *testing.T, url string) *ledger.Ledger {
	t.Helper()
	led, err := ledger.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	return led
}

// Allocate binds the key a Schedule forms for nominal to an episode of the
// pipeline's ISO week, as ScheduledRun does.
func (l *Ledger) Allocate(pipelineName string, nominal time.Time) ledger.Episode {
	l.T.Helper()
	y, w := nominal.ISOWeek()
	res, err := l.Led.Allocate(context.Background(), ledger.AllocateInput{
		Pipeline: pipelineName, Key: allot.AllocationKey(pipelineName, nominal),
		Period: fmt.Sprintf("%04d-W%02d", y, w), NominalTime: nominal,
	})
	if err != nil {
		l.T.Fatal(err)
	}
	return res.Episode
}

// DriverURL is the URL of a fresh, empty ledger on driver ("sqlite" or
// "postgres"): a file in the test's temporary directory, or a schema of its
// own in ALLOT_TEST_POSTGRES_DSN's database, dropped when the test ends. ""
// when driver is postgres and that variable is unset.
func DriverURL(t *testing.T, driver string) string {
	t.Helper()
	if driver == "sqlite" {
		return "sqlite:" + filepath.Join(t.TempDir(), "allot.db")
	}
	dsn := os.Getenv("ALLOT_TEST_POSTGRES_DSN")
	if dsn == "" {
		return ""
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "allot_test_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(context.Background(), `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
		admin.Close()
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// WriteSource writes an import's JSON Lines source (and the files it names)
// in a fresh folder and returns its path.
func WriteSource(t *testing.T, files map[string]string, lines ...string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	from := filepath.Join(dir, "old.jsonl")
	if err := os.WriteFile(from, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return from
}

// BudgetSet is a pipeline file in which weekly's video step (250 USD cents
// at most) is under a weekly budget for three and a monthly one; its cover
// step under the weekly one only, priced by its vendor's quote.
const BudgetSet = `
[[vendor]]
name       = "covers"
adapter    = "activity"
task_queue = "covers"
  [vendor.activities]
  submit = "Submit"
  status = "Status"
  fetch  = "Fetch"
  quote  = "Quote"

[[budget]]
name     = "video-weekly"
pipeline = "weekly"
period   = "iso-week"
limit    = { amount = 750, currency = "USD" }

[[budget]]
name   = "default-monthly"
vendor = "default"
period = "month"
limit  = { amount = 100000, currency = "USD" }

[[pipeline]]
name = "weekly"
  [[pipeline.step]]
  name     = "video"
  kind     = "paid"
  max_cost = { amount = 250, currency = "USD" }
  [[pipeline.step]]
  name   = "cover"
  kind   = "paid"
  vendor = "covers"

[[pipeline]]
name = "daily"
period = "day"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`

// BudgetPipelines parses BudgetSet.
func BudgetPipelines(t *testing.T) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse([]byte(BudgetSet), "budgets_test")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// BudgetMonday is the nominal time of the budget fixture's episodes: the
// Monday of 2026-W32.
var BudgetMonday = time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)

// Reserve admits the video step of ep into both of BudgetSet's budgets, as
// PaidPrepare does.
func (l *Ledger) Reserve(ep ledger.Episode, amount int64) error {
	ref := ledger.PaidTaskRef{Pipeline: ep.Pipeline, EpisodeID: ep.ID, Step: "video"}
	_, err := l.Led.WriteIntentReserving(context.Background(), ref, allot.IdempotencyKey(ep.Pipeline, ep.ID, "video", 0), "op-test", []allot.Reservation{
		{Budget: "video-weekly", Period: "2026-W32", Currency: "USD", Limit: 750, Amount: amount},
		{Budget: "default-monthly", Period: "2026-08", Currency: "USD", Limit: 100000, Amount: amount},
	})
	return err
}

// Park records ep as parked on its budget, as the Episode does.
func (l *Ledger) Park(ep ledger.Episode) {
	l.T.Helper()
	if err := l.Led.RecordEpisodeOutcome(context.Background(), ep.Pipeline, ep.ID, allot.OutcomeNeedsAttention, allot.BudgetExhausted, BudgetMonday); err != nil {
		l.T.Fatal(err)
	}
}

// BudgetLedger is a ledger of BudgetSet's weekly pipeline in 2026-W32: four
// episodes, the first three holding 250 each in video-weekly (the first
// charged 200), the fourth refused and parked on the budget.
func BudgetLedger(t *testing.T) (*Ledger, []ledger.Episode) {
	l := New(t)
	var eps []ledger.Episode
	for i := range 4 {
		eps = append(eps, l.Allocate("weekly", BudgetMonday.Add(time.Duration(i)*time.Hour)))
	}
	for _, ep := range eps[:3] {
		if err := l.Reserve(ep, 250); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if _, err := l.Led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: eps[0].ID, Step: "video"},
		RemoteRef: "vt_0", Amount: 200, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Reserve(eps[3], 250); !errors.Is(err, ledger.ErrBudgetExhausted) {
		t.Fatalf("a fourth task: %v, want refused", err)
	}
	l.Park(eps[3])
	return l, eps
}

// ChargeWithoutReservation records a new episode of pipelineName at
// nominal whose video step was sent and charged amount USD (reference
// remoteRef) with nothing reserved in any budget: spend outside the
// budgets' records, as a task sent before a budget covered its step is.
func (l *Ledger) ChargeWithoutReservation(pipelineName string, nominal time.Time, remoteRef string, amount int64) ledger.Episode {
	l.T.Helper()
	ctx := context.Background()
	ep := l.Allocate(pipelineName, nominal)
	ref := ledger.PaidTaskRef{Pipeline: pipelineName, EpisodeID: ep.ID, Step: "video"}
	if _, err := l.Led.WriteIntent(ctx, ref, allot.IdempotencyKey(pipelineName, ep.ID, "video", 0), "before-the-budget"); err != nil {
		l.T.Fatal(err)
	}
	if _, err := l.Led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: remoteRef, Amount: amount, Currency: "USD"}); err != nil {
		l.T.Fatal(err)
	}
	return ep
}
