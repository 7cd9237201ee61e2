package ledger

// What the budgets look like from outside: a period's limit, settled,
// reserved and free amounts, its entries, the tasks parked for room, and
// the periods the metrics export. Reads only.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"allot"
	"allot/pipeline"
)

// BudgetEntries lists the entries of one budget's period (every period
// when period is ""), by period, then task.
func (l *Ledger) BudgetEntries(ctx context.Context, budget, period string) ([]BudgetEntry, error) {
	if budget == "" {
		return nil, invalid("listing budget entries needs a budget")
	}
	return l.queryEntries(ctx, l.r, `SELECT `+budgetEntryCols+` FROM budget_entries
		WHERE budget = ? AND (? = '' OR period = ?) ORDER BY period, pipeline, episode_id, step, revision`, budget, period, period)
}

// TaskBudgetEntries lists a paid task's budget entries.
func (l *Ledger) TaskBudgetEntries(ctx context.Context, ref PaidTaskRef) ([]BudgetEntry, error) {
	if err := checkPaidRef(ref); err != nil {
		return nil, err
	}
	return l.taskEntries(ctx, l.r, ref)
}

// BudgetLimit is a budget as the pipeline file defines it: its currency and
// its limit for every period without a raise.
type BudgetLimit struct {
	Budget   string `json:"budget"`
	Currency string `json:"currency"`
	Limit    int64  `json:"limit"`
}

// LimitOf is the pipeline file's budget b as the ledger counts it.
func LimitOf(b pipeline.Budget) BudgetLimit {
	return BudgetLimit{Budget: b.Name, Currency: b.Limit.Currency, Limit: b.Limit.Amount}
}

// BudgetPeriod is where one (budget, period) stands.
type BudgetPeriod struct {
	Budget   string `json:"budget"`
	Period   string `json:"period"`
	Currency string `json:"currency"`
	// Limit is the period's limit; Raised says it comes from a raise.
	Limit    int64 `json:"limit"`
	Raised   bool  `json:"raised,omitempty"`
	Settled  int64 `json:"settled"`
	Reserved int64 `json:"reserved"`
	// HeldForSchedule is what the period holds for the scheduled runs
	// still due in it (a budget with hold_scheduled), up to what the
	// limit leaves after Settled and Reserved; HeldRuns counts those runs
	// (docs/design.md, "Scheduled work funded first").
	HeldForSchedule int64 `json:"held_for_schedule,omitempty"`
	HeldRuns        int   `json:"held_runs,omitempty"`
	// Free is Limit - Settled - Reserved - HeldForSchedule: what a manual
	// run, a backfill or a retry may spend. Negative only after costs
	// above their reservations (Overrun) or a lowered limit.
	Free int64 `json:"free"`
	// Overrun is what settled costs were booked beyond what the budget
	// admitted (costs above their reservations, corrections upward).
	Overrun int64 `json:"overrun,omitempty"`
	// Held and SettledTasks count the tasks holding a reservation and
	// the tasks whose cost is booked.
	Held         int `json:"held"`
	SettledTasks int `json:"settled_tasks"`
}

// BudgetPeriods reports every period of the given budgets that has entries
// or a raise, ordered by budget (as given), then period.
func (l *Ledger) BudgetPeriods(ctx context.Context, budgets []BudgetLimit) ([]BudgetPeriod, error) {
	var out []BudgetPeriod
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		for _, b := range budgets {
			periods, err := l.queryStrings(ctx, tx, "list budget periods", `SELECT period FROM budget_entries WHERE budget = ?
				UNION SELECT period FROM budget_raises WHERE budget = ? ORDER BY 1`, b.Budget, b.Budget)
			if err != nil {
				return err
			}
			for _, p := range periods {
				bp, err := l.budgetPeriodTx(ctx, tx, b, p)
				if err != nil {
					return err
				}
				out = append(out, bp)
			}
		}
		return nil
	})
	return out, err
}

// BudgetPeriodOf reports one (budget, period), also one with nothing in it.
func (l *Ledger) BudgetPeriodOf(ctx context.Context, b BudgetLimit, period string) (BudgetPeriod, error) {
	var out BudgetPeriod
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = l.budgetPeriodTx(ctx, tx, b, period)
		return err
	})
	return out, err
}

