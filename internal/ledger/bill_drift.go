package ledger

// Drift items (docs/design.md, "Reconciling the vendor's bill"): each bill
// line, or recorded cost, that the ledger and the vendor disagree on, kept
// once per (account, line, class) until an operator acknowledges it with a
// reason; their pages and their totals per vendor, class and currency.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"allot"
)

// DriftItem is one line of a bill, or one recorded cost, that the ledger
// and the vendor disagree on.
type DriftItem struct {
	ID      int64  `json:"id"`
	Account string `json:"account"`
	Vendor  string `json:"vendor"`
	// Line is the bill line's ID, or allot.DriftLineOfCost(ref) for a
	// cost no line charges.
	Line  string           `json:"line"`
	Class allot.DriftClass `json:"class"`
	// Pipeline, EpisodeID, Step, Revision and Period name the ledger's
	// task; "" when the line names no task of the ledger.
	Pipeline       string `json:"pipeline,omitempty"`
	EpisodeID      string `json:"episode_id,omitempty"`
	Step           string `json:"step,omitempty"`
	Revision       int    `json:"revision"`
	Period         string `json:"period,omitempty"`
	RemoteRef      string `json:"remote_ref,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Amount         int64  `json:"amount"` // the money at stake, minor units
	Currency       string `json:"currency"`
	// Detail says what is wrong and what to do, in a sentence or two.
	Detail    string    `json:"detail"`
	FoundAt   time.Time `json:"found_at"`
	AckedAt   time.Time `json:"acked_at,omitzero"` // zero until acknowledged
	AckedBy   string    `json:"acked_by,omitempty"`
	AckReason string    `json:"ack_reason,omitempty"`
}

// DriftFilter selects drift items; a page is at most Limit items after
// AfterID.
type DriftFilter struct {
	Account, Vendor, Pipeline string           // "" = any
	Class                     allot.DriftClass // "" = any
	Unacked                   bool             // only items not acknowledged
	AfterID                   int64            // keyset pagination: items with a greater ID
	Limit                     int              // 0 = DefaultDriftPage
}

// DriftTotal is the count and money of the unacknowledged drift items of
// one vendor, class and currency.
type DriftTotal struct {
	Vendor   string           `json:"vendor"`
	Class    allot.DriftClass `json:"class"`
	Currency string           `json:"currency"`
	Count    int              `json:"count"`
	Amount   int64            `json:"amount"`
}

// checkDrift refuses a drift item the ledger cannot keep; it fills the
// time it was found.
func checkDrift(d *DriftItem) error {
	what := fmt.Sprintf("drift item of account %q line %q", d.Account, d.Line)
	switch {
	case d.Account == "" || d.Line == "":
		return invalid("a drift item names its account and line (a bill line's ID, or %s), got %q and %q; nothing was recorded",
			allot.DriftLineOfCost("REF"), d.Account, d.Line)
	case !d.Class.Valid():
		return invalid("%s: class %q is not one of %v; nothing was recorded", what, d.Class, allot.DriftClasses)
	case d.Amount < 0 || d.Amount > allot.MaxAmount:
		return invalid("%s: %d minor units at stake is outside 0..%d; nothing was recorded", what, d.Amount, allot.MaxAmount)
	case d.Revision < 0:
		return invalid("%s: revision %d is below 0; nothing was recorded", what, d.Revision)
	case strings.TrimSpace(d.Detail) == "":
		return invalid("%s has no detail: say what is wrong and what to do; nothing was recorded", what)
	case d.Currency == "" && d.Amount == 0:
	default:
		if err := allot.CheckCurrency(d.Currency); err != nil {
			return invalid("%s: %v; nothing was recorded", what, err)
		}
	}
	d.ID, d.AckedAt, d.AckedBy, d.AckReason = 0, time.Time{}, "", ""
	if d.FoundAt.IsZero() {
		d.FoundAt = now()
	}
	d.FoundAt = normTime(d.FoundAt)
	return nil
}

// insertDriftTx records d unless its (account, line, class) is recorded
// already; it reports whether it did.
func (l *Ledger) insertDriftTx(ctx context.Context, tx *sql.Tx, d DriftItem) (bool, error) {
	res, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO drift_items
		(account, vendor, line, class, pipeline, episode_id, step, revision, period, remote_ref, idempotency_key, amount, currency, detail, found_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (account, line, class) DO NOTHING`),
		d.Account, d.Vendor, d.Line, string(d.Class), d.Pipeline, d.EpisodeID, d.Step, d.Revision, d.Period, d.RemoteRef, d.IdempotencyKey,
		d.Amount, d.Currency, d.Detail, l.d.timeArg(d.FoundAt))
	if err != nil {
		return false, fmt.Errorf("ledger %s: record the %s drift of account %q line %q: %w", l.where, d.Class, d.Account, d.Line, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("ledger %s: record the %s drift of account %q line %q: %w", l.where, d.Class, d.Account, d.Line, err)
	}
	return n == 1, nil
}

