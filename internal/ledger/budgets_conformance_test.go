package ledger

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"allot"
	"allot/pipeline"
)

// Conformance tests of budgets (invariant 20, budgets.go), registered in
// runConformance so that both drivers run them; the model-based test is in
// budgets_model_test.go.

// usd250 reserves 250 USD cents in budget b's period 2026-W32, whose limit
// in the pipeline file is limit.
func usd(b, period string, limit, amount int64) Reservation {
	return Reservation{Budget: b, Period: period, Currency: "USD", Limit: limit, Amount: amount}
}

func reserve(t *testing.T, l *Ledger, r PaidTaskRef, rs ...Reservation) (PaidTask, error) {
	t.Helper()
	return l.WriteIntentReserving(ctxT(t), r, testKey(r), testOwner, rs)
}

func mustReserve(t *testing.T, l *Ledger, r PaidTaskRef, rs ...Reservation) PaidTask {
	t.Helper()
	pt, err := reserve(t, l, r, rs...)
	if err != nil {
		t.Fatalf("WriteIntentReserving(%+v): %v", r, err)
	}
	if pt.State != allot.PaidIntent {
		t.Fatalf("admitted task is %s, want intent", pt.State)
	}
	return pt
}

// wantRefused fails unless err is a BudgetExhaustedError naming exactly the
// budgets given, and the task is planned.
func wantRefused(t *testing.T, pt PaidTask, err error, budgets ...string) *BudgetExhaustedError {
	t.Helper()
	var be *BudgetExhaustedError
	if !errors.Is(err, ErrBudgetExhausted) || !errors.As(err, &be) {
		t.Fatalf("got %v, want ErrBudgetExhausted", err)
	}
	var got []string
	for _, s := range be.Shortfalls {
		got = append(got, s.Budget)
	}
	if !slices.Equal(got, budgets) {
		t.Fatalf("refused by %v, want %v", got, budgets)
	}
	if pt.State != allot.PaidPlanned {
		t.Fatalf("a refused task is %s, want planned", pt.State)
	}
	return be
}

func mustPeriod(t *testing.T, l *Ledger, budget, period string, limit int64) BudgetPeriod {
	t.Helper()
	bp, err := l.BudgetPeriodOf(ctxT(t), BudgetLimit{Budget: budget, Currency: "USD", Limit: limit}, period)
	if err != nil {
		t.Fatal(err)
	}
	return bp
}

func wantSpend(t *testing.T, l *Ledger, budget, period string, limit, settled, reserved int64) {
	t.Helper()
	bp := mustPeriod(t, l, budget, period, limit)
	if bp.Settled != settled || bp.Reserved != reserved || bp.Free != bp.Limit-settled-reserved {
		t.Fatalf("budget %s period %s: settled %d reserved %d free %d (limit %d), want settled %d reserved %d",
			budget, period, bp.Settled, bp.Reserved, bp.Free, bp.Limit, settled, reserved)
	}
}

// episodes allocates n episodes of pipeline in period.
func episodes(t *testing.T, l *Ledger, pipeline, period string, n int) []Episode {
	t.Helper()
	out := make([]Episode, n)
	for i := range out {
		out[i] = alloc(t, l, pipeline, fmt.Sprintf("%s/k%d", period, i), period, 0).Episode
	}
	return out
}

