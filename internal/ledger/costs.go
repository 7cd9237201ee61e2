package ledger

// Cost entries: invariant 8 of docs/design.md. One entry per remote
// reference, holding the absolute amount the vendor charged for it; written
// in the same transaction as the reference (recordSubmissionTx), upserted and
// never incremented, so a retried write changes no total. An amount is at
// most allot.MaxAmount, so that no total of the ledger can overflow.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"allot"
)

// CostEntry is the cost of one accepted paid task, keyed by its remote
// reference and holding an absolute amount.
type CostEntry struct {
	RemoteRef  string    `json:"remote_ref"`
	Pipeline   string    `json:"pipeline"`
	EpisodeID  string    `json:"episode_id"`
	Period     string    `json:"period"` // filled on read from the episode
	Step       string    `json:"step"`
	Revision   int       `json:"revision"`
	Amount     int64     `json:"amount"`
	Currency   string    `json:"currency"`
	RecordedAt time.Time `json:"recorded_at"`
}

// checkRefOwner refuses a remote reference that another task, or another
// task's cost entry, already holds: one vendor submission is booked once.
func (l *Ledger) checkRefOwner(ctx context.Context, tx *sql.Tx, s Submission) error {
	others, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks
		WHERE remote_ref = ? AND remote_ref <> ''`, s.RemoteRef)
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.PaidTaskRef != s.PaidTaskRef {
			return fmt.Errorf("%w: remote reference %q already belongs to %s, so it cannot be %s's; nothing was written",
				ErrRemoteRefConflict, s.RemoteRef, describe(o.PaidTaskRef), describe(s.PaidTaskRef))
		}
	}
	var owner PaidTaskRef
	err = tx.QueryRowContext(ctx, l.d.q(`SELECT pipeline, episode_id, step, revision FROM cost_entries WHERE remote_ref = ?`), s.RemoteRef).
		Scan(&owner.Pipeline, &owner.EpisodeID, &owner.Step, &owner.Revision)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("ledger %s: read cost entry %q: %w", l.where, s.RemoteRef, err)
	case owner != s.PaidTaskRef:
		return fmt.Errorf("%w: the cost entry for remote reference %q is booked to %s, not %s; nothing was written (ledger Check reports it)",
			ErrRemoteRefConflict, s.RemoteRef, describe(owner), describe(s.PaidTaskRef))
	}
	return nil
}

// upsertCost writes the submission's cost entry: absolute, never
// incremented, so the same call twice leaves the same row; the time moves
// only when the amount does. A submission without a currency costs nothing
// (an effect step) and has no entry. It returns what the write added to the
// ledger's costs: the amount of a new entry (or of one whose currency
// changed), the rise of a corrected amount, else 0.
func (l *Ledger) upsertCost(ctx context.Context, tx *sql.Tx, s Submission) (int64, error) {
	if s.Currency == "" {
		return 0, nil
	}
	if s.Amount < 0 || s.Amount > allot.MaxAmount {
		// Every caller checks first; this is the one place a cost is
		// written, so no path can store an amount that breaks the totals.
		return 0, invalid("%s: cost %s of %q is outside 0..%s; nothing was written", describe(s.PaidTaskRef),
			allot.Money{Amount: s.Amount, Currency: s.Currency}, s.RemoteRef, allot.Money{Amount: allot.MaxAmount, Currency: s.Currency})
	}
	var (
		oldAmount   int64
		oldCurrency string
		added       = s.Amount
	)
	err := tx.QueryRowContext(ctx, l.d.q(`SELECT amount, currency FROM cost_entries WHERE remote_ref = ?`), s.RemoteRef).Scan(&oldAmount, &oldCurrency)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, fmt.Errorf("ledger %s: read cost of %s (remote reference %q): %w", l.where, describe(s.PaidTaskRef), s.RemoteRef, err)
	case oldCurrency == s.Currency:
		added = max(0, s.Amount-oldAmount)
	}
	if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO cost_entries
		(remote_ref, pipeline, episode_id, step, revision, amount, currency, recorded_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (remote_ref) DO UPDATE SET
			amount = excluded.amount, currency = excluded.currency,
			recorded_at = CASE WHEN cost_entries.amount = excluded.amount AND cost_entries.currency = excluded.currency
				THEN cost_entries.recorded_at ELSE excluded.recorded_at END`),
		s.RemoteRef, s.Pipeline, s.EpisodeID, s.Step, s.Revision, s.Amount, s.Currency, l.d.timeArg(now())); err != nil {
		return 0, fmt.Errorf("ledger %s: record cost of %s (remote reference %q): %w", l.where, describe(s.PaidTaskRef), s.RemoteRef, err)
	}
	return added, nil
}

// costSelect reads cost entries with the period of their episode.
const costSelect = `SELECT c.remote_ref, c.pipeline, c.episode_id, e.period, c.step, c.revision, c.amount, c.currency, c.recorded_at
	FROM cost_entries c JOIN episodes e ON e.pipeline = c.pipeline AND e.episode_id = c.episode_id`

// Costs returns the cost entries of a pipeline's episodes in one period, or
// in all periods when period is "", ordered by episode (period, sequence),
// step and revision. pipeline "" means every pipeline (ordered by pipeline
// first).
func (l *Ledger) Costs(ctx context.Context, pipeline, period string) ([]CostEntry, error) {
	query := costSelect + ` WHERE 1 = 1`
	var args []any
	if pipeline != "" {
		query += ` AND c.pipeline = ?`
		args = append(args, pipeline)
	}
	if period != "" {
		query += ` AND e.period = ?`
		args = append(args, period)
	}
	query += ` ORDER BY c.pipeline, e.period, e.sequence, c.episode_id, c.step, c.revision, c.remote_ref`
	return l.queryCosts(ctx, query, args...)
}

// Cost returns the cost entry of one remote reference; ErrCostNotFound if
// none was recorded.
func (l *Ledger) Cost(ctx context.Context, remoteRef string) (CostEntry, error) {
	if remoteRef == "" {
		return CostEntry{}, invalid("a cost look-up needs a remote reference")
	}
	cs, err := l.queryCosts(ctx, costSelect+` WHERE c.remote_ref = ?`, remoteRef)
	if err != nil {
		return CostEntry{}, err
	}
	if len(cs) == 0 {
		return CostEntry{}, fmt.Errorf("%w: no cost entry for remote reference %q: it is written with the submission (RecordSubmission)", ErrCostNotFound, remoteRef)
	}
	return cs[0], nil
}

func (l *Ledger) queryCosts(ctx context.Context, query string, args ...any) ([]CostEntry, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query costs: %w", l.where, err)
	}
	defer rows.Close()
	var out []CostEntry
	for rows.Next() {
		var c CostEntry
		if err := rows.Scan(&c.RemoteRef, &c.Pipeline, &c.EpisodeID, &c.Period, &c.Step, &c.Revision,
			&c.Amount, &c.Currency, dbTime{&c.RecordedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read cost entry: %w", l.where, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read cost entries: %w", l.where, err)
	}
	return out, nil
}
