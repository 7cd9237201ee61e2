package ledger

// Scheduled work funded first (docs/design.md, "Scheduled work funded
// first"): a budget with hold_scheduled holds, for each scheduled run
// still due in its period, what that run reserves at most. Admission then
// counts the hold as spent for every asker but the scheduled run it is
// held for: manual runs, backfills and retries spend only what is not
// held, and a scheduled run draws on its own hold.
//
// A hold row is open until the episode under its key holds an entry in
// the budget period (it drew on the hold: later reservations of the same
// episode are retries) or ends. Nothing is kept in step with it: whether
// a row is open is read from the episodes and the entries, in the
// admission's transaction.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"allot"
)

// ScheduledRun is one run a Schedule will start in a budget period, as the
// budget holds it: its pipeline, its nominal time and what it reserves in
// the budget at most.
type ScheduledRun struct {
	Pipeline string    `json:"pipeline"`
	At       time.Time `json:"at"`
	Amount   int64     `json:"amount"`
}

// HoldInput is what a budget period holds for its scheduled runs.
type HoldInput struct {
	Budget BudgetLimit
	Period string
	// Runs are the scheduled runs still due in the period, after At; an
	// empty list releases the hold (a paused Schedule, a budget without
	// hold_scheduled).
	Runs []ScheduledRun
	// At is when Runs were read; zero is now.
	At time.Time
}

// HoldGrace is how long a scheduled run's hold outlives its nominal time
// while no episode has its key: a Schedule starts a run seconds late, or
// late by a worker's restart, and the run still draws on its hold.
const HoldGrace = time.Hour

// scheduledHold is one open hold row.
type scheduledHold struct {
	ScheduledRun
	key       string
	allocated bool
}