// 32 concurrent admissions against a limit that fits exactly N tasks admit
// exactly N; the others are written planned, hold nothing, and name the
// budget with what it has.
func testBudgetConcurrentAdmissions(t *testing.T, l *Ledger) {
	const n, price = 5, 250
	eps := episodes(t, l, "weekly", "2026-W32", 32)
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		admitted, refuse int
	)
	for _, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pt, err := reserve(t, l, paidRef(ep, "video", 0), usd("video-weekly", "2026-W32", n*price, price))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && pt.State == allot.PaidIntent:
				admitted++
			case errors.Is(err, ErrBudgetExhausted) && pt.State == allot.PaidPlanned:
				refuse++
			default:
				t.Errorf("episode %s: %+v, %v", ep.ID, pt, err)
			}
		}()
	}
	wg.Wait()
	if admitted != n || refuse != 32-n {
		t.Fatalf("admitted %d and refused %d of 32 against a limit for %d", admitted, refuse, n)
	}
	wantSpend(t, l, "video-weekly", "2026-W32", n*price, 0, n*price)
	// A refusal says what the budget has.
	pt, err := reserve(t, l, paidRef(eps[0], "cover", 0), usd("video-weekly", "2026-W32", n*price, 1))
	be := wantRefused(t, pt, err, "video-weekly")
	if s := be.Shortfalls[0]; s.Limit != n*price || s.Reserved != n*price || s.Settled != 0 || s.Asked != 1 || s.Period != "2026-W32" || s.Needed() != n*price+1 {
		t.Fatalf("shortfall %+v", s)
	}
	wantErr(t, "refusal", err, ErrBudgetExhausted, "video-weekly", "2026-W32", "12.50 USD", "0.01 USD")
	// Admission needs every covering budget: one without room admits
	// none of them.
	before := dumpTables(t, l)
	pt, err = reserve(t, l, paidRef(eps[0], "cover", 0), usd("covers-weekly", "2026-W32", 1000, 100), usd("video-weekly", "2026-W32", n*price, 1))
	wantRefused(t, pt, err, "video-weekly")
	if after := dumpTables(t, l); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refusal by one of two budgets wrote:\n%v\nwas\n%v", after, before)
	}
	wantSpend(t, l, "covers-weekly", "2026-W32", 1000, 0, 0)
	if pt := mustReserve(t, l, paidRef(eps[0], "cover", 0), usd("covers-weekly", "2026-W32", 1000, 100)); pt.Owner != testOwner {
		t.Fatalf("admitted %+v", pt)
	}
}

// A release frees room for exactly one more; an abandon without a reference
// releases too; a task already an intent reserves nothing again.
func testBudgetReleaseFreesOne(t *testing.T, l *Ledger) {
	const price = 300
	res := usd("daily", "2026-08-03", 2*price, price)
	eps := episodes(t, l, "weekly", "2026-W32", 5)
	mustReserve(t, l, paidRef(eps[0], "video", 0), res)
	mustReserve(t, l, paidRef(eps[1], "video", 0), res)
	// Again for an intent: returned as it is, nothing reserved twice.
	if pt, err := reserve(t, l, paidRef(eps[1], "video", 0), res); err != nil || pt.State != allot.PaidIntent {
		t.Fatalf("WriteIntentReserving of an intent: %+v, %v", pt, err)
	}
	wantSpend(t, l, "daily", "2026-08-03", 2*price, 0, 2*price)
	pt, err := reserve(t, l, paidRef(eps[2], "video", 0), res)
	wantRefused(t, pt, err, "daily")

	// The vendor refused eps[0]'s send: its reservation comes back, for
	// exactly one more task.
	if _, err := l.ReleaseIntent(ctxT(t), paidRef(eps[0], "video", 0), testOwner, false); err != nil {
		t.Fatal(err)
	}
	wantSpend(t, l, "daily", "2026-08-03", 2*price, 0, price)
	mustReserve(t, l, paidRef(eps[2], "video", 0), res) // the refused task, planned, now admitted
	pt, err = reserve(t, l, paidRef(eps[3], "video", 0), res)
	wantRefused(t, pt, err, "daily")
	// The released task asks again: refused, its entry stays released.
	pt, err = reserve(t, l, paidRef(eps[0], "video", 0), res)
	wantRefused(t, pt, err, "daily")
	entries, err := l.TaskBudgetEntries(ctxT(t), paidRef(eps[0], "video", 0))
	if err != nil || len(entries) != 1 || entries[0].State != EntryReleased {
		t.Fatalf("entries of the released task: %+v, %v", entries, err)
	}

	// Abandoned without a reference (the operator says nothing was
	// charged): released, one more fits.
	mustDecide(t, l, abandonReq(eps[2], "video", "r-abandon", "vendor says it has nothing"))
	wantSpend(t, l, "daily", "2026-08-03", 2*price, 0, price)
	mustReserve(t, l, paidRef(eps[0], "video", 0), res) // released -> held again
	entries, _ = l.TaskBudgetEntries(ctxT(t), paidRef(eps[0], "video", 0))
	if len(entries) != 1 || entries[0].State != EntryHeld || entries[0].Reserved != price {
		t.Fatalf("entries after a second admission: %+v", entries)
	}
	// Abandoned after the vendor accepted it: the cost stays settled.
	mustSubmit(t, l, paidRef(eps[1], "video", 0), "vt_b1", price)
	mustFailure(t, l, paidRef(eps[1], "video", 0), "vt_b1", "render failed")
	mustDecide(t, l, abandonReq(eps[1], "video", "r-abandon-1", "failed"))
	wantSpend(t, l, "daily", "2026-08-03", 2*price, price, price)
	pt, err = reserve(t, l, paidRef(eps[4], "video", 0), res)
	wantRefused(t, pt, err, "daily")
}

