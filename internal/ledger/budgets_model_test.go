package ledger

// A randomized, model-based test of budgets (budgets.go; invariant 20),
// registered in runConformance so that both drivers run it as
// Test{SQLite,Postgres}Conformance/BudgetModel.
//
// From a seed it applies random calls to the paid tasks of eight episodes
// in two weeks of one month, covered by two budgets (a weekly one over
// every paid step, a monthly one over one step): admissions with varying
// amounts (alone and in concurrent rounds of 2-4), sends, lost responses
// (a send without an answer, then another attempt taking the intent over:
// a killed worker), vendor refusals, accepted submissions whose costs are
// below, equal to or above the reservation (and recorded twice, as a retry
// after a lost reply does), corrected costs, abandons and raises (some
// below what the period spent, which must be refused). It keeps a model of
// what each budget period holds and checks after every step:
//
//   - every admission and raise decision is the model's, and the ledger's
//     settled and reserved amounts per (budget, period) are the model's;
//   - settled + reserved <= limit + recorded overruns (costs above their
//     reservations), for every (budget, period);
//   - in the runs where every cost equals its reservation: settled <=
//     limit, with no overrun.
//
// A concurrent round's admissions run in whatever order the database gives
// them; the model then reads which were admitted and checks that the
// invariant held. Seeds: the paid model's (-ledger.seed, ALLOT_LEDGER_MODEL_SEED,
// ALLOT_LEDGER_MODEL_STEPS, ALLOT_LEDGER_MODEL_RUNS).

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"allot"
)

type budgetModelTask struct {
	ref       PaidTaskRef
	budgets   []string // the budgets covering it
	state     allot.PaidTaskState
	owner     string
	maybeSent bool
	remote    string
	held      map[string]int64 // budget -> reserved, while an intent
	settled   map[string]int64 // budget -> cost booked, once submitted
	reserved  map[string]int64 // budget -> what it reserved when admitted last
	granted   map[string]int64 // budget -> the reservation, lowered to the lowest cost recorded
}

type budgetModel struct {
	t      *testing.T
	l      *Ledger
	rng    *rand.Rand
	exact  bool // every cost equals its reservation
	tasks  []*budgetModelTask
	limits map[string]int64 // budget -> configured limit
	raised map[[2]string]int64
	period map[string]map[string]string // budget -> episode -> period
	log    []string
	seq    int
}

func testBudgetModel(t *testing.T, l *Ledger) {
	seed, steps, runs := modelParams(t)
	for run := range runs {
		for _, exact := range []bool{true, false} {
			s := seed + int64(run)
			name := fmt.Sprintf("seed%d/exact=%v", s, exact)
			t.Run(name, func(t *testing.T) {
				m := newBudgetModel(t, l, s, exact, fmt.Sprintf("r%d-%v", run, exact))
				for i := range steps {
					m.step(i)
					m.check()
				}
				m.audit()
			})
		}
	}
}

func newBudgetModel(t *testing.T, l *Ledger, seed int64, exact bool, tag string) *budgetModel {
	m := &budgetModel{t: t, l: l, rng: rand.New(rand.NewPCG(uint64(seed), 7)), exact: exact,
		limits: map[string]int64{"week-" + tag: 1000, "month-" + tag: 1500}, raised: map[[2]string]int64{},
		period: map[string]map[string]string{"week-" + tag: {}, "month-" + tag: {}}}
	pipeline := "model-" + strings.ReplaceAll(tag, "-", "")
	for _, period := range []string{"2026-W32", "2026-W33"} {
		for i := range 4 {
			ep := alloc(t, l, pipeline, fmt.Sprintf("%s/%d", period, i), period, 0).Episode
			m.period["week-"+tag][ep.ID] = period
			m.period["month-"+tag][ep.ID] = "2026-08"
			m.tasks = append(m.tasks,
				&budgetModelTask{ref: paidRef(ep, "video", 0), budgets: []string{"month-" + tag, "week-" + tag}},
				&budgetModelTask{ref: paidRef(ep, "cover", 0), budgets: []string{"week-" + tag}})
		}
	}
	for _, tk := range m.tasks {
		tk.held, tk.settled, tk.reserved, tk.granted = map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]int64{}
	}
	return m
}

func (m *budgetModel) fail(format string, args ...any) {
	m.t.Helper()
	failModel(m.t, m.log, format, args...)
}

// failModel fails a model-based test with the last 30 steps of its log.
func failModel(t *testing.T, log []string, format string, args ...any) {
	t.Helper()
	tail := log
	if len(tail) > 30 {
		tail = tail[len(tail)-30:]
	}
	t.Fatalf("%s\nlast steps:\n  %s", fmt.Sprintf(format, args...), strings.Join(tail, "\n  "))
}

