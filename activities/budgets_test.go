package activities

// Budgets at the activity boundary (invariant 20): what a paid task
// reserves, in which period, what a refusal parks with, quotes, alerts.

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/internal/ledger"
	"allot/internal/payonce"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
)

// budgetPipelines: tokyo's days are counted in Tokyo; its video step goes
// to the default vendor (the simulator, 250 USD cents a task) under a daily
// budget of that vendor for two tasks; its cover step goes to a Go adapter that quotes,
// under a monthly budget of that vendor.
const budgetPipelines = `
[[vendor]]
name    = "quoter"
adapter = "go"

[[budget]]
name      = "tokyo-daily"
pipeline  = "tokyo"
vendor    = "default"
period    = "day"
time_zone = "Asia/Tokyo"
limit     = { amount = 500, currency = "USD" }
alerts    = [0.5, 0.9]

[[budget]]
name   = "quoter-monthly"
vendor = "quoter"
period = "month"
limit  = { amount = 1000, currency = "USD" }

[[pipeline]]
name      = "tokyo"
period    = "day"
time_zone = "Asia/Tokyo"
  [[pipeline.step]]
  name     = "video"
  kind     = "paid"
  max_cost = { amount = 250, currency = "USD" }
  [[pipeline.step]]
  name     = "cover"
  kind     = "effect"
  vendor   = "quoter"
  max_cost = { amount = 100, currency = "USD" }
`

// quoter is a Go adapter that quotes (when price is set) and counts what
// it is asked.
type quoter struct {
	price          *paidvendor.Cost
	quotes, submit atomic.Int32
}

func (q *quoter) Quote(context.Context, paidvendor.SubmitRequest) (paidvendor.Cost, error) {
	q.quotes.Add(1)
	return *q.price, nil
}

func (q *quoter) Submit(_ context.Context, req paidvendor.SubmitRequest) (paidvendor.Task, error) {
	q.submit.Add(1)
	return paidvendor.Task{ID: "out_" + req.IdempotencyKey, IdempotencyKey: req.IdempotencyKey, Status: paidvendor.StatusSucceeded}, nil
}

func (q *quoter) LookupByIdempotencyKey(context.Context, string) (paidvendor.Task, error) {
	return paidvendor.Task{}, paidvendor.ErrNotFound
}

// noQuote is the same adapter without Quote.
type noQuote struct{ q *quoter }

func (n noQuote) Submit(ctx context.Context, req paidvendor.SubmitRequest) (paidvendor.Task, error) {
	return n.q.Submit(ctx, req)
}

func (n noQuote) LookupByIdempotencyKey(ctx context.Context, key string) (paidvendor.Task, error) {
	return n.q.LookupByIdempotencyKey(ctx, key)
}

type budgetFixture struct {
	*fixture
	sim     *paidvendortest.Simulator
	q       *quoter
	metrics countingHandler
}

func newBudgetFixture(t *testing.T, quotes bool) *budgetFixture {
	t.Helper()
	f := newFixture(t, nil)
	set, err := pipeline.Parse([]byte(budgetPipelines), "budgets_test")
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Pipelines = set
	sim, _, _ := withVendor(t, f)
	q := &quoter{}
	f.acts.Vendors = map[string]Vendor{"quoter": {New: func(string) (paidvendor.Submitter, error) {
		if quotes {
			return q, nil
		}
		return noQuote{q}, nil
	}}}
	h := newCountingHandler()
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(h)
	f.env = suite.NewTestActivityEnvironment()
	f.env.RegisterActivity(f.acts)
	return &budgetFixture{fixture: f, sim: sim, q: q, metrics: h}
}

func (f *budgetFixture) submit(t *testing.T, episodeID, step string) (PaidTaskResult, error) {
	t.Helper()
	return execute[PaidTaskResult](t, f.fixture, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "tokyo", EpisodeID: episodeID, Step: step})
}

