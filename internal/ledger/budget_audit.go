package ledger

// The budgets' part of the audit (invariant 20): every entry against its
// task and cost, and every period's settled spend against its limit.

import (
	"context"
	"database/sql"
	"fmt"

	"allot"
)

// Violation kinds of budgets (invariant 20), found by Audit.
const (
	// KindBudgetExceeded: a period's settled costs are above its limit.
	KindBudgetExceeded = "budget_exceeded"
	// KindCostOverReservation: a vendor charged more than the task
	// reserved (booked as charged, and counted against the budget).
	KindCostOverReservation = "cost_over_reservation"
	// KindReservationStale: a reservation held for a task that is no
	// longer an intent, or settled without the task's reference.
	KindReservationStale = "reservation_stale"
	// KindReservationMissing: an open intent of a step a budget covers
	// holds no reservation in it (report.Check, with the pipeline file).
	KindReservationMissing = "reservation_missing"
	// KindBudgetCostDiffers: a settled entry whose amount is not its
	// task's recorded cost (or the cost is in another currency).
	KindBudgetCostDiffers = "budget_cost_differs"
)

// auditBudgetsTx checks every budget entry against its task and cost, and
// every (budget, period) against its limit: settled <= limit, to the minor
// unit.
func (l *Ledger) auditBudgetsTx(ctx context.Context, tx *sql.Tx, opts AuditOptions, out *Audit) error {
	rows, err := tx.QueryContext(ctx, l.d.q(`SELECT e.budget, e.period, e.pipeline, e.episode_id, e.step, e.revision, e.state, e.currency,
			e.reserved, e.settled, t.state, t.remote_ref, COALESCE(c.amount, -1), COALESCE(c.currency, '')
		FROM budget_entries e
		JOIN paid_tasks t ON t.pipeline = e.pipeline AND t.episode_id = e.episode_id AND t.step = e.step AND t.revision = e.revision
		LEFT JOIN cost_entries c ON c.remote_ref = t.remote_ref AND t.remote_ref <> ''
		WHERE (? = '' OR e.pipeline = ?)
		ORDER BY e.budget, e.period, e.pipeline, e.episode_id, e.step, e.revision`), opts.Pipeline, opts.Pipeline)
	if err != nil {
		return fmt.Errorf("ledger %s: audit budget entries: %w", l.where, err)
	}
	defer rows.Close()
	budgets := map[string]BudgetLimit{}
	var names []string
	for _, b := range opts.Budgets {
		budgets[b.Budget] = b
		names = append(names, b.Budget)
	}
	periods := map[string][]string{}
	add := func(kind string, e BudgetEntry, format string, args ...any) {
		out.Violations = append(out.Violations, Violation{Kind: kind, Pipeline: e.Pipeline, Episode: e.EpisodeID,
			Detail: fmt.Sprintf("budget %s period %s, %s: ", e.Budget, e.Period, describe(e.PaidTaskRef)) + fmt.Sprintf(format, args...)})
	}
	for rows.Next() {
		var (
			e                      BudgetEntry
			taskState, remote, cur string
			cost                   int64
		)
		if err := rows.Scan(&e.Budget, &e.Period, &e.Pipeline, &e.EpisodeID, &e.Step, &e.Revision, &e.State, &e.Currency,
			&e.Reserved, &e.Settled, &taskState, &remote, &cost, &cur); err != nil {
			return fmt.Errorf("ledger %s: audit budget entries: %w", l.where, err)
		}
		m := func(a int64) string { return allot.Money{Amount: a, Currency: e.Currency}.String() }
		if _, ok := budgets[e.Budget]; !ok {
			budgets[e.Budget] = BudgetLimit{Budget: e.Budget, Currency: e.Currency}
			names = append(names, e.Budget)
		}
		if ps := periods[e.Budget]; len(ps) == 0 || ps[len(ps)-1] != e.Period {
			periods[e.Budget] = append(ps, e.Period)
		}
		switch e.State {
		case EntryHeld:
			// Held by an intent, or by a planned task its episode's first
			// paid task reserved (released when the episode completes or
			// is rejected).
			if taskState != "intent" && taskState != "planned" {
				add(KindReservationStale, e, "holds a reservation of %s but the task is %s: a reservation is held only while its task is an intent, or planned and reserved with its episode", m(e.Reserved), taskState)
			}
		case EntrySettled:
			switch {
			case remote == "":
				add(KindReservationStale, e, "is settled (%s) but the task (%s) has no remote reference: only a recorded submission settles a reservation", m(e.Settled), taskState)
			case cost < 0 && e.Settled != 0:
				add(KindBudgetCostDiffers, e, "is settled at %s but reference %q has no cost entry", m(e.Settled), remote)
			case cost >= 0 && cur != e.Currency:
				add(KindBudgetCostDiffers, e, "counts %s, but reference %q cost %s: amounts are never converted; correct the cost or the budget's currency",
					m(e.Settled), remote, allot.Money{Amount: cost, Currency: cur})
			case cost >= 0 && cost != e.Settled:
				add(KindBudgetCostDiffers, e, "is settled at %s but reference %q cost %s", m(e.Settled), remote, m(cost))
			}
			if e.Settled > e.Reserved {
				add(KindCostOverReservation, e, "cost %s, %s above the %s it reserved: it is booked as charged and counted against the budget; raise the step's max_cost if the vendor's price rose",
					m(e.Settled), m(e.Settled-e.Reserved), m(e.Reserved))
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger %s: audit budget entries: %w", l.where, err)
	}
	rows.Close()
	for _, name := range names {
		b := budgets[name]
		for _, p := range periods[name] {
			bp, err := l.budgetPeriodTx(ctx, tx, b, p)
			if err != nil {
				return err
			}
			if bp.Limit > 0 && bp.Settled > bp.Limit {
				m := func(a int64) string { return allot.Money{Amount: a, Currency: bp.Currency}.String() }
				out.Violations = append(out.Violations, Violation{Kind: KindBudgetExceeded,
					Detail: fmt.Sprintf("budget %s period %s has %s settled, over its limit of %s by %s (%s of it costs above their reservations)",
						name, p, m(bp.Settled), m(bp.Limit), m(bp.Settled-bp.Limit), m(bp.Overrun))})
			}
		}
	}
	return nil
}
