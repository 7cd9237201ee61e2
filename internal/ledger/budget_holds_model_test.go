package ledger

// A randomized, model-based test of the hold for scheduled runs
// (budget_holds.go; docs/design.md, "Scheduled work funded first"),
// registered in runConformance so that both drivers run it as
// Test{SQLite,Postgres}Conformance/BudgetHoldsModel.
//
// From a seed it moves a clock through two days of one budget period whose
// Schedule runs every two hours, and applies random calls: the worker's
// rewrite of the hold (the Schedule as it is, paused, or changed to a
// subset of its times), scheduled runs started on time or late (asking
// their hold, or more), manual runs and backfills, and retries of
// episodes that already reserved. It keeps a model of the hold's rows and
// of what is reserved, and checks after every step:
//
//   - every admission is the model's: a scheduled run whose row is open,
//     asking no more than it, leaves alone only the rows due before it;
//     asking more, every other open row; anyone else leaves alone every
//     open row;
//   - a scheduled run asking no more than its open row is always
//     admitted: nothing else can spend what is held for it;
//   - reserved <= limit; the ledger's held, held runs and free figures
//     are the model's.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"allot"
)

type holdRow struct {
	at     time.Time
	amount int64
}

type holdModel struct {
	t        *testing.T
	l        *Ledger
	rng      *rand.Rand
	pipeline string
	budget   string
	limit    int64
	now      time.Time
	// rows are the hold's rows by key; drew the keys whose episode holds
	// an entry; episodes the episode of each allocated key.
	rows     map[string]holdRow
	drew     map[string]bool
	episodes map[string]Episode
	reserved int64
	steps    int
	log      []string
}

const holdModelLimit = 2000

// holdModelTimes are the Schedule's times: every two hours of two days.
func holdModelTimes() []time.Time {
	var out []time.Time
	for h := 1; h < 48; h += 2 {
		out = append(out, w32Day(0, 0).Add(time.Duration(h)*time.Hour))
	}
	return out
}

// holdModelAmount is what the run at t reserves at most: 1.00, 1.50 or
// 2.00 USD by its hour.
func holdModelAmount(t time.Time) int64 { return 100 + 50*int64(t.Hour()%3) }

func testBudgetHoldsModel(t *testing.T, l *Ledger) {
	seed, steps, runs := modelParams(t)
	for run := range runs {
		s := seed + int64(run)
		t.Run(fmt.Sprintf("seed%d", s), func(t *testing.T) {
			tag := fmt.Sprintf("hm%d", run)
			m := &holdModel{t: t, l: l, rng: rand.New(rand.NewPCG(uint64(s), 11)), pipeline: tag, budget: "hold-" + tag,
				limit: holdModelLimit, now: w32Day(0, 0), rows: map[string]holdRow{}, drew: map[string]bool{}, episodes: map[string]Episode{}}
			for i := range steps {
				m.step(i)
				m.check()
			}
		})
	}
}

func (m *holdModel) fail(format string, args ...any) {
	m.t.Helper()
	failModel(m.t, m.log, format, args...)
}

func (m *holdModel) limitOf() BudgetLimit {
	return BudgetLimit{Budget: m.budget, Currency: "USD", Limit: m.limit}
}

// open is the model's open rows, in time order, with their keys.
func (m *holdModel) open() []string {
	var keys []string
	for k := range m.rows {
		if !m.drew[k] {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return m.rows[a].at.Compare(m.rows[b].at) })
	return keys
}

// heldFor is what the asker under key, asking asked, must leave alone.
func (m *holdModel) heldFor(key string, asked int64) int64 {
	var held int64
	own, isOwn := m.rows[key]
	isOwn = isOwn && !m.drew[key]
	for _, k := range m.open() {
		if isOwn && (k == key || asked <= own.amount && !m.rows[k].at.Before(own.at)) {
			continue
		}
		held += m.rows[k].amount
	}
	return held
}

func (m *holdModel) step(i int) {
	switch r := m.rng.IntN(100); {
	case r < 15:
		m.now = m.now.Add(time.Duration(m.rng.IntN(4)) * time.Hour)
		m.log = append(m.log, fmt.Sprintf("%d: now %s", i, m.now.Format("Mon 15:04")))
	case r < 35:
		m.rewrite(i)
	case r < 60:
		m.scheduledRun(i)
	case r < 85:
		m.manualRun(i)
	default:
		m.retry(i)
	}
}

