package ledger

// The vendor's bill, reconciled continuously (docs/design.md, "Reconciling
// the vendor's bill"): the lines of each vendor account's bill as the
// reconciler read them, a watermark per account (the vendor's cursor), and
// the drift items the reconciler found: each line, or recorded cost, the
// two sides do not explain, once per (account, line, class), until an
// operator acknowledges it with a reason.
//
// A page of the bill is stored with the move of its watermark in one
// transaction, and only from the watermark it was read from: two
// reconcilers of one account never both store the page after it, and a
// line read twice is stored once. Each new line is numbered (Seq) in the
// order the ledger read it, and judged once, in that order; a judgement
// and its drift item are one transaction, so a reconciler killed half-way
// judges the line again and records its item once.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"allot"
)

// BillLine is one line of a vendor account's bill: a charge, or a refund
// of (part of) one.
type BillLine struct {
	Account string `json:"account"`
	Vendor  string `json:"vendor"`
	LineID  string `json:"line_id"` // the vendor's ID of the line, unique in the account
	// Seq is the ledger's reading order within the account (1, 2, ...),
	// assigned by RecordBillPage.
	Seq int64 `json:"seq"`
	// TaskRef is the vendor's task ID (a remote reference); may be "".
	TaskRef        string    `json:"task_ref,omitempty"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Refund         bool      `json:"refund,omitempty"`
	Amount         int64     `json:"amount"` // minor units, 0..allot.MaxAmount; a refund's is what was given back
	Currency       string    `json:"currency"`
	ChargedAt      time.Time `json:"charged_at,omitzero"`
	ReadAt         time.Time `json:"read_at"`            // zero on input: now
	JudgedAt       time.Time `json:"judged_at,omitzero"` // zero until judged
}

// BillPage is one page of a vendor account's bill, as read from a
// watermark.
type BillPage struct {
	Account, Vendor string
	From            string // the watermark the page was read from ("" = the bill's start)
	Next            string // the watermark after it
	Lines           []BillLine
	// VendorAccount is the vendor's own ID of the account the page was
	// read from, where its bill says ("" where it does not): stored with
	// the watermark the first time, and a page of another account refused.
	VendorAccount string
}

// BillWatermark is how far the reconciler has read an account's bill.
type BillWatermark struct {
	Account   string    `json:"account"`
	Vendor    string    `json:"vendor"`
	Cursor    string    `json:"cursor"` // the vendor's cursor; "" = the bill's start
	Lines     int64     `json:"lines"`  // distinct lines stored
	UpdatedAt time.Time `json:"updated_at"`
	// VendorAccount is the vendor's ID of the account this bill is of, as
	// its bill reported it ("" until one did).
	VendorAccount string `json:"vendor_account,omitempty"`
}

// UnbilledCost is a cost entry no line of the bill charges yet, with the
// idempotency key of its paid task ("" when the ledger has no task for it).
type UnbilledCost struct {
	AuditCost
	IdempotencyKey string `json:"idempotency_key"`
}

// ErrBillWatermarkMoved means the account's watermark is no longer the one
// the page was read from (another reconciler stored the page first); nothing
// was written. The caller reads again from the stored watermark.
var ErrBillWatermarkMoved = errors.New("the bill's watermark moved")

// ErrBillOfAnotherAccount means a page read with the vendor's key is of
// another account than the bill the ledger keeps under the vendor's name
// (the key was replaced by one of another account); nothing was written.
var ErrBillOfAnotherAccount = errors.New("the page is of another vendor account")

// DefaultDriftPage is a page of DriftItems, UnjudgedBillLines and
// UnbilledCosts when the caller gives no limit; MaxBillPage bounds any.
const (
	DefaultDriftPage = 1000
	MaxBillPage      = 10000
)

// billPageLimit is limit with 0 as the default, refusing what would load too
// much at once.
func billPageLimit(what string, limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultDriftPage, nil
	case limit < 0 || limit > MaxBillPage:
		return 0, invalid("%s: a limit of %d is not between 1 and %d: page with a smaller limit", what, limit, MaxBillPage)
	}
	return limit, nil
}

// BillWatermark returns the account's watermark; the zero value (Cursor
// "", the bill's start) when none is stored.
func (l *Ledger) BillWatermark(ctx context.Context, account string) (BillWatermark, error) {
	w, _, err := l.readWatermark(ctx, l.r, account)
	return w, err
}

func (l *Ledger) readWatermark(ctx context.Context, db querier, account string) (BillWatermark, bool, error) {
	rows, err := db.QueryContext(ctx, l.d.q(`SELECT account, vendor, cursor, lines_read, updated_at, vendor_account FROM bill_watermarks WHERE account = ?`), account)
	if err != nil {
		return BillWatermark{}, false, fmt.Errorf("ledger %s: read the bill watermark of account %q: %w", l.where, account, err)
	}
	defer rows.Close()
	var w BillWatermark
	found := rows.Next()
	if found {
		if err := rows.Scan(&w.Account, &w.Vendor, &w.Cursor, &w.Lines, dbTime{&w.UpdatedAt}, &w.VendorAccount); err != nil {
			return BillWatermark{}, false, fmt.Errorf("ledger %s: read the bill watermark of account %q: %w", l.where, account, err)
		}
	}
	if err := rows.Err(); err != nil {
		return BillWatermark{}, false, fmt.Errorf("ledger %s: read the bill watermark of account %q: %w", l.where, account, err)
	}
	return w, found, nil
}

// checkBillPage refuses a page the ledger cannot store whole; it fills the
// lines' account, vendor and reading time.
func checkBillPage(p *BillPage) error {
	if p.Account == "" {
		return invalid("a page of a vendor's bill names no account: give the vendor account it was read from")
	}
	readAt := now()
	for i := range p.Lines {
		ln := &p.Lines[i]
		what := fmt.Sprintf("account %s: line %d of the page", p.Account, i+1)
		if ln.LineID != "" {
			what = fmt.Sprintf("account %s: bill line %q", p.Account, ln.LineID)
		}
		switch {
		case ln.LineID == "":
			return invalid("%s has no line ID: the bill reader must give the vendor's ID of each line; nothing was stored", what)
		case ln.Account != "" && ln.Account != p.Account:
			return invalid("%s is of account %q, not the page's: read each account's bill apart; nothing was stored", what, ln.Account)
		case ln.Vendor != "" && ln.Vendor != p.Vendor:
			return invalid("%s is of vendor %q, not the page's %q: read each vendor's bill apart; nothing was stored", what, ln.Vendor, p.Vendor)
		case ln.Amount < 0 || ln.Amount > allot.MaxAmount:
			return invalid("%s is %d minor units, outside 0..%d (a refund gives its amount as a positive number): the bill reader misread it; nothing was stored",
				what, ln.Amount, allot.MaxAmount)
		}
		if err := allot.CheckCurrency(ln.Currency); err != nil {
			return invalid("%s: %v; nothing was stored", what, err)
		}
		ln.Account, ln.Vendor, ln.Seq, ln.JudgedAt = p.Account, p.Vendor, 0, time.Time{}
		ln.ChargedAt = normTime(ln.ChargedAt)
		if ln.ReadAt.IsZero() {
			ln.ReadAt = readAt
		}
		ln.ReadAt = normTime(ln.ReadAt)
	}
	return nil
}

// RecordBillPage stores a page of an account's bill and moves its
// watermark from p.From to p.Next, in one transaction. A stored watermark
// other than p.From (another reconciler got there first) is
// ErrBillWatermarkMoved, and nothing is written. A line stored already
// (same account and line ID) is kept as it was: a line read twice is
// stored once. It returns how many lines were new.
func (l *Ledger) RecordBillPage(ctx context.Context, p BillPage) (int, error) {
	p.Lines = append([]BillLine(nil), p.Lines...) // the caller's page stays as given
	if err := checkBillPage(&p); err != nil {
		return 0, err
	}
	added := 0
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		added = 0
		w, err := l.moveWatermarkTx(ctx, tx, p)
		if err != nil {
			return err
		}
		ins, err := tx.PrepareContext(ctx, l.d.q(`INSERT INTO bill_lines
			(account, line_id, seq, vendor, task_ref, idempotency_key, refund, amount, currency, charged_at, read_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (account, line_id) DO NOTHING`))
		if err != nil {
			return fmt.Errorf("ledger %s: store bill lines of account %q: %w", l.where, p.Account, err)
		}
		defer ins.Close()
		for _, ln := range p.Lines {
			// The watermark's row is locked: numbering from its count
			// cannot race another page of the account.
			res, err := ins.ExecContext(ctx, ln.Account, ln.LineID, w.Lines+int64(added)+1, ln.Vendor, ln.TaskRef, ln.IdempotencyKey,
				ln.Refund, ln.Amount, ln.Currency, l.d.timeArg(ln.ChargedAt), l.d.timeArg(ln.ReadAt))
			if err != nil {
				return fmt.Errorf("ledger %s: store bill line %q of account %q: %w", l.where, ln.LineID, p.Account, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("ledger %s: store bill line %q of account %q: %w", l.where, ln.LineID, p.Account, err)
			} else if n == 1 {
				added++
			}
		}
		if added > 0 {
			if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE bill_watermarks SET lines_read = lines_read + ? WHERE account = ?`), added, p.Account); err != nil {
				return fmt.Errorf("ledger %s: count the bill lines of account %q: %w", l.where, p.Account, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return added, nil
}

// moveWatermarkTx moves the account's watermark from p.From to p.Next, or
// refuses: a compare-and-set, whose row lock (PostgreSQL: the updated or
// inserted row; SQLite: the database's) holds until the transaction ends.
// It returns the watermark as it was.
func (l *Ledger) moveWatermarkTx(ctx context.Context, tx *sql.Tx, p BillPage) (BillWatermark, error) {
	at := l.d.timeArg(now())
	res, err := tx.ExecContext(ctx, l.d.q(`UPDATE bill_watermarks SET cursor = ?, updated_at = ? WHERE account = ? AND cursor = ?`),
		p.Next, at, p.Account, p.From)
	if err != nil {
		return BillWatermark{}, fmt.Errorf("ledger %s: move the bill watermark of account %q: %w", l.where, p.Account, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return BillWatermark{}, fmt.Errorf("ledger %s: move the bill watermark of account %q: %w", l.where, p.Account, err)
	}
	if n == 0 && p.From == "" {
		// The account's first page: the row is created, once.
		res, err = tx.ExecContext(ctx, l.d.q(`INSERT INTO bill_watermarks (account, vendor, cursor, lines_read, updated_at, vendor_account)
			VALUES (?, ?, ?, 0, ?, ?) ON CONFLICT (account) DO NOTHING`), p.Account, p.Vendor, p.Next, at, p.VendorAccount)
		if err != nil {
			return BillWatermark{}, fmt.Errorf("ledger %s: create the bill watermark of account %q: %w", l.where, p.Account, err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return BillWatermark{}, fmt.Errorf("ledger %s: create the bill watermark of account %q: %w", l.where, p.Account, err)
		}
	}
	w, found, err := l.readWatermark(ctx, tx, p.Account)
	if err != nil {
		return BillWatermark{}, err
	}
	switch {
	case n == 0 && !found:
		return BillWatermark{}, fmt.Errorf("%w: account %q has no watermark yet, but the page was read from %q: read the bill from its start (watermark \"\"); nothing was written",
			ErrBillWatermarkMoved, p.Account, p.From)
	case n == 0:
		return BillWatermark{}, fmt.Errorf("%w: the watermark of account %q is %q, not %q the page was read from: another reconciler stored that page already; read on from the stored watermark; nothing was written",
			ErrBillWatermarkMoved, p.Account, w.Cursor, p.From)
	case w.Vendor != p.Vendor:
		return BillWatermark{}, invalid("account %q is vendor %q's bill, not %q's: give each vendor account its own name; nothing was written", p.Account, w.Vendor, p.Vendor)
	case p.VendorAccount != "" && w.VendorAccount != "" && p.VendorAccount != w.VendorAccount:
		return BillWatermark{}, fmt.Errorf("%w: the bill of %s is of the vendor's account %q, and this page of account %q: nothing was written", ErrBillOfAnotherAccount, p.Account, w.VendorAccount, p.VendorAccount)
	case p.VendorAccount != "" && w.VendorAccount == "":
		// The vendor names its account for the first time: from now on
		// a key of another account is refused.
		if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE bill_watermarks SET vendor_account = ? WHERE account = ?`), p.VendorAccount, p.Account); err != nil {
			return BillWatermark{}, fmt.Errorf("ledger %s: record the vendor account of %q: %w", l.where, p.Account, err)
		}
		w.VendorAccount = p.VendorAccount
	}
	return w, nil
}

const billLineCols = `account, vendor, line_id, seq, task_ref, idempotency_key, refund, amount, currency, charged_at, read_at, judged_at`

// unjudgedQuery reads a page of an account's lines not judged yet.
const unjudgedQuery = `SELECT ` + billLineCols + ` FROM bill_lines
	WHERE account = ? AND judged_at IS NULL AND seq > ? ORDER BY seq LIMIT ?`

// UnjudgedBillLines returns the account's lines not judged yet with a Seq
// above afterSeq, in reading order, at most limit (0: DefaultDriftPage).
func (l *Ledger) UnjudgedBillLines(ctx context.Context, account string, afterSeq int64, limit int) ([]BillLine, error) {
	limit, err := billPageLimit("unjudged bill lines", limit)
	if err != nil {
		return nil, err
	}
	rows, err := l.r.QueryContext(ctx, l.d.q(unjudgedQuery), account, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the unjudged bill lines of account %q: %w", l.where, account, err)
	}
	defer rows.Close()
	var out []BillLine
	for rows.Next() {
		var ln BillLine
		if err := rows.Scan(&ln.Account, &ln.Vendor, &ln.LineID, &ln.Seq, &ln.TaskRef, &ln.IdempotencyKey, &ln.Refund,
			&ln.Amount, &ln.Currency, dbTime{&ln.ChargedAt}, dbTime{&ln.ReadAt}, dbTime{&ln.JudgedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read a bill line of account %q: %w", l.where, account, err)
		}
		out = append(out, ln)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read the unjudged bill lines of account %q: %w", l.where, account, err)
	}
	return out, nil
}

// Earlier charges of one task: by idempotency key, or by task reference.
const (
	earlierByKeyQuery = `SELECT line_id FROM bill_lines
		WHERE account = ? AND idempotency_key = ? AND seq < ? AND refund = ? ORDER BY seq LIMIT 1`
	earlierByRefQuery = `SELECT line_id FROM bill_lines
		WHERE account = ? AND task_ref = ? AND seq < ? AND refund = ? ORDER BY seq LIMIT 1`
)

// EarlierBillCharge returns the ID of the account's first charge (not a
// refund) read before line that bills the same task: the same idempotency
// key, or, when line has none, the same task reference; "" when there is
// none (or line names neither).
func (l *Ledger) EarlierBillCharge(ctx context.Context, line BillLine) (string, error) {
	query, match := earlierByKeyQuery, line.IdempotencyKey
	if match == "" {
		query, match = earlierByRefQuery, line.TaskRef
	}
	if match == "" {
		return "", nil
	}
	var id string
	err := l.r.QueryRowContext(ctx, l.d.q(query), line.Account, match, line.Seq, false).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("ledger %s: look for an earlier charge of bill line %q of account %q: %w", l.where, line.LineID, line.Account, err)
	}
	return id, nil
}

// PaidTaskBilled returns the paid task a bill line names: the task of its
// remote reference, else the task of its idempotency key (byKeyOnly);
// ok is false when the ledger has neither.
func (l *Ledger) PaidTaskBilled(ctx context.Context, taskRef, idempotencyKey string) (t PaidTask, byKeyOnly bool, ok bool, err error) {
	if taskRef != "" {
		ts, err := l.queryPaidTasks(ctx, l.r, `SELECT `+paidTaskCols+` FROM paid_tasks WHERE remote_ref = ? AND remote_ref <> ''`, taskRef)
		if err != nil || len(ts) > 0 {
			return firstPaidTask(ts), false, len(ts) > 0, err
		}
	}
	if idempotencyKey != "" {
		ts, err := l.queryPaidTasks(ctx, l.r, `SELECT `+paidTaskCols+` FROM paid_tasks WHERE idempotency_key = ? AND idempotency_key <> ''`, idempotencyKey)
		if err != nil || len(ts) > 0 {
			return firstPaidTask(ts), true, len(ts) > 0, err
		}
	}
	return PaidTask{}, false, false, nil
}

func firstPaidTask(ts []PaidTask) PaidTask {
	if len(ts) == 0 {
		return PaidTask{}
	}
	return ts[0]
}

// JudgeBillLine marks the account's line judged and, when d is not nil,
// records d as its drift item (d's Account, Vendor and Line are the
// line's), in one transaction. A line judged already changes nothing and
// adds no item; recorded reports whether an item was added.
func (l *Ledger) JudgeBillLine(ctx context.Context, account, lineID string, d *DriftItem) (recorded bool, err error) {
	rec, err := l.JudgeBillLines(ctx, account, []BillJudgement{{LineID: lineID, Drift: d}})
	if err != nil {
		return false, err
	}
	return rec[0], nil
}

// BillJudgement is the verdict on one line of a bill: explained (Drift
// nil) or the drift item it is.
type BillJudgement struct {
	LineID string
	Drift  *DriftItem
}

// JudgeBillLines is JudgeBillLine for a page of lines in one transaction
// (one durable commit for the page, not one per line). recorded[i] says
// whether js[i] added an item. Any invalid judgement refuses them all and
// nothing is written.
func (l *Ledger) JudgeBillLines(ctx context.Context, account string, js []BillJudgement) (recorded []bool, err error) {
	items := make([]DriftItem, len(js))
	for i, j := range js {
		if j.Drift != nil {
			items[i] = *j.Drift
			items[i].Account, items[i].Line = account, j.LineID
			if err := checkDrift(&items[i]); err != nil {
				return nil, err
			}
		}
	}
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		recorded = make([]bool, len(js))
		for i, j := range js {
			var item *DriftItem
			if j.Drift != nil {
				item = &items[i]
			}
			var err error
			if recorded[i], err = l.judgeBillLineTx(ctx, tx, account, j.LineID, item); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recorded, nil
}

func (l *Ledger) judgeBillLineTx(ctx context.Context, tx *sql.Tx, account, lineID string, item *DriftItem) (bool, error) {
	var vendor string
	err := tx.QueryRowContext(ctx, l.d.q(`SELECT vendor FROM bill_lines WHERE account = ? AND line_id = ?`), account, lineID).Scan(&vendor)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, invalid("account %q has no bill line %q: only a line RecordBillPage stored is judged; nothing was written", account, lineID)
	case err != nil:
		return false, fmt.Errorf("ledger %s: read bill line %q of account %q: %w", l.where, lineID, account, err)
	}
	// Only the first judgement counts: a line judged already, by an
	// earlier call or a concurrent one that got there first, leaves
	// nothing to update and records nothing.
	res, err := tx.ExecContext(ctx, l.d.q(`UPDATE bill_lines SET judged_at = ? WHERE account = ? AND line_id = ? AND judged_at IS NULL`),
		l.d.timeArg(now()), account, lineID)
	if err != nil {
		return false, fmt.Errorf("ledger %s: judge bill line %q of account %q: %w", l.where, lineID, account, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("ledger %s: judge bill line %q of account %q: %w", l.where, lineID, account, err)
	} else if n == 0 || item == nil {
		return false, nil
	}
	item.Vendor = vendor
	return l.insertDriftTx(ctx, tx, *item)
}

// unbilledQuery reads a page of cost entries no line of an account charges
// and no drift item of the account already reports, in remote reference
// order; the bill's lines are found by the task's remote reference or by
// its paid task's idempotency key, refunds not counting.
const unbilledQuery = `SELECT c.remote_ref, c.pipeline, c.episode_id, e.period, c.step, c.revision, c.amount, c.currency, c.recorded_at,
		e.plan, COALESCE(pt.idempotency_key, '')
	FROM cost_entries c
	JOIN episodes e ON e.pipeline = c.pipeline AND e.episode_id = c.episode_id
	LEFT JOIN paid_tasks pt ON pt.remote_ref = c.remote_ref AND pt.remote_ref <> ''
	WHERE c.remote_ref > ? AND c.recorded_at <= ?
	AND NOT EXISTS (SELECT 1 FROM bill_lines b WHERE b.account = ? AND b.task_ref = c.remote_ref AND b.refund = ?)
	AND NOT EXISTS (SELECT 1 FROM bill_lines b WHERE b.account = ? AND b.idempotency_key = pt.idempotency_key AND pt.idempotency_key <> '' AND b.refund = ?)
	AND NOT EXISTS (SELECT 1 FROM drift_items d WHERE d.account = ? AND d.line = CAST(? AS TEXT) || c.remote_ref AND d.class = ?)
	ORDER BY c.remote_ref LIMIT ?`

func (l *Ledger) unbilledArgs(account string, before time.Time, afterRef string, limit int) []any {
	return []any{afterRef, l.d.timeArg(before), account, false, account, false,
		account, allot.DriftLineOfCost(""), string(allot.DriftUncharged), limit}
}

// UnbilledCosts returns the cost entries recorded at or before before, with
// a remote reference after afterRef, in remote reference order, at most
// limit (0: DefaultDriftPage), that no charge of the account's bill names
// (by the remote reference, or by its paid task's idempotency key) and for
// which the account has no recorded_uncharged drift item yet. Each comes
// with its step's vendor and kind from the episode's pinned plan; the
// caller keeps its vendor's.
func (l *Ledger) UnbilledCosts(ctx context.Context, account string, before time.Time, afterRef string, limit int) ([]UnbilledCost, error) {
	limit, err := billPageLimit("unbilled costs", limit)
	if err != nil {
		return nil, err
	}
	rows, err := l.r.QueryContext(ctx, l.d.q(unbilledQuery), l.unbilledArgs(account, before, afterRef, limit)...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the costs account %q has not charged: %w", l.where, account, err)
	}
	defer rows.Close()
	var (
		out   []UnbilledCost
		plans = map[string]map[string]planStep{} // pipeline \x00 episode -> its plan's steps
	)
	for rows.Next() {
		var (
			u    UnbilledCost
			plan string
		)
		if err := rows.Scan(&u.RemoteRef, &u.Pipeline, &u.EpisodeID, &u.Period, &u.Step, &u.Revision, &u.Amount, &u.Currency,
			dbTime{&u.RecordedAt}, &plan, &u.IdempotencyKey); err != nil {
			return nil, fmt.Errorf("ledger %s: read a cost account %q has not charged: %w", l.where, account, err)
		}
		k := u.Pipeline + "\x00" + u.EpisodeID
		steps, ok := plans[k]
		if !ok {
			steps = pinnedPlanSteps(plan)
			plans[k] = steps
		}
		s := steps[u.Step]
		u.Vendor, u.StepKind = s.Vendor, s.Kind
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read the costs account %q has not charged: %w", l.where, account, err)
	}
	return out, nil
}

// pinnedPlanSteps reads a pinned plan's steps by name, as the audit does; nil
// for no plan, or one that is not a list of steps (the audit reports it).
func pinnedPlanSteps(plan string) map[string]planStep {
	var steps []planStep
	if plan == "" || json.Unmarshal([]byte(plan), &steps) != nil {
		return nil
	}
	out := make(map[string]planStep, len(steps))
	for _, s := range steps {
		out[s.Name] = s
	}
	return out
}