// HoldScheduled replaces what in.Budget holds for its scheduled runs: in
// in.Period, in.Runs, in the order they come, each only if it fits in what
// the limit leaves (settled, reserved and the runs before it), so that the
// hold never exceeds the limit. Of what it held before, in any period, it
// keeps the runs already started that have not drawn yet (a run at 09:00
// whose paid step comes at 09:20 keeps its hold) and those whose time
// passed less than HoldGrace ago; the rest is released, and all of it when
// in.Runs is empty. It returns in.Period as it then stands.
func (l *Ledger) HoldScheduled(ctx context.Context, in HoldInput) (BudgetPeriod, error) {
	b := in.Budget
	switch {
	case b.Budget == "" || in.Period == "":
		return BudgetPeriod{}, invalid("a hold names its budget and period, got %q and %q", b.Budget, in.Period)
	case allot.CheckCurrency(b.Currency) != nil:
		return BudgetPeriod{}, invalid("budget %s: %v", b.Budget, allot.CheckCurrency(b.Currency))
	}
	for _, r := range in.Runs {
		if r.Pipeline == "" || r.At.IsZero() || r.Amount < 0 || r.Amount > allot.MaxAmount {
			return BudgetPeriod{}, invalid("budget %s period %s: a held run names its pipeline and time and holds 0 to %d minor units, got %q at %v holding %d",
				b.Budget, in.Period, allot.MaxAmount, r.Pipeline, r.At, r.Amount)
		}
	}
	at := normTime(in.At)
	if in.At.IsZero() {
		at = now()
	}
	if len(in.Runs) == 0 {
		// Nothing to hold: a read says whether there is a hold to release,
		// so that a budget that never holds costs no write.
		var n int
		if err := l.r.QueryRowContext(ctx, l.d.q(`SELECT COUNT(*) FROM budget_holds WHERE budget = ?`), b.Budget).Scan(&n); err != nil {
			return BudgetPeriod{}, fmt.Errorf("ledger %s: read the hold of budget %s: %w", l.where, b.Budget, err)
		}
		if n == 0 {
			return l.BudgetPeriodOf(ctx, b, in.Period)
		}
	}
	var out BudgetPeriod
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockBudgetTx(ctx, tx, b.Budget, in.Period); err != nil {
			return err
		}
		// Every row is written again: the runs still to come from in.Runs,
		// and of the rest (this period's and any other's) the open rows of
		// runs that started and have not drawn yet (a run at Sunday 23:00
		// whose paid step comes on Monday), or whose time passed less than
		// HoldGrace ago. A release keeps none.
		periods, err := l.queryStrings(ctx, tx, "list the periods a budget holds for", `SELECT DISTINCT period FROM budget_holds WHERE budget = ?`, b.Budget)
		if err != nil {
			return err
		}
		type keptRow struct {
			period string
			ScheduledRun
		}
		var kept []keptRow
		for _, p := range periods {
			open, err := l.openHolds(ctx, tx, b.Budget, p, b.Currency)
			if err != nil {
				return err
			}
			for _, h := range open {
				if len(in.Runs) > 0 && !h.At.After(at) && (h.allocated || h.At.After(at.Add(-HoldGrace))) {
					kept = append(kept, keptRow{p, h.ScheduledRun})
				}
			}
		}
		if _, err := tx.ExecContext(ctx, l.d.q(`DELETE FROM budget_holds WHERE budget = ?`), b.Budget); err != nil {
			return fmt.Errorf("ledger %s: release the hold of budget %s: %w", l.where, b.Budget, err)
		}
		hold := func(period string, r ScheduledRun) error {
			if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO budget_holds (budget, period, pipeline, allocation_key, nominal_time, amount, currency, held_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (budget, period, pipeline, allocation_key) DO NOTHING`),
				b.Budget, period, r.Pipeline, allot.AllocationKey(r.Pipeline, r.At), l.d.timeArg(r.At), r.Amount, b.Currency, l.d.timeArg(at)); err != nil {
				return fmt.Errorf("ledger %s: hold budget %s period %s for %s at %s: %w", l.where, b.Budget, period, r.Pipeline, r.At.UTC().Format(time.RFC3339), err)
			}
			return nil
		}
		var keptHere int64
		for _, k := range kept {
			if err := hold(k.period, k.ScheduledRun); err != nil {
				return err
			}
			if k.period == in.Period {
				keptHere += k.Amount // each at most MaxAmount, and few: no overflow
			}
		}
		limit, _, err := l.periodLimit(ctx, tx, b.Budget, in.Period, b.Currency, b.Limit)
		if err != nil {
			return err
		}
		settled, reserved, err := l.periodSpend(ctx, tx, b.Budget, in.Period, b.Currency)
		if err != nil {
			return err
		}
		used, err := allot.AddAmounts(settled, reserved, keptHere)
		if err != nil {
			return fmt.Errorf("ledger %s: budget %s period %s: %w", l.where, b.Budget, in.Period, err)
		}
		runs := slices.Clone(in.Runs)
		slices.SortStableFunc(runs, func(x, y ScheduledRun) int { return x.At.Compare(y.At) })
		for _, r := range runs {
			if r.Amount == 0 || !r.At.After(at) || used > limit || r.Amount > limit-used {
				continue
			}
			used += r.Amount
			if err := hold(in.Period, r); err != nil {
				return err
			}
		}
		out, err = l.budgetPeriodTx(ctx, tx, b, in.Period)
		return err
	})
	return out, err
}

// openHoldsQuery reads a budget period's hold rows in a currency, each with
// its episode's status and outcome, whether one has its key, and whether
// that episode drew on the hold (openHolds).
const openHoldsQuery = `SELECT h.pipeline, h.allocation_key, h.nominal_time, h.amount,
		COALESCE(e.status, ''), COALESCE(e.outcome, ''), e.episode_id IS NOT NULL,
		EXISTS (SELECT 1 FROM budget_entries b WHERE b.budget = h.budget AND b.period = h.period
			AND b.pipeline = e.pipeline AND b.episode_id = e.episode_id)
	FROM budget_holds h
	LEFT JOIN episodes e ON e.pipeline = h.pipeline AND e.allocation_key = h.allocation_key
	WHERE h.budget = ? AND h.period = ? AND h.currency = ?`

// openHolds are the open hold rows of a budget period in currency, in the
// order their runs come. Each row is read with its episode, if one has its
// key, and whether that episode drew on the hold; which rows are open
// (allot.Episode.Settled says whether the episode ended) is decided here.
func (l *Ledger) openHolds(ctx context.Context, db querier, budget, period, currency string) ([]scheduledHold, error) {
	rows, err := db.QueryContext(ctx, l.d.q(openHoldsQuery), budget, period, currency)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the hold of budget %s period %s: %w", l.where, budget, period, err)
	}
	defer rows.Close()
	var out []scheduledHold
	for rows.Next() {
		var (
			h             scheduledHold
			ep            allot.Episode
			status        string
			drew, started bool
		)
		if err := rows.Scan(&h.Pipeline, &h.key, dbTime{&h.At}, &h.Amount, &status, &ep.Outcome, &started, &drew); err != nil {
			return nil, fmt.Errorf("ledger %s: read the hold of budget %s period %s: %w", l.where, budget, period, err)
		}
		ep.Status = allot.EpisodeStatus(status)
		// Closed: the run drew on its hold, or its episode ended.
		if drew || started && ep.Settled() {
			continue
		}
		h.allocated = started
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read the hold of budget %s period %s: %w", l.where, budget, period, err)
	}
	slices.SortFunc(out, func(x, y scheduledHold) int {
		if c := x.At.Compare(y.At); c != 0 {
			return c
		}
		return strings.Compare(x.Pipeline, y.Pipeline)
	})
	return out, nil
}

// heldForSchedule is what a budget period holds for its scheduled runs
// that the asker (a task's episode, asking asked; zero: nobody's run) must
// leave alone: the whole open hold, unless the asker is a scheduled run
// whose own hold is open, which draws on it. Asking no more than its
// hold, it leaves alone only the hold of the runs due before it (the runs
// are funded in the order they come, even when the hold is more than the
// limit leaves, after a lower limit); asking more, the rest comes from
// what is free: it leaves alone every other run's hold. runs counts the
// open rows.
func (l *Ledger) heldForSchedule(ctx context.Context, db querier, budget, period, currency string, asker PaidTaskRef, asked int64) (held int64, runs int, err error) {
	open, err := l.openHolds(ctx, db, budget, period, currency)
	if err != nil || len(open) == 0 {
		return 0, 0, err
	}
	key := ""
	if asker.EpisodeID != "" {
		keys, err := l.queryStrings(ctx, db, "read an episode's key", `SELECT allocation_key FROM episodes WHERE pipeline = ? AND episode_id = ?`, asker.Pipeline, asker.EpisodeID)
		if err != nil {
			return 0, 0, err
		}
		if len(keys) == 1 {
			key = keys[0]
		}
	}
	own := slices.IndexFunc(open, func(h scheduledHold) bool { return h.Pipeline == asker.Pipeline && h.key == key })
	for i, h := range open {
		switch {
		case own < 0:
		case i == own:
			continue
		case asked <= open[own].Amount && !h.At.Before(open[own].At):
			continue
		}
		if held, err = allot.AddAmount(held, h.Amount); err != nil {
			return 0, 0, fmt.Errorf("ledger %s: the hold of budget %s period %s: %w", l.where, budget, period, err)
		}
	}
	return held, len(open), nil
}