// An intent whose outcome is unknown keeps its reservation through sends
// without answers and take-overs, until its cost is recorded; a cost below
// the reservation frees the rest, one above it is booked and counted.
func testBudgetUnknownOutcomeKept(t *testing.T, l *Ledger) {
	const price = 1000
	res := usd("monthly", "2026-08", 2*price, price)
	eps := episodes(t, l, "weekly", "2026-W32", 4)
	a := paidRef(eps[0], "video", 0)
	mustReserve(t, l, a, res)
	mustMarkSending(t, l, a, testOwner)
	if _, err := l.EndSend(ctxT(t), a, testOwner, t0); err != nil {
		t.Fatal(err)
	}
	seen := mustPaidTask(t, l, a)
	if !seen.OutcomeUnknown() {
		t.Fatalf("task %+v is not an unknown outcome", seen)
	}
	mustTakeIntent(t, l, seen, "another-attempt")
	wantSpend(t, l, "monthly", "2026-08", 2*price, 0, price)
	b := paidRef(eps[1], "video", 0)
	mustReserve(t, l, b, res)
	pt, err := reserve(t, l, paidRef(eps[2], "video", 0), res)
	wantRefused(t, pt, err, "monthly")

	// The vendor had it, for less: the rest is free.
	mustSubmit(t, l, a, "vt_a", 0) // EUR: another currency is never converted
	entries, _ := l.TaskBudgetEntries(ctxT(t), a)
	if len(entries) != 1 || entries[0].State != EntrySettled || entries[0].Settled != price {
		t.Fatalf("a cost in another currency settles at the reservation: %+v", entries)
	}
	if _, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: a, RemoteRef: "vt_a", Amount: 600, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	wantSpend(t, l, "monthly", "2026-08", 2*price, 600, price)
	mustReserve(t, l, paidRef(eps[2], "video", 0), usd("monthly", "2026-08", 2*price, 400))
	// b costs more than it reserved: booked as charged, counted, reported.
	if _, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: b, RemoteRef: "vt_b", Amount: 1100, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	bp := mustPeriod(t, l, "monthly", "2026-08", 2*price)
	if bp.Settled != 1700 || bp.Reserved != 400 || bp.Overrun != 100 || bp.Free != -100 {
		t.Fatalf("after a cost above its reservation: %+v", bp)
	}
	au, err := l.Audit(ctxT(t), AuditOptions{Budgets: []BudgetLimit{{Budget: "monthly", Currency: "USD", Limit: 2 * price}}})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, v := range au.Violations {
		if v.Kind == KindCostOverReservation || v.Kind == KindBudgetExceeded || v.Kind == KindBudgetCostDiffers || v.Kind == KindReservationStale {
			kinds = append(kinds, v.Kind)
		}
	}
	if !slices.Equal(kinds, []string{KindCostOverReservation}) {
		t.Fatalf("budget violations %v, want only %s: %v", kinds, KindCostOverReservation, au.Violations)
	}
}