func (f *budgetFixture) period(t *testing.T, budget, period string) ledger.BudgetPeriod {
	t.Helper()
	b, _ := f.acts.Pipelines.Budget(budget)
	bp, err := f.led.BudgetPeriodOf(f.ctx, ledger.BudgetLimit{Budget: budget, Currency: "USD", Limit: b.Limit.Amount}, period)
	if err != nil {
		t.Fatal(err)
	}
	return bp
}

// parkDetails are the details a BudgetExhausted refusal carries.
func parkDetails(t *testing.T, err error) ParkDetails {
	t.Helper()
	appErr := wantAppError(t, err, allot.BudgetExhausted)
	var d ParkDetails
	if !appErr.HasDetails() || appErr.Details(&d) != nil {
		t.Fatalf("a BudgetExhausted refusal without its details: %v", err)
	}
	return d
}

// A paid task reserves max_cost in the budget of its episode's nominal
// period (in the budget's zone), settles at the vendor's cost, and one that
// does not fit is not sent: planned, parked with what the budget has.
func TestBudgetReservesSettlesAndRefuses(t *testing.T) {
	f := newBudgetFixture(t, false)
	var eps []string
	for i, key := range []string{"run-1", "run-2", "run-3"} {
		eps = append(eps, f.mustAllocate(t, "tokyo", key, tokyoNominal.Add(time.Duration(i)*time.Minute)).EpisodeID)
	}
	for _, ep := range eps[:2] {
		if _, err := f.submit(t, ep, "video"); err != nil {
			t.Fatal(err)
		}
	}
	// 20:00 UTC on 2026-08-06 is 2026-08-07 in Tokyo: the budget's day.
	if bp := f.period(t, "tokyo-daily", tokyoPeriod); bp.Settled != 500 || bp.Reserved != 0 || bp.SettledTasks != 2 {
		t.Fatalf("tokyo-daily %s after two tasks: %+v", tokyoPeriod, bp)
	}
	_, err := f.submit(t, eps[2], "video")
	d := parkDetails(t, err)
	want := ledger.BudgetShortfall{Budget: "tokyo-daily", Period: tokyoPeriod, Currency: "USD", Limit: 500, Settled: 500, Asked: 250}
	if d.TaskState != allot.PaidPlanned || len(d.Budgets) != 1 || d.Budgets[0] != want {
		t.Fatalf("park details %+v, want planned and %+v", d, want)
	}
	if n := f.sim.ChargeCount(); n != 2 {
		t.Fatalf("the vendor charged %d times, want 2: a refused task was sent", n)
	}
	task, err := f.led.LatestPaidTask(f.ctx, "tokyo", eps[2], "video")
	if err != nil || task.State != allot.PaidPlanned {
		t.Fatalf("the refused task: %+v, %v", task, err)
	}
	// Read-only: the room it asks for is not there; after a raise it is,
	// and the step goes through.
	room, err := execute[BudgetRoomResult](t, f.fixture, f.acts.BudgetRoom, BudgetRoomInput{
		PaidTaskInput: PaidTaskInput{Pipeline: "tokyo", EpisodeID: eps[2], Step: "video"}, Needs: d.Budgets})
	if err != nil || room.Room {
		t.Fatalf("BudgetRoom before a raise: %+v, %v", room, err)
	}
	if _, _, err := f.led.RaiseBudget(f.ctx, ledger.BudgetRaise{RequestID: "r1", Budget: "tokyo-daily", Period: tokyoPeriod, Limit: 750, Currency: "USD", Reason: "t", By: "t"}); err != nil {
		t.Fatal(err)
	}
	room, err = execute[BudgetRoomResult](t, f.fixture, f.acts.BudgetRoom, BudgetRoomInput{
		PaidTaskInput: PaidTaskInput{Pipeline: "tokyo", EpisodeID: eps[2], Step: "video"}, Needs: d.Budgets})
	if err != nil || !room.Room {
		t.Fatalf("BudgetRoom after a raise: %+v, %v", room, err)
	}
	if _, err := f.submit(t, eps[2], "video"); err != nil {
		t.Fatal(err)
	}
	if n := f.sim.ChargeCount(); n != 3 {
		t.Fatalf("charges after the raise: %d, want 3", n)
	}
	// Soft thresholds: 50 % (250 of 500) and 90 % (500 of 500) of the
	// day's limit, each counted once, not again at 750 of 750 after the
	// raise.
	if n := f.metrics.total(MetricBudgetAlerts); n != 2 {
		t.Fatalf("budget alerts counted %d times, want 2 (50 %% and 90 %%, once each)", n)
	}
}