func (l *Ledger) budgetPeriodTx(ctx context.Context, tx *sql.Tx, b BudgetLimit, period string) (BudgetPeriod, error) {
	bp := BudgetPeriod{Budget: b.Budget, Period: period, Currency: b.Currency}
	var err error
	if bp.Limit, bp.Raised, err = l.periodLimit(ctx, tx, b.Budget, period, b.Currency, b.Limit); err != nil {
		return bp, err
	}
	entries, err := l.queryEntries(ctx, tx, `SELECT `+budgetEntryCols+` FROM budget_entries
		WHERE budget = ? AND period = ? AND currency = ? AND state IN ('held', 'settled')`, b.Budget, period, b.Currency)
	if err != nil {
		return bp, err
	}
	for _, e := range entries {
		switch e.State {
		case EntryHeld:
			bp.Held++
			bp.Reserved, err = allot.AddAmounts(bp.Reserved, e.Reserved)
		case EntrySettled:
			bp.SettledTasks++
			bp.Settled, err = allot.AddAmounts(bp.Settled, e.Settled)
			if err == nil && e.Settled > e.Granted {
				bp.Overrun, err = allot.AddAmounts(bp.Overrun, e.Settled-e.Granted)
			}
		}
		if err != nil {
			return bp, fmt.Errorf("ledger %s: budget %s period %s: %w", l.where, b.Budget, period, err)
		}
	}
	spent, err := allot.AddAmounts(bp.Settled, bp.Reserved)
	if err != nil {
		return bp, fmt.Errorf("ledger %s: budget %s period %s: %w", l.where, b.Budget, period, err)
	}
	held, runs, err := l.heldForSchedule(ctx, tx, b.Budget, period, b.Currency, PaidTaskRef{}, 0)
	if err != nil {
		return bp, err
	}
	bp.Free = bp.Limit - spent // both within int64: limit <= MaxAmount, spent >= 0
	bp.HeldForSchedule, bp.HeldRuns = min(held, max(bp.Free, 0)), runs
	bp.Free -= bp.HeldForSchedule
	return bp, nil
}

// ParkedTask is a paid task whose episode is parked on BudgetExhausted:
// planned, not sent, waiting for room.
type ParkedTask struct {
	PaidTaskRef
	NominalTime time.Time `json:"nominal_time"`
}

// BudgetParked lists the planned paid tasks of the episodes parked on
// BudgetExhausted, by pipeline, episode and step.
func (l *Ledger) BudgetParked(ctx context.Context) ([]ParkedTask, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT t.pipeline, t.episode_id, t.step, t.revision, e.nominal_time
		FROM episodes e JOIN paid_tasks t ON t.pipeline = e.pipeline AND t.episode_id = e.episode_id
		WHERE e.outcome = ? AND e.outcome_reason = ? AND t.state = 'planned'
		ORDER BY t.pipeline, t.episode_id, t.step, t.revision`), string(allot.OutcomeNeedsAttention), allot.BudgetExhausted)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: list episodes parked on budgets: %w", l.where, err)
	}
	defer rows.Close()
	var out []ParkedTask
	for rows.Next() {
		var p ParkedTask
		if err := rows.Scan(&p.Pipeline, &p.EpisodeID, &p.Step, &p.Revision, dbTime{&p.NominalTime}); err != nil {
			return nil, fmt.Errorf("ledger %s: read an episode parked on budgets: %w", l.where, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: list episodes parked on budgets: %w", l.where, err)
	}
	return out, nil
}

// BudgetPeriodsHeld lists the (budget, period) pairs that hold
// reservations now.
func (l *Ledger) BudgetPeriodsHeld(ctx context.Context) ([][2]string, error) {
	rows, err := l.r.QueryContext(ctx, `SELECT DISTINCT budget, period FROM budget_entries WHERE state = 'held' ORDER BY budget, period`)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: list budget periods holding reservations: %w", l.where, err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var bp [2]string
		if err := rows.Scan(&bp[0], &bp[1]); err != nil {
			return nil, fmt.Errorf("ledger %s: list budget periods holding reservations: %w", l.where, err)
		}
		out = append(out, bp)
	}
	return out, rows.Err()
}

// GaugedBudgetPeriods are the budget periods the metrics export: each
// budget's current period (by the clock now, in its zone) and the one
// before, and every period that holds reservations (a backfill's, say).
func (l *Ledger) GaugedBudgetPeriods(ctx context.Context, budgets []pipeline.Budget, now time.Time) ([]BudgetPeriod, error) {
	held, err := l.BudgetPeriodsHeld(ctx)
	if err != nil {
		return nil, err
	}
	var out []BudgetPeriod
	for _, b := range budgets {
		periods := []string{}
		for _, p := range []string{b.PeriodOf(previousPeriod(b, now)), b.PeriodOf(now)} {
			if !slices.Contains(periods, p) {
				periods = append(periods, p)
			}
		}
		for _, h := range held {
			if h[0] == b.Name && !slices.Contains(periods, h[1]) {
				periods = append(periods, h[1])
			}
		}
		for _, p := range periods {
			bp, err := l.BudgetPeriodOf(ctx, BudgetLimit{Budget: b.Name, Currency: b.Limit.Currency, Limit: b.Limit.Amount}, p)
			if err != nil {
				return nil, err
			}
			out = append(out, bp)
		}
	}
	return out, nil
}

// previousPeriod is a time in the budget period before now's.
func previousPeriod(b pipeline.Budget, now time.Time) time.Time {
	local := now.In(b.Location())
	y, m, d := local.Date()
	switch b.Period {
	case pipeline.Day:
		return time.Date(y, m, d-1, 12, 0, 0, 0, b.Location())
	case pipeline.Month:
		return time.Date(y, m-1, 1, 12, 0, 0, 0, b.Location())
	}
	return time.Date(y, m, d-7, 12, 0, 0, 0, b.Location())
}
