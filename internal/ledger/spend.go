package ledger

// Spend per day (docs/design.md, "The operator page"): the recorded costs
// of a window, per UTC day, pipeline, step and vendor, for the page's
// spend chart and its unbudgeted spend. A cost entry knows its pipeline,
// episode and step; its vendor is the step's in the episode's pinned plan
// (as the reconciler reads it, UnbilledCosts), so the query joins the
// episode by its primary key, sums per plan, and each distinct plan is
// parsed once.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"allot"
)

// DaySpend is what the costs recorded on one UTC day came to for one step
// of one pipeline, at one vendor, in one currency.
type DaySpend struct {
	Day      string `json:"day"` // YYYY-MM-DD, UTC, of the costs' recorded_at
	Pipeline string `json:"pipeline"`
	Step     string `json:"step"`
	// Vendor is the step's vendor in the episode's pinned plan; "" when
	// the plan names none (the pipeline file's default vendor) or has no
	// such step.
	Vendor   string `json:"vendor"`
	Currency string `json:"currency"`
	Amount   int64  `json:"amount"`
}

// DayLayout is how DaySpend.Day spells a day.
const DayLayout = "2006-01-02"

// spendPerDayQuery sums the cost entries recorded at or after a time per
// UTC day, pipeline, step, currency and the episode's plan: one range of
// cost_entries_recorded (0019), each cost's episode by its key, and as many
// rows out as there are groups, not costs (a pipeline's episodes mostly
// share one plan). The CAST makes an overflowing sum an error on both
// drivers (SQLite's SUM refuses one; PostgreSQL's numeric does not fit
// BIGINT), never a wrapped number.
func (l *Ledger) spendPerDayQuery() string {
	day := fmt.Sprintf(l.d.utcDay, "c.recorded_at")
	return `SELECT ` + day + `, c.pipeline, c.step, c.currency, e.plan, CAST(SUM(c.amount) AS BIGINT)
	FROM cost_entries c JOIN episodes e ON e.pipeline = c.pipeline AND e.episode_id = c.episode_id
	WHERE c.recorded_at >= ?
	GROUP BY ` + day + `, c.pipeline, c.step, c.currency, e.plan`
}

// SpendPerDay sums the cost entries recorded at or after since per UTC day
// of their recorded_at, pipeline, step, vendor and currency, ordered by
// day, pipeline, step, vendor and currency. A sum that leaves int64's
// range is an error (allot.ErrAmountOverflow, or the database's), never
// wrapped.
func (l *Ledger) SpendPerDay(ctx context.Context, since time.Time) ([]DaySpend, error) {
	if since.IsZero() {
		return nil, invalid("spend per day needs the start of its window: give a time, for example 30 days ago")
	}
	rows, err := l.r.QueryContext(ctx, l.d.q(l.spendPerDayQuery()), l.d.timeArg(since))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the costs recorded since %s: %w", l.where, since.UTC().Format(time.RFC3339), err)
	}
	defer rows.Close()
	type key struct{ day, pipeline, step, vendor, currency string }
	var (
		sums  = map[key]int64{}
		plans = map[string]map[string]planStep{} // plan -> its steps
	)
	for rows.Next() {
		var (
			plan   string
			k      key
			amount int64
		)
		if err := rows.Scan(&k.day, &k.pipeline, &k.step, &k.currency, &plan, &amount); err != nil {
			return nil, fmt.Errorf("ledger %s: read the costs recorded since %s: %w", l.where, since.UTC().Format(time.RFC3339), err)
		}
		steps, ok := plans[plan]
		if !ok {
			steps = pinnedPlanSteps(plan)
			plans[plan] = steps
		}
		k.vendor = steps[k.step].Vendor
		sum, err := allot.AddAmount(sums[k], amount)
		if err != nil {
			return nil, fmt.Errorf("ledger %s: the spend of %s step %s at %q on %s in %s: %w", l.where, k.pipeline, k.step, k.vendor, k.day, k.currency, err)
		}
		sums[k] = sum
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read the costs recorded since %s: %w", l.where, since.UTC().Format(time.RFC3339), err)
	}
	out := make([]DaySpend, 0, len(sums))
	for k, a := range sums {
		out = append(out, DaySpend{Day: k.day, Pipeline: k.pipeline, Step: k.step, Vendor: k.vendor, Currency: k.currency, Amount: a})
	}
	slices.SortFunc(out, func(a, b DaySpend) int {
		for _, c := range [][2]string{{a.Day, b.Day}, {a.Pipeline, b.Pipeline}, {a.Step, b.Step}, {a.Vendor, b.Vendor}, {a.Currency, b.Currency}} {
			if n := strings.Compare(c[0], c[1]); n != 0 {
				return n
			}
		}
		return 0
	})
	return out, nil
}