// rewrite is the worker's pass: the Schedule as it is, paused, or with
// some of its times.
func (m *holdModel) rewrite(i int) {
	var runs []ScheduledRun
	what := "as it is"
	switch m.rng.IntN(4) {
	case 0:
		what = "paused"
	case 1:
		what = "changed"
		for _, at := range holdModelTimes() {
			if at.After(m.now) && m.rng.IntN(2) == 0 {
				runs = append(runs, ScheduledRun{Pipeline: m.pipeline, At: at, Amount: holdModelAmount(at)})
			}
		}
	default:
		for _, at := range holdModelTimes() {
			if at.After(m.now) {
				runs = append(runs, ScheduledRun{Pipeline: m.pipeline, At: at, Amount: holdModelAmount(at)})
			}
		}
	}
	m.log = append(m.log, fmt.Sprintf("%d: rewrite the hold at %s, the Schedule %s (%d runs)", i, m.now.Format("Mon 15:04"), what, len(runs)))
	// The model of HoldScheduled: future rows go; a past open row stays
	// while its run started or HoldGrace has not passed; the runs are
	// held in time order while they fit in what the limit leaves.
	used := m.reserved
	for k, row := range m.rows {
		if m.drew[k] {
			continue
		}
		_, started := m.episodes[k]
		if row.at.After(m.now) || len(runs) == 0 || !(started || row.at.After(m.now.Add(-HoldGrace))) {
			delete(m.rows, k)
			continue
		}
		used += row.amount
	}
	for _, r := range runs {
		if used > m.limit || r.Amount > m.limit-used {
			continue
		}
		used += r.Amount
		m.rows[allot.AllocationKey(m.pipeline, r.At)] = holdRow{at: r.At, amount: r.Amount}
	}
	if _, err := m.l.HoldScheduled(ctxT(m.t), HoldInput{Budget: m.limitOf(), Period: "2026-W32", Runs: runs, At: m.now}); err != nil {
		m.fail("HoldScheduled: %v", err)
	}
}

// admit reserves asked for a new step of the episode under key, and
// checks the decision against the model's.
func (m *holdModel) admit(i int, key string, asked int64, what string) {
	ep := m.episodes[key]
	m.steps++
	ref := PaidTaskRef{Pipeline: m.pipeline, EpisodeID: ep.ID, Step: fmt.Sprintf("s%d", m.steps)}
	held := m.heldFor(key, asked)
	row, scheduled := m.rows[key]
	scheduled = scheduled && !m.drew[key]
	want := m.reserved+asked+held <= m.limit
	_, err := reserve(m.t, m.l, ref, usd(m.budget, "2026-W32", m.limit, asked))
	got := err == nil
	m.log = append(m.log, fmt.Sprintf("%d: %s %s asks %d (held for others %d, reserved %d): admitted %v", i, what, key, asked, held, m.reserved, got))
	if err != nil && !errors.Is(err, ErrBudgetExhausted) {
		m.fail("reserve: %v", err)
	}
	if got != want {
		m.fail("%s %s asking %d was admitted %v, the model says %v", what, key, asked, got, want)
	}
	if scheduled && asked <= row.amount && !got {
		m.fail("the scheduled run %s asking %d of its %d held was refused: what was held for it was spent", key, asked, row.amount)
	}
	if got {
		m.reserved += asked
		m.drew[key] = true
	}
}

// scheduledRun starts a Schedule's time that has come (up to three hours
// late) and has not run, asking its hold or more.
func (m *holdModel) scheduledRun(i int) {
	var due []time.Time
	for _, at := range holdModelTimes() {
		key := allot.AllocationKey(m.pipeline, at)
		if _, ran := m.episodes[key]; !ran && !at.After(m.now) && at.After(m.now.Add(-3*time.Hour)) {
			due = append(due, at)
		}
	}
	if len(due) == 0 {
		return
	}
	at := due[m.rng.IntN(len(due))]
	key := allot.AllocationKey(m.pipeline, at)
	res, err := m.l.Allocate(ctxT(m.t), AllocateInput{Pipeline: m.pipeline, Key: key, Period: "2026-W32", NominalTime: at})
	if err != nil {
		m.fail("Allocate %s: %v", key, err)
	}
	m.episodes[key] = res.Episode
	asked := holdModelAmount(at)
	if m.rng.IntN(5) == 0 {
		asked += 50 // priced above what one run reserves at most
	}
	m.admit(i, key, asked, "scheduled run")
}

// manualRun is a manual run or a backfill: a key the hold has no row for.
func (m *holdModel) manualRun(i int) {
	key := fmt.Sprintf("%s/manual-%d", m.pipeline, i)
	res, err := m.l.Allocate(ctxT(m.t), AllocateInput{Pipeline: m.pipeline, Key: key, Period: "2026-W32", NominalTime: m.now})
	if err != nil {
		m.fail("Allocate %s: %v", key, err)
	}
	m.episodes[key] = res.Episode
	m.admit(i, key, 50*int64(1+m.rng.IntN(8)), "manual run")
}

// retry reserves again for an episode that already drew.
func (m *holdModel) retry(i int) {
	var keys []string
	for k := range m.drew {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return
	}
	slices.Sort(keys)
	m.admit(i, keys[m.rng.IntN(len(keys))], 50*int64(1+m.rng.IntN(4)), "retry of")
}

func (m *holdModel) check() {
	m.t.Helper()
	bp, err := m.l.BudgetPeriodOf(ctxT(m.t), m.limitOf(), "2026-W32")
	if err != nil {
		m.fail("BudgetPeriodOf: %v", err)
	}
	open := m.open()
	var held int64
	for _, k := range open {
		held += m.rows[k].amount
	}
	held = min(held, max(m.limit-m.reserved, 0))
	if bp.Reserved != m.reserved || bp.HeldForSchedule != held || bp.HeldRuns != len(open) || bp.Free != m.limit-m.reserved-held {
		m.fail("the ledger has reserved %d, held %d for %d runs, free %d; the model reserved %d, held %d for %d runs, free %d",
			bp.Reserved, bp.HeldForSchedule, bp.HeldRuns, bp.Free, m.reserved, held, len(open), m.limit-m.reserved-held)
	}
	if m.reserved > m.limit {
		m.fail("reserved %d exceeds the limit %d", m.reserved, m.limit)
	}
}