// A raise for one period leaves every other period untouched; it is
// recorded once per request, and one below what the period spent is
// refused without writing anything.
func testBudgetRaiseOnePeriod(t *testing.T, l *Ledger) {
	const price, limit = 500, 1000
	w32 := episodes(t, l, "weekly", "2026-W32", 4)
	w33 := episodes(t, l, "weekly", "2026-W33", 4)
	for i := range 2 {
		mustReserve(t, l, paidRef(w32[i], "video", 0), usd("video-weekly", "2026-W32", limit, price))
		mustReserve(t, l, paidRef(w33[i], "video", 0), usd("video-weekly", "2026-W33", limit, price))
	}
	raise := BudgetRaise{RequestID: "raise-1", Budget: "video-weekly", Period: "2026-W32", Limit: 1500, Currency: "USD", Reason: "launch week", By: "maria", Configured: limit}
	got, applied, err := l.RaiseBudget(ctxT(t), raise)
	if err != nil || !applied || got.Limit != 1500 || got.By != "maria" || got.At.IsZero() {
		t.Fatalf("RaiseBudget = %+v, %v, %v", got, applied, err)
	}
	if got.Change != LimitRaised || got.Previous != limit {
		t.Fatalf("RaiseBudget change = %q from %d, want raised from %d", got.Change, got.Previous, limit)
	}
	again, applied, err := l.RaiseBudget(ctxT(t), raise)
	if err != nil || applied || again.RequestID != got.RequestID || again.Limit != got.Limit || !again.At.Equal(got.At) {
		t.Fatalf("the same request again = %+v, %v, %v; want the first raise, not applied", again, applied, err)
	}
	// The same request ID with other arguments is refused, showing both.
	rows := countRows(t, l, "budget_raises")
	_, _, err = l.RaiseBudget(ctxT(t), BudgetRaise{RequestID: "raise-1", Budget: "video-weekly", Period: "2026-W32", Limit: 9999, Currency: "USD", Reason: "x", By: "y"})
	wantErr(t, "a request ID reused with another limit", err, ErrRequestConflict, "raise-1", "15.00 USD", "99.99 USD")
	// The current limit again is unchanged: no row.
	same, applied, err := l.RaiseBudget(ctxT(t), BudgetRaise{RequestID: "raise-same", Budget: "video-weekly", Period: "2026-W32", Limit: 1500, Currency: "USD", Reason: "again", By: "maria", Configured: limit})
	if err != nil || applied || same.Change != LimitUnchanged || same.Previous != 1500 {
		t.Fatalf("the current limit again = %+v, %v, %v; want unchanged, not applied", same, applied, err)
	}
	// The pipeline file's limit of a period with no raise is unchanged too.
	if same, applied, err := l.RaiseBudget(ctxT(t), BudgetRaise{RequestID: "raise-same-33", Budget: "video-weekly", Period: "2026-W33", Limit: limit, Currency: "USD", Reason: "again", By: "maria", Configured: limit}); err != nil || applied || same.Change != LimitUnchanged {
		t.Fatalf("the configured limit = %+v, %v, %v; want unchanged, not applied", same, applied, err)
	}
	if after := countRows(t, l, "budget_raises"); after != rows {
		t.Fatalf("a conflicting or unchanged request wrote %d rows", after-rows)
	}
	mustReserve(t, l, paidRef(w32[2], "video", 0), usd("video-weekly", "2026-W32", limit, price))
	pt, err := reserve(t, l, paidRef(w32[3], "video", 0), usd("video-weekly", "2026-W32", limit, price))
	wantRefused(t, pt, err, "video-weekly")
	pt, err = reserve(t, l, paidRef(w33[2], "video", 0), usd("video-weekly", "2026-W33", limit, price))
	be := wantRefused(t, pt, err, "video-weekly")
	if be.Shortfalls[0].Limit != limit {
		t.Fatalf("W33's limit after W32's raise: %+v", be.Shortfalls[0])
	}
	if bp := mustPeriod(t, l, "video-weekly", "2026-W33", limit); bp.Raised || bp.Limit != limit {
		t.Fatalf("W33 after W32's raise: %+v", bp)
	}
	if bp := mustPeriod(t, l, "video-weekly", "2026-W32", limit); !bp.Raised || bp.Limit != 1500 || bp.Free != 0 {
		t.Fatalf("W32 after its raise: %+v", bp)
	}

	// Below what W32 has reserved: refused, nothing recorded.
	before := countRows(t, l, "budget_raises")
	_, _, err = l.RaiseBudget(ctxT(t), BudgetRaise{RequestID: "raise-2", Budget: "video-weekly", Period: "2026-W32", Limit: 1400, Currency: "USD", Reason: "cut", By: "maria"})
	wantErr(t, "a raise below the spend", err, ErrInvalidInput, "15.00 USD", "14.00 USD")
	for _, bad := range []BudgetRaise{
		{Budget: "video-weekly", Period: "2026-W32", Limit: 2000, Currency: "USD", Reason: "r", By: "b"},
		{RequestID: "x", Period: "2026-W32", Limit: 2000, Currency: "USD", Reason: "r", By: "b"},
		{RequestID: "x", Budget: "video-weekly", Period: "2026-W32", Limit: 0, Currency: "USD", Reason: "r", By: "b"},
		{RequestID: "x", Budget: "video-weekly", Period: "2026-W32", Limit: 2000, Currency: "usd", Reason: "r", By: "b"},
		{RequestID: "x", Budget: "video-weekly", Period: "2026-W32", Limit: 2000, Currency: "USD", Reason: " ", By: "b"},
		{RequestID: "x", Budget: "video-weekly", Period: "2026-W32", Limit: 2000, Currency: "USD", Reason: "r"},
	} {
		if _, _, err := l.RaiseBudget(ctxT(t), bad); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("RaiseBudget(%+v) = %v, want ErrInvalidInput", bad, err)
		}
	}
	if after := countRows(t, l, "budget_raises"); after != before {
		t.Fatalf("refused raises wrote %d rows", after-before)
	}
	raises, err := l.BudgetRaises(ctxT(t), "video-weekly", "")
	if err != nil || len(raises) != 1 || raises[0].RequestID != "raise-1" {
		t.Fatalf("raises %+v, %v", raises, err)
	}
	// Every period with entries or a raise is listed, each with its limit.
	ps, err := l.BudgetPeriods(ctxT(t), []BudgetLimit{{Budget: "video-weekly", Currency: "USD", Limit: limit}})
	if err != nil || len(ps) != 2 || ps[0].Period != "2026-W32" || ps[0].Limit != 1500 || ps[1].Period != "2026-W33" || ps[1].Limit != limit || ps[1].Held != 2 {
		t.Fatalf("BudgetPeriods = %+v, %v", ps, err)
	}
	// A lower limit above the spend is recorded, as lowered.
	low, applied, err := l.RaiseBudget(ctxT(t), BudgetRaise{RequestID: "lower-1", Budget: "video-weekly", Period: "2026-W34", Limit: 800, Currency: "USD", Reason: "quiet week", By: "maria", Configured: limit})
	if err != nil || !applied || low.Change != LimitLowered || low.Previous != limit {
		t.Fatalf("a lower limit = %+v, %v, %v; want lowered from %d, applied", low, applied, err, limit)
	}
}

