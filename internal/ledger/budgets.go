package ledger

// Budgets: invariant 20 of docs/design.md (budgets are never exceeded). A
// paid task reserves its price in every budget that covers it, in the
// transaction that writes its intent, under a lock that serialises each
// (budget, period)'s admissions: admitted only if, for every budget,
// settled + reserved + asked <= the period's limit (the rule is
// allot.BudgetSpend.Admits; the ledger reads and locks); else nothing is
// reserved, the task stays planned and nothing is sent. When the vendor's
// cost is recorded (in the reference's transaction) the reservation becomes
// that cost; when the vendor is known not to have charged (a refusal, an
// abandon without a reference) it is released. An intent whose outcome is
// unknown keeps it.
//
// An entry's states and the only moves between them:
//
//	(none)   -> held      admission: the task's intent is written (WriteIntentAdmitted), or an earlier
//	                      paid task of its episode is, which writes it planned (an episode is paid for whole)
//	released -> held      admission again: a released task is sent again
//	held     -> held      admission again of a task whose entry is held (a repair; not reached by the protocol)
//	held     -> settled   the vendor's cost is recorded (RecordSubmission, adopt)
//	settled  -> settled   a corrected cost
//	held     -> released  the vendor refused (ReleaseIntent), or the task is abandoned without a reference,
//	                      or its episode completed or was rejected before the task was sent
//	(none)   -> held -> settled  an imported cost (Import, settleImportedTx), in the import's transaction
//
// Every change goes through setEntryTx, which checks the move against
// entryMoves.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/pipeline"
)

// ErrBudgetExhausted means a task's reservation does not fit in a budget
// that covers it; nothing was reserved and nothing may be sent. The error is
// a *BudgetExhaustedError naming each budget that refused.
var ErrBudgetExhausted = errors.New("budget exhausted")

// Budget entry states.
const (
	EntryHeld     = "held"     // reserved with the task's intent
	EntrySettled  = "settled"  // the vendor's cost, recorded
	EntryReleased = "released" // the vendor is known not to have charged
)

// entryMoves lists, for each state ("" = no entry yet), the states an entry
// may move to.
var entryMoves = map[string][]string{
	"":            {EntryHeld},
	EntryReleased: {EntryHeld},
	EntryHeld:     {EntryHeld, EntrySettled, EntryReleased},
	EntrySettled:  {EntrySettled},
}

// Reservation asks a budget to hold Amount for a paid task in Period (the
// domain's allot.Reservation, which admission adds and compares).
type Reservation = allot.Reservation