func (m *budgetModel) limit(budget, period string) int64 {
	if v, ok := m.raised[[2]string{budget, period}]; ok {
		return v
	}
	return m.limits[budget]
}

// spend is the model's settled and reserved amounts of a (budget, period).
func (m *budgetModel) spend(budget, period string) (settled, reserved, overrun int64) {
	for _, tk := range m.tasks {
		if m.period[budget][tk.ref.EpisodeID] != period {
			continue
		}
		if v, ok := tk.held[budget]; ok {
			reserved += v
		}
		if v, ok := tk.settled[budget]; ok {
			settled += v
			if v > tk.granted[budget] {
				overrun += v - tk.granted[budget]
			}
		}
	}
	return settled, reserved, overrun
}

func (m *budgetModel) reservations(tk *budgetModelTask, amount int64) []Reservation {
	var rs []Reservation
	for _, b := range tk.budgets {
		rs = append(rs, usd(b, m.period[b][tk.ref.EpisodeID], m.limits[b], amount))
	}
	return rs
}

func (m *budgetModel) fits(tk *budgetModelTask, amount int64) bool {
	for _, b := range tk.budgets {
		p := m.period[b][tk.ref.EpisodeID]
		s, r, _ := m.spend(b, p)
		if s+r+amount > m.limit(b, p) {
			return false
		}
	}
	return true
}

func (m *budgetModel) owner() string {
	m.seq++
	return fmt.Sprintf("attempt-%d", m.seq)
}

func (m *budgetModel) amount() int64 { return []int64{100, 150, 200, 300}[m.rng.IntN(4)] }

// cost is what the vendor charges a task that reserved r.
func (m *budgetModel) cost(r int64) int64 {
	if m.exact {
		return r
	}
	switch m.rng.IntN(3) {
	case 0:
		return r
	case 1:
		return m.rng.Int64N(r + 1)
	}
	return r + 1 + m.rng.Int64N(100)
}

