package dailysettlement_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/devstack"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/paidvendor/vendorapi"
	"allot/workflows"
)

const (
	pipelineName = "daily-settlement"
	// notifyKey is the downstream's API key: the worker reads it from
	// LEDGER_NOTIFY_API_KEY, and it must show up nowhere else.
	notifyKey = "sk-ledger-notify-test-5b2d0e-DO-NOT-LEAK"
)

// The README's commands, in its order: its starter lines, then its settle
// lines. The test runs each of them as written (starter with --json, to
// read what it printed; schedule create with --paused); readmeCommands
// keeps the README and these lists the same.
var (
	firstRun       = []string{"run", "--pipeline", pipelineName, "--nominal-time", "2026-03-30T00:05:00+02:00", "--follow"}
	manualRun      = []string{"run", "--pipeline", pipelineName, "--key", "manual-2026-03-29", "--nominal-time", "2026-03-30T00:05:00+02:00", "--wait"}
	createSchedule = []string{"schedule", "create", "--pipeline", pipelineName}
	backfill       = []string{"schedule", "backfill", "--pipeline", pipelineName, "--from", "2026-10-20T00:00:00+02:00", "--to", "2026-10-27T00:00:00+01:00"}
	listEpisodes   = []string{"episodes", "--pipeline", pipelineName}

	settleInit     = []string{"init"}
	readmePayments = [][]string{{"pay", "--date", "2026-03-29", "--cents", "125000"}, {"pay", "--date", "2026-03-29", "--cents", "-4550"}}
	settleByHand   = []string{"--date", "2026-03-29", "--out", "data/total-2026-03-29.json"}
)

// The README's payments of 2026-03-29.
const (
	readmeTotal    = 125000 - 4550
	readmePayCount = 2
)

// One environment for the whole example: the embedded server, allot's
// worker, the starter and settle binaries as real processes, a simulated
// downstream, the settlement database. Its parts run in order, each on
// its own business dates, and each builds on what the ones before left:
//
//  1. the same business date three times over (a retry after exit 75, a
//     duplicate start, a manual run, and settle by hand) leaves one row
//     with the right amount and one notification;
//  2. the nominal times after both DST changes and on new year's day
//     settle the right date, in the episode ID, the period, {period} and
//     the row, with the key at the nominal time;
//  3. a 7-day backfill through the pipeline's Schedule settles each date
//     once and notifies once, sharing the key of an earlier manual run;
//     again, it adds nothing;
//  4. a downstream without look-up that loses its answer parks the
//     episode with one notification, and the printed remedy completes it
//     without a second.
func TestDailySettlement(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and starts the embedded server")
	}
	readmeCommands(t)
	e := newEnv(t)

	t.Run("one business date three times", e.sameDateThreeTimes)
	if t.Failed() {
		return
	}
	t.Run("DST changes and the new year", e.dstAndNewYear)
	if t.Failed() {
		return
	}
	t.Run("7-day backfill through the schedule", e.backfillSevenDays)
	if t.Failed() {
		return
	}
	t.Run("downstream without look-up parks", e.noLookupParks)
	if t.Failed() {
		return
	}

	// Every episode notified exactly once, and the ledger holds.
	e.t = t
	eps := e.episodes()
	if len(eps) != 11 {
		t.Fatalf("%d episodes, want 11: %+v", len(eps), eps)
	}
	for _, ep := range eps {
		if n := e.notifications()[notifyIdem(ep.ID)]; n != 1 {
			t.Fatalf("episode %s: %d notifications", ep.ID, n)
		}
	}
	if n := e.sim.ChargeCount(); n != len(eps) {
		t.Fatalf("the downstream received %d notifications for %d episodes", n, len(eps))
	}
	var check report.CheckResult
	e.json(&check, "check")
	if !check.OK || check.Artifacts == 0 {
		t.Fatalf("starter check: %+v", check)
	}
	if strings.Contains(e.worker.Output.String(), notifyKey) {
		t.Fatal("the worker logged the downstream's API key")
	}
}