// Refused reservations are malformed ones; nothing is written for them.
func testBudgetInvalidReservations(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	before := dumpTables(t, l)
	for _, rs := range [][]Reservation{
		{{Budget: "", Period: "2026-W32", Currency: "USD", Limit: 10, Amount: 1}},
		{{Budget: "b", Period: "", Currency: "USD", Limit: 10, Amount: 1}},
		{{Budget: "b", Period: "2026-W32", Currency: "US", Limit: 10, Amount: 1}},
		{{Budget: "b", Period: "2026-W32", Currency: "USD", Limit: 10, Amount: -1}},
		{{Budget: "b", Period: "2026-W32", Currency: "USD", Limit: 0, Amount: 1}},
		{usd("b", "2026-W32", 10, 1), usd("b", "2026-W32", 10, 2)},
	} {
		if _, err := reserve(t, l, paidRef(ep, "video", 0), rs...); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("WriteIntentReserving(%+v) = %v, want ErrInvalidInput", rs, err)
		}
	}
	if after := dumpTables(t, l); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("refused reservations wrote to the ledger")
	}
}

// A soft threshold is recorded and returned once per period.
func testBudgetAlertsOnce(t *testing.T, l *Ledger) {
	eps := episodes(t, l, "weekly", "2026-W32", 3)
	res := usd("video-weekly", "2026-W32", 1000, 400)
	check := []BudgetAlertCheck{{BudgetLimit: BudgetLimit{Budget: "video-weekly", Currency: "USD", Limit: 1000}, Period: "2026-W32", Thresholds: []int{5000, 8000}}}
	alerts := func() []int {
		t.Helper()
		as, err := l.RecordBudgetAlerts(ctxT(t), check)
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, a := range as {
			out = append(out, a.Threshold)
		}
		return out
	}
	mustReserve(t, l, paidRef(eps[0], "video", 0), res)
	if got := alerts(); len(got) != 0 {
		t.Fatalf("reserved (not settled) spend alerted %v", got)
	}
	mustSubmit(t, l, paidRef(eps[0], "video", 0), "vt_0", 400)
	mustReserve(t, l, paidRef(eps[1], "video", 0), res)
	if _, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: paidRef(eps[1], "video", 0), RemoteRef: "vt_1", Amount: 100, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	if got := alerts(); !slices.Equal(got, []int{5000}) {
		t.Fatalf("500 of 1000 settled alerted %v, want [5000]", got)
	}
	if got := alerts(); len(got) != 0 {
		t.Fatalf("the same threshold alerted again: %v", got)
	}
	mustReserve(t, l, paidRef(eps[2], "video", 0), res)
	if _, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: paidRef(eps[2], "video", 0), RemoteRef: "vt_2", Amount: 400, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	if got := alerts(); !slices.Equal(got, []int{8000}) {
		t.Fatalf("900 of 1000 settled alerted %v, want [8000]", got)
	}
}