func (m *budgetModel) pick(ok func(*budgetModelTask) bool) *budgetModelTask {
	var cands []*budgetModelTask
	for _, tk := range m.tasks {
		if ok(tk) {
			cands = append(cands, tk)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[m.rng.IntN(len(cands))]
}

func (m *budgetModel) admit(tk *budgetModelTask, amount int64, owner string) {
	m.t.Helper()
	want := m.fits(tk, amount)
	pt, err := m.l.WriteIntentReserving(ctxT(m.t), tk.ref, testKey(tk.ref), owner, m.reservations(tk, amount))
	m.log = append(m.log, fmt.Sprintf("admit %s/%s %d by %s: %s %v", tk.ref.EpisodeID, tk.ref.Step, amount, owner, pt.State, err))
	switch {
	case want && (err != nil || pt.State != allot.PaidIntent):
		m.fail("admission of %s (%d) that fits: %+v, %v", describe(tk.ref), amount, pt, err)
	case !want && (!errors.Is(err, ErrBudgetExhausted) || pt.State != allot.PaidPlanned):
		m.fail("admission of %s (%d) that does not fit: %+v, %v", describe(tk.ref), amount, pt, err)
	}
	m.applyAdmission(tk, amount, owner, want)
}

func (m *budgetModel) applyAdmission(tk *budgetModelTask, amount int64, owner string, admitted bool) {
	if !admitted {
		tk.state = allot.PaidPlanned
		return
	}
	tk.state, tk.owner = allot.PaidIntent, owner
	for _, b := range tk.budgets {
		tk.held[b], tk.reserved[b], tk.granted[b] = amount, amount, amount
	}
}

func (m *budgetModel) step(i int) {
	m.t.Helper()
	ctx := ctxT(m.t)
	open := func(tk *budgetModelTask) bool { return tk.state == "" || tk.state == allot.PaidPlanned }
	intent := func(tk *budgetModelTask) bool { return tk.state == allot.PaidIntent }
	switch op := m.rng.IntN(12); {
	case op < 3:
		if tk := m.pick(open); tk != nil {
			m.admit(tk, m.amount(), m.owner())
		}
	case op == 3:
		m.concurrentRound()
	case op == 4: // a send begins
		if tk := m.pick(func(tk *budgetModelTask) bool { return intent(tk) && !tk.maybeSent }); tk != nil {
			if _, err := m.l.MarkSending(ctx, tk.ref, tk.owner, sendUntil); err != nil {
				m.fail("MarkSending %s: %v", describe(tk.ref), err)
			}
			tk.maybeSent = true
			m.log = append(m.log, "send "+tk.ref.EpisodeID+"/"+tk.ref.Step)
		}
	case op == 5: // its response is lost and the worker is killed: another attempt takes over
		if tk := m.pick(func(tk *budgetModelTask) bool { return intent(tk) && tk.maybeSent }); tk != nil {
			if _, err := m.l.EndSend(ctx, tk.ref, tk.owner, t0); err != nil {
				m.fail("EndSend %s: %v", describe(tk.ref), err)
			}
			seen, err := m.l.PaidTask(ctx, tk.ref)
			if err != nil {
				m.fail("PaidTask: %v", err)
			}
			to := m.owner()
			if _, err := m.l.TakeIntent(ctx, seen, to, afterSend); err != nil {
				m.fail("TakeIntent %s: %v", describe(tk.ref), err)
			}
			tk.owner = to
			m.log = append(m.log, "lost+takeover "+tk.ref.EpisodeID+"/"+tk.ref.Step)
		}
	case op < 8: // accepted, its cost recorded (twice: a retry after a lost reply)
		if tk := m.pick(intent); tk != nil {
			var r int64
			for _, v := range tk.held {
				r = v
			}
			c := m.cost(r)
			tk.remote = fmt.Sprintf("vt_%s_%s_%s_%d", tk.ref.Pipeline, tk.ref.EpisodeID, tk.ref.Step, i)
			for range 1 + m.rng.IntN(2) {
				if _, err := m.l.RecordSubmission(ctx, Submission{PaidTaskRef: tk.ref, RemoteRef: tk.remote, Amount: c, Currency: "USD"}); err != nil {
					m.fail("RecordSubmission %s: %v", describe(tk.ref), err)
				}
			}
			tk.state, tk.maybeSent = allot.PaidSubmitted, false
			for b := range tk.held {
				tk.settled[b], tk.granted[b] = c, min(tk.granted[b], c)
				delete(tk.held, b)
			}
			m.log = append(m.log, fmt.Sprintf("accept %s/%s reserved %d cost %d", tk.ref.EpisodeID, tk.ref.Step, r, c))
		}
	case op == 8: // a corrected cost
		if tk := m.pick(func(tk *budgetModelTask) bool { return tk.state == allot.PaidSubmitted && tk.remote != "" }); tk != nil && !m.exact {
			var r int64
			for _, v := range tk.reserved {
				r = v
			}
			c := m.cost(r)
			if _, err := m.l.RecordSubmission(ctx, Submission{PaidTaskRef: tk.ref, RemoteRef: tk.remote, Amount: c, Currency: "USD"}); err != nil {
				m.fail("corrected RecordSubmission %s: %v", describe(tk.ref), err)
			}
			for b := range tk.settled {
				tk.settled[b], tk.granted[b] = c, min(tk.granted[b], c)
			}
			m.log = append(m.log, fmt.Sprintf("correct %s/%s cost %d", tk.ref.EpisodeID, tk.ref.Step, c))
		}
	case op == 9: // the vendor refused
		if tk := m.pick(intent); tk != nil {
			if _, err := m.l.ReleaseIntent(ctx, tk.ref, tk.owner, false); err != nil {
				m.fail("ReleaseIntent %s: %v", describe(tk.ref), err)
			}
			tk.state, tk.owner, tk.maybeSent = allot.PaidPlanned, "", false
			clear(tk.held)
			m.log = append(m.log, "refused "+tk.ref.EpisodeID+"/"+tk.ref.Step)
		}
	case op == 10: // abandoned by an operator
		if tk := m.pick(func(tk *budgetModelTask) bool {
			return tk.state == allot.PaidPlanned || tk.state == allot.PaidIntent || tk.state == allot.PaidSubmitted
		}); tk != nil {
			ep := Episode{Pipeline: tk.ref.Pipeline, ID: tk.ref.EpisodeID}
			mustDecide(m.t, m.l, abandonReq(ep, tk.ref.Step, fmt.Sprintf("abandon-%d", i), "model"))
			tk.state = allot.PaidAbandoned
			clear(tk.held) // a submitted task keeps its settled cost
			m.log = append(m.log, "abandon "+tk.ref.EpisodeID+"/"+tk.ref.Step)
		}
	default: // a raise, sometimes below what the period spent
		b := m.tasks[0].budgets[m.rng.IntN(2)]
		periods := []string{"2026-08"}
		if strings.HasPrefix(b, "week-") {
			periods = []string{"2026-W32", "2026-W33"}
		}
		p := periods[m.rng.IntN(len(periods))]
		s, r, _ := m.spend(b, p)
		limit := max(1, s+r+m.rng.Int64N(600)-100)
		_, applied, err := m.l.RaiseBudget(ctx, BudgetRaise{RequestID: fmt.Sprintf("%s-raise-%d", b, i), Budget: b, Period: p, Limit: limit, Currency: "USD", Reason: "model", By: "model"})
		m.log = append(m.log, fmt.Sprintf("raise %s %s to %d (spent %d): %v", b, p, limit, s+r, err))
		switch {
		case limit >= s+r && (err != nil || !applied):
			m.fail("a raise of %s %s to %d above its spend %d: %v", b, p, limit, s+r, err)
		case limit < s+r && !errors.Is(err, ErrInvalidInput):
			m.fail("a raise of %s %s to %d below its spend %d: %v", b, p, limit, s+r, err)
		case err == nil:
			m.raised[[2]string{b, p}] = limit
		}
	}
}

// concurrentRound admits 2-4 open tasks at once; the model follows what
// the ledger decided.
func (m *budgetModel) concurrentRound() {
	m.t.Helper()
	var round []*budgetModelTask
	for _, tk := range m.tasks {
		if (tk.state == "" || tk.state == allot.PaidPlanned) && len(round) < 2+m.rng.IntN(3) {
			round = append(round, tk)
		}
	}
	if len(round) < 2 {
		return
	}
	type result struct {
		pt  PaidTask
		err error
	}
	amounts, owners := make([]int64, len(round)), make([]string, len(round))
	results := make([]result, len(round))
	for i := range round {
		amounts[i], owners[i] = m.amount(), m.owner()
	}
	var wg sync.WaitGroup
	for i, tk := range round {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pt, err := m.l.WriteIntentReserving(ctxT(m.t), tk.ref, testKey(tk.ref), owners[i], m.reservations(tk, amounts[i]))
			results[i] = result{pt, err}
		}()
	}
	wg.Wait()
	for i, tk := range round {
		r := results[i]
		admitted := r.err == nil && r.pt.State == allot.PaidIntent
		if !admitted && (!errors.Is(r.err, ErrBudgetExhausted) || r.pt.State != allot.PaidPlanned) {
			m.fail("concurrent admission of %s: %+v, %v", describe(tk.ref), r.pt, r.err)
		}
		m.log = append(m.log, fmt.Sprintf("concurrent admit %s/%s %d: %v", tk.ref.EpisodeID, tk.ref.Step, amounts[i], admitted))
		m.applyAdmission(tk, amounts[i], owners[i], admitted)
	}
}

// check compares every (budget, period) with the model and the invariant.
func (m *budgetModel) check() {
	m.t.Helper()
	for b, eps := range m.period {
		seen := map[string]bool{}
		for _, p := range eps {
			if seen[p] {
				continue
			}
			seen[p] = true
			bp, err := m.l.BudgetPeriodOf(ctxT(m.t), BudgetLimit{Budget: b, Currency: "USD", Limit: m.limits[b]}, p)
			if err != nil {
				m.fail("BudgetPeriodOf: %v", err)
			}
			s, r, o := m.spend(b, p)
			if bp.Settled != s || bp.Reserved != r || bp.Overrun != o || bp.Limit != m.limit(b, p) {
				m.fail("budget %s period %s: ledger %+v, model settled %d reserved %d overrun %d limit %d", b, p, bp, s, r, o, m.limit(b, p))
			}
			if bp.Settled+bp.Reserved > bp.Limit+bp.Overrun {
				m.fail("budget %s period %s exceeded: settled %d + reserved %d > limit %d + overrun %d", b, p, bp.Settled, bp.Reserved, bp.Limit, bp.Overrun)
			}
			if m.exact && (bp.Settled > bp.Limit || bp.Overrun != 0) {
				m.fail("budget %s period %s: every cost is its reservation, yet settled %d > limit %d (overrun %d)", b, p, bp.Settled, bp.Limit, bp.Overrun)
			}
		}
	}
}

// audit: at the end, the audit finds no entry out of step with its task.
func (m *budgetModel) audit() {
	m.t.Helper()
	var limits []BudgetLimit
	for b, v := range m.limits {
		limits = append(limits, BudgetLimit{Budget: b, Currency: "USD", Limit: v})
	}
	au, err := m.l.Audit(ctxT(m.t), AuditOptions{Pipeline: m.tasks[0].ref.Pipeline, Budgets: limits})
	if err != nil {
		m.fail("Audit: %v", err)
	}
	for _, v := range au.Violations {
		if v.Kind == KindBudgetExceeded && !strings.HasPrefix(v.Detail, "budget "+m.tasks[0].budgets[0]+" ") && !strings.HasPrefix(v.Detail, "budget "+m.tasks[0].budgets[1]+" ") {
			continue // another run's budget
		}
		switch v.Kind {
		case KindReservationStale, KindBudgetCostDiffers:
			m.fail("audit: %v", v)
		case KindCostOverReservation, KindBudgetExceeded:
			if m.exact {
				m.fail("audit of a run where every cost is its reservation: %v", v)
			}
		}
	}
}