// 1. 2026-03-29 (the 23-hour day of the change to summer time), settled
// by the README's run at 2026-03-30 00:05 CEST, while the test holds the
// database locked: settle exits 75, allot runs it again, and the retry
// settles. Then the same run again (the same episode), a manual run for
// the same date (skipped at the cap), a late payment and settle by hand:
// one row, with every payment of the date counted once, and one
// notification.
func (e *env) sameDateThreeTimes(t *testing.T) {
	e.t = t
	const date, episode, key = "2026-03-29", "2026-03-29-0", "daily-settlement/scheduled-2026-03-29T22:05:00Z"
	release := e.lockDB()
	stderr := filepath.Join(e.episodeDir(episode), "settle.r0.stderr")
	busy := make(chan error, 1)
	go func() {
		defer release()
		deadline := allottest.Deadline(t, 2*time.Minute)
		for time.Now().Before(deadline) {
			if data, _ := os.ReadFile(stderr); bytes.Contains(data, []byte("database is busy")) {
				busy <- nil
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		busy <- errors.New("settle never reported the database busy in " + stderr)
	}()
	first := e.run(firstRun)
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	if first.Action != operator.RunStarted || first.Result.Outcome != allot.OutcomeAllocated || first.Result.EpisodeID != episode ||
		first.Result.Period != date || first.WorkflowID != key || first.Episode.Stage != allot.StageCompleted {
		t.Fatalf("first run: %+v, episode %+v", first.RunResult, first.Episode)
	}
	settled := e.rows()[date]
	if settled.TotalCents != readmeTotal || settled.Payments != readmePayCount {
		t.Fatalf("row of %s after the first run: %+v, want %d cents from %d payments", date, settled, readmeTotal, readmePayCount)
	}
	e.wantTotalFile(episode, settled)

	// Started again: the same episode; nothing runs again.
	again := e.run(firstRun)
	if again.Action != operator.RunExisting || again.Result.EpisodeID != episode || again.Episode.Stage != allot.StageCompleted {
		t.Fatalf("duplicate start: %+v, episode %+v", again.RunResult, again.Episode)
	}
	// A manual run for the same business date: its own run, no episode.
	var manual operator.RunResult
	e.json(&manual, manualRun...)
	if manual.Action != operator.RunStarted || manual.Result == nil || manual.Result.Outcome != allot.OutcomeSkipped ||
		manual.Result.Reason != allot.ReasonCapReached || manual.Result.EpisodeID != "" || manual.Result.Period != date {
		t.Fatalf("manual run: %+v", manual)
	}
	if got := e.rows()[date]; got != settled {
		t.Fatalf("a duplicate start and a skipped run changed the row: %+v, was %+v", got, settled)
	}

	// A payment comes late; settle by hand recomputes the row in place.
	e.insertPayment(date, 777)
	e.settle(settleByHand...)
	got := e.rows()
	if row := got[date]; row.TotalCents != readmeTotal+777 || row.Payments != readmePayCount+1 {
		t.Fatalf("row of %s after settle by hand: %+v, want %d cents from %d payments", date, row, readmeTotal+777, readmePayCount+1)
	}
	if len(got) != 1 {
		t.Fatalf("daily_totals holds %v, want the one row of %s", slices.Sorted(maps.Keys(got)), date)
	}
	if n := e.notifications()[notifyIdem(episode)]; n != 1 || e.posts(notifyIdem(episode)) != 1 {
		t.Fatalf("the downstream got %d notifications (%d requests) for %s, want one", n, e.posts(notifyIdem(episode)), episode)
	}
	if eps := e.episodes(); len(eps) != 1 {
		t.Fatalf("episodes %+v, want one", eps)
	}
	outcomes := e.runOutcomes()
	if o := outcomes[key]; len(o) != 1 || o[0].Outcome != allot.OutcomeAllocated {
		t.Fatalf("runs of %s: %+v, want one, allocated", key, o)
	}
	if o := outcomes[pipelineName+"/manual-2026-03-29"]; len(o) != 1 || o[0].Outcome != allot.OutcomeSkipped || o[0].Reason != allot.ReasonCapReached {
		t.Fatalf("runs of the manual key: %+v, want one, skipped at the cap", o)
	}
}

// 2. Runs at 00:05 Berlin time settle the date before: on the night of
// the change to summer time (still CET), after the change to winter time
// (the 25-hour day), and on new year's day (the old year's last day).
func (e *env) dstAndNewYear(t *testing.T) {
	e.t = t
	for _, c := range []struct{ nominal, date, key string }{
		{"2026-03-29T00:05:00+01:00", "2026-03-28", "daily-settlement/scheduled-2026-03-28T23:05:00Z"},
		{"2026-10-26T00:05:00+01:00", "2026-10-25", "daily-settlement/scheduled-2026-10-25T23:05:00Z"},
		{"2027-01-01T00:05:00+01:00", "2026-12-31", "daily-settlement/scheduled-2026-12-31T23:05:00Z"},
	} {
		r := e.run([]string{"run", "--pipeline", pipelineName, "--nominal-time", c.nominal, "--follow"})
		episode := c.date + "-0"
		if r.Action != operator.RunStarted || r.WorkflowID != c.key || r.Result.EpisodeID != episode || r.Result.Period != c.date ||
			r.Episode.Stage != allot.StageCompleted {
			t.Fatalf("run at %s: %+v, episode %+v; want episode %s under key %s", c.nominal, r.RunResult, r.Episode, episode, c.key)
		}
		row := e.rows()[c.date]
		if want := expectedTotal(c.date); row.TotalCents != want.TotalCents || row.Payments != want.Payments {
			t.Fatalf("row of %s: %+v, want %+v", c.date, row, want)
		}
		e.wantTotalFile(episode, row)
		if n := e.notifications()[notifyIdem(episode)]; n != 1 {
			t.Fatalf("%d notifications for %s", n, episode)
		}
	}
	// Only the settled dates have rows: nothing leaked into the nominal
	// dates (2026-03-29 is the first part's).
	if got := slices.Sorted(maps.Keys(e.rows())); !slices.Equal(got, []string{"2026-03-28", "2026-03-29", "2026-10-25", "2026-12-31"}) {
		t.Fatalf("daily_totals holds %v", got)
	}
}

// 3. The README's schedule and backfill: seven times at 00:05 Berlin
// (across the change to winter time) settle 2026-10-19 to 2026-10-25; the
// last time is the key the second part ran by hand, so its episode comes
// back. Backfilled again, every run is reused and nothing changes.
func (e *env) backfillSevenDays(t *testing.T) {
	e.t = t
	var sched operator.ScheduleResult
	e.json(&sched, append(createSchedule, "--paused")...)
	if sched.Spec.Cron != "5 0 * * *" || !sched.Paused {
		t.Fatalf("schedule: %+v", sched)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	var dates, keys []string
	for d := time.Date(2026, 10, 19, 0, 0, 0, 0, time.UTC); !d.After(time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)); d = d.AddDate(0, 0, 1) {
		dates = append(dates, d.Format(time.DateOnly))
		run := time.Date(d.Year(), d.Month(), d.Day()+1, 0, 5, 0, 0, berlin)
		keys = append(keys, allot.AllocationKey(pipelineName, run))
	}
	var res operator.BackfillResult
	e.json(&res, backfill...)
	if !res.Sent || res.Runs != 7 || res.Progress == nil || *res.Progress != (operator.BackfillProgress{Total: 7, Done: 7, AlreadyDone: 1, Started: 6, Allocated: 6}) ||
		res.First.Format(time.RFC3339) != "2026-10-19T22:05:00Z" || res.Last.Format(time.RFC3339) != "2026-10-25T23:05:00Z" {
		t.Fatalf("backfill: %+v, progress %+v", res, res.Progress)
	}
	e.waitCompleted(dates)

	var listed report.EpisodesResult
	e.json(&listed, listEpisodes...)
	byPeriod := map[string][]report.EpisodeView{}
	for _, ep := range listed.Episodes {
		byPeriod[ep.Period] = append(byPeriod[ep.Period], ep)
	}
	rows := e.rows()
	for i, date := range dates {
		eps := byPeriod[date]
		if len(eps) != 1 || eps[0].ID != date+"-0" || eps[0].AllocationKey != keys[i] || eps[0].Status != string(allot.OutcomeCompleted) {
			t.Fatalf("episodes of %s: %+v, want %s-0 under key %s, completed", date, eps, date, keys[i])
		}
		if want := expectedTotal(date); rows[date].TotalCents != want.TotalCents || rows[date].Payments != want.Payments {
			t.Fatalf("row of %s: %+v, want %+v", date, rows[date], want)
		}
		if n := e.notifications()[notifyIdem(date+"-0")]; n != 1 {
			t.Fatalf("%d notifications for %s", n, date)
		}
	}
	// The manual run's time was done: the backfill did not start it again.
	if o := e.runOutcomes()[keys[6]]; len(o) != 1 || o[0].Outcome != allot.OutcomeAllocated {
		t.Fatalf("runs of %s: %+v, want the manual run's allocation only", keys[6], o)
	}

	// The same range again: every time is done, nothing starts.
	before := e.state()
	var again operator.BackfillResult
	e.json(&again, backfill...)
	if again.Progress == nil || *again.Progress != (operator.BackfillProgress{Total: 7, Done: 7, AlreadyDone: 7}) {
		t.Fatalf("backfill again: %+v, progress %+v", again, again.Progress)
	}
	if after := e.state(); after != before {
		t.Fatalf("backfilling again changed something:\nbefore %s\nafter  %s", before, after)
	}
}

// 4. The downstream cannot be looked up and loses its first answer: the
// notification arrived, but allot cannot know. The episode parks with
// OutcomeUnknown and its remedies, the downstream holds one notification
// and got one request; the printed resubmit (once its answers arrive
// again) completes the episode, and the downstream, which honours the
// key, still holds one.
func (e *env) noLookupParks(t *testing.T) {
	e.t = t
	const date, episode = "2026-11-15", "2026-11-15-0"
	if err := e.sim.SetFaults(paidvendortest.SimFaults{NoLookup: true, LoseResponseAfterAccept: 1}); err != nil {
		t.Fatal(err)
	}
	run := []string{"run", "--pipeline", pipelineName, "--nominal-time", "2026-11-16T00:05:00+01:00", "--follow"}
	parked := e.run(run)
	a := parked.Episode.Attention
	if parked.Result.EpisodeID != episode || parked.Episode.Stage != allot.StageNeedsAttention || a == nil || a.ErrorType != allot.OutcomeUnknown || a.Step != "notify" {
		t.Fatalf("run with a downstream that lost its answer: %+v, episode %+v", parked.RunResult, parked.Episode)
	}
	if n, posts := e.notifications()[notifyIdem(episode)], e.posts(notifyIdem(episode)); n != 1 || posts != 1 {
		t.Fatalf("while parked the downstream holds %d notifications from %d requests, want one from one", n, posts)
	}
	if row, want := e.rows()[date], expectedTotal(date); row.TotalCents != want.TotalCents || row.Payments != want.Payments {
		t.Fatalf("row of %s: %+v, want %+v", date, row, want)
	}
	show := string(e.out("episode", "show", "--pipeline", pipelineName, "--episode", episode))
	var resubmit string
	for _, r := range a.Remedies {
		if !strings.Contains(show, r) {
			t.Fatalf("starter episode show does not print the remedy %q:\n%s", r, show)
		}
		if strings.HasSuffix(r, " --resubmit") {
			resubmit = r
		}
	}
	if len(a.Remedies) != 4 || resubmit != "starter episode resolve --pipeline daily-settlement --episode "+episode+" --step notify --resubmit" {
		t.Fatalf("remedies %q", a.Remedies)
	}
	if !strings.Contains(show, "OutcomeUnknown") {
		t.Fatalf("starter episode show does not say why it waits:\n%s", show)
	}

	// The downstream answers again, still without look-up.
	if err := e.sim.SetFaults(paidvendortest.SimFaults{NoLookup: true}); err != nil {
		t.Fatal(err)
	}
	words := strings.Fields(resubmit)
	var res operator.CommandResult
	e.json(&res, words[1:]...)
	if done := e.run(run); done.Action != operator.RunExisting || done.Episode.Stage != allot.StageCompleted {
		t.Fatalf("after the resubmit: %+v, episode %+v", done.RunResult, done.Episode)
	}
	if n, posts := e.notifications()[notifyIdem(episode)], e.posts(notifyIdem(episode)); n != 1 || posts != 2 {
		t.Fatalf("after the resubmit the downstream holds %d notifications from %d requests, want one from two", n, posts)
	}
}

// env is the example's environment.
type env struct {
	t       *testing.T // the running part's
	dir     string     // the shell's working directory
	dataDir string
	dbPath  string
	vars    []string
	starter string
	settleB string
	sim     *paidvendortest.Simulator
	worker  *allottest.Process
	ledger  string

	mu       sync.Mutex
	requests map[string]int // submissions per idempotency key
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), requests: map[string]int{}}
	e.dataDir = filepath.Join(e.dir, "data")
	e.dbPath = filepath.Join(e.dataDir, "settlement.db")
	e.ledger = "sqlite:" + filepath.Join(e.dataDir, "allot.db")

	// The downstream: notifications cost nothing.
	e.sim = paidvendortest.NewSimulator(paidvendortest.SimConfig{
		APIKey: notifyKey, Seed: 3, PricePerKind: map[string]paidvendor.Cost{"settlement-ready": {Amount: 0, Currency: "USD"}},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == vendorapi.TasksPath {
			e.mu.Lock()
			e.requests[r.Header.Get(vendorapi.IdempotencyKeyHeader)]++
			e.mu.Unlock()
		}
		e.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	shipped, err := os.ReadFile("pipelines.toml")
	if err != nil {
		t.Fatal(err)
	}
	const readmeURL = `"http://127.0.0.1:8803"`
	if strings.Count(string(shipped), readmeURL) != 1 {
		t.Fatalf("pipelines.toml should name %s once (the README runs the downstream there)", readmeURL)
	}
	pipelinesFile := filepath.Join(e.dir, "pipelines.toml")
	if err := os.WriteFile(pipelinesFile, []byte(strings.Replace(string(shipped), readmeURL, `"`+srv.URL+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	dev := allottest.StartDevWith(t, devstack.Config{DataDir: filepath.Join(e.dir, "server"), NoWorker: true, Headless: true})
	workerBin := allottest.BuildBinary(t, "allot/worker")
	e.starter = allottest.BuildBinary(t, "allot/starter")
	// The README's `go build -o data/bin/settle`, onto the PATH.
	bin := filepath.Join(e.dataDir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	e.settleB = filepath.Join(bin, "settle")
	if err := os.Symlink(allottest.BuildBinary(t, "allot/examples/daily-settlement/settle"), e.settleB); err != nil {
		t.Fatal(err)
	}
	e.vars = cleanenv.Environ(
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SETTLE_DB="+e.dbPath, "SETTLE_BUSY_TIMEOUT=300ms", "LEDGER_NOTIFY_API_KEY="+notifyKey,
		"TEMPORAL_ADDRESS="+dev.Info.Frontend, "TEMPORAL_NAMESPACE="+dev.Info.Namespace,
		"ALLOT_LEDGER="+e.ledger, "ALLOT_DATA_DIR="+e.dataDir, "ALLOT_PIPELINES="+pipelinesFile, "ALLOT_VENDOR_URL=")

	// The README's settle lines, then the test's payments.
	e.settle(settleInit...)
	for _, p := range readmePayments {
		e.settle(p...)
	}
	db := e.openDB(false)
	defer db.Close()
	for _, date := range paymentDates() {
		if date == "2026-03-29" {
			continue // the README's
		}
		for i, cents := range payments(date) {
			if _, err := db.Exec(`INSERT INTO payments (business_date, amount_cents, reference) VALUES (?, ?, ?)`, date, cents, fmt.Sprintf("%s/%d", date, i)); err != nil {
				t.Fatal(err)
			}
		}
	}

	cmd := exec.Command(workerBin)
	cmd.Env, cmd.Dir = e.vars, e.dir
	e.worker = allottest.StartProcess(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker output:\n%s", e.worker.Output.String())
		}
	})
	e.worker.WaitOutput(t, regexp.MustCompile(`allot worker starting`), time.Minute)
	return e
}

// paymentDates are the business dates the test has payments for: around
// each date it settles, so that a wrong date would find other amounts.
func paymentDates() []string {
	var out []string
	for _, r := range [][2]string{{"2026-03-27", "2026-03-31"}, {"2026-10-17", "2026-10-27"}, {"2026-11-14", "2026-11-16"}, {"2026-12-30", "2027-01-01"}} {
		from, _ := time.Parse(time.DateOnly, r[0])
		to, _ := time.Parse(time.DateOnly, r[1])
		for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
			out = append(out, d.Format(time.DateOnly))
		}
	}
	return out
}

// payments are a date's payments in cents: a different count and sum for
// every date.
func payments(date string) []int64 {
	d, _ := time.Parse(time.DateOnly, date)
	out := []int64{}
	for i := range d.Day()%3 + 1 {
		out = append(out, int64(10000*(i+1)+d.YearDay()))
	}
	return out
}

// row is one row of daily_totals.
type row struct {
	TotalCents int64  `json:"total_cents"`
	Payments   int64  `json:"payments"`
	ComputedAt string `json:"computed_at"`
}

func expectedTotal(date string) row {
	var r row
	for _, c := range payments(date) {
		r.TotalCents += c
		r.Payments++
	}
	return r
}

// rows reads daily_totals.
func (e *env) rows() map[string]row {
	e.t.Helper()
	db := e.openDB(true)
	defer db.Close()
	rs, err := db.Query(`SELECT business_date, total_cents, payments, computed_at FROM daily_totals`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rs.Close()
	out := map[string]row{}
	for rs.Next() {
		var date string
		var r row
		if err := rs.Scan(&date, &r.TotalCents, &r.Payments, &r.ComputedAt); err != nil {
			e.t.Fatal(err)
		}
		if _, dup := out[date]; dup {
			e.t.Fatalf("daily_totals holds %s twice", date)
		}
		out[date] = r
	}
	if err := rs.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) openDB(readOnly bool) *sql.DB {
	e.t.Helper()
	dsn := "file:" + e.dbPath + "?_pragma=busy_timeout(10000)"
	if readOnly {
		dsn += "&mode=ro"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	return db
}

func (e *env) insertPayment(date string, cents int64) {
	e.t.Helper()
	db := e.openDB(false)
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO payments (business_date, amount_cents, reference) VALUES (?, ?, 'late')`, date, cents); err != nil {
		e.t.Fatal(err)
	}
}

// lockDB holds the settlement database's write lock, as another writer
// would, until the returned function is called (or the test ends).
func (e *env) lockDB() func() {
	e.t.Helper()
	db := e.openDB(false)
	conn, err := db.Conn(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		e.t.Fatal(err)
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
			db.Close()
		})
	}
	e.t.Cleanup(release)
	return release
}

func (e *env) episodeDir(episode string) string {
	return filepath.Join(e.dataDir, "artifacts", pipelineName, episode)
}

// wantTotalFile checks the exec step's declared output: total.json in the
// episode's directory names the episode's business date and the row's
// total, and the ledger holds its sha256.
func (e *env) wantTotalFile(episode string, r row) {
	e.t.Helper()
	path := filepath.Join(e.episodeDir(episode), "total.json")
	data, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	var file struct {
		row
		BusinessDate string `json:"business_date"`
	}
	if err := json.Unmarshal(data, &file); err != nil || file.BusinessDate != strings.TrimSuffix(episode, "-0") || file.row != r {
		e.t.Fatalf("%s: %s (%v), want the row %+v", path, data, err, r)
	}
	sum := sha256.Sum256(data)
	led, err := ledger.OpenReadOnly(context.Background(), e.ledger)
	if err != nil {
		e.t.Fatal(err)
	}
	defer led.Close()
	steps, err := led.Steps(context.Background(), pipelineName, episode)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range steps {
		if s.Step == "settle" && s.Status == allot.StepCompleted && len(s.Outputs) == 1 && s.Outputs[0].SHA256 == hex.EncodeToString(sum[:]) {
			return
		}
	}
	e.t.Fatalf("the ledger does not hold total.json of %s with its sha256: %+v", episode, steps)
}

// notifications counts the downstream's notifications per idempotency key.
func (e *env) notifications() map[string]int {
	out := map[string]int{}
	for _, c := range e.sim.Charges() {
		out[c.IdempotencyKey]++
	}
	return out
}

func (e *env) posts(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests[key]
}

func notifyIdem(episode string) string {
	return allot.IdempotencyKey(pipelineName, episode, "notify", 0)
}

func (e *env) episodes() []ledger.Episode {
	e.t.Helper()
	led, err := ledger.OpenReadOnly(context.Background(), e.ledger)
	if err != nil {
		e.t.Fatal(err)
	}
	defer led.Close()
	eps, err := led.ListEpisodes(context.Background(), pipelineName, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return eps
}

// runOutcomes are the recorded runs per allocation key, oldest first.
func (e *env) runOutcomes() map[string][]ledger.RunOutcome {
	e.t.Helper()
	led, err := ledger.OpenReadOnly(context.Background(), e.ledger)
	if err != nil {
		e.t.Fatal(err)
	}
	defer led.Close()
	outs, err := led.RunOutcomes(context.Background(), pipelineName, time.Time{})
	if err != nil {
		e.t.Fatal(err)
	}
	slices.SortStableFunc(outs, func(a, b ledger.RunOutcome) int { return a.RecordedAt.Compare(b.RecordedAt) })
	m := map[string][]ledger.RunOutcome{}
	for _, o := range outs {
		m[o.AllocationKey] = append(m[o.AllocationKey], o)
	}
	return m
}

// waitCompleted waits (2 minutes) until each date's episode has completed
// and recorded its outcome.
func (e *env) waitCompleted(dates []string) {
	e.t.Helper()
	deadline := allottest.Deadline(e.t, 2*time.Minute)
	for {
		done := map[string]bool{}
		for _, ep := range e.episodes() {
			// Completed, and its outcome recorded (which follows).
			done[ep.Period] = ep.Status == ledger.EpisodeCompleted && ep.Outcome == string(allot.OutcomeCompleted)
		}
		missing := slices.DeleteFunc(slices.Clone(dates), func(d string) bool { return done[d] })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("episodes of %v did not complete", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// state is what a repeated run or backfill could change: the rows (with
// when they were computed), the notifications, the episodes.
func (e *env) state() string {
	data, _ := json.Marshal(map[string]any{"rows": e.rows(), "notifications": e.notifications(), "charges": e.sim.ChargeCount(), "episodes": len(e.episodes())})
	return string(data)
}

// out runs the real starter binary, as an operator at a shell would.
func (e *env) out(args ...string) []byte {
	e.t.Helper()
	return allottest.Starter{Bin: e.starter, Dir: e.dir, Env: e.vars}.Out(e.t, args...)
}

func (e *env) json(v any, args ...string) {
	e.t.Helper()
	allottest.Starter{Bin: e.starter, Dir: e.dir, Env: e.vars}.JSON(e.t, v, args...)
}

type followedRun struct {
	operator.RunResult
	Episode workflows.EpisodeState `json:"episode"`
}

func (e *env) run(args []string) followedRun {
	e.t.Helper()
	var r followedRun
	e.json(&r, args...)
	if r.Result == nil {
		e.t.Fatalf("starter %s: no result: %+v", strings.Join(args, " "), r)
	}
	return r
}

// settle runs the settle binary as the README does, from the shell's
// working directory.
func (e *env) settle(args ...string) {
	e.t.Helper()
	cmd := exec.Command(e.settleB, args...)
	cmd.Env, cmd.Dir = e.vars, e.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("settle %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// readmeCommands fails unless the README's shell block has the starter
// and settle lines this test runs, in this order, and runs the downstream
// where pipelines.toml has it.
func readmeCommands(t *testing.T) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(readme), "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var starterLines, settleLines [][]string
	for _, line := range strings.Split(block, "\n") {
		if rest, ok := strings.CutPrefix(line, "go run ./starter "); ok {
			starterLines = append(starterLines, strings.Fields(rest))
		}
		if rest, ok := strings.CutPrefix(line, "settle "); ok {
			settleLines = append(settleLines, strings.Fields(rest))
		}
	}
	wantStarter := [][]string{firstRun, firstRun, manualRun, createSchedule, backfill, listEpisodes}
	if !slices.EqualFunc(starterLines, wantStarter, slices.Equal) {
		t.Fatalf("the README's starter commands are %q, the test runs %q", starterLines, wantStarter)
	}
	wantSettle := append(append([][]string{settleInit}, readmePayments...), settleByHand)
	if !slices.EqualFunc(settleLines, wantSettle, slices.Equal) {
		t.Fatalf("the README's settle commands are %q, the test runs %q", settleLines, wantSettle)
	}
	for _, s := range []string{"--addr 127.0.0.1:8803", "go build -o data/bin/settle ./examples/daily-settlement/settle", "PATH=$PWD/data/bin:$PATH", "SETTLE_DB=$PWD/data/settlement.db"} {
		if !strings.Contains(block, s) {
			t.Fatalf("the README's commands lack %q, which the test relies on", s)
		}
	}
}