// Issue 24: an episode parked on a budget that has since been removed
// from the pipeline file resumes. Its room check no longer asks the gone
// budget (which, kept at its old limit, refused for ever); the step runs
// again, and the budgets that cover it now decide.
func TestBudgetRoomOfARemovedBudgetLetsTheStepRunAgain(t *testing.T) {
	f := newBudgetFixture(t, false)
	var eps []string
	for i, key := range []string{"run-1", "run-2", "run-3"} {
		eps = append(eps, f.mustAllocate(t, "tokyo", key, tokyoNominal.Add(time.Duration(i)*time.Minute)).EpisodeID)
	}
	for _, ep := range eps[:2] {
		if _, err := f.submit(t, ep, "video"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := f.submit(t, eps[2], "video")
	needs := parkDetails(t, err).Budgets
	ask := BudgetRoomInput{PaidTaskInput: PaidTaskInput{Pipeline: "tokyo", EpisodeID: eps[2], Step: "video"}, Needs: needs}
	if room, err := execute[BudgetRoomResult](t, f.fixture, f.acts.BudgetRoom, ask); err != nil || room.Room {
		t.Fatalf("BudgetRoom with the budget in the file: %+v, %v", room, err)
	}
	// The operator deletes the [[budget]] tokyo-daily and restarts.
	start := strings.Index(budgetPipelines, "[[budget]]\nname      = \"tokyo-daily\"")
	end := strings.Index(budgetPipelines, "[[budget]]\nname   = \"quoter-monthly\"")
	if start < 0 || end < start {
		t.Fatal("the test file changed: find tokyo-daily's [[budget]]")
	}
	set, err := pipeline.Parse([]byte(budgetPipelines[:start]+budgetPipelines[end:]), "budgets_test")
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Pipelines = set
	room, err := execute[BudgetRoomResult](t, f.fixture, f.acts.BudgetRoom, ask)
	if err != nil || !room.Room || len(room.Shortfalls) != 0 {
		t.Fatalf("BudgetRoom of a removed budget: %+v, %v; want room (the step runs again)", room, err)
	}
	if _, err := f.submit(t, eps[2], "video"); err != nil {
		t.Fatalf("the step run again: %v", err)
	}
	if n := f.sim.ChargeCount(); n != 3 {
		t.Fatalf("charges: %d, want 3", n)
	}
}

// Defect: a price that could not be reserved was sent anyway. A quote above
// the step's max_cost parks the step (nothing sent); a quote within it is
// what the budget reserves; an effect with a max_cost reserves it and
// settles at nothing.
func TestBudgetReservesTheQuote(t *testing.T) {
	f := newBudgetFixture(t, true)
	ep := f.mustAllocate(t, "tokyo", "run-1", tokyoNominal).EpisodeID
	f.q.price = &paidvendor.Cost{Amount: 101, Currency: "USD"}
	_, err := f.submit(t, ep, "cover")
	parkDetails(t, err)
	if f.q.submit.Load() != 0 {
		t.Fatal("a task quoted above its max_cost was sent")
	}
	f.q.price = &paidvendor.Cost{Amount: 80, Currency: "USD"}
	// The reservation is the quote: watched between the intent and the
	// send through PaidPrepare.
	plan, err := execute[PaidPlan](t, f.fixture, f.acts.PaidPrepare, PaidPhaseInput{PaidTaskInput: PaidTaskInput{Pipeline: "tokyo", EpisodeID: ep, Step: "cover"}, Owner: "a1"})
	if err != nil || plan.Next != payonce.NextQuote || plan.QuoteRequest == nil || plan.QuoteRequest.Kind != "cover" {
		t.Fatalf("PaidPrepare of a quoting vendor's task: %+v, %v; want the quote phase first", plan, err)
	}
	if task, err := f.led.LatestPaidTask(f.ctx, "tokyo", ep, "cover"); err != nil || task.State != allot.PaidPlanned || task.Owner != "" {
		t.Fatalf("after a refused quote and the quote phase: %+v, %v; want the task planned, nothing reserved", task, err)
	}
	plan, err = execute[PaidPlan](t, f.fixture, f.acts.PaidPrepare, PaidPhaseInput{PaidTaskInput: PaidTaskInput{Pipeline: "tokyo", EpisodeID: ep, Step: "cover"}, Owner: "a1", Quote: f.q.price})
	if err != nil || plan.Next != payonce.NextSend {
		t.Fatalf("PaidPrepare with the quote: %+v, %v", plan, err)
	}
	month := tokyoNominal.UTC().Format("2006-01")
	if bp := f.period(t, "quoter-monthly", month); bp.Reserved != 80 {
		t.Fatalf("quoter-monthly holds %+v, want the quote of 80 reserved", bp)
	}
	// A second attempt finds the intent: no quote is asked again.
	quotes := f.q.quotes.Load()
	if _, err := f.submit(t, ep, "cover"); err != nil {
		t.Fatal(err)
	}
	if f.q.quotes.Load() != quotes {
		t.Fatal("a quote was asked for a task whose intent exists")
	}
	if bp := f.period(t, "quoter-monthly", month); bp.Reserved != 0 || bp.Settled != 0 || bp.SettledTasks != 1 {
		t.Fatalf("an effect settles at nothing: %+v", bp)
	}
}

// Without a quote (the Go adapter does not implement Quoter) the
// reservation is max_cost; a pinned plan without max_cost takes the
// pipeline file's (an episode allocated before budgets).
func TestBudgetReservesMaxCostOfThePlanOrTheFile(t *testing.T) {
	f := newBudgetFixture(t, false)
	ep := f.mustAllocate(t, "tokyo", "run-1", tokyoNominal).EpisodeID
	// Pin a plan without max_cost, as an older worker did.
	old := `[{"name":"video","kind":"paid","action":"video"},{"name":"cover","kind":"effect","action":"cover","vendor":"quoter"}]`
	rawSQL(t, f.fixture, `UPDATE episodes SET plan = ? WHERE episode_id = ?`, old, ep)
	plan, err := execute[PaidPlan](t, f.fixture, f.acts.PaidPrepare, PaidPhaseInput{PaidTaskInput: PaidTaskInput{Pipeline: "tokyo", EpisodeID: ep, Step: "video"}, Owner: "a1"})
	if err != nil || plan.Next != payonce.NextSend {
		t.Fatalf("PaidPrepare: %+v, %v", plan, err)
	}
	if bp := f.period(t, "tokyo-daily", tokyoPeriod); bp.Reserved != 250 {
		t.Fatalf("a plan pinned without max_cost reserved %+v, want the file's 250", bp)
	}
	// The Go adapter cannot quote: max_cost it is.
	if _, err := f.submit(t, ep, "cover"); err != nil {
		t.Fatal(err)
	}
	if bp := f.period(t, "quoter-monthly", tokyoNominal.UTC().Format("2006-01")); bp.SettledTasks != 1 {
		t.Fatalf("quoter-monthly: %+v", bp)
	}
}

// A step no pipeline file prices any more (the pinned plan names a step the
// file lost) parks instead of being sent unreserved.
func TestBudgetWithoutAPriceParks(t *testing.T) {
	f := newBudgetFixture(t, false)
	ep := f.mustAllocate(t, "tokyo", "run-1", tokyoNominal).EpisodeID
	plan := `[{"name":"video","kind":"paid","action":"video"},{"name":"extra","kind":"paid","action":"extra"}]`
	rawSQL(t, f.fixture, `UPDATE episodes SET plan = ? WHERE episode_id = ?`, plan, ep)
	_, err := f.submit(t, ep, "extra")
	d := parkDetails(t, err)
	if len(d.Budgets) != 0 || d.TaskState != allot.PaidPlanned {
		t.Fatalf("details %+v: a step without a price names no budget to raise", d)
	}
	if f.sim.ChargeCount() != 0 {
		t.Fatal("an unpriced step was sent")
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && !appErr.NonRetryable() {
		t.Fatal("BudgetExhausted is retryable")
	}
	// The task is planned, so that the remedies (retry, abandon) apply.
	mustAbandon := DecisionInput{RequestID: "abandon-1", Action: allot.ActionAbandon, Step: "extra", Reason: "no price", Pipeline: "tokyo", EpisodeID: ep}
	if _, err := execute[DecisionResult](t, f.fixture, f.acts.ApplyDecision, mustAbandon); err != nil {
		t.Fatalf("abandoning the unpriced step: %v", err)
	}
}

// An attempt that read another attempt's intent prices nothing; if that
// intent goes back to planned (its send refused) before the attempt writes,
// the attempt must not make it an intent with nothing reserved: it prices
// the task again (here: asks for a quote) and reserves (issue 24: an
// attempt running past its heartbeat timeout beside its retry paid 750
// under a budget of 500).
func TestAStaleReadNeverSendsWithoutAReservation(t *testing.T) {
	f := newBudgetFixture(t, true)
	ep := f.mustAllocate(t, "tokyo", "run-1", tokyoNominal).EpisodeID
	f.q.price = &paidvendor.Cost{Amount: 80, Currency: "USD"}
	in := func(owner string, quote *paidvendor.Cost) PaidPhaseInput {
		return PaidPhaseInput{PaidTaskInput: PaidTaskInput{Pipeline: "tokyo", EpisodeID: ep, Step: "cover"}, Owner: owner, Quote: quote}
	}
	if plan, err := execute[PaidPlan](t, f.fixture, f.acts.PaidPrepare, in("a1", f.q.price)); err != nil || plan.Next != payonce.NextSend {
		t.Fatalf("attempt a1 with its quote: %+v, %v", plan, err)
	}
	month := tokyoNominal.UTC().Format("2006-01")
	// Attempt a2 reads a1's intent; before it writes, the vendor refuses
	// a1's send and a1 puts the task back to planned.
	released := false
	testHookPriced = func(ref ledger.PaidTaskRef) {
		if released {
			return
		}
		released = true
		if _, err := f.led.ReleaseIntent(f.ctx, ref, "a1", false); err != nil {
			t.Errorf("release a1's intent: %v", err)
		}
	}
	t.Cleanup(func() { testHookPriced = nil })
	plan, err := execute[PaidPlan](t, f.fixture, f.acts.PaidPrepare, in("a2", nil))
	if !released {
		t.Fatal("the hook between pricing and writing never ran")
	}
	if err != nil || plan.Next != payonce.NextQuote {
		t.Fatalf("attempt a2 after a1's intent went back to planned: %+v, %v; want it to ask for a quote again", plan, err)
	}
	task, err := f.led.LatestPaidTask(f.ctx, "tokyo", ep, "cover")
	if err != nil || task.State != allot.PaidPlanned {
		t.Fatalf("the task is %+v, %v; want planned: no intent without a reservation", task, err)
	}
	if bp := f.period(t, "quoter-monthly", month); bp.Reserved != 0 {
		t.Fatalf("quoter-monthly holds %+v, want nothing reserved yet", bp)
	}
	if plan, err := execute[PaidPlan](t, f.fixture, f.acts.PaidPrepare, in("a2", f.q.price)); err != nil || plan.Next != payonce.NextSend {
		t.Fatalf("attempt a2 with its quote: %+v, %v", plan, err)
	}
	if bp := f.period(t, "quoter-monthly", month); bp.Reserved != 80 {
		t.Fatalf("quoter-monthly holds %+v, want a2's quote of 80 reserved before its send", bp)
	}
}