// BudgetEntry is one budget's share of one paid task.
type BudgetEntry struct {
	Budget string `json:"budget"`
	Period string `json:"period"`
	PaidTaskRef
	State    string `json:"state"`
	Currency string `json:"currency"`
	Reserved int64  `json:"reserved"`
	Settled  int64  `json:"settled"`
	// Granted is the part of the cost the budget admitted: the
	// reservation, lowered to the lowest cost recorded since (a lower cost
	// frees the rest for other tasks). Settled - Granted, when positive, is
	// an overrun: booked beyond what any admission allowed.
	Granted   int64     `json:"granted"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// BudgetShortfall is why a budget refused a task: its period's limit, what
// is settled and reserved already, and what the task asked.
type BudgetShortfall struct {
	Budget   string `json:"budget"`
	Period   string `json:"period"`
	Currency string `json:"currency"`
	Limit    int64  `json:"limit"`
	Settled  int64  `json:"settled"`
	Reserved int64  `json:"reserved"`
	Asked    int64  `json:"asked"`
}

// Needed is the smallest limit that admits the task: settled + reserved +
// asked (saturating, never wrapping).
func (s BudgetShortfall) Needed() int64 {
	return allot.BudgetSpend{Settled: s.Settled, Reserved: s.Reserved}.Needed(s.Asked)
}

func (s BudgetShortfall) String() string {
	m := func(a int64) string { return allot.Money{Amount: a, Currency: s.Currency}.String() }
	return fmt.Sprintf("budget %s, period %s: limit %s, settled %s, reserved %s, asked %s", s.Budget, s.Period,
		m(s.Limit), m(s.Settled), m(s.Reserved), m(s.Asked))
}

// BudgetExhaustedError is ErrBudgetExhausted with the budgets that refused.
type BudgetExhaustedError struct {
	Task       PaidTaskRef
	Shortfalls []BudgetShortfall
}

func (e *BudgetExhaustedError) Error() string {
	parts := make([]string, len(e.Shortfalls))
	for i, s := range e.Shortfalls {
		parts[i] = s.String()
	}
	return fmt.Sprintf("%v: %s does not fit: %s; nothing was reserved or sent, the task is planned", ErrBudgetExhausted, describe(e.Task), strings.Join(parts, "; "))
}

func (e *BudgetExhaustedError) Is(target error) bool { return target == ErrBudgetExhausted }

// budgetLockKey maps (budget, period) to the advisory lock that serialises
// its admissions and raises on PostgreSQL.
func budgetLockKey(budget, period string) int64 { return advisoryKey("budget", budget, period) }

// lockBudgetTx takes the (budget, period) lock (lockTx).
func (l *Ledger) lockBudgetTx(ctx context.Context, tx *sql.Tx, budget, period string) error {
	return l.lockTx(ctx, tx, budgetLockKey(budget, period), "budget "+budget+" period "+period)
}

// checkReservations refuses malformed reservations; what names their task
// in the message.
func checkReservations(what string, rs []Reservation) error {
	seen := map[[2]string]bool{}
	for _, r := range rs {
		k := [2]string{r.Budget, r.Period}
		switch {
		case r.Budget == "" || r.Period == "":
			return invalid("%s: a reservation names its budget and period, got %q and %q", what, r.Budget, r.Period)
		case seen[k]:
			return invalid("%s: budget %s period %s is asked twice", what, r.Budget, r.Period)
		case pipeline.CheckCurrency(r.Currency) != nil:
			return invalid("%s: budget %s: %v", what, r.Budget, pipeline.CheckCurrency(r.Currency))
		case r.Amount < 0 || r.Amount > allot.MaxAmount:
			return invalid("%s: budget %s: a reservation of %d is not between 0 and %d minor units", what, r.Budget, r.Amount, allot.MaxAmount)
		case r.Limit <= 0 || r.Limit > pipeline.MaxBudgetLimit:
			return invalid("%s: budget %s: a limit of %d is not between 1 and %d minor units", what, r.Budget, r.Limit, pipeline.MaxBudgetLimit)
		}
		seen[k] = true
	}
	return nil
}

// periodSpend is a (budget, period)'s settled and reserved amounts in one
// currency. Entries in another currency (the budget's currency changed)
// are not this budget's money and are not added. The database sums refuse
// to overflow (SQLite raises an error, PostgreSQL's numeric sum does not fit
// the int64 it is scanned into).
func (l *Ledger) periodSpend(ctx context.Context, db querier, budget, period, currency string) (settled, reserved int64, err error) {
	rows, err := db.QueryContext(ctx, l.d.q(`SELECT
			COALESCE(SUM(CASE WHEN state = 'settled' THEN settled ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN state = 'held' THEN reserved ELSE 0 END), 0)
		FROM budget_entries WHERE budget = ? AND period = ? AND currency = ? AND state IN ('held', 'settled')`), budget, period, currency)
	if err != nil {
		return 0, 0, fmt.Errorf("ledger %s: sum budget %s period %s: %w", l.where, budget, period, err)
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(&settled, &reserved); err != nil {
			return 0, 0, fmt.Errorf("ledger %s: sum budget %s period %s: %w", l.where, budget, period, err)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("ledger %s: sum budget %s period %s: %w", l.where, budget, period, err)
	}
	return settled, reserved, nil
}

// periodLimit is the (budget, period)'s limit: the latest raise recorded
// for it in currency, else configured.
func (l *Ledger) periodLimit(ctx context.Context, db querier, budget, period, currency string, configured int64) (limit int64, raised bool, err error) {
	rows, err := db.QueryContext(ctx, l.d.q(`SELECT limit_amount, currency FROM budget_raises
		WHERE budget = ? AND period = ? ORDER BY id DESC LIMIT 1`), budget, period)
	if err != nil {
		return 0, false, fmt.Errorf("ledger %s: read the raises of budget %s period %s: %w", l.where, budget, period, err)
	}
	defer rows.Close()
	if rows.Next() {
		var cur string
		if err := rows.Scan(&limit, &cur); err != nil {
			return 0, false, fmt.Errorf("ledger %s: read a raise of budget %s period %s: %w", l.where, budget, period, err)
		}
		if cur == currency {
			return limit, true, rows.Err()
		}
	}
	return configured, false, rows.Err()
}

// shortfalls reads, for each reservation, whether its budget's period has
// room for it; the refusing ones are returned, in the order given.
func (l *Ledger) shortfalls(ctx context.Context, db querier, rs []Reservation) ([]BudgetShortfall, error) {
	var out []BudgetShortfall
	for _, r := range rs {
		limit, _, err := l.periodLimit(ctx, db, r.Budget, r.Period, r.Currency, r.Limit)
		if err != nil {
			return nil, err
		}
		settled, reserved, err := l.periodSpend(ctx, db, r.Budget, r.Period, r.Currency)
		if err != nil {
			return nil, err
		}
		if !(allot.BudgetSpend{Settled: settled, Reserved: reserved}).Admits(limit, r.Amount) {
			out = append(out, BudgetShortfall{Budget: r.Budget, Period: r.Period, Currency: r.Currency, Limit: limit, Settled: settled, Reserved: reserved, Asked: r.Amount})
		}
	}
	return out, nil
}

// sortedReservations orders reservations by (budget, period), the order
// their locks are taken in, so that two admissions never wait for each
// other in a cycle.
func sortedReservations(rs []Reservation) []Reservation {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b Reservation) int {
		if c := strings.Compare(a.Budget, b.Budget); c != 0 {
			return c
		}
		return strings.Compare(a.Period, b.Period)
	})
	return out
}

// admitTx decides, in the caller's transaction (which writes the task's
// intent and holds the episode's lock), whether ref's reservations fit:
// under each (budget, period)'s lock, taken in a fixed order, every budget
// must have room for its amount. It returns the budgets that refuse; with
// none, the caller writes the intent and then reserveTx.
func (l *Ledger) admitTx(ctx context.Context, tx *sql.Tx, rs []Reservation) ([]BudgetShortfall, error) {
	rs = sortedReservations(rs)
	for _, r := range rs {
		if err := l.lockBudgetTx(ctx, tx, r.Budget, r.Period); err != nil {
			return nil, err
		}
	}
	return l.shortfalls(ctx, tx, rs)
}

// reserveTx holds rs for ref, once admitTx found room (the task's row
// exists by then).
func (l *Ledger) reserveTx(ctx context.Context, tx *sql.Tx, ref PaidTaskRef, rs []Reservation) error {
	entries, err := l.taskEntries(ctx, tx, ref)
	if err != nil {
		return err
	}
	for _, r := range sortedReservations(rs) {
		var before *BudgetEntry
		for i := range entries {
			if entries[i].Budget == r.Budget && entries[i].Period == r.Period {
				before = &entries[i]
			}
		}
		after := BudgetEntry{Budget: r.Budget, Period: r.Period, PaidTaskRef: ref, State: EntryHeld, Currency: r.Currency, Reserved: r.Amount, Granted: r.Amount}
		if err := l.setEntryTx(ctx, tx, before, after); err != nil {
			return err
		}
	}
	return nil
}

// setEntryTx is the one path that writes a budget entry: it checks the move
// from before (nil: no entry yet) to after against entryMoves and inserts or
// updates the row.
func (l *Ledger) setEntryTx(ctx context.Context, tx *sql.Tx, before *BudgetEntry, after BudgetEntry) error {
	from := ""
	if before != nil {
		from = before.State
		if before.Budget != after.Budget || before.Period != after.Period || before.PaidTaskRef != after.PaidTaskRef {
			return fmt.Errorf("ledger %s: budget entry %s/%s of %s cannot become another entry", l.where, before.Budget, before.Period, describe(before.PaidTaskRef))
		}
	}
	if !slices.Contains(entryMoves[from], after.State) {
		return fmt.Errorf("%w: budget %s period %s entry of %s cannot move from %q to %q", ErrPaidTaskState, after.Budget, after.Period, describe(after.PaidTaskRef), from, after.State)
	}
	if after.Reserved < 0 || after.Settled < 0 || after.Granted < 0 {
		return invalid("budget %s period %s entry of %s: amounts are not negative, got reserved %d, settled %d", after.Budget, after.Period, describe(after.PaidTaskRef), after.Reserved, after.Settled)
	}
	at := now()
	if before == nil {
		_, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO budget_entries
			(budget, period, pipeline, episode_id, step, revision, state, currency, reserved, settled, granted, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			after.Budget, after.Period, after.Pipeline, after.EpisodeID, after.Step, after.Revision, after.State, after.Currency,
			after.Reserved, after.Settled, after.Granted, l.d.timeArg(at), l.d.timeArg(at))
		if err != nil {
			return fmt.Errorf("ledger %s: reserve budget %s period %s for %s: %w", l.where, after.Budget, after.Period, describe(after.PaidTaskRef), err)
		}
		return nil
	}
	if before.State == after.State && before.Currency == after.Currency && before.Reserved == after.Reserved && before.Settled == after.Settled && before.Granted == after.Granted {
		return nil
	}
	_, err := tx.ExecContext(ctx, l.d.q(`UPDATE budget_entries SET state = ?, currency = ?, reserved = ?, settled = ?, granted = ?, updated_at = ?
		WHERE budget = ? AND period = ? AND pipeline = ? AND episode_id = ? AND step = ? AND revision = ?`),
		after.State, after.Currency, after.Reserved, after.Settled, after.Granted, l.d.timeArg(at),
		after.Budget, after.Period, after.Pipeline, after.EpisodeID, after.Step, after.Revision)
	if err != nil {
		return fmt.Errorf("ledger %s: update budget %s period %s entry of %s: %w", l.where, after.Budget, after.Period, describe(after.PaidTaskRef), err)
	}
	return nil
}

const budgetEntryCols = `budget, period, pipeline, episode_id, step, revision, state, currency, reserved, settled, granted, created_at, updated_at`

func (l *Ledger) queryEntries(ctx context.Context, db querier, query string, args ...any) ([]BudgetEntry, error) {
	rows, err := db.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query budget entries: %w", l.where, err)
	}
	defer rows.Close()
	var out []BudgetEntry
	for rows.Next() {
		var e BudgetEntry
		if err := rows.Scan(&e.Budget, &e.Period, &e.Pipeline, &e.EpisodeID, &e.Step, &e.Revision, &e.State, &e.Currency,
			&e.Reserved, &e.Settled, &e.Granted, dbTime{&e.CreatedAt}, dbTime{&e.UpdatedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read budget entry: %w", l.where, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read budget entries: %w", l.where, err)
	}
	return out, nil
}

func (l *Ledger) taskEntries(ctx context.Context, db querier, ref PaidTaskRef) ([]BudgetEntry, error) {
	return l.queryEntries(ctx, db, `SELECT `+budgetEntryCols+` FROM budget_entries
		WHERE pipeline = ? AND episode_id = ? AND step = ? AND revision = ? ORDER BY budget, period`,
		ref.Pipeline, ref.EpisodeID, ref.Step, ref.Revision)
}

// settleEntriesTx books the task's recorded cost in its budget entries: the
// reservation becomes the cost, as it is (above the reservation too: it was
// charged). A cost in another currency than an entry's is never converted:
// the entry keeps its reservation as the amount counted, and Audit reports
// the difference. No currency (an effect) is no charge.
func (l *Ledger) settleEntriesTx(ctx context.Context, tx *sql.Tx, s Submission) error {
	entries, err := l.taskEntries(ctx, tx, s.PaidTaskRef)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.State == EntryReleased {
			continue
		}
		after := e
		after.State = EntrySettled
		switch {
		case s.Currency == "":
			after.Settled = 0
		case s.Currency == e.Currency:
			after.Settled = s.Amount
		default:
			after.Settled = e.Reserved
		}
		after.Granted = min(e.Granted, after.Settled)
		if err := l.setEntryTx(ctx, tx, &e, after); err != nil {
			return err
		}
	}
	return nil
}

// releaseEntriesTx gives back the task's held reservations: the vendor is
// known not to have charged for it.
func (l *Ledger) releaseEntriesTx(ctx context.Context, tx *sql.Tx, ref PaidTaskRef) error {
	entries, err := l.taskEntries(ctx, tx, ref)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.State != EntryHeld {
			continue
		}
		after := e
		after.State = EntryReleased
		if err := l.setEntryTx(ctx, tx, &e, after); err != nil {
			return err
		}
	}
	return nil
}

// BudgetRoom reports, read-only, which of rs would be refused now: nil
// when all of them have room. A parked episode asks it before trying again.
func (l *Ledger) BudgetRoom(ctx context.Context, rs []Reservation) ([]BudgetShortfall, error) {
	if err := checkReservations("a budget room check", rs); err != nil {
		return nil, err
	}
	var out []BudgetShortfall
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = l.shortfalls(ctx, tx, rs)
		return err
	})
	return out, err
}

// BudgetEntries lists the entries of one budget's period (every period
// when period is ""), by period, then task.
func (l *Ledger) BudgetEntries(ctx context.Context, budget, period string) ([]BudgetEntry, error) {
	if budget == "" {
		return nil, invalid("listing budget entries needs a budget")
	}
	return l.queryEntries(ctx, l.r, `SELECT `+budgetEntryCols+` FROM budget_entries
		WHERE budget = ? AND (? = '' OR period = ?) ORDER BY period, pipeline, episode_id, step, revision`, budget, period, period)
}

// TaskBudgetEntries lists a paid task's budget entries.
func (l *Ledger) TaskBudgetEntries(ctx context.Context, ref PaidTaskRef) ([]BudgetEntry, error) {
	if err := checkPaidRef(ref); err != nil {
		return nil, err
	}
	return l.taskEntries(ctx, l.r, ref)
}

// BudgetLimit is a budget as the pipeline file defines it: its currency and
// its limit for every period without a raise.
type BudgetLimit struct {
	Budget   string `json:"budget"`
	Currency string `json:"currency"`
	Limit    int64  `json:"limit"`
}

// LimitOf is the pipeline file's budget b as the ledger counts it.
func LimitOf(b pipeline.Budget) BudgetLimit {
	return BudgetLimit{Budget: b.Name, Currency: b.Limit.Currency, Limit: b.Limit.Amount}
}

// BudgetPeriod is where one (budget, period) stands.
type BudgetPeriod struct {
	Budget   string `json:"budget"`
	Period   string `json:"period"`
	Currency string `json:"currency"`
	// Limit is the period's limit; Raised says it comes from a raise.
	Limit    int64 `json:"limit"`
	Raised   bool  `json:"raised,omitempty"`
	Settled  int64 `json:"settled"`
	Reserved int64 `json:"reserved"`
	// Free is Limit - Settled - Reserved; negative only after costs above
	// their reservations (Overrun) or a lowered limit.
	Free int64 `json:"free"`
	// Overrun is what settled costs were booked beyond what the budget
	// admitted (costs above their reservations, corrections upward).
	Overrun int64 `json:"overrun,omitempty"`
	// Held and SettledTasks count the tasks holding a reservation and
	// the tasks whose cost is booked.
	Held         int `json:"held"`
	SettledTasks int `json:"settled_tasks"`
}

// BudgetPeriods reports every period of the given budgets that has entries
// or a raise, ordered by budget (as given), then period.
func (l *Ledger) BudgetPeriods(ctx context.Context, budgets []BudgetLimit) ([]BudgetPeriod, error) {
	var out []BudgetPeriod
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		for _, b := range budgets {
			periods, err := l.queryStrings(ctx, tx, "list budget periods", `SELECT period FROM budget_entries WHERE budget = ?
				UNION SELECT period FROM budget_raises WHERE budget = ? ORDER BY 1`, b.Budget, b.Budget)
			if err != nil {
				return err
			}
			for _, p := range periods {
				bp, err := l.budgetPeriodTx(ctx, tx, b, p)
				if err != nil {
					return err
				}
				out = append(out, bp)
			}
		}
		return nil
	})
	return out, err
}

// BudgetPeriodOf reports one (budget, period), also one with nothing in it.
func (l *Ledger) BudgetPeriodOf(ctx context.Context, b BudgetLimit, period string) (BudgetPeriod, error) {
	var out BudgetPeriod
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = l.budgetPeriodTx(ctx, tx, b, period)
		return err
	})
	return out, err
}

func (l *Ledger) budgetPeriodTx(ctx context.Context, tx *sql.Tx, b BudgetLimit, period string) (BudgetPeriod, error) {
	bp := BudgetPeriod{Budget: b.Budget, Period: period, Currency: b.Currency}
	var err error
	if bp.Limit, bp.Raised, err = l.periodLimit(ctx, tx, b.Budget, period, b.Currency, b.Limit); err != nil {
		return bp, err
	}
	entries, err := l.queryEntries(ctx, tx, `SELECT `+budgetEntryCols+` FROM budget_entries
		WHERE budget = ? AND period = ? AND currency = ? AND state IN ('held', 'settled')`, b.Budget, period, b.Currency)
	if err != nil {
		return bp, err
	}
	for _, e := range entries {
		switch e.State {
		case EntryHeld:
			bp.Held++
			bp.Reserved, err = allot.AddAmounts(bp.Reserved, e.Reserved)
		case EntrySettled:
			bp.SettledTasks++
			bp.Settled, err = allot.AddAmounts(bp.Settled, e.Settled)
			if err == nil && e.Settled > e.Granted {
				bp.Overrun, err = allot.AddAmounts(bp.Overrun, e.Settled-e.Granted)
			}
		}
		if err != nil {
			return bp, fmt.Errorf("ledger %s: budget %s period %s: %w", l.where, b.Budget, period, err)
		}
	}
	spent, err := allot.AddAmounts(bp.Settled, bp.Reserved)
	if err != nil {
		return bp, fmt.Errorf("ledger %s: budget %s period %s: %w", l.where, b.Budget, period, err)
	}
	bp.Free = bp.Limit - spent // both within int64: limit <= MaxAmount, spent >= 0
	return bp, nil
}

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
	case r.Limit <= 0 || r.Limit > pipeline.MaxBudgetLimit:
		return BudgetRaise{}, false, invalid("budget %s period %s: a limit of %d is not between 1 and %d minor units", r.Budget, r.Period, r.Limit, pipeline.MaxBudgetLimit)
	case pipeline.CheckCurrency(r.Currency) != nil:
		return BudgetRaise{}, false, invalid("budget %s: %v", r.Budget, pipeline.CheckCurrency(r.Currency))
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

// Violation kinds of budgets (invariant 20), found by Audit.
const (
	// KindBudgetExceeded: a period's settled costs are above its limit.
	KindBudgetExceeded = "budget_exceeded"
	// KindCostOverReservation: a vendor charged more than the task
	// reserved (booked as charged, and counted against the budget).
	KindCostOverReservation = "cost_over_reservation"
	// KindReservationStale: a reservation held for a task that is no
	// longer an intent, or settled without the task's reference.
	KindReservationStale = "reservation_stale"
	// KindReservationMissing: an open intent of a step a budget covers
	// holds no reservation in it (report.Check, with the pipeline file).
	KindReservationMissing = "reservation_missing"
	// KindBudgetCostDiffers: a settled entry whose amount is not its
	// task's recorded cost (or the cost is in another currency).
	KindBudgetCostDiffers = "budget_cost_differs"
)

// auditBudgetsTx checks every budget entry against its task and cost, and
// every (budget, period) against its limit: settled <= limit, to the minor
// unit.
func (l *Ledger) auditBudgetsTx(ctx context.Context, tx *sql.Tx, opts AuditOptions, out *Audit) error {
	rows, err := tx.QueryContext(ctx, l.d.q(`SELECT e.budget, e.period, e.pipeline, e.episode_id, e.step, e.revision, e.state, e.currency,
			e.reserved, e.settled, t.state, t.remote_ref, COALESCE(c.amount, -1), COALESCE(c.currency, '')
		FROM budget_entries e
		JOIN paid_tasks t ON t.pipeline = e.pipeline AND t.episode_id = e.episode_id AND t.step = e.step AND t.revision = e.revision
		LEFT JOIN cost_entries c ON c.remote_ref = t.remote_ref AND t.remote_ref <> ''
		WHERE (? = '' OR e.pipeline = ?)
		ORDER BY e.budget, e.period, e.pipeline, e.episode_id, e.step, e.revision`), opts.Pipeline, opts.Pipeline)
	if err != nil {
		return fmt.Errorf("ledger %s: audit budget entries: %w", l.where, err)
	}
	defer rows.Close()
	budgets := map[string]BudgetLimit{}
	var names []string
	for _, b := range opts.Budgets {
		budgets[b.Budget] = b
		names = append(names, b.Budget)
	}
	periods := map[string][]string{}
	add := func(kind string, e BudgetEntry, format string, args ...any) {
		out.Violations = append(out.Violations, Violation{Kind: kind, Pipeline: e.Pipeline, Episode: e.EpisodeID,
			Detail: fmt.Sprintf("budget %s period %s, %s: ", e.Budget, e.Period, describe(e.PaidTaskRef)) + fmt.Sprintf(format, args...)})
	}
	for rows.Next() {
		var (
			e                      BudgetEntry
			taskState, remote, cur string
			cost                   int64
		)
		if err := rows.Scan(&e.Budget, &e.Period, &e.Pipeline, &e.EpisodeID, &e.Step, &e.Revision, &e.State, &e.Currency,
			&e.Reserved, &e.Settled, &taskState, &remote, &cost, &cur); err != nil {
			return fmt.Errorf("ledger %s: audit budget entries: %w", l.where, err)
		}
		m := func(a int64) string { return allot.Money{Amount: a, Currency: e.Currency}.String() }
		if _, ok := budgets[e.Budget]; !ok {
			budgets[e.Budget] = BudgetLimit{Budget: e.Budget, Currency: e.Currency}
			names = append(names, e.Budget)
		}
		if ps := periods[e.Budget]; len(ps) == 0 || ps[len(ps)-1] != e.Period {
			periods[e.Budget] = append(ps, e.Period)
		}
		switch e.State {
		case EntryHeld:
			// Held by an intent, or by a planned task its episode's first
			// paid task reserved (released when the episode completes or
			// is rejected).
			if taskState != "intent" && taskState != "planned" {
				add(KindReservationStale, e, "holds a reservation of %s but the task is %s: a reservation is held only while its task is an intent, or planned and reserved with its episode", m(e.Reserved), taskState)
			}
		case EntrySettled:
			switch {
			case remote == "":
				add(KindReservationStale, e, "is settled (%s) but the task (%s) has no remote reference: only a recorded submission settles a reservation", m(e.Settled), taskState)
			case cost < 0 && e.Settled != 0:
				add(KindBudgetCostDiffers, e, "is settled at %s but reference %q has no cost entry", m(e.Settled), remote)
			case cost >= 0 && cur != e.Currency:
				add(KindBudgetCostDiffers, e, "counts %s, but reference %q cost %s: amounts are never converted; correct the cost or the budget's currency",
					m(e.Settled), remote, allot.Money{Amount: cost, Currency: cur})
			case cost >= 0 && cost != e.Settled:
				add(KindBudgetCostDiffers, e, "is settled at %s but reference %q cost %s", m(e.Settled), remote, m(cost))
			}
			if e.Settled > e.Reserved {
				add(KindCostOverReservation, e, "cost %s, %s above the %s it reserved: it is booked as charged and counted against the budget; raise the step's max_cost if the vendor's price rose",
					m(e.Settled), m(e.Settled-e.Reserved), m(e.Reserved))
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger %s: audit budget entries: %w", l.where, err)
	}
	rows.Close()
	for _, name := range names {
		b := budgets[name]
		for _, p := range periods[name] {
			bp, err := l.budgetPeriodTx(ctx, tx, b, p)
			if err != nil {
				return err
			}
			if bp.Limit > 0 && bp.Settled > bp.Limit {
				m := func(a int64) string { return allot.Money{Amount: a, Currency: bp.Currency}.String() }
				out.Violations = append(out.Violations, Violation{Kind: KindBudgetExceeded,
					Detail: fmt.Sprintf("budget %s period %s has %s settled, over its limit of %s by %s (%s of it costs above their reservations)",
						name, p, m(bp.Settled), m(bp.Limit), m(bp.Settled-bp.Limit), m(bp.Overrun))})
			}
		}
	}
	return nil
}

// ParkedTask is a paid task whose episode is parked on BudgetExhausted:
// planned, not sent, waiting for room.
type ParkedTask struct {
	PaidTaskRef
	NominalTime time.Time `json:"nominal_time"`
}

// BudgetParked lists the planned paid tasks of the episodes parked on
// BudgetExhausted, by pipeline, episode and step.
func (l *Ledger) BudgetParked(ctx context.Context) ([]ParkedTask, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT t.pipeline, t.episode_id, t.step, t.revision, e.nominal_time
		FROM episodes e JOIN paid_tasks t ON t.pipeline = e.pipeline AND t.episode_id = e.episode_id
		WHERE e.outcome = ? AND e.outcome_reason = ? AND t.state = 'planned'
		ORDER BY t.pipeline, t.episode_id, t.step, t.revision`), string(allot.OutcomeNeedsAttention), allot.BudgetExhausted)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: list episodes parked on budgets: %w", l.where, err)
	}
	defer rows.Close()
	var out []ParkedTask
	for rows.Next() {
		var p ParkedTask
		if err := rows.Scan(&p.Pipeline, &p.EpisodeID, &p.Step, &p.Revision, dbTime{&p.NominalTime}); err != nil {
			return nil, fmt.Errorf("ledger %s: read an episode parked on budgets: %w", l.where, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: list episodes parked on budgets: %w", l.where, err)
	}
	return out, nil
}

// BudgetPeriodsHeld lists the (budget, period) pairs that hold
// reservations now.
func (l *Ledger) BudgetPeriodsHeld(ctx context.Context) ([][2]string, error) {
	rows, err := l.r.QueryContext(ctx, `SELECT DISTINCT budget, period FROM budget_entries WHERE state = 'held' ORDER BY budget, period`)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: list budget periods holding reservations: %w", l.where, err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var bp [2]string
		if err := rows.Scan(&bp[0], &bp[1]); err != nil {
			return nil, fmt.Errorf("ledger %s: list budget periods holding reservations: %w", l.where, err)
		}
		out = append(out, bp)
	}
	return out, rows.Err()
}

