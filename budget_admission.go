package allot

// Budget admission (invariant 20 of docs/design.md, "Budgets"): whether a
// paid task's price fits a budget's period, and what an episode's
// admission asks. Pure: the ledger reads a period's limit and spend and
// calls these in the intent's transaction, under the period's lock.

import (
	"fmt"
	"slices"
)

// MaxBudgetLimit bounds a budget's limit and its raises: 10^15 minor
// units, a thousand times a cost entry's bound (MaxAmount). Every sum of
// amounts is checked all the same (AddAmount).
const MaxBudgetLimit int64 = 1_000_000_000_000_000

// Reservation asks a budget to hold Amount for a paid task in Period. Limit
// is the limit the pipeline file gives the budget; a raise recorded for the
// period replaces it.
type Reservation struct {
	Budget   string `json:"budget"`
	Period   string `json:"period"`
	Currency string `json:"currency"`
	Limit    int64  `json:"limit"`
	Amount   int64  `json:"amount"`
}

// BudgetSpend is what a (budget, period) has used in its currency: the
// costs settled and the reservations held, and what it holds for the
// scheduled runs still due that the asker may not spend (docs/design.md,
// "Scheduled work funded first").
type BudgetSpend struct {
	Settled  int64
	Reserved int64
	// HeldForSchedule is the hold of the budget's scheduled runs that the
	// asker must leave alone: all of it for a manual run, a backfill or a
	// retry; for a scheduled run drawing on its own hold, the hold of the
	// scheduled runs due before it.
	HeldForSchedule int64
}

// Total is settled + reserved, refusing an overflow (ErrAmountOverflow).
func (s BudgetSpend) Total() (int64, error) {
	return AddAmounts(s.Settled, s.Reserved)
}

// Admits reports whether asked fits under limit: settled + reserved +
// held for the schedule + asked <= limit. A sum beyond int64 fits no
// limit.
func (s BudgetSpend) Admits(limit, asked int64) bool {
	total, err := AddAmounts(s.Settled, s.Reserved, s.HeldForSchedule, asked)
	return err == nil && total <= limit
}

// Needed is the smallest limit that admits asked: settled + reserved +
// held for the schedule + asked, or MaxBudgetLimit when that sum leaves
// int64 (saturating, never wrapping).
func (s BudgetSpend) Needed(asked int64) int64 {
	n, err := AddAmounts(s.Settled, s.Reserved, s.HeldForSchedule, asked)
	if err != nil {
		return MaxBudgetLimit
	}
	return n
}

// AsksBeyondHeld is what rs asks beyond what the task holds already in the
// same (budget, period) and currency (held: its held reservations): an
// episode's first paid task reserved a later task's max_cost, and the
// later task's own admission asks only a rise (a lower quote fits in what
// is held).
func AsksBeyondHeld(rs, held []Reservation) []Reservation {
	var out []Reservation
	for _, r := range rs {
		for _, h := range held {
			if h.Budget == r.Budget && h.Period == r.Period && h.Currency == r.Currency {
				r.Amount -= h.Amount
			}
		}
		if r.Amount > 0 {
			out = append(out, r)
		}
	}
	return out
}

// SumAsks adds the asks of several tasks per (budget, period), in the
// order first asked, so that an admission of a whole episode checks each
// budget once, with everything it asks. A period asked in two currencies,
// or asks that add up beyond int64, are refused.
func SumAsks(rs []Reservation) ([]Reservation, error) {
	var out []Reservation
	for _, r := range rs {
		i := slices.IndexFunc(out, func(o Reservation) bool { return o.Budget == r.Budget && o.Period == r.Period })
		if i < 0 {
			out = append(out, r)
			continue
		}
		if out[i].Currency != r.Currency {
			return nil, fmt.Errorf("budget %s period %s is asked in %s and in %s: a budget counts one currency", r.Budget, r.Period, out[i].Currency, r.Currency)
		}
		sum, err := AddAmount(out[i].Amount, r.Amount)
		if err != nil {
			return nil, fmt.Errorf("budget %s period %s: the asks add up beyond what int64 minor units hold", r.Budget, r.Period)
		}
		out[i].Amount = sum
	}
	return out, nil
}

// BudgetShortfall is why a budget refused a task: its period's limit, what
// is settled and reserved already, what it holds for scheduled runs the
// task may not spend, and what the task asked.
type BudgetShortfall struct {
	Budget          string `json:"budget"`
	Period          string `json:"period"`
	Currency        string `json:"currency"`
	Limit           int64  `json:"limit"`
	Settled         int64  `json:"settled"`
	Reserved        int64  `json:"reserved"`
	HeldForSchedule int64  `json:"held_for_schedule,omitempty"`
	Asked           int64  `json:"asked"`
}

// Spend is the budget's spend as the refusal counted it.
func (s BudgetShortfall) Spend() BudgetSpend {
	return BudgetSpend{Settled: s.Settled, Reserved: s.Reserved, HeldForSchedule: s.HeldForSchedule}
}

// Needed is the smallest limit that admits the task: settled + reserved +
// held for the schedule + asked (saturating, never wrapping).
func (s BudgetShortfall) Needed() int64 {
	return s.Spend().Needed(s.Asked)
}

func (s BudgetShortfall) String() string {
	m := func(a int64) string { return Money{Amount: a, Currency: s.Currency}.String() }
	held := ""
	if s.HeldForSchedule > 0 {
		held = ", held for scheduled runs " + m(s.HeldForSchedule)
	}
	return fmt.Sprintf("budget %s, period %s: limit %s, settled %s, reserved %s%s, asked %s", s.Budget, s.Period,
		m(s.Limit), m(s.Settled), m(s.Reserved), held, m(s.Asked))
}
