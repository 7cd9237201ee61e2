package ledger

// The ledger's costs one line each, for export to the tools finance reads
// (docs/operating.md, "Costs in FOCUS"): every charge with its task, its
// vendor as the episode's pinned plan names it, and the budgets that hold
// it.

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// CostLine is one recorded cost: what a vendor charged for one task.
type CostLine struct {
	PaidTaskRef
	RemoteRef  string    `json:"remote_ref"`
	Amount     int64     `json:"amount"`
	Currency   string    `json:"currency"`
	RecordedAt time.Time `json:"recorded_at"`
	// Vendor is the step's vendor in the episode's pinned plan ("default"
	// for the worker's ALLOT_VENDOR_URL, or a plan that names none).
	Vendor string `json:"vendor"`
	// Budgets are the budgets whose entries hold the task (not released),
	// sorted.
	Budgets []string `json:"budgets,omitempty"`
}

// CostLines lists the costs recorded in [since, until), oldest first, read
// through cost_entries_recorded; pipeline "" is every pipeline.
func (l *Ledger) CostLines(ctx context.Context, pipeline string, since, until time.Time) ([]CostLine, error) {
	if since.IsZero() || !since.Before(until) {
		return nil, invalid("the costs to list need a window: give a start before its end")
	}
	rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT c.pipeline, c.episode_id, c.step, c.revision, c.remote_ref, c.amount, c.currency, c.recorded_at, e.plan
		FROM cost_entries c JOIN episodes e ON e.pipeline = c.pipeline AND e.episode_id = c.episode_id
		WHERE c.recorded_at >= ? AND c.recorded_at < ? AND (? = '' OR c.pipeline = ?)
		ORDER BY c.recorded_at, c.remote_ref`), l.d.timeArg(since), l.d.timeArg(until), pipeline, pipeline)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the costs to export: %w", l.where, err)
	}
	defer rows.Close()
	var (
		out   []CostLine
		plans = map[string]map[string]planStep{}
	)
	for rows.Next() {
		var (
			c    CostLine
			plan string
		)
		if err := rows.Scan(&c.Pipeline, &c.EpisodeID, &c.Step, &c.Revision, &c.RemoteRef, &c.Amount, &c.Currency, dbTime{&c.RecordedAt}, &plan); err != nil {
			return nil, fmt.Errorf("ledger %s: read the costs to export: %w", l.where, err)
		}
		steps, ok := plans[plan]
		if !ok {
			steps = pinnedPlanSteps(plan)
			plans[plan] = steps
		}
		c.Vendor = steps[c.Step].Vendor
		if c.Vendor == "" {
			c.Vendor = "default"
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read the costs to export: %w", l.where, err)
	}
	// The budgets holding them, one read for the window.
	brows, err := l.r.QueryContext(ctx, l.d.q(`SELECT b.pipeline, b.episode_id, b.step, b.revision, b.budget
		FROM cost_entries c JOIN budget_entries b ON b.pipeline = c.pipeline AND b.episode_id = c.episode_id AND b.step = c.step AND b.revision = c.revision
		WHERE c.recorded_at >= ? AND c.recorded_at < ? AND (? = '' OR c.pipeline = ?) AND b.state <> 'released'`),
		l.d.timeArg(since), l.d.timeArg(until), pipeline, pipeline)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the budgets of the costs to export: %w", l.where, err)
	}
	defer brows.Close()
	budgets := map[PaidTaskRef][]string{}
	for brows.Next() {
		var (
			r PaidTaskRef
			b string
		)
		if err := brows.Scan(&r.Pipeline, &r.EpisodeID, &r.Step, &r.Revision, &b); err != nil {
			return nil, fmt.Errorf("ledger %s: read the budgets of the costs to export: %w", l.where, err)
		}
		budgets[r] = append(budgets[r], b)
	}
	if err := brows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read the budgets of the costs to export: %w", l.where, err)
	}
	for i := range out {
		if bs := budgets[out[i].PaidTaskRef]; len(bs) > 0 {
			slices.Sort(bs)
			out[i].Budgets = bs
		}
	}
	return out, nil
}
