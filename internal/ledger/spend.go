package ledger

// Spend per day (docs/design.md, "The operator page"): the recorded costs
// of a window, per UTC day, pipeline, step and vendor, for the page's
// spend chart and its unbudgeted spend. A cost entry knows its pipeline,
// episode and step; its vendor is the step's in the episode's pinned plan
// (as the reconciler reads it, UnbilledCosts), so the query joins the
// episode by its primary key and parses each plan once.

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

// spendPerDayQuery reads the cost entries recorded at or after a time: one
// range of cost_entries_recorded (0019), each with its episode's plan.
const spendPerDayQuery = `SELECT c.pipeline, c.episode_id, c.step, c.amount, c.currency, c.recorded_at, e.plan
	FROM cost_entries c JOIN episodes e ON e.pipeline = c.pipeline AND e.episode_id = c.episode_id
	WHERE c.recorded_at >= ?`

// SpendPerDay sums the cost entries recorded at or after since per UTC day
// of their recorded_at, pipeline, step, vendor and currency, ordered by
// day, pipeline, step, vendor and currency. A sum that leaves int64's
// range is an error (allot.ErrAmountOverflow), never wrapped.
func (l *Ledger) SpendPerDay(ctx context.Context, since time.Time) ([]DaySpend, error) {
	if since.IsZero() {
		return nil, invalid("spend per day needs the start of its window: give a time, for example 30 days ago")
	}
	rows, err := l.r.QueryContext(ctx, l.d.q(spendPerDayQuery), l.d.timeArg(since))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the costs recorded since %s: %w", l.where, since.UTC().Format(time.RFC3339), err)
	}
	defer rows.Close()
	type key struct{ day, pipeline, step, vendor, currency string }
	var (
		sums  = map[key]int64{}
		plans = map[string]map[string]planStep{} // pipeline \x00 episode -> its plan's steps
	)
	for rows.Next() {
		var (
			pipeline, episode, plan string
			k                       key
			amount                  int64
			at                      time.Time
		)
		if err := rows.Scan(&pipeline, &episode, &k.step, &amount, &k.currency, dbTime{&at}, &plan); err != nil {
			return nil, fmt.Errorf("ledger %s: read a cost recorded since %s: %w", l.where, since.UTC().Format(time.RFC3339), err)
		}
		pk := pipeline + "\x00" + episode
		steps, ok := plans[pk]
		if !ok {
			steps = pinnedPlanSteps(plan)
			plans[pk] = steps
		}
		k.day, k.pipeline, k.vendor = at.UTC().Format(DayLayout), pipeline, steps[k.step].Vendor
		sum, err := allot.AddAmount(sums[k], amount)
		if err != nil {
			return nil, fmt.Errorf("ledger %s: the spend of %s step %s at %q on %s in %s: %w", l.where, pipeline, k.step, k.vendor, k.day, k.currency, err)
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
