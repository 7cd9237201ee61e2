package ledger

// Budget raises (docs/design.md, "Budgets"): an operator's new limit for
// one budget's period, with who set it and why, recorded once per request
// however often the request is retried. A raise is admission's other
// input: the period's limit is the last raise, else the configured one.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"allot"
)

// BudgetRaise is an operator's new limit for one budget's period: who set
// it, why, and the request that did (a retried request records it once).
type BudgetRaise struct {
	RequestID string    `json:"request_id"`
	Budget    string    `json:"budget"`
	Period    string    `json:"period"`
	Limit     int64     `json:"limit"`
	Currency  string    `json:"currency"`
	Reason    string    `json:"reason"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
	// Configured is the pipeline file's limit of the budget: the period's
	// limit while it has no raise. Input only; 0 when the caller does not
	// know it (then a limit is never taken as unchanged before a raise).
	Configured int64 `json:"-"`
	// Previous and Change are what RaiseBudget found and did: the period's
	// limit before the request, and whether the new one raised, lowered or
	// left it unchanged. Empty for a request recorded already.
	Previous int64       `json:"previous,omitempty"`
	Change   LimitChange `json:"change,omitempty"`
}

// LimitChange is what setting a period's limit did to it.
type LimitChange string

const (
	LimitRaised    LimitChange = "raised"
	LimitLowered   LimitChange = "lowered"
	LimitUnchanged LimitChange = "unchanged"
)

// ErrRequestConflict means a request ID was already recorded with other
// arguments. The message shows both requests; nothing was written.
var ErrRequestConflict = &allot.Error{Type: allot.RequestConflict, Message: "request ID already used with other arguments"}

// sameRequest reports whether a stored raise and a new one are the same
// request: same budget, period, limit, currency, reason and author.
func sameRequest(a, b BudgetRaise) bool {
	return a.Budget == b.Budget && a.Period == b.Period && a.Limit == b.Limit && a.Currency == b.Currency && a.Reason == b.Reason && a.By == b.By
}

func (r BudgetRaise) requestText() string {
	return fmt.Sprintf("budget %s period %s limit %s by %s reason %q", r.Budget, r.Period, allot.Money{Amount: r.Limit, Currency: r.Currency}, r.By, r.Reason)
}

// RaiseBudget records a new limit for one budget's period (higher or lower
// than the current one); the latest raise of a period is its limit, and
// other periods keep theirs. Under the period's lock, a limit below what
// the period has settled and reserved is refused (ErrInvalidInput): it
// would be exceeded at once; a limit equal to the current one records
// nothing (Change unchanged, false). A request already recorded returns the
// stored raise and false, writing nothing; its ID with other arguments is
// ErrRequestConflict (docs/design.md, "Budgets").
func (l *Ledger) RaiseBudget(ctx context.Context, r BudgetRaise) (BudgetRaise, bool, error) {
	switch {
	case r.RequestID == "":
		return BudgetRaise{}, false, invalid("a budget raise needs a request ID")
	case r.Budget == "" || r.Period == "":
		return BudgetRaise{}, false, invalid("a budget raise names its budget and period, got %q and %q", r.Budget, r.Period)
	case r.Limit <= 0 || r.Limit > allot.MaxBudgetLimit:
		return BudgetRaise{}, false, invalid("budget %s period %s: a limit of %d is not between 1 and %d minor units", r.Budget, r.Period, r.Limit, allot.MaxBudgetLimit)
	case allot.CheckCurrency(r.Currency) != nil:
		return BudgetRaise{}, false, invalid("budget %s: %v", r.Budget, allot.CheckCurrency(r.Currency))
	case strings.TrimSpace(r.Reason) == "":
		return BudgetRaise{}, false, invalid("budget %s period %s: a raise needs a reason: pass --reason TEXT", r.Budget, r.Period)
	case strings.TrimSpace(r.By) == "":
		return BudgetRaise{}, false, invalid("budget %s period %s: a raise names who made it: pass --by NAME", r.Budget, r.Period)
	}
	if r.At.IsZero() {
		r.At = now()
	}
	r.At = normTime(r.At)
	var (
		out     BudgetRaise
		applied bool
	)
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockBudgetTx(ctx, tx, r.Budget, r.Period); err != nil {
			return err
		}
		stored, err := l.queryRaises(ctx, tx, `SELECT `+raiseCols+` FROM budget_raises WHERE request_id = ?`, r.RequestID)
		if err != nil {
			return err
		}
		if len(stored) > 0 {
			if !sameRequest(stored[0], r) {
				return fmt.Errorf("%w: request %s recorded %s; this request asks %s: give a new --request-id for a new request",
					ErrRequestConflict, r.RequestID, stored[0].requestText(), r.requestText())
			}
			out = stored[0]
			return nil
		}
		previous := r.Configured
		latest, err := l.queryRaises(ctx, tx, `SELECT `+raiseCols+` FROM budget_raises WHERE budget = ? AND period = ? ORDER BY id DESC LIMIT 1`, r.Budget, r.Period)
		if err != nil {
			return err
		}
		if len(latest) > 0 {
			previous = latest[0].Limit
		}
		r.Previous = previous
		switch {
		case previous == r.Limit:
			r.Change = LimitUnchanged
			out = r
			return nil
		case previous < r.Limit:
			r.Change = LimitRaised
		default:
			r.Change = LimitLowered
		}
		settled, reserved, err := l.periodSpend(ctx, tx, r.Budget, r.Period, r.Currency)
		if err != nil {
			return err
		}
		if spend := (allot.BudgetSpend{Settled: settled, Reserved: reserved}); !spend.Admits(r.Limit, 0) {
			spent, _ := spend.Total()
			m := func(a int64) string { return allot.Money{Amount: a, Currency: r.Currency}.String() }
			return invalid("budget %s period %s has %s settled and %s reserved: a limit of %s would be exceeded at once; nothing was recorded (give at least %s)",
				r.Budget, r.Period, m(settled), m(reserved), m(r.Limit), m(spent))
		}
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO budget_raises (request_id, budget, period, limit_amount, currency, reason, raised_by, raised_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`), r.RequestID, r.Budget, r.Period, r.Limit, r.Currency, r.Reason, r.By, l.d.timeArg(r.At)); err != nil {
			return fmt.Errorf("ledger %s: record the raise of budget %s period %s: %w", l.where, r.Budget, r.Period, err)
		}
		out, applied = r, true
		return nil
	})
	if err != nil {
		return BudgetRaise{}, false, err
	}
	return out, applied, nil
}

const raiseCols = `request_id, budget, period, limit_amount, currency, reason, raised_by, raised_at`

// BudgetRaises lists a budget's raises (of one period, or of every period
// when period is ""), in the order they were made.
func (l *Ledger) BudgetRaises(ctx context.Context, budget, period string) ([]BudgetRaise, error) {
	return l.queryRaises(ctx, l.r, `SELECT `+raiseCols+` FROM budget_raises
		WHERE budget = ? AND (? = '' OR period = ?) ORDER BY id`, budget, period, period)
}

func (l *Ledger) queryRaises(ctx context.Context, db querier, query string, args ...any) ([]BudgetRaise, error) {
	rows, err := db.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query budget raises: %w", l.where, err)
	}
	defer rows.Close()
	var out []BudgetRaise
	for rows.Next() {
		var r BudgetRaise
		if err := rows.Scan(&r.RequestID, &r.Budget, &r.Period, &r.Limit, &r.Currency, &r.Reason, &r.By, dbTime{&r.At}); err != nil {
			return nil, fmt.Errorf("ledger %s: read budget raise: %w", l.where, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read budget raises: %w", l.where, err)
	}
	return out, nil
}
