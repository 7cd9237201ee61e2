package ledger

// Spend outside a budget's records (docs/design.md, "Budgets"): the costs
// of paid tasks that hold no entry in a budget period, and the
// acknowledgements a person gave them. A budget's figures (settled,
// reserved, free) are its entries; a task sent before the budget covered
// its step, an imported one, or one sent without an admission is charged
// all the same, and is shown beside the figures rather than lost.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// ChargeOutside is one cost the entries of a budget period leave out.
type ChargeOutside struct {
	PaidTaskRef
	RemoteRef string `json:"remote_ref"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	// Plan is the episode's pinned plan (JSON; "" none), which says the
	// step's vendor as the episode ran it.
	Plan string `json:"-"`
	// Imported: its episode came in by `starter import`: it was charged
	// before allot ran it.
	Imported bool `json:"imported,omitempty"`
	// Ack is a person's acknowledgement of it in this budget, if any.
	Ack *ChargeAck `json:"ack,omitempty"`
}

// ChargeAck is a person's acknowledgement of a charge outside a budget's
// records: who, why and when, and the charge as it was.
type ChargeAck struct {
	Budget string `json:"budget"`
	Period string `json:"period"`
	PaidTaskRef
	Amount   int64     `json:"amount"`
	Currency string    `json:"currency"`
	By       string    `json:"by"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// ChargesOutsideBudget lists the costs of paid tasks of pipelines (all
// when empty) whose episodes' nominal times fall in [from, to), and that
// hold no entry in budget's period other than a released one, with their
// acknowledgements in budget. Whether the budget covers each task is the
// caller's to judge (the pipeline file's scope).
func (l *Ledger) ChargesOutsideBudget(ctx context.Context, budget, period string, pipelines []string, from, to time.Time) ([]ChargeOutside, error) {
	if budget == "" || period == "" || !from.Before(to) {
		return nil, invalid("charges outside a budget need the budget, its period and the period's bounds")
	}
	q := `SELECT c.pipeline, c.episode_id, c.step, c.revision, c.remote_ref, c.amount, c.currency, e.plan,
		EXISTS (SELECT 1 FROM imports i WHERE i.pipeline = c.pipeline AND i.episode_id = c.episode_id),
		COALESCE(a.period, ''), COALESCE(a.amount, 0), COALESCE(a.currency, ''), COALESCE(a.acked_by, ''), COALESCE(a.reason, ''), a.acked_at
	FROM cost_entries c
	JOIN episodes e ON e.pipeline = c.pipeline AND e.episode_id = c.episode_id
	LEFT JOIN charge_acks a ON a.budget = ? AND a.pipeline = c.pipeline AND a.episode_id = c.episode_id AND a.step = c.step AND a.revision = c.revision
	WHERE e.nominal_time >= ? AND e.nominal_time < ?
	  AND NOT EXISTS (SELECT 1 FROM budget_entries b WHERE b.budget = ? AND b.period = ? AND b.pipeline = c.pipeline
	      AND b.episode_id = c.episode_id AND b.step = c.step AND b.revision = c.revision AND b.state <> 'released')`
	args := []any{budget, l.d.timeArg(from), l.d.timeArg(to), budget, period}
	if len(pipelines) > 0 {
		q += ` AND c.pipeline IN (?` + strings.Repeat(", ?", len(pipelines)-1) + `)`
		for _, p := range pipelines {
			args = append(args, p)
		}
	}
	q += ` ORDER BY c.pipeline, c.episode_id, c.step, c.revision`
	rows, err := l.r.QueryContext(ctx, l.d.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the charges outside budget %s period %s: %w", l.where, budget, period, err)
	}
	defer rows.Close()
	var out []ChargeOutside
	for rows.Next() {
		var (
			c ChargeOutside
			a ChargeAck
		)
		if err := rows.Scan(&c.Pipeline, &c.EpisodeID, &c.Step, &c.Revision, &c.RemoteRef, &c.Amount, &c.Currency, &c.Plan, &c.Imported,
			&a.Period, &a.Amount, &a.Currency, &a.By, &a.Reason, dbTime{&a.At}); err != nil {
			return nil, fmt.Errorf("ledger %s: read the charges outside budget %s period %s: %w", l.where, budget, period, err)
		}
		if a.By != "" {
			a.Budget, a.PaidTaskRef = budget, c.PaidTaskRef
			c.Ack = &a
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// AcknowledgeCharges records each acknowledgement, in one transaction; a
// charge acknowledged before keeps its first acknowledgement. It returns
// those recorded now. One without a name or a reason, or naming no
// budget, period or task, is refused and nothing is written.
func (l *Ledger) AcknowledgeCharges(ctx context.Context, acks []ChargeAck, at time.Time) ([]ChargeAck, error) {
	for _, a := range acks {
		switch {
		case a.Budget == "" || a.Period == "" || a.Pipeline == "" || a.EpisodeID == "" || a.Step == "":
			return nil, invalid("an acknowledged charge names its budget, period and paid task")
		case strings.TrimSpace(a.By) == "":
			return nil, invalid("budget %s period %s: an acknowledgement needs who gives it", a.Budget, a.Period)
		case strings.TrimSpace(a.Reason) == "":
			return nil, invalid("budget %s period %s: an acknowledgement needs a reason: pass --reason TEXT", a.Budget, a.Period)
		case a.Amount < 0:
			return nil, invalid("budget %s period %s: a charge is never negative", a.Budget, a.Period)
		}
	}
	if at.IsZero() {
		at = time.Now()
	}
	var recorded []ChargeAck
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		recorded = recorded[:0]
		for _, a := range acks {
			a.At = at.UTC()
			res, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO charge_acks (budget, period, pipeline, episode_id, step, revision, amount, currency, acked_by, reason, acked_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (budget, pipeline, episode_id, step, revision) DO NOTHING`),
				a.Budget, a.Period, a.Pipeline, a.EpisodeID, a.Step, a.Revision, a.Amount, a.Currency, truncate(a.By, 200), truncate(a.Reason, 1000), l.d.timeArg(a.At))
			if err != nil {
				return fmt.Errorf("ledger %s: acknowledge the charge of %s/%s step %s in budget %s: %w", l.where, a.Pipeline, a.EpisodeID, a.Step, a.Budget, err)
			}
			if n, err := res.RowsAffected(); err == nil && n == 1 {
				recorded = append(recorded, a)
			}
		}
		return nil
	})
	return recorded, err
}

// ChargeAcks lists the acknowledgements of budget (every budget when ""),
// oldest first.
func (l *Ledger) ChargeAcks(ctx context.Context, budget string) ([]ChargeAck, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT budget, period, pipeline, episode_id, step, revision, amount, currency, acked_by, reason, acked_at
		FROM charge_acks WHERE ? = '' OR budget = ? ORDER BY acked_at, budget, pipeline, episode_id, step, revision`), budget, budget)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the acknowledged charges: %w", l.where, err)
	}
	defer rows.Close()
	var out []ChargeAck
	for rows.Next() {
		var a ChargeAck
		if err := rows.Scan(&a.Budget, &a.Period, &a.Pipeline, &a.EpisodeID, &a.Step, &a.Revision, &a.Amount, &a.Currency, &a.By, &a.Reason, dbTime{&a.At}); err != nil {
			return nil, fmt.Errorf("ledger %s: read the acknowledged charges: %w", l.where, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
