package ledger

// Budget alerts: the soft thresholds a period's settled spend has crossed,
// each recorded once per period however many workers ask.

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"time"
)

// BudgetAlertCheck asks whether a budget's period has crossed its soft
// thresholds (basis points of the limit).
type BudgetAlertCheck struct {
	BudgetLimit
	Period     string `json:"period"`
	Thresholds []int  `json:"thresholds"`
}

// BudgetAlert is a soft threshold a period's settled spend crossed.
type BudgetAlert struct {
	Budget    string    `json:"budget"`
	Period    string    `json:"period"`
	Threshold int       `json:"threshold"` // basis points of the limit
	Limit     int64     `json:"limit"`
	Settled   int64     `json:"settled"`
	Currency  string    `json:"currency"`
	At        time.Time `json:"at"`
}

// RecordBudgetAlerts records the thresholds each period's settled spend has
// reached (settled >= threshold x limit) and returns those recorded now for
// the first time: each threshold of a period is alerted once, however often
// (and by however many workers) it is asked.
func (l *Ledger) RecordBudgetAlerts(ctx context.Context, checks []BudgetAlertCheck) ([]BudgetAlert, error) {
	var out []BudgetAlert
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		out = nil
		for _, c := range checks {
			if len(c.Thresholds) == 0 {
				continue
			}
			bp, err := l.budgetPeriodTx(ctx, tx, c.BudgetLimit, c.Period)
			if err != nil {
				return err
			}
			for _, th := range c.Thresholds {
				if th <= 0 || th >= 10000 {
					return invalid("budget %s: threshold %d is not between 1 and 9999 basis points", c.Budget, th)
				}
				// settled >= limit * th / 10000, exactly: in 128 bits.
				if new(big.Int).Mul(big.NewInt(bp.Settled), big.NewInt(10000)).Cmp(new(big.Int).Mul(big.NewInt(bp.Limit), big.NewInt(int64(th)))) < 0 {
					continue
				}
				a := BudgetAlert{Budget: c.Budget, Period: c.Period, Threshold: th, Limit: bp.Limit, Settled: bp.Settled, Currency: c.Currency, At: now()}
				res, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO budget_alerts (budget, period, threshold, limit_amount, settled, currency, crossed_at)
					VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (budget, period, threshold) DO NOTHING`),
					a.Budget, a.Period, a.Threshold, a.Limit, a.Settled, a.Currency, l.d.timeArg(a.At))
				if err != nil {
					return fmt.Errorf("ledger %s: record alert of budget %s period %s: %w", l.where, c.Budget, c.Period, err)
				}
				if n, err := res.RowsAffected(); err == nil && n == 1 {
					out = append(out, a)
				}
			}
		}
		return nil
	})
	return out, err
}