// The audit finds what the API never writes: a reservation held for a task
// that moved on, a settled amount that is not the cost, and a period whose
// settled costs are above its limit.
func testBudgetAuditTampered(t *testing.T, l *Ledger) {
	eps := episodes(t, l, "weekly", "2026-W32", 3)
	limits := []BudgetLimit{{Budget: "video-weekly", Currency: "USD", Limit: 1000}}
	res := usd("video-weekly", "2026-W32", 1000, 500)
	for i := range 2 {
		mustReserve(t, l, paidRef(eps[i], "video", 0), res)
		mustSubmit(t, l, paidRef(eps[i], "video", 0), fmt.Sprintf("vt_%d", i), 0)
		if _, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: paidRef(eps[i], "video", 0), RemoteRef: fmt.Sprintf("vt_%d", i), Amount: 500, Currency: "USD"}); err != nil {
			t.Fatal(err)
		}
	}
	au, err := l.Audit(ctxT(t), AuditOptions{Budgets: limits})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range au.Violations {
		if v.Kind == KindBudgetExceeded || v.Kind == KindReservationStale || v.Kind == KindBudgetCostDiffers || v.Kind == KindCostOverReservation {
			t.Fatalf("a clean ledger has %v", v)
		}
	}
	// Tampered: a cost changed behind the entry's back, a reservation held
	// for an abandoned task, a period over its limit.
	rawExec(t, l, `UPDATE cost_entries SET amount = 700 WHERE remote_ref = 'vt_1'`)
	rawExec(t, l, `UPDATE budget_entries SET settled = 700 WHERE episode_id = ?`, eps[1].ID)
	rawInsertPaidTask(t, l, paidRef(eps[2], "video", 0), testKey(paidRef(eps[2], "video", 0)), "abandoned", "")
	rawExec(t, l, `INSERT INTO budget_entries (budget, period, pipeline, episode_id, step, revision, state, currency, reserved, settled, created_at, updated_at)
		VALUES ('video-weekly', '2026-W32', 'weekly', ?, 'video', 0, 'held', 'USD', 500, 0, ?, ?)`, eps[2].ID, l.d.timeArg(t0), l.d.timeArg(t0))
	rawExec(t, l, `UPDATE cost_entries SET amount = 999 WHERE remote_ref = 'vt_0'`)
	au, err = l.Audit(ctxT(t), AuditOptions{Budgets: limits})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, v := range au.Violations {
		got[v.Kind]++
	}
	for kind, n := range map[string]int{KindBudgetExceeded: 1, KindReservationStale: 1, KindBudgetCostDiffers: 1, KindCostOverReservation: 1} {
		if got[kind] != n {
			t.Errorf("%s reported %d times, want %d: %v", kind, got[kind], n, au.Violations)
		}
	}
}

