package ledger

// Budgets whose shape changed under their spend (invariant 20 of
// docs/design.md): a budget's spend is kept under its name, in the
// periods and the currency it had when the money was reserved. If the
// pipeline file then gives the budget another currency, another kind of
// period or another time zone, the periods it looks up hold nothing, and
// money already spent would show as free. The worker refuses to start
// instead (CheckBudgetShapes); nothing is re-bucketed or converted.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"allot"
	"allot/pipeline"
)

// ErrBudgetReshaped means a budget of the pipeline file has another
// currency, period kind or time zone than the spend the ledger holds under
// its name. The error is a *BudgetReshapedError.
var ErrBudgetReshaped = errors.New("budget changed under its spend")

// BudgetPeriodSpend is what the entries of one (budget, period, currency) hold:
// settled costs and held reservations, and the first and last nominal
// time of their episodes (the times the period was computed from).
type BudgetPeriodSpend struct {
	Budget       string    `json:"budget"`
	Period       string    `json:"period"`
	Currency     string    `json:"currency"`
	Settled      int64     `json:"settled"`
	Reserved     int64     `json:"reserved"`
	FirstNominal time.Time `json:"first_nominal"`
	LastNominal  time.Time `json:"last_nominal"`
}

// BudgetPeriodSpends lists, in one query, every (budget, period, currency) that
// holds settled or held money, by budget, period and currency.
func (l *Ledger) BudgetPeriodSpends(ctx context.Context) ([]BudgetPeriodSpend, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT b.budget, b.period, b.currency,
			COALESCE(SUM(CASE WHEN b.state = 'settled' THEN b.settled ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN b.state = 'held' THEN b.reserved ELSE 0 END), 0),
			MIN(e.nominal_time), MAX(e.nominal_time)
		FROM budget_entries b JOIN episodes e ON e.pipeline = b.pipeline AND e.episode_id = b.episode_id
		WHERE b.state IN ('held', 'settled')
		GROUP BY b.budget, b.period, b.currency
		ORDER BY b.budget, b.period, b.currency`))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: sum the spend of every budget period: %w", l.where, err)
	}
	defer rows.Close()
	var out []BudgetPeriodSpend
	for rows.Next() {
		var s BudgetPeriodSpend
		if err := rows.Scan(&s.Budget, &s.Period, &s.Currency, &s.Settled, &s.Reserved, dbTime{&s.FirstNominal}, dbTime{&s.LastNominal}); err != nil {
			return nil, fmt.Errorf("ledger %s: sum the spend of every budget period: %w", l.where, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: sum the spend of every budget period: %w", l.where, err)
	}
	return out, nil
}

// BudgetReshapedError names each budget of the pipeline file whose spend
// the ledger holds in another shape, with those periods.
type BudgetReshapedError struct {
	Budgets []ReshapedBudget
}

// ReshapedBudget is one budget of the file and its spend in another shape.
type ReshapedBudget struct {
	Budget pipeline.Budget
	// Changed says what differs: "currency", "period" or "time_zone".
	Changed string
	Spends  []BudgetPeriodSpend
	// Both: the ledger also holds spend of the budget in the file's
	// shape (the budget was changed before, and money booked both ways),
	// so restoring the old shape would refuse that spend instead.
	Both bool
}

func (e *BudgetReshapedError) Error() string {
	parts := make([]string, len(e.Budgets))
	for i, r := range e.Budgets {
		b := r.Budget
		var held []string
		for _, s := range r.Spends {
			held = append(held, fmt.Sprintf("%s: %s settled, %s reserved", s.Period,
				allot.Money{Amount: s.Settled, Currency: s.Currency}, allot.Money{Amount: s.Reserved, Currency: s.Currency}))
		}
		var was, fix string
		switch r.Changed {
		case "currency":
			was = fmt.Sprintf("the ledger holds its spend in %s, the file says %s", r.Spends[0].Currency, b.Limit.Currency)
			fix = fmt.Sprintf("currency = %q in its limit", r.Spends[0].Currency)
		case "period":
			kind, _ := pipeline.BudgetPeriodKindOf(r.Spends[0].Period)
			was = fmt.Sprintf("the ledger holds its spend in %s periods, the file says period = %q", kind, b.Period)
			fix = fmt.Sprintf("period = %q", kind)
		default:
			was = fmt.Sprintf("the ledger holds its spend in periods that time_zone %q puts elsewhere", b.TimeZone)
			fix = "its former time_zone"
		}
		rename := fmt.Sprintf("give the changed budget a new name (name = %q, say): the spend above then stays with the old name, in its old periods, as history that no budget counts, and the new budget starts empty, so those periods may spend its limit again", b.Name+"-2")
		if r.Both {
			parts[i] = fmt.Sprintf("budget %q: %s (%s), and it holds spend in the file's shape too, so restoring the old one would not help. Instead, %s",
				b.Name, was, strings.Join(held, "; "), rename)
			continue
		}
		parts[i] = fmt.Sprintf("budget %q: %s (%s). Either restore %s for budget %q in the pipeline file, or %s",
			b.Name, was, strings.Join(held, "; "), fix, b.Name, rename)
	}
	return fmt.Sprintf("%v: the worker cannot start, money already spent would count as free: %s", ErrBudgetReshaped, strings.Join(parts, "; "))
}

func (e *BudgetReshapedError) Is(target error) bool { return target == ErrBudgetReshaped }

// CheckBudgetShapes refuses a pipeline file whose budgets no longer have
// the shape of the spend the ledger holds under their names: the same
// currency, the same kind of period, and periods that the budget's zone
// computes from the episodes' nominal times exactly as they were computed
// when the money was reserved. Spend under a name the file no longer has
// is history and is not checked. A period is an interval of time, so the
// first and last nominal time of its entries decide for every entry.
func (l *Ledger) CheckBudgetShapes(ctx context.Context, budgets []pipeline.Budget) error {
	if len(budgets) == 0 {
		return nil
	}
	spends, err := l.BudgetPeriodSpends(ctx)
	if err != nil {
		return err
	}
	var out BudgetReshapedError
	for _, b := range budgets {
		byChange := map[string][]BudgetPeriodSpend{}
		fits := false
		for _, s := range spends {
			if s.Budget != b.Name {
				continue
			}
			switch {
			case s.Currency != b.Limit.Currency:
				byChange["currency"] = append(byChange["currency"], s)
			case b.CheckPeriod(s.Period) != nil:
				byChange["period"] = append(byChange["period"], s)
			case b.PeriodOf(s.FirstNominal) != s.Period || b.PeriodOf(s.LastNominal) != s.Period:
				byChange["time_zone"] = append(byChange["time_zone"], s)
			default:
				fits = true
			}
		}
		for _, change := range []string{"currency", "period", "time_zone"} {
			if ss := byChange[change]; len(ss) > 0 {
				out.Budgets = append(out.Budgets, ReshapedBudget{Budget: b, Changed: change, Spends: ss, Both: fits})
				break // one change per budget: the fix of the first shows the rest
			}
		}
	}
	if len(out.Budgets) > 0 {
		return &out
	}
	return nil
}