// RecordDrift records a drift item no bill line carries (a recorded cost
// the bill does not charge: recorded_uncharged, Line
// allot.DriftLineOfCost(ref)), once per (account, line, class): when it is
// recorded already it returns the stored item and created false.
func (l *Ledger) RecordDrift(ctx context.Context, d DriftItem) (DriftItem, bool, error) {
	if err := checkDrift(&d); err != nil {
		return DriftItem{}, false, err
	}
	var (
		out     DriftItem
		created bool
	)
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		if created, err = l.insertDriftTx(ctx, tx, d); err != nil {
			return err
		}
		items, err := l.queryDrift(ctx, tx, `SELECT `+driftCols+` FROM drift_items WHERE account = ? AND line = ? AND class = ?`, d.Account, d.Line, string(d.Class))
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return fmt.Errorf("ledger %s: the %s drift of account %q line %q is not there after it was recorded", l.where, d.Class, d.Account, d.Line)
		}
		out = items[0]
		return nil
	})
	if err != nil {
		return DriftItem{}, false, err
	}
	return out, created, nil
}

const driftCols = `id, account, vendor, line, class, pipeline, episode_id, step, revision, period, remote_ref, idempotency_key,
	amount, currency, detail, found_at, acked_at, acked_by, ack_reason`

func (l *Ledger) queryDrift(ctx context.Context, db querier, query string, args ...any) ([]DriftItem, error) {
	rows, err := db.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query drift items: %w", l.where, err)
	}
	defer rows.Close()
	var out []DriftItem
	for rows.Next() {
		var (
			d     DriftItem
			class string
		)
		if err := rows.Scan(&d.ID, &d.Account, &d.Vendor, &d.Line, &class, &d.Pipeline, &d.EpisodeID, &d.Step, &d.Revision, &d.Period,
			&d.RemoteRef, &d.IdempotencyKey, &d.Amount, &d.Currency, &d.Detail, dbTime{&d.FoundAt}, dbTime{&d.AckedAt},
			&d.AckedBy, &d.AckReason); err != nil {
			return nil, fmt.Errorf("ledger %s: read a drift item: %w", l.where, err)
		}
		d.Class = allot.DriftClass(class)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read drift items: %w", l.where, err)
	}
	return out, nil
}

// driftItemsQuery builds the query of one page of DriftItems.
func driftItemsQuery(f DriftFilter, limit int) (string, []any) {
	query := `SELECT ` + driftCols + ` FROM drift_items WHERE id > ?`
	args := []any{f.AfterID}
	for _, c := range []struct{ col, val string }{
		{"account", f.Account}, {"vendor", f.Vendor}, {"pipeline", f.Pipeline}, {"class", string(f.Class)},
	} {
		if c.val != "" {
			query += ` AND ` + c.col + ` = ?`
			args = append(args, c.val)
		}
	}
	if f.Unacked {
		query += ` AND acked_at IS NULL`
	}
	return query + ` ORDER BY id LIMIT ?`, append(args, limit)
}

// DriftItems returns a page of the drift items f selects, ordered by ID:
// at most f.Limit (0: DefaultDriftPage) after f.AfterID.
func (l *Ledger) DriftItems(ctx context.Context, f DriftFilter) ([]DriftItem, error) {
	limit, err := billPageLimit("drift items", f.Limit)
	if err != nil {
		return nil, err
	}
	if f.Class != "" && !f.Class.Valid() {
		return nil, invalid("drift class %q is not one of %v", f.Class, allot.DriftClasses)
	}
	query, args := driftItemsQuery(f, limit)
	return l.queryDrift(ctx, l.r, query, args...)
}

// DriftItem returns one drift item; an unknown ID is an allot.DriftNotFound
// error.
func (l *Ledger) DriftItem(ctx context.Context, id int64) (DriftItem, error) {
	return l.driftItem(ctx, l.r, id)
}