// GaugedBudgetPeriods are the budget periods the metrics export: each
// budget's current period (by the clock now, in its zone) and the one
// before, and every period that holds reservations (a backfill's, say).
func (l *Ledger) GaugedBudgetPeriods(ctx context.Context, budgets []pipeline.Budget, now time.Time) ([]BudgetPeriod, error) {
	held, err := l.BudgetPeriodsHeld(ctx)
	if err != nil {
		return nil, err
	}
	var out []BudgetPeriod
	for _, b := range budgets {
		periods := []string{}
		for _, p := range []string{b.PeriodOf(previousPeriod(b, now)), b.PeriodOf(now)} {
			if !slices.Contains(periods, p) {
				periods = append(periods, p)
			}
		}
		for _, h := range held {
			if h[0] == b.Name && !slices.Contains(periods, h[1]) {
				periods = append(periods, h[1])
			}
		}
		for _, p := range periods {
			bp, err := l.BudgetPeriodOf(ctx, BudgetLimit{Budget: b.Name, Currency: b.Limit.Currency, Limit: b.Limit.Amount}, p)
			if err != nil {
				return nil, err
			}
			out = append(out, bp)
		}
	}
	return out, nil
}

// previousPeriod is a time in the budget period before now's.
func previousPeriod(b pipeline.Budget, now time.Time) time.Time {
	local := now.In(b.Location())
	y, m, d := local.Date()
	switch b.Period {
	case pipeline.Day:
		return time.Date(y, m, d-1, 12, 0, 0, 0, b.Location())
	case pipeline.Month:
		return time.Date(y, m-1, 1, 12, 0, 0, 0, b.Location())
	}
	return time.Date(y, m, d-7, 12, 0, 0, 0, b.Location())
}

// releaseUnsentOfEpisodeTx releases the reservations held by the planned
// tasks of an episode that will run none of them (completed, or rejected):
// an earlier paid task reserved them with its own admission.
func (l *Ledger) releaseUnsentOfEpisodeTx(ctx context.Context, tx *sql.Tx, pipeline, episodeID string) error {
	tasks, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks
		WHERE pipeline = ? AND episode_id = ? AND state = ?`, pipeline, episodeID, string(allot.PaidPlanned))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if err := l.releaseEntriesTx(ctx, tx, t.PaidTaskRef); err != nil {
			return err
		}
	}
	return nil
}

// heldReservations are the task's entries that hold a reservation, as
// what admission finds held already (allot.AsksBeyondHeld).
func heldReservations(entries []BudgetEntry) []Reservation {
	var out []Reservation
	for _, e := range entries {
		if e.State == EntryHeld {
			out = append(out, Reservation{Budget: e.Budget, Period: e.Period, Currency: e.Currency, Amount: e.Reserved})
		}
	}
	return out
}