// The metrics export each budget's current and previous periods (by the
// clock) and every period holding reservations.
func testBudgetGaugedPeriods(t *testing.T, l *Ledger) {
	set, err := pipeline.Parse([]byte(`
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
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	mustReserve(t, l, paidRef(ep, "video", 0), usd("video-weekly", "2026-W32", 750, 250), usd("default-monthly", "2026-08", 100000, 250))
	ps, err := l.GaugedBudgetPeriods(ctxT(t), set.Budgets(), time.Date(2026, 9, 15, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.Budget+" "+p.Period)
		if p.Budget == "video-weekly" && p.Period == "2026-W32" && (p.Limit != 750 || p.Reserved != 250 || p.Currency != "USD") {
			t.Errorf("gauge %+v", p)
		}
	}
	want := []string{"video-weekly 2026-W37", "video-weekly 2026-W38", "video-weekly 2026-W32", "default-monthly 2026-08", "default-monthly 2026-09"}
	if !slices.Equal(got, want) {
		t.Fatalf("gauged periods %v, want %v", got, want)
	}
}

// testBudgetAdmissionInTheIntentsTransaction: a covered task becomes an
// intent only with a reservation, decided where the intent is written.
// The race it closes: attempt B reads the task as A's intent (reserved), so
// it prices nothing; A's send is refused and the task goes back to planned,
// its reservation released; B's write must not make it an intent with
// nothing held (issue 24: 750 charged under a budget of 500).
func testBudgetAdmissionInTheIntentsTransaction(t *testing.T, l *Ledger) {
	const price = 250
	res := usd("weekly-cap", "2026-W32", 2*price, price)
	eps := episodes(t, l, "weekly", "2026-W32", 1)
	ref := paidRef(eps[0], "video", 0)
	mustReserve(t, l, ref, res)
	if _, err := l.ReleaseIntent(ctxT(t), ref, testOwner, false); err != nil {
		t.Fatal(err)
	}
	// B priced nothing (it read the intent), and says the task is covered.
	pt, err := l.WriteIntentAdmitted(ctxT(t), ref, testKey(ref), "attempt-b", Admission{Covered: true})
	if !errors.Is(err, ErrReservationMissing) {
		t.Fatalf("a covered intent without reservations: %+v, %v; want ErrReservationMissing", pt, err)
	}
	if got, err := l.PaidTask(ctxT(t), ref); err != nil || got.State != allot.PaidPlanned || got.Owner != "" {
		t.Fatalf("after the refused write the task is %+v, %v; want planned with no owner (nothing written)", got, err)
	}
	wantSpend(t, l, "weekly-cap", "2026-W32", 2*price, 0, 0)
	// A new task is refused the same way.
	fresh := paidRef(eps[0], "cover", 0)
	if _, err := l.WriteIntentAdmitted(ctxT(t), fresh, testKey(fresh), "attempt-b", Admission{Covered: true}); !errors.Is(err, ErrReservationMissing) {
		t.Fatalf("a new covered task without reservations: %v; want ErrReservationMissing", err)
	}
	if _, err := l.PaidTask(ctxT(t), fresh); !errors.Is(err, ErrPaidTaskNotFound) {
		t.Fatalf("the refused new task was written: %v", err)
	}
	// Priced again, as the task is now: admitted and held.
	if pt, err := l.WriteIntentAdmitted(ctxT(t), ref, testKey(ref), "attempt-b", Admission{Covered: true, Reservations: []Reservation{res}}); err != nil || pt.State != allot.PaidIntent {
		t.Fatalf("priced again: %+v, %v", pt, err)
	}
	wantSpend(t, l, "weekly-cap", "2026-W32", 2*price, 0, price)
	// An intent already held is returned as it is, priced or not.
	if pt, err := l.WriteIntentAdmitted(ctxT(t), ref, testKey(ref), "attempt-c", Admission{Covered: true}); err != nil || pt.Owner != "attempt-b" {
		t.Fatalf("an intent written again without a price: %+v, %v; want attempt-b's intent unchanged", pt, err)
	}
	// Not covered: an intent needs nothing.
	free := paidRef(eps[0], "publish", 0)
	if pt, err := l.WriteIntentAdmitted(ctxT(t), free, testKey(free), testOwner, Admission{}); err != nil || pt.State != allot.PaidIntent {
		t.Fatalf("an uncovered task: %+v, %v", pt, err)
	}
}

// testBudgetEpisodeAdmittedWhole: the first paid task of an episode admits
// its later tasks with it (each budget checked once with the sum), writes
// them planned holding their reservations, and a later task's own turn
// asks only a rise over what it holds; an episode that cannot be paid for
// whole reserves nothing (docs/design.md, "An episode is paid for whole").
func testBudgetEpisodeAdmittedWhole(t *testing.T, l *Ledger) {
	const price = 250
	res := usd("media-weekly", "2026-W32", 4*price, price)
	eps := episodes(t, l, "weekly", "2026-W32", 3)
	later := func(ep Episode) []LaterTask {
		r := paidRef(ep, "cover", 0)
		return []LaterTask{{Ref: r, IdempotencyKey: testKey(r), Reservations: []Reservation{res}}}
	}
	admit := func(ep Episode) (PaidTask, error) {
		r := paidRef(ep, "video", 0)
		return l.WriteIntentAdmitted(ctxT(t), r, testKey(r), testOwner, Admission{Covered: true, Reservations: []Reservation{res}, Later: later(ep)})
	}
	for _, ep := range eps[:2] {
		if pt, err := admit(ep); err != nil || pt.State != allot.PaidIntent {
			t.Fatalf("admit %s whole: %+v, %v", ep.ID, pt, err)
		}
	}
	wantSpend(t, l, "media-weekly", "2026-W32", 4*price, 0, 4*price)
	cover0 := paidRef(eps[0], "cover", 0)
	if pt, err := l.PaidTask(ctxT(t), cover0); err != nil || pt.State != allot.PaidPlanned {
		t.Fatalf("the later task: %+v, %v; want planned", pt, err)
	}
	pt, err := admit(eps[2])
	be := wantRefused(t, pt, err, "media-weekly")
	if be.Shortfalls[0].Asked != 2*price {
		t.Fatalf("the refusal asks %d, want the whole episode's %d", be.Shortfalls[0].Asked, 2*price)
	}
	if _, err := l.PaidTask(ctxT(t), paidRef(eps[2], "cover", 0)); !errors.Is(err, ErrPaidTaskNotFound) {
		t.Fatalf("a refused episode's later task was written: %v", err)
	}
	// The later task's turn: the full budget admits it (it holds its own),
	// at a lower price (a quote) the rest is freed.
	quoted := res
	quoted.Amount = 100
	if pt, err := l.WriteIntentAdmitted(ctxT(t), cover0, testKey(cover0), testOwner, Admission{Covered: true, Reservations: []Reservation{quoted}}); err != nil || pt.State != allot.PaidIntent {
		t.Fatalf("the later task's own admission in a full budget: %+v, %v", pt, err)
	}
	wantSpend(t, l, "media-weekly", "2026-W32", 4*price, 0, 3*price+100)
	// A rise over what it holds is admitted only if it fits.
	cover1 := paidRef(eps[1], "cover", 0)
	risen := res
	risen.Amount = price + 200
	pt, err = l.WriteIntentAdmitted(ctxT(t), cover1, testKey(cover1), testOwner, Admission{Covered: true, Reservations: []Reservation{risen}})
	if be := wantRefused(t, pt, err, "media-weekly"); be.Shortfalls[0].Asked != 200 {
		t.Fatalf("a rise asks %d, want 200 beyond the 250 held", be.Shortfalls[0].Asked)
	}
	// Completing the episode gives back what its unsent task held.
	if _, err := l.CompleteEpisode(ctxT(t), "weekly", eps[1].ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	wantSpend(t, l, "media-weekly", "2026-W32", 4*price, 0, 2*price+100)
}
