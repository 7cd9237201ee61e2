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
	"slices"
	"strings"
	"time"

	"allot"
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

// BudgetShortfall is why a budget refused a task (allot's noun).
type BudgetShortfall = allot.BudgetShortfall

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
		case allot.CheckCurrency(r.Currency) != nil:
			return invalid("%s: budget %s: %v", what, r.Budget, allot.CheckCurrency(r.Currency))
		case r.Amount < 0 || r.Amount > allot.MaxAmount:
			return invalid("%s: budget %s: a reservation of %d is not between 0 and %d minor units", what, r.Budget, r.Amount, allot.MaxAmount)
		case r.Limit <= 0 || r.Limit > allot.MaxBudgetLimit:
			return invalid("%s: budget %s: a limit of %d is not between 1 and %d minor units", what, r.Budget, r.Limit, allot.MaxBudgetLimit)
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
// room for it, asked by asker's episode (held for the schedule: see
// heldForSchedule); the refusing ones are returned, in the order given.
func (l *Ledger) shortfalls(ctx context.Context, db querier, asker PaidTaskRef, rs []Reservation) ([]BudgetShortfall, error) {
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
		held, _, err := l.heldForSchedule(ctx, db, r.Budget, r.Period, r.Currency, asker, r.Amount)
		if err != nil {
			return nil, err
		}
		if !(allot.BudgetSpend{Settled: settled, Reserved: reserved, HeldForSchedule: held}).Admits(limit, r.Amount) {
			out = append(out, BudgetShortfall{Budget: r.Budget, Period: r.Period, Currency: r.Currency, Limit: limit,
				Settled: settled, Reserved: reserved, HeldForSchedule: held, Asked: r.Amount})
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
// must have room for its amount, asked by ref's episode. It returns the
// budgets that refuse; with none, the caller writes the intent and then
// reserveTx.
func (l *Ledger) admitTx(ctx context.Context, tx *sql.Tx, ref PaidTaskRef, rs []Reservation) ([]BudgetShortfall, error) {
	rs = sortedReservations(rs)
	for _, r := range rs {
		if err := l.lockBudgetTx(ctx, tx, r.Budget, r.Period); err != nil {
			return nil, err
		}
	}
	return l.shortfalls(ctx, tx, ref, rs)
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

// BudgetRoom reports, read-only, which of rs would be refused now, asked
// by the task ref (its episode may draw on its scheduled run's hold): nil
// when all of them have room. A parked episode asks it before trying
// again.
func (l *Ledger) BudgetRoom(ctx context.Context, ref PaidTaskRef, rs []Reservation) ([]BudgetShortfall, error) {
	if err := checkReservations("a budget room check", rs); err != nil {
		return nil, err
	}
	var out []BudgetShortfall
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = l.shortfalls(ctx, tx, ref, rs)
		return err
	})
	return out, err
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