func (l *Ledger) driftItem(ctx context.Context, db querier, id int64) (DriftItem, error) {
	items, err := l.queryDrift(ctx, db, `SELECT `+driftCols+` FROM drift_items WHERE id = ?`, id)
	if err != nil {
		return DriftItem{}, err
	}
	if len(items) == 0 {
		return DriftItem{}, allot.Errorf(allot.DriftNotFound, "the ledger has no drift item %d: list the items with %s", id, allot.DriftListCommand())
	}
	return items[0], nil
}

// AckDrift acknowledges a drift item: by says who, reason why (both
// required, within allot.CheckText's limits). The item stops alerting and
// stays in the ledger. An item acknowledged already is refused
// (allot.DriftAcknowledged, saying when, by whom and why), an unknown one
// is allot.DriftNotFound; nothing is written on a refusal.
func (l *Ledger) AckDrift(ctx context.Context, id int64, by, reason string) (DriftItem, error) {
	switch {
	case strings.TrimSpace(by) == "":
		return DriftItem{}, invalid("acknowledging drift item %d names who does it: pass --by NAME", id)
	case strings.TrimSpace(reason) == "":
		return DriftItem{}, invalid("acknowledging drift item %d needs a reason: pass --reason TEXT, e.g. the vendor's credit note or why the charge is right", id)
	}
	if err := allot.CheckText("--by", by); err != nil {
		return DriftItem{}, invalid("acknowledging drift item %d: %v", id, err)
	}
	if err := allot.CheckText("--reason", reason); err != nil {
		return DriftItem{}, invalid("acknowledging drift item %d: %v", id, err)
	}
	var out DriftItem
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		// Set only while unacknowledged: of two concurrent acknowledgements
		// the second finds nothing to set and is refused below.
		res, err := tx.ExecContext(ctx, l.d.q(`UPDATE drift_items SET acked_at = ?, acked_by = ?, ack_reason = ? WHERE id = ? AND acked_at IS NULL`),
			l.d.timeArg(now()), by, reason, id)
		if err != nil {
			return fmt.Errorf("ledger %s: acknowledge drift item %d: %w", l.where, id, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("ledger %s: acknowledge drift item %d: %w", l.where, id, err)
		}
		if out, err = l.driftItem(ctx, tx, id); err != nil {
			return err
		}
		if n == 0 {
			return allot.Errorf(allot.DriftAcknowledged, "drift item %d was acknowledged already, at %s by %s: %q; nothing was written (it no longer alerts; %s lists it)",
				id, out.AckedAt.Format(time.RFC3339), out.AckedBy, out.AckReason, allot.DriftListCommand())
		}
		return nil
	})
	if err != nil {
		return DriftItem{}, err
	}
	return out, nil
}

// driftTotalsQuery reads the unacknowledged items' amounts from their
// index, grouped by its order.
const driftTotalsQuery = `SELECT vendor, class, currency, amount FROM drift_items
	WHERE acked_at IS NULL ORDER BY vendor, class, currency`

// DriftTotals returns the count and money of the unacknowledged drift
// items per vendor, class and currency, in that order. The amounts are
// summed as they stream, refusing a total that would overflow.
func (l *Ledger) DriftTotals(ctx context.Context) ([]DriftTotal, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(driftTotalsQuery))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: total the drift items: %w", l.where, err)
	}
	defer rows.Close()
	var out []DriftTotal
	for rows.Next() {
		var (
			t     DriftTotal
			class string
		)
		if err := rows.Scan(&t.Vendor, &class, &t.Currency, &t.Amount); err != nil {
			return nil, fmt.Errorf("ledger %s: total the drift items: %w", l.where, err)
		}
		t.Class = allot.DriftClass(class)
		n := len(out)
		if n == 0 || out[n-1].Vendor != t.Vendor || out[n-1].Class != t.Class || out[n-1].Currency != t.Currency {
			t.Count = 1
			out = append(out, t)
			continue
		}
		sum, err := allot.AddAmount(out[n-1].Amount, t.Amount)
		if err != nil {
			return nil, fmt.Errorf("ledger %s: the unacknowledged %s drift of vendor %q in %s: %w: correct the absurd amounts (starter drift list)",
				l.where, t.Class, t.Vendor, t.Currency, err)
		}
		out[n-1].Amount = sum
		out[n-1].Count++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: total the drift items: %w", l.where, err)
	}
	return out, nil
}
